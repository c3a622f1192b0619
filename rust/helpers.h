/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C wrappers for the static inline functions and macros that roxe's Rust
 * abstractions need. Each is a one-line forward to the kernel's own code;
 * the logic stays in Rust.
 */
#ifndef ROXE_HELPERS_H
#define ROXE_HELPERS_H

#include <linux/netdevice.h>
#include <linux/sysfs.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <linux/mmu_notifier.h>
#include <linux/skbuff.h>
#include <net/sock.h>

struct net_device *roxe_netdev_notifier_info_to_dev(void *info);
bool roxe_netdev_is_vlan(const struct net_device *ndev);
bool roxe_netdev_is_up(const struct net_device *ndev);
unsigned int roxe_netdev_mtu(const struct net_device *ndev);
void roxe_netdev_put(struct net_device *ndev);
void roxe_netdev_hold(struct net_device *ndev);
void roxe_netdev_eui48(u8 *eui, const struct net_device *ndev);

void roxe_ib_device_get(struct ib_device *dev);
struct ib_device *roxe_ib_device_from_dev(struct device *dev);

void roxe_sysfs_attr_init(struct attribute *attr);



struct ib_udata *roxe_attrs_udata(struct uverbs_attr_bundle *attrs);
unsigned long roxe_copy_to_user(void __user *to, const void *from, unsigned long n);
unsigned long roxe_copy_from_user(void *to, const void __user *from, unsigned long n);
bool roxe_udata_is_cleared(struct ib_udata *udata, size_t offset, size_t len);
void roxe_dispatch_cq_event(struct ib_cq *cq, enum ib_event_type type);
struct ib_ucontext *roxe_udata_ucontext(struct ib_udata *udata);
void roxe_cq_comp(struct ib_cq *cq);
void *roxe_vmalloc_user(unsigned long size);
void roxe_work_init(struct work_struct *w, void (*fn)(struct work_struct *));
void roxe_work_queue(struct work_struct *w);
void roxe_work_cancel_sync(struct work_struct *w);
size_t roxe_umem_num_pages(struct ib_umem *umem);
size_t roxe_umem_offset(struct ib_umem *umem);
size_t roxe_umem_pages(struct ib_umem *umem, struct page **pages, size_t max);

bool roxe_irqs_disabled(void);
void roxe_spin_lock_bh(spinlock_t *lock);
void roxe_spin_unlock_bh(spinlock_t *lock);
unsigned long roxe_spin_lock_irqsave(spinlock_t *lock);
void roxe_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);

typedef int (*roxe_encap_rcv_t)(struct sock *sk, struct sk_buff *skb);
int roxe_net_register(roxe_encap_rcv_t rcv);
void roxe_net_unregister(void);
int roxe_net_attach(struct net_device *ndev);
void roxe_net_detach(struct net_device *ndev);
void roxe_rtnl_lock(void);
void roxe_rtnl_unlock(void);

struct net_device *roxe_skb_dev(struct sk_buff *skb);
int roxe_skb_linear_udp(struct sk_buff *skb, const u8 **ip, unsigned int *ip_len,
			const u8 **udp, unsigned int *udp_len);
void roxe_skb_free(struct sk_buff *skb);
void roxe_skb_consume(struct sk_buff *skb);

struct dst_entry *roxe_route4(struct net_device *ndev, __be32 saddr, __be32 daddr);
struct dst_entry *roxe_route6(struct net_device *ndev, const struct in6_addr *saddr,
			      const struct in6_addr *daddr);
u32 roxe_dst_cookie(struct dst_entry *dst, bool ipv6);
bool roxe_dst_current(struct dst_entry *dst, u32 cookie);
void roxe_dst_release(struct dst_entry *dst);
void roxe_dst_hold(struct dst_entry *dst);
unsigned int roxe_dst_mtu(struct dst_entry *dst);
struct sk_buff *roxe_tx_alloc(struct dst_entry *dst, unsigned int len, u8 **data);
int roxe_tx_send(struct sk_buff *skb, struct dst_entry *dst, bool ipv6);
bool roxe_dst_is_local(const struct dst_entry *dst);
int roxe_tx_loopback(struct sk_buff *skb, struct dst_entry *dst, struct net_device *ndev);
bool roxe_skb_to_host(const struct sk_buff *skb);
bool roxe_skb_multicast_frame(const struct sk_buff *skb);

void roxe_timer_setup(struct timer_list *t, void (*fn)(struct timer_list *));
void roxe_timer_arm(struct timer_list *t, unsigned int msecs);
void roxe_timer_reduce(struct timer_list *t, unsigned int msecs);
void roxe_timer_shutdown_sync(struct timer_list *t);
unsigned int roxe_timer_tick_usecs(void);

long roxe_kernel_read(void *dst, u64 src, size_t n);
long roxe_kernel_write(u64 dst, const void *src, size_t n);

void *roxe_kmap_local_page(struct page *page);
void roxe_kunmap_local(void *addr);

