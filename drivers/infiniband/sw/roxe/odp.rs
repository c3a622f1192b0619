// SPDX-License-Identifier: GPL-2.0

//! The memory of an on-demand-paging MR, as the key table holds it: one
//! registered range, or (implicit ODP) the whole address space of the
//! registering process, in pieces made as they are first used; and the
//! fault state the data path's misses leave.
//!
//! The data path never faults: a copy that finds a page missing does
//! nothing and reports [`Miss::Absent`]; the key table then queues
//! [`OdpPages::fault`] (`keys.rs`), and the engine that missed tries
//! again later. See `Documentation/odp.md`.

use crate::rdma::odp::{ImplicitRoot, Miss, OdpUmem};
use crate::sync::{new_spinlock_irq, SpinLockIrq};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::alloc::flags::GFP_KERNEL;
use kernel::error::code::{EBUSY, EFAULT, ENOSPC};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::sync::Arc;

/// An implicit registration is cut into pieces of this size (2 MiB): each
/// has a page table of 512 entries and its own notifier.
const CHUNK_SHIFT: u32 = 21;
const CHUNK: u64 = 1 << CHUNK_SHIFT;

/// The most pieces one implicit MR makes (8 GiB of address space used):
/// a peer with the rkey cannot make roxe allocate without bound. Faults
/// beyond fail, and so the accesses after them.
const MAX_CHILDREN: usize = 4096;

/// The most a fault the data path asks for maps at once: a miss often
/// starts a long message, whose next pages are missing too.
const FAULT_AHEAD: usize = 256 * 1024;

/// Failed faults in a row that make a miss an error: [`FAULT_TRIES`]
/// that failed for good (nothing mapped there, a write to read-only
/// memory, the process gone), or [`BUSY_TRIES`] that ran out of time
/// while the kernel kept moving the pages (`EBUSY` after the core's one
/// second of retries: migration or compaction under way), or a mix
/// weighted so.
const FAULT_TRIES: u32 = 3;
const BUSY_TRIES: u32 = 30;
/// What a failure adds to [`OdpPages::failed`], and where it stops.
const HARD_WEIGHT: u32 = BUSY_TRIES / FAULT_TRIES;
const FAIL_LIMIT: u32 = BUSY_TRIES;

/// An implicit registration: the root, and its pieces by index
/// (address >> [`CHUNK_SHIFT`]).
#[pin_data]
pub(crate) struct Implicit {
    /// Dropped before `root`: children first.
    #[pin]
    children: SpinLockIrq<RBTree<u64, Arc<OdpUmem>>>,
    root: ImplicitRoot,
}

impl Implicit {
    pub(crate) fn new(root: ImplicitRoot) -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(Implicit {
                children <- new_spinlock_irq!(RBTree::new(), "roxe_odp_children"),
                root,
            }),
            GFP_KERNEL,
        )
    }

    /// Calls `f(piece, offset in it, range of the buffer)` for each piece
    /// of `off..off + n` (`off` is the user address), under the pieces'
    /// lock; a piece not made yet is a miss.
    fn each(
        &self,
        off: usize,
        n: usize,
        mut f: impl FnMut(&OdpUmem, usize, core::ops::Range<usize>) -> Result<(), Miss>,
    ) -> Result<(), Miss> {
        let children = self.children.lock();
        let mut done = 0;
        while done < n {
            let va = (off as u64).checked_add(done as u64).ok_or(Miss::Bounds)?;
            let idx = va >> CHUNK_SHIFT;
            let in_chunk = va & (CHUNK - 1);
            // CAST: at most a chunk.
            let part = ((CHUNK - in_chunk) as usize).min(n - done);
            let child = children.get(&idx).ok_or(Miss::Absent)?;
            // CAST: below a chunk.
            f(child, in_chunk as usize, done..done + part)?;
            done += part;
        }
        Ok(())
    }

    /// The piece with index `idx`, made if it does not exist yet. Sleeps.
    fn child(&self, idx: u64) -> Result<Arc<OdpUmem>> {
        if let Some(c) = self.children.lock().get(&idx) {
            return Ok(c.clone());
        }
        if self.children.lock().iter().count() >= MAX_CHILDREN {
            return Err(ENOSPC);
        }
        let start = idx.checked_mul(CHUNK).ok_or(EFAULT)?;
        let new = Arc::new(self.root.child(start, CHUNK)?, GFP_KERNEL)?;
        let node = RBTreeNode::new(idx, new.clone(), GFP_KERNEL)?;
        let mut children = self.children.lock();
        if let Some(c) = children.get(&idx) {
            // Made meanwhile by another fault: keep that one. (Ours drops
            // after the lock.)
            let c = c.clone();
            drop(children);
            return Ok(c);
        }
        children.insert(node);
        Ok(new)
    }

    /// Maps `len` bytes at user address `off`, faulting them in unless
    /// `snapshot`. Sleeps.
    fn map(&self, off: usize, len: usize, write: bool, snapshot: bool) -> Result {
        let mut done = 0;
        while done < len {
            let va = (off as u64).checked_add(done as u64).ok_or(EFAULT)?;
            let idx = va >> CHUNK_SHIFT;
            let in_chunk = va & (CHUNK - 1);
            // CAST: at most a chunk.
            let part = ((CHUNK - in_chunk) as usize).min(len - done);
            let child = self.child(idx)?;
            // CAST: below a chunk.
            if snapshot {
                child.snapshot(in_chunk as usize, part)?;
            } else {
                child.fault(in_chunk as usize, part, write)?;
            }
            done += part;
        }
        Ok(())
    }
}

