// SPDX-License-Identifier: GPL-2.0
/*
 * roxe_dmabuf_mover: a test-only dma-buf exporter whose buffers move when
 * user space asks, so that an importer's re-validation (move_notify, then
 * mapping the buffer again) can be tested without a GPU. See
 * tests/kmod/README.md; the ioctl ABI is in roxe_dmabuf_mover.h.
 *
 * A buffer is an array of individually allocated pages. The exporter is
 * dynamic (it has pin and unpin ops): importers may attach without pinning
 * and must then drop their mappings in move_notify. MOVE copies the bytes
 * into new pages and frees the old ones, but only when no importer pinned
 * the buffer and, after move_notify, none still holds a kernel mapping.
 *
 * CREATE's flags make a buffer that poses as device memory (VRAM: I/O
 * memory until pinned; IOMEM: for good), and MOVE's LATE_COPY flag moves
 * the bytes after MOVE returns, behind a fence, as a GPU's copy engine
 * does: the importer must wait for the buffer's fences before it touches
 * the pages.
 *
 * Locking: dmabuf->resv (the reservation lock) guards everything of a
 * buffer that can change: the page array, the exporter's own mapping and
 * the counters. The dma-buf core holds it around the pin, unpin, vmap and
 * vunmap ops for a dynamic exporter, and dma_buf_move_notify requires it;
 * the ioctls take it themselves. Nothing copies to or from user space
 * under it: the core orders mmap_lock before the reservation lock
 * (dma_resv_lockdep), so PEEK and POKE go through a kernel bounce buffer.
 */
#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/iosys-map.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

#include "roxe_dmabuf_mover.h"

/* One exported buffer: dmabuf->priv. */
struct mover_buf {
	size_t npages;
	u32 flags; /* CREATE's */
	/* Guarded by the reservation lock, as everything below. */
	struct page **pages;
	void *vaddr; /* the vmap op's mapping, while the core holds one */
	unsigned int pins;
	u64 moves;
	u64 vmap_calls;
	u64 vunmap_calls;
	u64 pin_calls;
};

static void free_page_array(struct page **pages, size_t npages)
{
	size_t i;

	if (!pages)
		return;
	for (i = 0; i < npages; i++)
		if (pages[i])
			__free_page(pages[i]);
	kvfree(pages);
}

static struct page **alloc_page_array(size_t npages, gfp_t gfp)
{
	struct page **pages = kvcalloc(npages, sizeof(*pages), GFP_KERNEL);
	size_t i;

	if (!pages)
		return NULL;
	for (i = 0; i < npages; i++) {
		pages[i] = alloc_page(gfp);
		if (!pages[i]) {
			free_page_array(pages, npages);
			return NULL;
		}
	}
	return pages;
}

static int mover_pin(struct dma_buf_attachment *attach)
{
	struct mover_buf *buf = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	buf->pins++;
	buf->pin_calls++;
	return 0;
}

static void mover_unpin(struct dma_buf_attachment *attach)
{
	struct mover_buf *buf = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (!WARN_ON_ONCE(!buf->pins))
		buf->pins--;
}

/*
 * No DMA mappings. The only importer these buffers are made for is roxe,
 * a software device that reaches memory with the CPU through dma_buf_vmap
 * and never calls dma_buf_map_attachment. (A static attachment to this
 * dynamic exporter would make the core pin and map at attach time: it
 * fails here, which is as good as refusing it.) The core requires both ops.
 */
static struct sg_table *mover_map_dma_buf(struct dma_buf_attachment *attach,
					  enum dma_data_direction dir)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static void mover_unmap_dma_buf(struct dma_buf_attachment *attach, struct sg_table *sgt,
				enum dma_data_direction dir)
{
	/* Unreachable: mover_map_dma_buf never gives out a table. */
}

/*
 * The core counts dma_buf_vmap()s in dmabuf->vmapping_counter and calls
 * this only for the first, vunmap only after the last.
 */
