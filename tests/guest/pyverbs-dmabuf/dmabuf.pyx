# SPDX-License-Identifier: GPL-2.0 OR MIT
#cython: language_level=3
"""
roxe's stand-in for pyverbs.dmabuf, built in the guest by pyverbs.sh.

Debian's python3-pyverbs (rdma-core 44) is built without libdrm, so its
DmaBuf is rdma-core's stub: every allocation fails with EOPNOTSUPP and the
suite's dma-buf tests skip (its compiled dmabuf module imports no open or
ioctl at all). rdma-core's real allocator would not help either: it knows
only amdgpu and i915, and the guests have no GPU.

This module has the same object layout (dmabuf.pxd), so the suite's own
compiled DmaBufMR and tests use it unchanged. It allocates from vgem, a DRM
driver with no hardware whose buffers are shmem pages: a dumb buffer on
vgem's primary node, exported as a dma-buf with PRIME_HANDLE_TO_FD, mapped
through the primary node at the offset MAP_DUMB gives (which is what
DmaBufMR.read and write mmap). `gpu` picks the render node
/dev/dri/renderD<128+gpu>, as in rdma-core; `gtt` means nothing to vgem.
"""
import weakref

from pyverbs.pyverbs_error import PyverbsRDMAError

cdef extern from "vgem_alloc.h":
    int vgem_alloc(unsigned long size, int gpu, int *drm_fd, int *handle, int *fd,
                   unsigned long *map_offset, unsigned long *got)
    void vgem_free(int drm_fd, int handle, int fd)


cdef class DmaBuf:
    def __init__(self, size, gpu=0, gtt=0):
        self.dmabuf_mrs = weakref.WeakSet()
        rc = vgem_alloc(size, gpu, &self.drm_fd, &self.handle, &self.fd,
                        &self.map_offset, &self.size)
        if rc:
            raise PyverbsRDMAError(f'Failed to allocate dmabuf of size {size} on gpu {gpu}', rc)
        # Non-NULL while this object owns a buffer (the layout's pointer
        # field; vgem needs no allocator state beyond the descriptors).
        self.dmabuf = <void *>&self.fd

    def __dealloc__(self):
        self.close()

    cpdef close(self):
        if self.dmabuf == NULL:
            return None
        # Marked closed first: closing an MR that allocated this buffer
        # calls back into close().
        self.dmabuf = NULL
        for mr in list(self.dmabuf_mrs):
            mr.close()
        vgem_free(self.drm_fd, self.handle, self.fd)

    cpdef add_ref(self, obj):
        self.dmabuf_mrs.add(obj)

    @property
    def drm_fd(self):
        return self.drm_fd

    @property
    def handle(self):
        return self.handle

    @property
    def fd(self):
        return self.fd

    @property
    def size(self):
        return self.size

    @property
    def map_offset(self):
        return self.map_offset
