// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line copies of static inline kernel functions for roxe's Rust code.
 * See helpers.h.
 */
#include <linux/if_vlan.h>
#include <linux/etherdevice.h>
#include <linux/if_packet.h>
#include <net/addrconf.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/inetdevice.h>
#include <linux/highmem.h>
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/iosys-map.h>
#include <linux/uaccess.h>
#include <net/udp_tunnel.h>
#include <net/route.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/ip6_fib.h>
#include <net/addrconf.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <linux/rtnetlink.h>
#include <linux/xarray.h>
#include <net/netlink.h>
#include <rdma/rdma_netlink.h>
#include "helpers.h"

/* IANA's port for RoCEv2 (IBTA Annex A17). */
#define ROXE_ROCE_PORT 4791

struct net_device *roxe_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool roxe_netdev_is_vlan(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

bool roxe_netdev_is_up(const struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

unsigned int roxe_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

void roxe_netdev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void roxe_netdev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

void roxe_netdev_eui48(u8 *eui, const struct net_device *ndev)
{
	addrconf_addr_eui48(eui, ndev->dev_addr);
}

void roxe_ib_device_get(struct ib_device *dev)
{
	refcount_inc(&dev->refcount);
}

struct ib_device *roxe_ib_device_from_dev(struct device *dev)
{
	return rdma_device_to_ibdev(dev);
}

void roxe_sysfs_attr_init(struct attribute *attr)
{
	sysfs_attr_init(attr);
}

struct ib_udata *roxe_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

unsigned long roxe_copy_to_user(void __user *to, const void *from, unsigned long n)
{
	return copy_to_user(to, from, n);
}

unsigned long roxe_copy_from_user(void *to, const void __user *from, unsigned long n)
{
	return copy_from_user(to, from, n);
}

bool roxe_udata_is_cleared(struct ib_udata *udata, size_t offset, size_t len)
{
	return ib_is_udata_cleared(udata, offset, len);
}

void roxe_dispatch_cq_event(struct ib_cq *cq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = cq->device,
		.element.cq = cq,
		.event = type,
	};

	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}

struct ib_ucontext *roxe_udata_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

void roxe_cq_comp(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

/*
 * Zeroed, user-mappable memory for a ring, charged to the caller's memory
 * cgroup. vmalloc_user() does not charge, and the allocator it is built on
 * (__vmalloc_node_range) is not exported, so the pages are allocated with
 * GFP_KERNEL_ACCOUNT and mapped with VM_USERMAP (which remap_vmalloc_range
 * requires) here. VM_MAP_PUT_PAGES hands the pages and the array to the
 * area: vfree() frees (and uncharges) them. __GFP_RETRY_MAYFAIL makes an
 * allocation over the cgroup's limit fail with NULL instead of waking the
 * OOM killer.
 */
void *roxe_vmalloc_user(unsigned long size)
{
	const gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_RETRY_MAYFAIL | __GFP_NOWARN;
	unsigned long i, n = PAGE_ALIGN(size) >> PAGE_SHIFT;
	struct page **pages;
	void *addr;

	if (!n || n > UINT_MAX)
		return NULL;
	pages = kvmalloc_array(n, sizeof(*pages), gfp);
	if (!pages)
		return NULL;
	for (i = 0; i < n; i++) {
		pages[i] = alloc_page(gfp);
		if (!pages[i])
			goto fail;
		cond_resched();
	}
	addr = vmap(pages, n, VM_MAP | VM_USERMAP | VM_MAP_PUT_PAGES, PAGE_KERNEL);
	if (addr)
		return addr;
fail:
	while (i--)
		__free_page(pages[i]);
	kvfree(pages);
	return NULL;
}

/*
 * Work items that run a verbs consumer's handlers with no roxe lock held
 * (rust/rdma/upcall.rs).
 */
void roxe_work_init(struct work_struct *w, void (*fn)(struct work_struct *))
{
	INIT_WORK(w, fn);
}

void roxe_work_queue(struct work_struct *w)
{
	queue_work(system_highpri_wq, w);
}

void roxe_work_cancel_sync(struct work_struct *w)
{
	cancel_work_sync(w);
}

size_t roxe_umem_num_pages(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}

size_t roxe_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

size_t roxe_umem_pages(struct ib_umem *umem, struct page **pages, size_t max)
{
	struct sg_page_iter it;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (n == max)
			break;
		pages[n++] = sg_page_iter_page(&it);
	}
	return n;
}

bool roxe_irqs_disabled(void)
{
	return irqs_disabled();
}

void roxe_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void roxe_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

unsigned long roxe_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void roxe_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

/*
 * RoCEv2 sockets per network namespace. Each namespace has, in its pernet
 * storage, the set of its netdevs that carry a roxe device (by ifindex) and,
 * while that set is not empty, roxe's two UDP sockets on port 4791 there
 * (IPv4 and IPv6). Attaching and detaching a netdev happen under RTNL,
 * which also keeps dev_net() of a netdev we hold stable. The namespace's
 * exit closes what is left: it runs after every netdev of the namespace is
 * gone, and the netdev notifier has detached each on its way out.
 */
struct roxe_net {
	struct socket *sock[2];		/* IPv4, IPv6; NULL when closed */
	struct sock __rcu *tx_sk[2];	/* their socks, for multicast sends */
	struct xarray users;		/* ifindex -> netdev */
};

static unsigned int roxe_net_id;
static roxe_encap_rcv_t roxe_net_rcv;
static bool roxe_net_registered;

static struct roxe_net *roxe_net(struct net *net)
{
	return net_generic(net, roxe_net_id);
}

static int roxe_sock_open(struct net *net, bool ipv6, struct socket **out)
{
	struct udp_port_cfg ucfg = {
		.family = ipv6 ? AF_INET6 : AF_INET,
		.ipv6_v6only = ipv6,
		.local_udp_port = htons(ROXE_ROCE_PORT),
	};
	struct udp_tunnel_sock_cfg tcfg = {
		.encap_type = 1,
		.encap_rcv = roxe_net_rcv,
	};
	int err = udp_sock_create(net, &ucfg, out);

	if (err)
		return err;
	setup_udp_tunnel_sock(net, *out, &tcfg);
	/*
	 * roxe sends its multicast as this socket, with the IP layer's
	 * loopback of multicast off: roxe delivers its own copy to local
	 * members itself (roxe_tx_send), and takes no looped-back packet, as
	 * a local process's socket could loop back anything.
	 */
	if (ipv6)
		inet6_clear_bit(MC6_LOOP, (*out)->sk);
	else
		inet_clear_bit(MC_LOOP, (*out)->sk);
	return 0;
}

/* Closes @rn's sockets: no sender sees them after the first grace period,
 * no receive hook runs after the second. */
static void roxe_net_close(struct roxe_net *rn)
{
	int i;

	for (i = 0; i < 2; i++)
		RCU_INIT_POINTER(rn->tx_sk[i], NULL);
	synchronize_net();
	for (i = 0; i < 2; i++) {
		if (rn->sock[i])
			udp_tunnel_sock_release(rn->sock[i]);
		rn->sock[i] = NULL;
	}
	synchronize_net();
}

static int __net_init roxe_net_init(struct net *net)
{
	xa_init(&roxe_net(net)->users);
	return 0;
}

static void __net_exit roxe_net_exit(struct net *net)
{
	struct roxe_net *rn = roxe_net(net);

	if (rn->sock[0] || rn->sock[1])
		roxe_net_close(rn);
	xa_destroy(&rn->users);
}

static struct pernet_operations roxe_net_ops = {
	.init = roxe_net_init,
	.exit = roxe_net_exit,
	.id = &roxe_net_id,
	.size = sizeof(struct roxe_net),
};

int roxe_net_register(roxe_encap_rcv_t rcv)
{
	int err;

	roxe_net_rcv = rcv;
	err = register_pernet_subsys(&roxe_net_ops);
	if (!err)
		WRITE_ONCE(roxe_net_registered, true);
	return err;
}

void roxe_net_unregister(void)
{
	WRITE_ONCE(roxe_net_registered, false);
	unregister_pernet_subsys(&roxe_net_ops);
}

/*
 * Counts @ndev, in its namespace, as carrying a roxe device, opening the
 * namespace's sockets for the first. RTNL held; @ndev held by the caller.
 */
int roxe_net_attach(struct net_device *ndev)
{
	struct net *net = dev_net(ndev);
	struct roxe_net *rn;
	bool first;
	int err;

	ASSERT_RTNL();
	if (!READ_ONCE(roxe_net_registered) || ndev->reg_state != NETREG_REGISTERED)
		return -ENODEV;
	rn = roxe_net(net);
	first = xa_empty(&rn->users);
	if (first) {
		err = roxe_sock_open(net, false, &rn->sock[0]);
		if (err)
			return err;
		err = roxe_sock_open(net, true, &rn->sock[1]);
		if (err) {
			udp_tunnel_sock_release(rn->sock[0]);
			rn->sock[0] = NULL;
			synchronize_net();
			return err;
		}
		rcu_assign_pointer(rn->tx_sk[0], rn->sock[0]->sk);
		rcu_assign_pointer(rn->tx_sk[1], rn->sock[1]->sk);
	}
	err = xa_insert(&rn->users, ndev->ifindex, ndev, GFP_KERNEL);
	if (err && first)
		roxe_net_close(rn);
	return err;
}

/*
 * Stops counting @ndev in its namespace, closing the namespace's sockets
 * with the last. Does nothing for a netdev that is not counted there (never
 * attached, or detached already). RTNL held; @ndev held by the caller or by
 * the notifier chain.
 */
void roxe_net_detach(struct net_device *ndev)
{
	struct roxe_net *rn;

	ASSERT_RTNL();
	if (!READ_ONCE(roxe_net_registered))
		return;
	rn = roxe_net(dev_net(ndev));
	if (xa_load(&rn->users, ndev->ifindex) != ndev)
		return;
	xa_erase(&rn->users, ndev->ifindex);
	if (xa_empty(&rn->users))
		roxe_net_close(rn);
}

void roxe_rtnl_lock(void)
{
	rtnl_lock();
}

void roxe_rtnl_unlock(void)
{
	rtnl_unlock();
}

struct net_device *roxe_skb_dev(struct sk_buff *skb)
{
	return skb->dev;
}

/*
 * Makes the whole packet linear and points @ip at the network header and
 * @udp at the UDP header, each with the number of bytes up to the end.
 */
int roxe_skb_linear_udp(struct sk_buff *skb, const u8 **ip, unsigned int *ip_len,
			const u8 **udp, unsigned int *udp_len)
{
	if (skb_linearize(skb))
		return -ENOMEM;
	*ip = skb_network_header(skb);
	*ip_len = skb_tail_pointer(skb) - skb_network_header(skb);
	*udp = skb_transport_header(skb);
	*udp_len = skb_tail_pointer(skb) - skb_transport_header(skb);
	return 0;
}

void roxe_skb_free(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void roxe_skb_consume(struct sk_buff *skb)
{
	consume_skb(skb);
}

struct dst_entry *roxe_route4(struct net_device *ndev, __be32 saddr, __be32 daddr)
{
	struct flowi4 fl = {
		.flowi4_oif = ndev->ifindex,
		.flowi4_proto = IPPROTO_UDP,
		.saddr = saddr,
		.daddr = daddr,
	};
	struct rtable *rt = ip_route_output_key(dev_net(ndev), &fl);

	return IS_ERR(rt) ? NULL : &rt->dst;
}

struct dst_entry *roxe_route6(struct net_device *ndev, const struct in6_addr *saddr,
			      const struct in6_addr *daddr)
{
	struct flowi6 fl = {
		.flowi6_oif = ndev->ifindex,
		.flowi6_proto = IPPROTO_UDP,
		.saddr = *saddr,
		.daddr = *daddr,
	};
	struct dst_entry *dst;

	if (!ipv6_stub || !ipv6_stub->ipv6_dst_lookup_flow)
		return NULL;
	dst = ipv6_stub->ipv6_dst_lookup_flow(dev_net(ndev), NULL, &fl, NULL);
	return IS_ERR(dst) ? NULL : dst;
}

/*
 * The cookie that tells later whether an IPv6 route still stands (0 for
 * IPv4, whose routes carry their generation themselves).
 */
u32 roxe_dst_cookie(struct dst_entry *dst, bool ipv6)
{
	u32 cookie = 0;

	if (ipv6)
		cookie = rt6_get_cookie(dst_rt6_info(dst));
	return cookie;
}

/*
 * Whether @dst is still the route to use: false once the routing tables
 * changed under it, as when its device went down (its IPv4 generation
 * expired, or its IPv6 cookie no longer matches). A caller that holds a
 * route for a long time looks it up again then.
 */
bool roxe_dst_current(struct dst_entry *dst, u32 cookie)
{
	return dst_check(dst, cookie) != NULL;
}

void roxe_dst_release(struct dst_entry *dst)
{
	dst_release(dst);
}

void roxe_dst_hold(struct dst_entry *dst)
{
	dst_hold(dst);
}

unsigned int roxe_dst_mtu(struct dst_entry *dst)
{
	return dst_mtu(dst);
}

/*
 * Allocates a linear skb with room for the link-layer header of the route's
 * device and @len bytes of IP packet, which @data points to.
 */
struct sk_buff *roxe_tx_alloc(struct dst_entry *dst, unsigned int len, u8 **data)
{
	unsigned int room = LL_RESERVED_SPACE(dst->dev);
	struct sk_buff *skb = alloc_skb(room + len, GFP_ATOMIC);

	if (!skb)
		return NULL;
	skb_reserve(skb, room);
	skb_reset_network_header(skb);
	*data = skb_put(skb, len);
	return skb;
}

/*
 * Whether this host may have members of the multicast group @dst leads
 * to, so that roxe delivers a copy itself: for IPv4 the route says whether
 * the device has joined the group; for IPv6 the receive side checks that
 * (ip6_mc_input), so every multicast packet gets a copy.
 */
static bool roxe_tx_to_local_group(struct dst_entry *dst, bool ipv6)
{
	return ipv6 || (dst_rtable(dst)->rt_flags & RTCF_LOCAL);
}

static bool roxe_tx_multicast(struct sk_buff *skb, bool ipv6)
{
	if (ipv6)
		return ipv6_addr_is_multicast(&ipv6_hdr(skb)->daddr);
	return ipv4_is_multicast(ip_hdr(skb)->daddr);
}

/*
 * Sends a packet whose IP and UDP headers the caller wrote. Takes a new
 * reference on @dst for the skb; always consumes @skb. A multicast packet
 * goes out as roxe's tunnel socket, which the IP layer does not loop back
 * (see roxe_udp_tunnel_open); its copy for this host's own members is
 * delivered as roxe_tx_loopback delivers one to a local address.
 * Returns 0 or a negative errno (-ENOBUFS for a packet dropped on the way).
 */
int roxe_tx_send(struct sk_buff *skb, struct dst_entry *dst, bool ipv6)
{
	struct sk_buff *copy = NULL;
	struct sock *sk = NULL;
	int rc;

	skb_set_transport_header(skb, ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	skb->protocol = htons(ipv6 ? ETH_P_IPV6 : ETH_P_IP);
	skb->ip_summed = CHECKSUM_NONE;
	skb_dst_set(skb, dst_clone(dst));
	skb->dev = dst->dev;
	/* The namespace's socket is read, and used, inside one RCU section:
	 * roxe_net_close waits for it before it frees the socket. */
	rcu_read_lock();
	if (roxe_tx_multicast(skb, ipv6)) {
		if (READ_ONCE(roxe_net_registered))
			sk = rcu_dereference(roxe_net(dev_net(dst->dev))->tx_sk[ipv6]);
		if (roxe_tx_to_local_group(dst, ipv6))
			copy = skb_copy(skb, GFP_ATOMIC);
	}
	if (ipv6) {
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
		rc = ip6_local_out(dev_net(dst->dev), sk, skb);
	} else {
		memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
		rc = ip_local_out(dev_net(dst->dev), sk, skb);
	}
	rcu_read_unlock();
	if (copy) {
		skb_dst_drop(copy);
		roxe_tx_loopback(copy, dst, dst->dev);
	}
	/* A congestion note (NET_XMIT_CN) still sent the packet; a drop did not. */
	rc = net_xmit_eval(rc);
	return rc > 0 ? -ENOBUFS : rc;
}

/* Whether @dst delivers to this host: its device is the loopback device. */
bool roxe_dst_is_local(const struct dst_entry *dst)
{
	return dst->dev->flags & IFF_LOOPBACK;
}

/*
 * Delivers a packet roxe built for one of this host's own addresses as if
 * @ndev had received it, instead of sending it out through `lo`: roxe takes
 * nothing that arrives on `lo`, where any local socket could put it. The
 * packet gets an Ethernet header to @ndev's own address, so taps and the
 * stack see an ordinary frame, and keeps @dst, the local route, so the IP
 * layer delivers it without a route lookup. Always consumes @skb.
 */
int roxe_tx_loopback(struct sk_buff *skb, struct dst_entry *dst, struct net_device *ndev)
{
	bool ipv6 = (skb_network_header(skb)[0] >> 4) == 6;
	struct ethhdr *eth;

	if (skb_cow_head(skb, ETH_HLEN)) {
		kfree_skb(skb);
		return -ENOMEM;
	}
	skb_set_transport_header(skb, ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	eth = skb_push(skb, ETH_HLEN);
	ether_addr_copy(eth->h_dest, ndev->dev_addr);
	ether_addr_copy(eth->h_source, ndev->dev_addr);
	eth->h_proto = htons(ipv6 ? ETH_P_IPV6 : ETH_P_IP);
	skb->protocol = eth_type_trans(skb, ndev);
	skb->ip_summed = CHECKSUM_NONE;
	skb_dst_set(skb, dst_clone(dst));
	return netif_rx(skb) == NET_RX_SUCCESS ? 0 : -ENOBUFS;
}

/* Whether @skb was addressed to this host alone (not a broadcast, multicast or loop). */
bool roxe_skb_to_host(const struct sk_buff *skb)
{
	return skb->pkt_type == PACKET_HOST;
}

/* Whether @skb came in a multicast frame (not one a local socket looped back). */
bool roxe_skb_multicast_frame(const struct sk_buff *skb)
{
	return skb->pkt_type == PACKET_MULTICAST;
}

void roxe_timer_setup(struct timer_list *t, void (*fn)(struct timer_list *))
{
	timer_setup(t, fn, 0);
}

/* (Re)starts @t to fire @msecs from now; a no-op once it is shut down. */
void roxe_timer_arm(struct timer_list *t, unsigned int msecs)
{
	mod_timer(t, jiffies + msecs_to_jiffies(msecs));
}

void roxe_timer_reduce(struct timer_list *t, unsigned int msecs)
{
	timer_reduce(t, jiffies + msecs_to_jiffies(msecs));
}

void roxe_timer_shutdown_sync(struct timer_list *t)
{
	timer_shutdown_sync(t);
}

/* How long one jiffy lasts: the finest step a timer_list can wait. */
unsigned int roxe_timer_tick_usecs(void)
{
	return jiffies_to_usecs(1);
}

/*
 * Copies to or from a kernel consumer's buffer, named by its kernel virtual
 * address (roxe has no DMA device, so the core hands ULPs virtual
 * addresses). Reads fail with -EFAULT instead of faulting; writes go only
 * to the kernel's linear map, page by page checked, and fail otherwise.
 */
long roxe_kernel_read(void *dst, u64 src, size_t n)
{
	return copy_from_kernel_nofault(dst, (const void *)(uintptr_t)src, n);
}

long roxe_kernel_write(u64 dst, const void *src, size_t n)
{
	char *p = (char *)(uintptr_t)dst;
	size_t off;

	if (dst + n < dst)
		return -EFAULT;
	for (off = 0; off < n; off += PAGE_SIZE - offset_in_page(p + off))
		if (!virt_addr_valid(p + off))
			return -EFAULT;
	if (n && !virt_addr_valid(p + n - 1))
		return -EFAULT;
	memcpy(p, src, n);
	return 0;
}

void *roxe_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void roxe_kunmap_local(void *addr)
{
	kunmap_local(addr);
}

/*
 * dma-buf memory regions. roxe reaches the memory with the CPU, so what it
 * needs from the exporter is a kernel mapping (dma_buf_vmap). Matching the
 * attachment's kind to the exporter's keeps the dma-buf core from mapping
 * the buffer for DMA at attach time: roxe's device does no DMA and never
 * maps it. I/O memory is refused, since the data path copies with memcpy.
 *
 * - An exporter that can move its buffers (one with a pin op: a "dynamic"
 *   exporter) gets a dynamic attachment that is NOT pinned. When it moves
 *   the buffer it calls roxe_dmabuf_move_notify() with the buffer's
 *   reservation lock held: the mapping is taken away under the map's
 *   spinlock (so no copy is using it) and unmapped. The data path then
 *   finds no mapping, answers as for ODP memory not present (RNR NAK, or
 *   waiting), and a work item maps the buffer again where it now is
 *   (roxe_dmabuf_remap()), once the exporter's copy is done.
 * - Any other exporter gets a plain attachment, which such exporters take
 *   as the pin (the GEM helpers pin the object in their attach op), and
 *   the mapping lives as long as the MR.
 */
MODULE_IMPORT_NS(DMA_BUF);

struct roxe_dmabuf_map {
	struct dma_buf *buf;
	struct dma_buf_attachment *attach;
	/* Guards vaddr; the data path copies with it held. */
	spinlock_t lock;
	/* The kernel mapping; NULL after a move until it is made again. */
	void *vaddr;
	/* A dynamic attachment pinned because its memory was I/O memory. */
	bool pinned;
};

/*
 * Takes the mapping away under the map's lock (no copy is using it then,
 * and none starts on it after) and unmaps it. The reservation lock is held.
 */
static void roxe_dmabuf_unmap_locked(struct roxe_dmabuf_map *m)
{
	struct iosys_map map;
	unsigned long flags;
	void *va;

	dma_resv_assert_held(m->buf->resv);
	spin_lock_irqsave(&m->lock, flags);
	va = m->vaddr;
	m->vaddr = NULL;
	spin_unlock_irqrestore(&m->lock, flags);
	if (va) {
		iosys_map_set_vaddr(&map, va);
		dma_buf_vunmap(m->buf, &map);
	}
}

static void roxe_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	roxe_dmabuf_unmap_locked(attach->importer_priv);
}

static const struct dma_buf_attach_ops roxe_dmabuf_attach_ops = {
	.allow_peer2peer = false,
	.move_notify = roxe_dmabuf_move_notify,
};

struct dma_buf *roxe_dmabuf_get(int fd)
{
	return dma_buf_get(fd);
}

void roxe_dmabuf_put(struct dma_buf *buf)
{
	dma_buf_put(buf);
}

size_t roxe_dmabuf_size(const struct dma_buf *buf)
{
	return buf->size;
}

/*
 * Whether the buffer's file was opened for writing. A dma-buf has exactly
 * one file, made at export, whatever descriptor the caller passed.
 */
bool roxe_dmabuf_writable(const struct dma_buf *buf)
{
	return buf->file && (buf->file->f_mode & FMODE_WRITE);
}

/*
 * Maps the buffer into the kernel; the reservation lock is held. Memory the
 * CPU cannot copy with plain loads and stores (device memory behind a BAR)
 * is refused, but first, for an unpinned dynamic attachment, the exporter
 * is asked to put the buffer where the CPU can reach it and keep it there
 * (dma_buf_pin: amdgpu moves it to GTT for an importer without peer to
 * peer); the pin is then held until the MR goes.
 */
static int roxe_dmabuf_vmap_locked(struct roxe_dmabuf_map *m)
{
	struct iosys_map map;
	unsigned long flags;
	long waited;
	int err;

	dma_resv_assert_held(m->buf->resv);
	if (m->vaddr)
		return 0;
	err = dma_buf_vmap(m->buf, &map);
	if (!err && map.is_iomem && dma_buf_attachment_is_dynamic(m->attach) && !m->pinned) {
		dma_buf_vunmap(m->buf, &map);
		err = dma_buf_pin(m->attach);
		if (err)
			return err;
		m->pinned = true;
		err = dma_buf_vmap(m->buf, &map);
	}
	if (err)
		return err;
	if (map.is_iomem || !map.vaddr || !PAGE_ALIGNED(map.vaddr)) {
		dma_buf_vunmap(m->buf, &map);
		return -EOPNOTSUPP;
	}
	/*
	 * An exporter may still be copying the bytes of a move (TTM's copy is
	 * a fence of kernel usage on the buffer, and its vmap does not wait):
	 * no copy of roxe's may touch them before it is done.
	 */
	waited = dma_resv_wait_timeout(m->buf->resv, DMA_RESV_USAGE_KERNEL, false,
				       MAX_SCHEDULE_TIMEOUT);
	if (waited <= 0) {
		dma_buf_vunmap(m->buf, &map);
		return waited ? (int)waited : -ETIMEDOUT;
	}
	spin_lock_irqsave(&m->lock, flags);
	m->vaddr = map.vaddr;
	spin_unlock_irqrestore(&m->lock, flags);
	return 0;
}

/*
 * Attaches to buf (whose reference the map takes over on success) for
 * ibdev and maps it. Returns the map or an ERR_PTR; on error the caller
 * keeps its reference.
 */
struct roxe_dmabuf_map *roxe_dmabuf_import(struct dma_buf *buf, struct ib_device *ibdev)
{
	bool dynamic = dma_buf_is_dynamic(buf);
	struct roxe_dmabuf_map *m;
	struct dma_buf_attachment *a;
	int err;

	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&m->lock);
	m->buf = buf;
	a = dma_buf_dynamic_attach(buf, &ibdev->dev, dynamic ? &roxe_dmabuf_attach_ops : NULL,
				   dynamic ? m : NULL);
	if (IS_ERR(a)) {
		kfree(m);
		return ERR_CAST(a);
	}
	m->attach = a;
	dma_resv_lock(buf->resv, NULL);
	err = roxe_dmabuf_vmap_locked(m);
	if (err && m->pinned)
		dma_buf_unpin(a);
	dma_resv_unlock(buf->resv);
	if (err) {
		dma_buf_detach(buf, a);
		kfree(m);
		return ERR_PTR(err);
	}
	return m;
}

/* Maps the buffer again after a move. Sleeps. */
int roxe_dmabuf_remap(struct roxe_dmabuf_map *m)
{
	int err;

	dma_resv_lock(m->buf->resv, NULL);
	err = roxe_dmabuf_vmap_locked(m);
	dma_resv_unlock(m->buf->resv);
	return err;
}

/*
 * Takes the map's lock and returns the mapping (NULL if the buffer moved
 * and is not mapped again yet). roxe_dmabuf_unlock() releases it.
 */
void *roxe_dmabuf_lock(struct roxe_dmabuf_map *m, unsigned long *flags)
{
	spin_lock_irqsave(&m->lock, *flags);
	return m->vaddr;
}

void roxe_dmabuf_unlock(struct roxe_dmabuf_map *m, unsigned long flags)
{
	spin_unlock_irqrestore(&m->lock, flags);
}

/* Unmaps, detaches, drops the buffer's reference and frees the map. */
void roxe_dmabuf_release(struct roxe_dmabuf_map *m)
{
	dma_resv_lock(m->buf->resv, NULL);
	roxe_dmabuf_unmap_locked(m);
	if (m->pinned)
		dma_buf_unpin(m->attach);
	dma_resv_unlock(m->buf->resv);
	/* After the detach, no move_notify can come for this map. */
	dma_buf_detach(m->buf, m->attach);
	dma_buf_put(m->buf);
	kfree(m);
}

/*
 * Test only: fault injection for error paths that the test kernel's own
 * fault injection cannot reach (it is built without CONFIG_FAULT_INJECTION).
 * The module parameter is a countdown; rust/rdma/fault.rs holds the logic.
 * Writing N > 0 to /sys/module/roxe/parameters/fail_qp_table makes the Nth
 * QP creation from then on fail its per-WQE table allocation with -ENOMEM,
 * after the QP number was taken. 0, the default, injects nothing.
 */
static unsigned int fail_qp_table;
module_param(fail_qp_table, uint, 0600);
MODULE_PARM_DESC(fail_qp_table, "test only: fail the PSN table allocation of the Nth next QP creation (0: never)");

unsigned int *roxe_fail_qp_table(void)
{
	return &fail_qp_table;
}

/*
 * Test only, like fail_qp_table: writing N > 0 to fail_cq_init (or
 * fail_srq_init) makes the Nth CQ (SRQ) creation from then on fail with
 * -ENOMEM in its state's initialiser, the last step of creation, after the
 * per-device budget unit (and the SRQ number) was taken.
 */
static unsigned int fail_cq_init;
module_param(fail_cq_init, uint, 0600);
MODULE_PARM_DESC(fail_cq_init,
		 "test only: fail the initialisation of the Nth next CQ creation (0: never)");
static unsigned int fail_srq_init;
module_param(fail_srq_init, uint, 0600);
MODULE_PARM_DESC(fail_srq_init,
		 "test only: fail the initialisation of the Nth next SRQ creation (0: never)");

unsigned int *roxe_fail_cq_init(void)
{
	return &fail_cq_init;
}

unsigned int *roxe_fail_srq_init(void)
{
	return &fail_srq_init;
}

/*
 * DCQCN's reaction point constants (Documentation/congestion.md), as
 * module parameters an administrator may change at run time, as RNICs
 * offer theirs: rust/rdma/tunables.rs reads them on every use and
 * rust/proto's Params::tuned bounds what it takes. The defaults are the
 * paper's constants with ConnectX's increase steps (rust/proto's
 * Knobs::DEFAULT), sized for 100 Gbit/s links.
 */
static struct roxe_dcqcn_knobs roxe_dcqcn = {
	.time_reset_us = ROXE_DCQCN_TIME_RESET_US,
	.ai_rate_kbps = ROXE_DCQCN_AI_RATE_KBPS,
	.hai_rate_kbps = ROXE_DCQCN_HAI_RATE_KBPS,
	.min_rate_kbps = ROXE_DCQCN_MIN_RATE_KBPS,
	.byte_reset = ROXE_DCQCN_BYTE_RESET,
	.threshold = ROXE_DCQCN_THRESHOLD,
	.g_shift = ROXE_DCQCN_G_SHIFT,
	.alpha_period_us = ROXE_DCQCN_ALPHA_PERIOD_US,
	.reduce_period_us = ROXE_DCQCN_REDUCE_PERIOD_US,
};

/* Writes out of range get -EINVAL, so sysfs shows what applies. */
static int roxe_set_g_shift(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, ROXE_DCQCN_G_SHIFT_MAX);
}

static const struct kernel_param_ops roxe_g_shift_ops = {
	.set = roxe_set_g_shift,
	.get = param_get_uint,
};

static int roxe_set_min_rate(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, ROXE_DCQCN_LINE_KBPS);
}

