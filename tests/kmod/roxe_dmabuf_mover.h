/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * roxe_dmabuf_mover: the ioctl ABI of /dev/roxe_mover, a test-only dma-buf
 * exporter whose buffers move on request (tests/kmod/roxe_dmabuf_mover.c,
 * tests/kmod/README.md). Shared by the module and by user space
 * (tests/guest/dmabuf-move.c): only <linux/types.h> and <linux/ioctl.h>.
 *
 * Every ioctl returns 0 or -1 with errno. Padding must be zero (EINVAL).
 * An fd that is not a dma-buf gives EINVAL (EBADF if it is not open), as
 * does a dma-buf of any other exporter.
 */
#ifndef ROXE_DMABUF_MOVER_H
#define ROXE_DMABUF_MOVER_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define ROXE_MOVER_DEV "/dev/roxe_mover"
/* The largest buffer CREATE makes. */
#define ROXE_MOVER_MAX_SIZE (64ull << 20)

/*
 * CREATE flags. VRAM: device memory until pinned. Unpinned, the vmap op
 * maps the pages as I/O memory (is_iomem), as a GPU's VRAM behind a BAR;
 * pinned, as system memory (amdgpu moves a buffer to GTT when an importer
 * without peer-to-peer pins it). IOMEM: I/O memory for good, pinned or not.
 */
#define ROXE_MOVER_VRAM (1u << 0)
#define ROXE_MOVER_IOMEM (1u << 1)

/*
 * CREATE: in size (bytes, a multiple of the page size, 1 page to
 * ROXE_MOVER_MAX_SIZE; else EINVAL) and flags (the ones above; others
 * EINVAL); out fd, a new O_RDWR|O_CLOEXEC dma-buf of zeroed pages.
 */
struct roxe_mover_create {
	__u64 size;
	__s32 fd;
	__u32 flags;
};

/*
 * MOVE flags. LATE_COPY: the bytes follow later, as a GPU's copy engine
 * moves them (TTM): the fresh pages (zeroed) take the old ones' place at
 * once, and a work item copies the old bytes into them ROXE_MOVER_LATE_MS
 * later, behind a fence of kernel usage (DMA_RESV_USAGE_KERNEL) added to
 * the buffer's reservation object and signalled once the copy is done.
 * An importer that touches the pages before the fence signals sees zeros,
 * and its writes are overwritten by the copy.
 */
#define ROXE_MOVER_LATE_COPY (1u << 0)
#define ROXE_MOVER_LATE_MS 50

/*
 * MOVE: under the buffer's reservation lock, once its fences of kernel
 * usage have signalled (a late copy before), EBUSY if an importer pinned
 * it; else tell the importers (dma_buf_move_notify), then EBUSY if one
 * still holds a kernel mapping (dma_buf_vmap) of it; else copy the bytes
 * into freshly allocated pages and free the old ones (or, with
 * ROXE_MOVER_LATE_COPY, have them copied later). Other flags: EINVAL.
 */
struct roxe_mover_move {
	__s32 fd;
	__u32 flags;
};

/*
 * PEEK (buffer to ptr) and POKE (ptr to buffer): len bytes at offset of
 * the buffer's current pages, under its reservation lock, once a late
 * copy is done. offset + len past the buffer's end: EINVAL.
 */
struct roxe_mover_io {
	__s32 fd;
	__u32 pad;
	__u64 offset;
	__u64 len;
	__u64 ptr; /* user address */
};

/* STATS: in fd; out the buffer's counters, read under its reservation lock. */
struct roxe_mover_stats {
	__s32 fd;
	__u32 pad;
	__u64 moves;        /* MOVEs that moved the pages */
	__u64 vmap_calls;   /* calls of the exporter's vmap op (first mappings) */
	__u64 vunmap_calls; /* calls of its vunmap op (last unmappings) */
	__u64 live_vmaps;   /* dma_buf_vmap()s not yet unmapped (the core's count) */
	__u64 pins;         /* pins now held (pin op calls minus unpin op calls) */
	__u64 pin_calls;    /* pin op calls ever */
};

#define ROXE_MOVER_IOC_MAGIC 0xD8
#define ROXE_MOVER_CREATE _IOWR(ROXE_MOVER_IOC_MAGIC, 0x00, struct roxe_mover_create)
#define ROXE_MOVER_MOVE _IOW(ROXE_MOVER_IOC_MAGIC, 0x01, struct roxe_mover_move)
#define ROXE_MOVER_PEEK _IOW(ROXE_MOVER_IOC_MAGIC, 0x02, struct roxe_mover_io)
#define ROXE_MOVER_POKE _IOW(ROXE_MOVER_IOC_MAGIC, 0x03, struct roxe_mover_io)
#define ROXE_MOVER_STATS _IOWR(ROXE_MOVER_IOC_MAGIC, 0x04, struct roxe_mover_stats)

#endif /* ROXE_DMABUF_MOVER_H */
