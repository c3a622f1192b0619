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
#include <linux/moduleparam.h>
#include <linux/inetdevice.h>
#include <linux/highmem.h>
#include <linux/uaccess.h>
#include <net/udp_tunnel.h>
#include <net/route.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/addrconf.h>
#include "helpers.h"

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

void *roxe_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
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

/* Opens a kernel UDP socket on @port in init_net with @rcv as its encap hook. */
int roxe_udp_tunnel_open(u16 port, bool ipv6, roxe_encap_rcv_t rcv, struct socket **out)
{
	struct udp_port_cfg ucfg = {
		.family = ipv6 ? AF_INET6 : AF_INET,
		.ipv6_v6only = ipv6,
		.local_udp_port = htons(port),
	};
	struct udp_tunnel_sock_cfg tcfg = {
		.encap_type = 1,
		.encap_rcv = rcv,
	};
	int err = udp_sock_create(&init_net, &ucfg, out);

	if (err)
		return err;
	setup_udp_tunnel_sock(&init_net, *out, &tcfg);
	return 0;
}

/* Closes the socket and waits until no receive hook can still be running. */
void roxe_udp_tunnel_close(struct socket *sock)
{
	udp_tunnel_sock_release(sock);
	synchronize_net();
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
 * Sends a packet whose IP and UDP headers the caller wrote. Takes a new
 * reference on @dst for the skb; always consumes @skb.
 */
int roxe_tx_send(struct sk_buff *skb, struct dst_entry *dst, bool ipv6)
{
	skb_set_transport_header(skb, ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	skb->protocol = htons(ipv6 ? ETH_P_IPV6 : ETH_P_IP);
	skb->ip_summed = CHECKSUM_NONE;
	skb_dst_set(skb, dst_clone(dst));
	skb->dev = dst->dev;
	if (ipv6) {
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
		return ip6_local_out(dev_net(dst->dev), NULL, skb);
	}
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	return ip_local_out(dev_net(dst->dev), NULL, skb);
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

void roxe_timer_setup(struct timer_list *t, void (*fn)(struct timer_list *))
{
	timer_setup(t, fn, 0);
}

/* (Re)starts @t to fire @msecs from now; a no-op once it is shut down. */
void roxe_timer_arm(struct timer_list *t, unsigned int msecs)
{
	mod_timer(t, jiffies + msecs_to_jiffies(msecs));
}

void roxe_timer_shutdown_sync(struct timer_list *t)
{
	timer_shutdown_sync(t);
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