static const struct kernel_param_ops roxe_min_rate_ops = {
	.set = roxe_set_min_rate,
	.get = param_get_uint,
};
module_param_named(dcqcn_time_reset_us, roxe_dcqcn.time_reset_us, uint, 0644);
MODULE_PARM_DESC(dcqcn_time_reset_us, "DCQCN: rate increase timer, us (0: no timer stages)");
module_param_named(dcqcn_ai_rate_kbps, roxe_dcqcn.ai_rate_kbps, uint, 0644);
MODULE_PARM_DESC(dcqcn_ai_rate_kbps, "DCQCN: additive increase of the target rate, kbit/s");
module_param_named(dcqcn_hai_rate_kbps, roxe_dcqcn.hai_rate_kbps, uint, 0644);
MODULE_PARM_DESC(dcqcn_hai_rate_kbps, "DCQCN: hyper increase of the target rate, kbit/s");
module_param_cb(dcqcn_min_rate_kbps, &roxe_min_rate_ops, &roxe_dcqcn.min_rate_kbps, 0644);
MODULE_PARM_DESC(dcqcn_min_rate_kbps, "DCQCN: the lowest rate a cut reaches, kbit/s (1 to the line, 10^8)");
module_param_named(dcqcn_byte_reset, roxe_dcqcn.byte_reset, uint, 0644);
MODULE_PARM_DESC(dcqcn_byte_reset, "DCQCN: bytes per byte-counter stage (0: no byte stages)");
module_param_named(dcqcn_threshold, roxe_dcqcn.threshold, uint, 0644);
MODULE_PARM_DESC(dcqcn_threshold, "DCQCN: stages of fast recovery before additive increase (F)");
module_param_cb(dcqcn_g_shift, &roxe_g_shift_ops, &roxe_dcqcn.g_shift, 0644);
MODULE_PARM_DESC(dcqcn_g_shift, "DCQCN: alpha's gain g = 1/2^g_shift (1 to 16)");
module_param_named(dcqcn_alpha_period_us, roxe_dcqcn.alpha_period_us, uint, 0644);
MODULE_PARM_DESC(dcqcn_alpha_period_us, "DCQCN: alpha decays once per this many us without a CNP (0: never)");
module_param_named(dcqcn_reduce_period_us, roxe_dcqcn.reduce_period_us, uint, 0644);
MODULE_PARM_DESC(dcqcn_reduce_period_us, "DCQCN: at most one rate cut per this many us");

