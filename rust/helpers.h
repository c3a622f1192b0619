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
size_t roxe_umem_num_pages(struct ib_umem *umem);
size_t roxe_umem_offset(struct ib_umem *umem);
size_t roxe_umem_pages(struct ib_umem *umem, struct page **pages, size_t max);
#endif
