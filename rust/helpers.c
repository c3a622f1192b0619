// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line copies of static inline kernel functions for roxe's Rust code.
 * See helpers.h.
 */
#include <linux/if_vlan.h>
#include <net/addrconf.h>
#include <linux/vmalloc.h>
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