struct roxe_dcqcn_knobs *roxe_dcqcn_knobs(void)
{
	return &roxe_dcqcn;
}

/* On-demand paging: static inlines and field reads for rust/rdma/odp.rs. */

struct ib_umem_odp *roxe_odp_from_notifier(struct mmu_interval_notifier *mni)
{
	return container_of(mni, struct ib_umem_odp, notifier);
}

bool roxe_odp_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}

void roxe_odp_range(const struct mmu_notifier_range *range, u64 *start, u64 *end)
{
	*start = range->start;
	*end = range->end;
}

void roxe_odp_set_seq(struct mmu_interval_notifier *mni, unsigned long seq)
{
	mmu_interval_set_seq(mni, seq);
}

void roxe_odp_lock(struct ib_umem_odp *odp)
{
	mutex_lock(&odp->umem_mutex);
}

void roxe_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

u64 roxe_odp_start(struct ib_umem_odp *odp)
{
	return ib_umem_start(odp);
}

u64 roxe_odp_end(struct ib_umem_odp *odp)
{
	return ib_umem_end(odp);
}

u64 roxe_odp_address(struct ib_umem_odp *odp)
{
	return odp->umem.address;
}

bool roxe_odp_writable(struct ib_umem_odp *odp)
{
	return odp->umem.writable;
}

