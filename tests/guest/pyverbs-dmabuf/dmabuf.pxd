# SPDX-License-Identifier: GPL-2.0 OR MIT
#cython: language_level=3

# The object layout of rdma-core 44's pyverbs.dmabuf.DmaBuf, field for
# field and in its method table's order: python3-pyverbs' compiled mr module
# checks the object's size when it imports the type. One difference:
# rdma-core declares add_ref `cdef`, yet its DmaBufMR looks add_ref up as a
# Python attribute (an untyped object there), which only a `cpdef` method
# answers. The table slot stays first; nothing calls it through the table.
# See dmabuf.pyx.
cdef class DmaBuf:
    cdef int drm_fd
    cdef int handle
    cdef int fd
    cdef unsigned long size
    cdef unsigned long map_offset
    cdef void *dmabuf
    cdef object dmabuf_mrs
    cpdef add_ref(self, obj)
    cpdef close(self)
