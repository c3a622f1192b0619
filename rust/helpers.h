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
int roxe_sysfs_emit_str(char *buf, const char *s, size_t len);

#endif
