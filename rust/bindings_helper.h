/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C headers that roxe's own bindgen run reads. scripts/gen-bindings
 * turns this into bindings_generated.rs with the same clang flags the
 * kernel used for its own bindings, restricted by the allowlists there.
 */
#include <linux/delay.h>
#include <linux/netdevice.h>
#include <linux/if_vlan.h>
#include <linux/notifier.h>
#include <linux/sysfs.h>
#include <linux/device.h>
#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <net/addrconf.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/rdma_netlink.h>
#include <rdma/ib_user_ioctl_verbs.h>

#include "helpers.h"
