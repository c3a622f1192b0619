// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line copies of static inline kernel functions for roxe's Rust code.
 * See helpers.h.
 */
#include <linux/if_vlan.h>
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

int roxe_sysfs_emit_str(char *buf, const char *s, size_t len)
{
	return sysfs_emit(buf, "%.*s\n", (int)len, s);
}
