// SPDX-License-Identifier: GPL-2.0

//! Index tables: each live object of a kind gets a small unique number,
//! which becomes part of its key or handle. The data path looks objects
//! up here from softirq.

use crate::rdma::device::Driver;
use crate::rdma::qp::{Qp, QpRef};
use crate::sync::{new_spinlock_bh, new_spinlock_irq, SpinLockBh, SpinLockIrq};
use kernel::alloc::{flags::GFP_KERNEL, Flags};
use kernel::error::code::{EBUSY, ENOMEM};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};

/// A table of values indexed by numbers in `1..=max`.
///
/// Indices are handed out round-robin, so a freed index is reused as late
/// as possible: a stale handle is unlikely to name a new object.
#[pin_data]
pub(crate) struct Table<V: Send> {
    #[pin]
    inner: SpinLockIrq<Inner<V>>,
    max: u32,
}

struct Inner<V> {
    tree: RBTree<u32, V>,
    next: u32,
}

impl<V: Send> Table<V> {
    /// An empty table for indices `1..=max`.
    pub(crate) fn new(max: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_spinlock_irq!(Inner { tree: RBTree::new(), next: 1 }, "roxe_table"),
            max,
        })
    }

    /// Stores `value` under a free index and returns the index, or fails
    /// with `ENOMEM` when all `max` indices are in use.
    pub(crate) fn insert(&self, value: V) -> Result<u32> {
        self.insert_with(value, GFP_KERNEL)
    }

    /// [`Table::insert`], allocating with `flags` (`GFP_ATOMIC` where the
    /// caller may not sleep).
    pub(crate) fn insert_with(&self, value: V, flags: Flags) -> Result<u32> {
        // Allocate before taking the spinlock.
        let reservation = RBTreeNodeReservation::new(flags)?;
        let mut inner = self.inner.lock();
        let mut idx = inner.next;
        for _ in 0..self.max {
            if idx == 0 || idx > self.max {
                idx = 1;
            }
            if inner.tree.get(&idx).is_none() {
                inner.tree.insert(reservation.into_node(idx, value));
                inner.next = idx.wrapping_add(1);
                return Ok(idx);
            }
            idx = idx.wrapping_add(1);
        }
        Err(ENOMEM)
    }

    /// Removes and returns the value at `idx`.
    pub(crate) fn remove(&self, idx: u32) -> Option<V> {
        self.inner.lock().remove(&idx)
    }

    /// Replaces the value at `idx`, if there is one.
    pub(crate) fn replace(&self, idx: u32, value: V) {
        if let Some(v) = self.inner.lock().tree.get_mut(&idx) {
            *v = value;
        }
    }

    /// Runs `f` on the value at `idx`, under the table's lock (which
    /// disables interrupts: the data path looks up from softirq, and the
    /// CM creates address handles with interrupts off).
    pub(crate) fn with<R>(&self, idx: u32, f: impl FnOnce(&V) -> R) -> Option<R> {
        self.inner.lock().tree.get(&idx).map(f)
    }

    /// Runs `f` with the whole table locked, for work that reads or
    /// changes more than one entry atomically.
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut Entries<'_, V>) -> R) -> R {
        let mut inner = self.inner.lock();
        f(&mut Entries {
            tree: &mut inner.tree,
        })
    }
}

/// The entries of a locked [`Table`].
pub(crate) struct Entries<'a, V> {
    tree: &'a mut RBTree<u32, V>,
}

impl<V> Entries<'_, V> {
    /// The value at `idx`.
    pub(crate) fn get(&self, idx: u32) -> Option<&V> {
        self.tree.get(&idx)
    }

    /// The value at `idx`, to change.
    pub(crate) fn get_mut(&mut self, idx: u32) -> Option<&mut V> {
        self.tree.get_mut(&idx)
    }

    /// Removes and returns the value at `idx`. Drop it after the lock.
    pub(crate) fn remove(&mut self, idx: u32) -> Option<V> {
        self.tree.remove(&idx)
    }
}

impl<V> Inner<V> {
    fn remove(&mut self, idx: &u32) -> Option<V> {
        self.tree.remove(idx)
    }
}

/// The device's QPs by number, for the receive path and for completions
/// that name their QP. Each entry is a counted reference, so a lookup
/// clones one out and lets the lock go: packets for different QPs are
/// processed side by side, and a QP's destruction (which takes its entry
/// out first) waits for the lookups that found it.
#[pin_data]
pub(crate) struct QpIndex<T: Driver> {
    #[pin]
    tree: SpinLockBh<RBTree<u32, QpRef<T>>>,
}

impl<T: Driver> QpIndex<T> {
    /// An empty index.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            tree <- new_spinlock_bh!(RBTree::new(), "roxe_qp_index"),
        })
    }

    /// Adds `qp` under its number; `EBUSY` if the number is taken.
    pub(crate) fn insert(&self, qp: &Qp<T>) -> Result {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut tree = self.tree.lock();
        if tree.get(&qp.qp_num()).is_some() {
            return Err(EBUSY);
        }
        tree.insert(node.into_node(qp.qp_num(), qp.new_ref()));
        Ok(())
    }

    /// Takes the QP numbered `qpn` out; its reference and node are dropped
    /// after the lock.
    pub(crate) fn remove(&self, qpn: u32) {
        let _old = self.tree.lock().remove(&qpn);
    }

    /// The QP numbered `qpn`, if it is in the index.
    pub(crate) fn get(&self, qpn: u32) -> Option<QpRef<T>> {
        self.tree.lock().get(&qpn).cloned()
    }
}
