// SPDX-License-Identifier: GPL-2.0

//! UD multicast: which QPs are attached to which group.
//!
//! A group is named by its multicast GID; a datagram for it arrives with
//! destination QPN 0xFFFFFF and the group's IP address as its destination,
//! and every QP attached to the group gets a copy. IP membership (IGMP or
//! MLD, so the stack delivers the group's packets to us) is the RDMA CM's
//! job, as for rxe: `rdma_join_multicast` joins the IP group and attaches
//! the QP.

use crate::sync::{new_spinlock_irq, SpinLockIrq};
use kernel::alloc::flags::GFP_KERNEL;
use kernel::error::code::{EINVAL, ENOMEM};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};

/// The BTH destination QPN of multicast datagrams.
pub(crate) const MULTICAST_QPN: u32 = 0xFF_FFFF;

/// Groups one device can have.
pub(crate) const MAX_GROUPS: u32 = 8192;
/// QPs one group can have.
pub(crate) const MAX_QP_ATTACH: usize = 56;
/// Attachments one device can have in all.
// CAST: a small constant.
pub(crate) const MAX_TOTAL_ATTACH: u32 = MAX_GROUPS * MAX_QP_ATTACH as u32;

/// The QPs attached to one group.
#[derive(Clone, Copy)]
pub(crate) struct Members {
    qpns: [u32; MAX_QP_ATTACH],
    len: usize,
}

impl Members {
    const EMPTY: Self = Self {
        qpns: [0; MAX_QP_ATTACH],
        len: 0,
    };

    /// The attached QP numbers.
    pub(crate) fn qpns(&self) -> &[u32] {
        &self.qpns[..self.len]
    }

    fn position(&self, qpn: u32) -> Option<usize> {
        self.qpns().iter().position(|&q| q == qpn)
    }

    fn remove_at(&mut self, i: usize) {
        self.len -= 1;
        self.qpns[i] = self.qpns[self.len];
    }
}

/// A device's multicast groups.
#[pin_data]
pub(crate) struct Groups {
    /// Irq-safe: the receive path reads it from softirq, and kernel
    /// consumers may attach with interrupts off.
    #[pin]
    inner: SpinLockIrq<Inner>,
}

struct Inner {
    tree: RBTree<[u8; 16], Members>,
    groups: u32,
    total: u32,
}

impl Groups {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_spinlock_irq!(Inner { tree: RBTree::new(), groups: 0, total: 0 }, "roxe_mcast"),
        })
    }

    /// Attaches `qpn` to `gid`. Attaching twice is not an error. Fails with
    /// `ENOMEM` at the group, per-group or total limit.
    pub(crate) fn attach(&self, gid: &[u8; 16], qpn: u32) -> Result {
        // Allocated before the spinlock; freed unused if the group exists.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if let Some(m) = inner.tree.get_mut(gid) {
            if m.position(qpn).is_some() {
                return Ok(());
            }
            if m.len == MAX_QP_ATTACH || inner.total >= MAX_TOTAL_ATTACH {
                return Err(ENOMEM);
            }
            m.qpns[m.len] = qpn;
            m.len += 1;
        } else {
            if inner.groups >= MAX_GROUPS || inner.total >= MAX_TOTAL_ATTACH {
                return Err(ENOMEM);
            }
            let mut m = Members::EMPTY;
            m.qpns[0] = qpn;
            m.len = 1;
            inner.tree.insert(node.into_node(*gid, m));
            inner.groups += 1;
        }
        inner.total += 1;
        Ok(())
    }

    /// Detaches `qpn` from `gid`; `EINVAL` if it is not attached.
    pub(crate) fn detach(&self, gid: &[u8; 16], qpn: u32) -> Result {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let m = inner.tree.get_mut(gid).ok_or(EINVAL)?;
        let i = m.position(qpn).ok_or(EINVAL)?;
        m.remove_at(i);
        let empty = m.len == 0;
        inner.total -= 1;
        if empty {
            // Drop the node after the lock: returned from the block below.
            let node = inner.tree.remove_node(gid);
            inner.groups -= 1;
            drop(guard);
            drop(node);
        }
        Ok(())
    }

    /// Detaches `qpn` from every group (its QP is going away; uverbs
    /// detaches user QPs itself, kernel consumers may not have).
    pub(crate) fn detach_all(&self, qpn: u32) {
        loop {
            let guard = self.inner.lock();
            if guard.total == 0 {
                return;
            }
            let found = guard
                .tree
                .iter()
                .find(|(_, m)| m.position(qpn).is_some())
                .map(|(gid, _)| *gid);
            drop(guard);
            match found {
                Some(gid) => {
                    // Another thread may have detached it meanwhile.
                    let _ = self.detach(&gid, qpn);
                }
                None => return,
            }
        }
    }

    /// A copy of the group's members, if the group exists.
    pub(crate) fn members(&self, gid: &[u8; 16]) -> Option<Members> {
        self.inner.lock().tree.get(gid).copied()
    }
}