static int mover_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct mover_buf *buf = dmabuf->priv;
	void *vaddr;

	dma_resv_assert_held(dmabuf->resv);
	if (WARN_ON_ONCE(buf->vaddr))
		return -EBUSY;
	vaddr = vmap(buf->pages, buf->npages, VM_MAP, PAGE_KERNEL);
	if (!vaddr)
		return -ENOMEM;
	buf->vaddr = vaddr;
	buf->vmap_calls++;
	/*
	 * Posing as device memory: the same pages, marked as I/O memory, which
	 * an importer must not reach with plain loads and stores.
	 */
	if ((buf->flags & ROXE_MOVER_IOMEM) || ((buf->flags & ROXE_MOVER_VRAM) && !buf->pins))
		iosys_map_set_vaddr_iomem(map, (void __iomem __force *)vaddr);
	else
		iosys_map_set_vaddr(map, vaddr);
	return 0;
}

static void mover_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct mover_buf *buf = dmabuf->priv;

	dma_resv_assert_held(dmabuf->resv);
	WARN_ON_ONCE(map->vaddr != buf->vaddr);
	vunmap(map->vaddr);
	buf->vaddr = NULL;
	buf->vunmap_calls++;
}

/* The last reference is gone: no importer, no mapping, no lock needed. */
static void mover_release(struct dma_buf *dmabuf)
{
	struct mover_buf *buf = dmabuf->priv;

	WARN_ON(buf->pins);
	if (WARN_ON(buf->vaddr))
		vunmap(buf->vaddr);
	free_page_array(buf->pages, buf->npages);
	kfree(buf);
}

static const struct dma_buf_ops mover_ops = {
	.pin = mover_pin,
	.unpin = mover_unpin,
	.map_dma_buf = mover_map_dma_buf,
	.unmap_dma_buf = mover_unmap_dma_buf,
	.vmap = mover_vmap,
	.vunmap = mover_vunmap,
	.release = mover_release,
};

/* The buffer behind fd, with a reference, if this module exported it. */
static struct dma_buf *mover_get(s32 fd)
{
	struct dma_buf *dmabuf = dma_buf_get(fd);

	if (IS_ERR(dmabuf))
		return dmabuf;
	if (dmabuf->ops != &mover_ops) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-EINVAL);
	}
	return dmabuf;
}

static long mover_create(struct roxe_mover_create __user *uarg)
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct roxe_mover_create arg;
	struct dma_buf *dmabuf;
	struct mover_buf *buf;
	int fd;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if ((arg.flags & ~(ROXE_MOVER_VRAM | ROXE_MOVER_IOMEM)) || !arg.size ||
	    arg.size > ROXE_MOVER_MAX_SIZE || !PAGE_ALIGNED(arg.size))
		return -EINVAL;
	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	buf->npages = arg.size >> PAGE_SHIFT;
	buf->flags = arg.flags;
	buf->pages = alloc_page_array(buf->npages, GFP_KERNEL | __GFP_ZERO);
	if (!buf->pages) {
		kfree(buf);
		return -ENOMEM;
	}
	info.ops = &mover_ops;
	info.size = arg.size;
	/* A writable file: roxe grants write rights only over one. */
	info.flags = O_RDWR;
	info.priv = buf;
	/* The buffer holds a reference to this module (info.owner) until released. */
	dmabuf = dma_buf_export(&info);
	if (IS_ERR(dmabuf)) {
		free_page_array(buf->pages, buf->npages);
		kfree(buf);
		return PTR_ERR(dmabuf);
	}
	/* From here the release op frees buf. */
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(dmabuf);
		return fd;
	}
	arg.fd = fd;
	if (copy_to_user(uarg, &arg, sizeof(arg))) {
		put_unused_fd(fd);
		dma_buf_put(dmabuf);
		return -EFAULT;
	}
	fd_install(fd, dmabuf->file);
	return 0;
}

/* A late copy (ROXE_MOVER_LATE_COPY): its fence, and what it copies. */
struct mover_late {
	struct dma_fence fence; /* first: the fence's release frees the whole */
	spinlock_t lock;
	struct delayed_work work;
	struct dma_buf *dmabuf; /* a reference, until the copy is done */
	struct page **from;     /* the old pages, freed after the copy */
	struct page **to;       /* the buffer's pages now */
	size_t npages;
};

static u64 late_context;
static atomic64_t late_seqno;
/* Destroyed (drained) at unload, so no copy runs after the module is gone. */
static struct workqueue_struct *late_wq;