void *roxe_odp_private(struct ib_umem_odp *odp)
{
	return odp->private;
}

void roxe_odp_set_private(struct ib_umem_odp *odp, void *p)
{
	odp->private = p;
}

u64 roxe_odp_entry(struct ib_umem_odp *odp, size_t idx)
{
	return READ_ONCE(odp->dma_list[idx]);
}

void *roxe_odp_entry_ptr(u64 entry)
{
	return ib_virt_dma_to_ptr(entry & ODP_DMA_ADDR_MASK);
}

void roxe_odp_mmgrab(struct ib_umem_odp *odp)
{
	mmgrab(odp->umem.owning_mm);
}

void roxe_odp_mmdrop(struct ib_umem_odp *odp)
{
	mmdrop(odp->umem.owning_mm);
}

struct workqueue_struct *roxe_alloc_wq(const char *name)
{
	return alloc_workqueue("%s", WQ_UNBOUND | WQ_MEM_RECLAIM, 0, name);
}

void roxe_destroy_wq(struct workqueue_struct *wq)
{
	destroy_workqueue(wq);
}

void roxe_flush_wq(struct workqueue_struct *wq)
{
	flush_workqueue(wq);
}

/*
 * A restrack dump's driver attributes go in one nested table
 * (RDMA_NLDEV_ATTR_DRIVER), which rust/rdma/qp.rs's ResAttrs opens and
 * closes here; nla_nest_start and its kin are static inlines.
 */