/// An ODP MR's memory.
pub(crate) enum OdpMem {
    /// One registered range; offsets count from its first byte.
    Range(OdpUmem),
    /// The whole address space; offsets are user addresses.
    Implicit(Pin<KBox<Implicit>>),
}

/// An ODP MR's memory, and the faults the data path asked for.
pub(crate) struct OdpPages {
    mem: OdpMem,
    /// A fault of this MR is queued or running.
    faulting: AtomicBool,
    /// Faults the data path asked for that failed in a row, weighted:
    /// [`HARD_WEIGHT`] for one that failed for good, 1 for one that timed
    /// out on pages in motion. At [`FAIL_LIMIT`] the next miss is an error
    /// rather than another wait, or a requester would wait forever; less
    /// rides out a moment when the memory was write-protected
    /// (`mprotect`, `fork`) or being migrated.
    failed: AtomicU32,
}

impl OdpPages {
    pub(crate) fn new(mem: OdpMem) -> Self {
        OdpPages {
            mem,
            faulting: AtomicBool::new(false),
            failed: AtomicU32::new(0),
        }
    }

    /// Whether the data path may write the memory at all.
    pub(crate) fn writable(&self) -> bool {
        match &self.mem {
            OdpMem::Range(u) => u.writable(),
            OdpMem::Implicit(i) => i.root.writable(),
        }
    }

    /// Copies `src` to byte `off` if every page is mapped for writing.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result<(), Miss> {
        match &self.mem {
            OdpMem::Range(u) => u.write(off, src),
            OdpMem::Implicit(i) => i.each(off, src.len(), |c, o, r| c.write(o, &src[r])),
        }
    }

    /// Copies the bytes at `off` into `dst` if every page is mapped.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), Miss> {
        match &self.mem {
            OdpMem::Range(u) => u.read(off, dst),
            OdpMem::Implicit(i) => i.each(off, dst.len(), |c, o, r| c.read(o, &mut dst[r])),
        }
    }

    /// Whether `len` bytes at `off` are mapped for reading.
    pub(crate) fn present(&self, off: usize, len: usize) -> Result<(), Miss> {
        match &self.mem {
            OdpMem::Range(u) => u.present(off, len),
            OdpMem::Implicit(i) => i.each(off, len, |c, o, r| c.present(o, r.len())),
        }
    }

    /// Faults `len` bytes at `off` in (for writing if `write`), or only
    /// maps what is present if `snapshot`. Sleeps.
    pub(crate) fn map(&self, off: usize, len: usize, write: bool, snapshot: bool) -> Result {
        match (&self.mem, snapshot) {
            (OdpMem::Range(u), false) => u.fault(off, len, write),
            (OdpMem::Range(u), true) => u.snapshot(off, len),
            (OdpMem::Implicit(i), _) => i.map(off, len, write && self.writable(), snapshot),
        }
    }

    /// The data path missed `len` bytes at `off`: whether to wait for a
    /// fault (`true`) or fail the access, after [`FAULT_TRIES`] (or
    /// [`BUSY_TRIES`]) failed faults in a row.
    pub(crate) fn wait_for_fault(&self) -> bool {
        if self.failed.load(Ordering::Acquire) >= FAIL_LIMIT {
            self.failed.store(0, Ordering::Release);
            return false;
        }
        true
    }

    /// Takes the fault the data path asks for, unless one is queued:
    /// `true` if the caller must queue [`OdpPages::fault`] now.
    pub(crate) fn start_fault(&self) -> bool {
        !self.faulting.swap(true, Ordering::AcqRel)
    }

    /// The fault [`start_fault`](Self::start_fault) took could not be
    /// queued.
    pub(crate) fn cancel_fault(&self) {
        self.faulting.store(false, Ordering::Release);
    }

    /// Runs the fault the data path asked for: `len` bytes at `off`, with
    /// some ahead if that works; a failure of the exact range counts
    /// towards [`FAIL_LIMIT`]. Sleeps.
    pub(crate) fn fault(&self, off: usize, len: usize, write: bool) {
        let mut ahead = len.max(FAULT_AHEAD);
        if let OdpMem::Implicit(_) = self.mem {
            // Not into the next piece, which the process may not use.
            // CAST: at most a chunk.
            let to_end = (CHUNK - (off as u64 & (CHUNK - 1))) as usize;
            ahead = ahead.min(to_end).max(len);
        }
        let r = if ahead > len && self.map(off, ahead, write, false).is_ok() {
            Ok(())
        } else {
            self.map(off, len, write, false)
        };
        match r {
            Ok(()) => self.failed.store(0, Ordering::Release),
            Err(e) if e == EBUSY => {
                self.failed.fetch_add(1, Ordering::AcqRel);
            }
            Err(_) => {
                self.failed.fetch_add(HARD_WEIGHT, Ordering::AcqRel);
            }
        }
        self.faulting.store(false, Ordering::Release);
    }
}