static const char *late_name(struct dma_fence *fence)
{
	return "roxe_dmabuf_mover";
}

static const struct dma_fence_ops late_ops = {
	.get_driver_name = late_name,
	.get_timeline_name = late_name,
};

/*
 * The copy engine: no reservation lock (an importer may wait for this
 * fence while holding it); the pages cannot go meanwhile, since the next
 * MOVE and the release both wait (the fence, the dma-buf reference).
 */
static void late_copy(struct work_struct *work)
{
	struct mover_late *l = container_of(to_delayed_work(work), struct mover_late, work);
	size_t i;

	for (i = 0; i < l->npages; i++)
		copy_highpage(l->to[i], l->from[i]);
	free_page_array(l->from, l->npages);
	dma_fence_signal(&l->fence);
	dma_buf_put(l->dmabuf);
	dma_fence_put(&l->fence);
}

/* Takes the reservation lock once the buffer's late copies are done. */
static int mover_lock_idle(struct dma_buf *dmabuf)
{
	long ret;

	for (;;) {
		ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
		if (ret)
			return ret;
		if (dma_resv_test_signaled(dmabuf->resv, DMA_RESV_USAGE_KERNEL))
			return 0;
		dma_resv_unlock(dmabuf->resv);
		ret = dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_KERNEL, true,
					    MAX_SCHEDULE_TIMEOUT);
		if (ret < 0)
			return ret;
	}
}

static long mover_move(struct roxe_mover_move __user *uarg)
{
	struct mover_late *late = NULL;
	struct roxe_mover_move arg;
	struct page **fresh, **old;
	struct dma_buf *dmabuf;
	struct mover_buf *buf;
	size_t i;
	long ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.flags & ~ROXE_MOVER_LATE_COPY)
		return -EINVAL;
	dmabuf = mover_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	buf = dmabuf->priv;
	ret = -ENOMEM;
	if (arg.flags & ROXE_MOVER_LATE_COPY) {
		late = kzalloc(sizeof(*late), GFP_KERNEL);
		if (!late)
			goto put;
	}
	/*
	 * The new pages, before the lock: whichever array loses is freed
	 * after it. Zeroed for a late copy, so that an importer that does not
	 * wait for it reads zeros, not the bytes.
	 */
	fresh = alloc_page_array(buf->npages, GFP_KERNEL | (late ? __GFP_ZERO : 0));
	if (!fresh)
		goto put;
	ret = mover_lock_idle(dmabuf);
	if (ret)
		goto free;
	if (buf->pins) {
		ret = -EBUSY;
		goto unlock;
	}
	if (late) {
		ret = dma_resv_reserve_fences(dmabuf->resv, 1);
		if (ret)
			goto unlock;
	}
	dma_buf_move_notify(dmabuf);
	/* An importer that kept its mapping would now read freed pages. */
	if (dmabuf->vmapping_counter || buf->vaddr) {
		ret = -EBUSY;
		goto unlock;
	}
	if (late) {
		spin_lock_init(&late->lock);
		dma_fence_init(&late->fence, &late_ops, &late->lock, late_context,
			       atomic64_inc_return(&late_seqno));
		get_dma_buf(dmabuf);
		late->dmabuf = dmabuf;
		late->from = buf->pages;
		late->to = fresh;
		late->npages = buf->npages;
		/* The reservation object takes a reference of its own. */
		dma_resv_add_fence(dmabuf->resv, &late->fence, DMA_RESV_USAGE_KERNEL);
		buf->pages = fresh;
		fresh = NULL;
		INIT_DELAYED_WORK(&late->work, late_copy);
		queue_delayed_work(late_wq, &late->work, msecs_to_jiffies(ROXE_MOVER_LATE_MS));
		late = NULL;
	} else {
		for (i = 0; i < buf->npages; i++)
			copy_highpage(fresh[i], buf->pages[i]);
		old = buf->pages;
		buf->pages = fresh;
		fresh = old;
	}
	buf->moves++;
	ret = 0;
unlock:
	dma_resv_unlock(dmabuf->resv);
free:
	free_page_array(fresh, buf->npages);
put:
	kfree(late);
	dma_buf_put(dmabuf);
	return ret;
}