/* dma-buf memory regions (rust/rdma/umem.rs, DmaBuf). */
struct dma_buf;
struct dma_buf_attachment;
struct dma_buf *roxe_dmabuf_get(int fd);
void roxe_dmabuf_put(struct dma_buf *buf);
size_t roxe_dmabuf_size(const struct dma_buf *buf);
bool roxe_dmabuf_writable(const struct dma_buf *buf);
struct roxe_dmabuf_map;
struct roxe_dmabuf_map *roxe_dmabuf_import(struct dma_buf *buf, struct ib_device *ibdev);
int roxe_dmabuf_remap(struct roxe_dmabuf_map *m);
void *roxe_dmabuf_lock(struct roxe_dmabuf_map *m, unsigned long *flags);
void roxe_dmabuf_unlock(struct roxe_dmabuf_map *m, unsigned long flags);
void roxe_dmabuf_release(struct roxe_dmabuf_map *m);

/* On-demand paging (rust/rdma/odp.rs). */
struct ib_umem_odp *roxe_odp_from_notifier(struct mmu_interval_notifier *mni);
bool roxe_odp_range_blockable(const struct mmu_notifier_range *range);
void roxe_odp_range(const struct mmu_notifier_range *range, u64 *start, u64 *end);
void roxe_odp_set_seq(struct mmu_interval_notifier *mni, unsigned long seq);
void roxe_odp_lock(struct ib_umem_odp *odp);
void roxe_odp_unlock(struct ib_umem_odp *odp);
u64 roxe_odp_start(struct ib_umem_odp *odp);
u64 roxe_odp_end(struct ib_umem_odp *odp);
u64 roxe_odp_address(struct ib_umem_odp *odp);
bool roxe_odp_writable(struct ib_umem_odp *odp);
void *roxe_odp_private(struct ib_umem_odp *odp);
void roxe_odp_set_private(struct ib_umem_odp *odp, void *p);
u64 roxe_odp_entry(struct ib_umem_odp *odp, size_t idx);
void *roxe_odp_entry_ptr(u64 entry);
void roxe_odp_mmgrab(struct ib_umem_odp *odp);
void roxe_odp_mmdrop(struct ib_umem_odp *odp);
struct workqueue_struct *roxe_alloc_wq(const char *name);
void roxe_destroy_wq(struct workqueue_struct *wq);
void roxe_flush_wq(struct workqueue_struct *wq);

unsigned int *roxe_fail_qp_table(void);
unsigned int *roxe_fail_cq_init(void);
unsigned int *roxe_fail_srq_init(void);

/*
 * DCQCN reaction point tunables: module parameters, read on every use.
 * The defaults; rust/rdma/tunables.rs checks them against rust/proto's
 * Knobs::DEFAULT at build time.
 */
#define ROXE_DCQCN_TIME_RESET_US 300
#define ROXE_DCQCN_AI_RATE_KBPS 5000
#define ROXE_DCQCN_HAI_RATE_KBPS 50000
#define ROXE_DCQCN_MIN_RATE_KBPS 1000
#define ROXE_DCQCN_BYTE_RESET (10 << 20)
#define ROXE_DCQCN_THRESHOLD 5
#define ROXE_DCQCN_G_SHIFT 8
#define ROXE_DCQCN_ALPHA_PERIOD_US 55
#define ROXE_DCQCN_REDUCE_PERIOD_US 50
/* The bounds writes to two of them must keep. */
#define ROXE_DCQCN_G_SHIFT_MAX 16
#define ROXE_DCQCN_LINE_KBPS 100000000
struct roxe_dcqcn_knobs {
	unsigned int time_reset_us;
	unsigned int ai_rate_kbps;
	unsigned int hai_rate_kbps;
	unsigned int min_rate_kbps;
	unsigned int byte_reset;
	unsigned int threshold;
	unsigned int g_shift;
	unsigned int alpha_period_us;
	unsigned int reduce_period_us;
};
struct roxe_dcqcn_knobs *roxe_dcqcn_knobs(void);
void *roxe_res_driver_begin(struct sk_buff *msg);

struct ib_xrcd *roxe_srq_init_xrcd(const struct ib_srq_init_attr *init);
struct ib_xrcd *roxe_srq_xrcd(const struct ib_srq *srq);
void roxe_srq_set_xrc_num(struct ib_srq *srq, u32 num);

typedef int (*roxe_tap_fn)(struct sk_buff *, struct net_device *,
			   struct packet_type *, struct net_device *);
void roxe_tap_add(struct packet_type *pt, struct net_device *dev, roxe_tap_fn func);
void roxe_tap_remove(struct packet_type *pt);
bool roxe_skb_outgoing(const struct sk_buff *skb);
unsigned int roxe_frame_len(const struct sk_buff *skb);
int roxe_frame_copy(const struct sk_buff *skb, void *to, unsigned int len);
int roxe_raw_xmit(struct net_device *dev, const void *frame, unsigned int len);
void roxe_res_driver_end(struct sk_buff *msg, void *table, bool ok);
#endif