void *roxe_res_driver_begin(struct sk_buff *msg)
{
	return nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void roxe_res_driver_end(struct sk_buff *msg, void *table, bool ok)
{
	if (ok)
		nla_nest_end(msg, table);
	else
		nla_nest_cancel(msg, table);
}

/*
 * XRC SRQs: the domain and number live in a union inside `ext`, which the
 * Rust side reads through these rather than through bindgen's names for
 * the anonymous members.
 */
struct ib_xrcd *roxe_srq_init_xrcd(const struct ib_srq_init_attr *init)
{
	return init->srq_type == IB_SRQT_XRC ? init->ext.xrc.xrcd : NULL;
}

struct ib_xrcd *roxe_srq_xrcd(const struct ib_srq *srq)
{
	return srq->srq_type == IB_SRQT_XRC ? srq->ext.xrc.xrcd : NULL;
}

void roxe_srq_set_xrc_num(struct ib_srq *srq, u32 num)
{
	if (srq->srq_type == IB_SRQT_XRC)
		srq->ext.xrc.srq_num = num;
}

/*
 * Raw packet QPs. A tap sees every frame @dev receives (ETH_P_ALL, bound to
 * the device), as a packet socket does: the stack still gets the frame.
 */
void roxe_tap_add(struct packet_type *pt, struct net_device *dev, roxe_tap_fn func)
{
	memset(pt, 0, sizeof(*pt));
	pt->type = htons(ETH_P_ALL);
	dev_hold(dev);
	pt->dev = dev;
	pt->func = func;
	/* Frames the device sends are not wanted: no clone of each for us. */
	pt->ignore_outgoing = true;
	dev_add_pack(pt);
}

/*
 * Waits for every running call of the tap's function (synchronize_net),
 * then lets go of the device.
 */
void roxe_tap_remove(struct packet_type *pt)
{
	struct net_device *dev = pt->dev;

	dev_remove_pack(pt);
	dev_put(dev);
}

bool roxe_skb_outgoing(const struct sk_buff *skb)
{
	return skb->pkt_type == PACKET_OUTGOING;
}

/*
 * A received frame's length from its MAC header on; 0 for a frame a raw
 * QP does not take: no MAC header, or a VLAN tag the device took off into
 * the skb (the frame's bytes would no longer say which VLAN it came on).
 */
unsigned int roxe_frame_len(const struct sk_buff *skb)
{
	if (!skb_mac_header_was_set(skb) || skb_mac_offset(skb) > 0 ||
	    skb_vlan_tag_present(skb))
		return 0;
	return skb->len - skb_mac_offset(skb);
}

/* Copies the first @len bytes of a received frame, from its MAC header. */
int roxe_frame_copy(const struct sk_buff *skb, void *to, unsigned int len)
{
	unsigned int mac;

	if (len > roxe_frame_len(skb))
		return -EINVAL;
	mac = -skb_mac_offset(skb);
	if (len <= mac) {
		memcpy(to, skb_mac_header(skb), len);
		return 0;
	}
	memcpy(to, skb_mac_header(skb), mac);
	return skb_copy_bits(skb, 0, (u8 *)to + mac, len - mac);
}

/*
 * Sends @len bytes at @frame, a whole Ethernet frame from its destination
 * MAC on, out of @dev. Returns 0 or a negative errno (-ENOBUFS for a frame
 * the queue dropped).
 */
int roxe_raw_xmit(struct net_device *dev, const void *frame, unsigned int len)
{
	unsigned int room = LL_RESERVED_SPACE(dev);
	struct sk_buff *skb;
	int rc;

	if (len < ETH_HLEN)
		return -EINVAL;
	skb = alloc_skb(room + len + dev->needed_tailroom, GFP_ATOMIC);
	if (!skb)
		return -ENOMEM;
	skb_reserve(skb, room);
	skb_put_data(skb, frame, len);
	skb->dev = dev;
	skb_reset_mac_header(skb);
	skb->protocol = ((const struct ethhdr *)frame)->h_proto;
	skb_set_network_header(skb, ETH_HLEN);
	rc = dev_queue_xmit(skb);
	if (rc > 0)
		rc = net_xmit_errno(rc);
	return rc < 0 ? rc : 0;
}