/*
 * Copy len bytes at off between the buffer's pages and kbuf. The caller
 * holds the reservation lock and checked the range. The pages are reached
 * through their own kernel mapping; an importer's vmap() of them is cached
 * (PAGE_KERNEL) too, so the two agree on x86 (the test machines).
 */
static void mover_copy(struct mover_buf *buf, u64 off, void *kbuf, size_t len, bool to_pages)
{
	while (len) {
		size_t in = offset_in_page(off);
		size_t n = min_t(size_t, len, PAGE_SIZE - in);
		void *va = kmap_local_page(buf->pages[off >> PAGE_SHIFT]);

		if (to_pages)
			memcpy(va + in, kbuf, n);
		else
			memcpy(kbuf, va + in, n);
		kunmap_local(va);
		off += n;
		kbuf += n;
		len -= n;
	}
}

static long mover_io(struct roxe_mover_io __user *uarg, bool poke)
{
	struct roxe_mover_io arg;
	struct dma_buf *dmabuf;
	void __user *uptr;
	void *bounce;
	long ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.pad)
		return -EINVAL;
	dmabuf = mover_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = -EINVAL;
	if (arg.offset > dmabuf->size || arg.len > dmabuf->size - arg.offset)
		goto put;
	ret = 0;
	if (!arg.len)
		goto put;
	uptr = u64_to_user_ptr(arg.ptr);
	ret = -ENOMEM;
	bounce = kvmalloc(arg.len, GFP_KERNEL);
	if (!bounce)
		goto put;
	ret = -EFAULT;
	if (poke && copy_from_user(bounce, uptr, arg.len))
		goto free;
	ret = mover_lock_idle(dmabuf);
	if (ret)
		goto free;
	mover_copy(dmabuf->priv, arg.offset, bounce, arg.len, poke);
	dma_resv_unlock(dmabuf->resv);
	if (!poke && copy_to_user(uptr, bounce, arg.len))
		ret = -EFAULT;
free:
	kvfree(bounce);
put:
	dma_buf_put(dmabuf);
	return ret;
}

static long mover_stats(struct roxe_mover_stats __user *uarg)
{
	struct roxe_mover_stats arg;
	struct dma_buf *dmabuf;
	struct mover_buf *buf;
	long ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.pad)
		return -EINVAL;
	dmabuf = mover_get(arg.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	buf = dmabuf->priv;
	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (ret)
		goto put;
	arg.moves = buf->moves;
	arg.vmap_calls = buf->vmap_calls;
	arg.vunmap_calls = buf->vunmap_calls;
	arg.live_vmaps = dmabuf->vmapping_counter;
	arg.pins = buf->pins;
	arg.pin_calls = buf->pin_calls;
	dma_resv_unlock(dmabuf->resv);
	if (copy_to_user(uarg, &arg, sizeof(arg)))
		ret = -EFAULT;
put:
	dma_buf_put(dmabuf);
	return ret;
}

static long mover_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case ROXE_MOVER_CREATE:
		return mover_create(uarg);
	case ROXE_MOVER_MOVE:
		return mover_move(uarg);
	case ROXE_MOVER_PEEK:
		return mover_io(uarg, false);
	case ROXE_MOVER_POKE:
		return mover_io(uarg, true);
	case ROXE_MOVER_STATS:
		return mover_stats(uarg);
	default:
		return -ENOTTY;
	}
}

/* An open /dev/roxe_mover holds the module (fops owner), as every buffer does. */
static const struct file_operations mover_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = mover_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice mover_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "roxe_mover",
	.fops = &mover_fops,
	.mode = 0600,
};
static int __init mover_init(void)
{
	int ret;

	late_context = dma_fence_context_alloc(1);
	late_wq = alloc_workqueue("roxe_mover", 0, 0);
	if (!late_wq)
		return -ENOMEM;
	ret = misc_register(&mover_misc);
	if (ret)
		destroy_workqueue(late_wq);
	return ret;
}

static void __exit mover_exit(void)
{
	misc_deregister(&mover_misc);
	destroy_workqueue(late_wq);
}

module_init(mover_init);
module_exit(mover_exit);

MODULE_DESCRIPTION("roxe test: a dma-buf exporter whose buffers move on request");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(DMA_BUF);
