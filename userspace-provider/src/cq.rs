// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Completion queues: polling the ring into `ibv_wc`s, and the extended
//! polling interface of `ibv_cq_ex` (`start_poll`, `next_poll`, `end_poll`).
//!
//! Polling never enters the kernel. [`CqState`] is the part of a CQ that its
//! lock guards; the `ffi` module owns the lock and the libibverbs objects.

use roxe_uapi::Cqe;

use crate::abi::ibv;
use crate::errno::Errno;
use crate::ring::{Ring, RingMemory};

/// The `IBV_WC_EX_WITH_*` fields an extended CQ can report: those of
/// `struct ibv_wc`, which is what a roxe CQE holds.
pub const SUPPORTED_WC_FLAGS: u64 = ibv::WC_STANDARD_FLAGS;

/// The `IBV_CREATE_CQ_ATTR_*` flags roxe accepts. Single-threaded use is
/// only a hint, which roxe ignores (it locks anyway); it cannot ignore
/// overruns, because the kernel reports them as `IBV_EVENT_CQ_ERR`.
pub const SUPPORTED_CREATE_FLAGS: u32 = ibv::CREATE_CQ_ATTR_SINGLE_THREADED;

/// Checks the fields of an `ibv_cq_init_attr_ex` that roxe interprets.
///
/// Fails with `EOPNOTSUPP` for completion fields roxe cannot report, for
/// unknown `comp_mask` bits and for unsupported creation flags. A parent
/// domain (`IBV_CQ_INIT_ATTR_MASK_PD`) is allowed; the caller checks that
/// it is one.
pub fn check_init_attr(wc_flags: u64, comp_mask: u32, flags: u32) -> Result<(), Errno> {
    if wc_flags & !SUPPORTED_WC_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if comp_mask & !(ibv::CQ_INIT_ATTR_MASK_FLAGS | ibv::CQ_INIT_ATTR_MASK_PD) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if comp_mask & ibv::CQ_INIT_ATTR_MASK_FLAGS != 0 && flags & !SUPPORTED_CREATE_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// The `ibv_wc` for a CQE: every field of `struct ibv_wc` has its
/// counterpart in the CQE, and is copied unchanged.
pub fn wc_from_cqe(cqe: &Cqe) -> ibv::Wc {
    ibv::Wc {
        wr_id: cqe.wr_id,
        status: cqe.status,
        opcode: cqe.opcode,
        vendor_err: cqe.vendor_err,
        byte_len: cqe.byte_len,
        imm_data: cqe.imm_data,
        qp_num: cqe.qp_num,
        src_qp: cqe.src_qp,
        wc_flags: cqe.wc_flags,
        pkey_index: cqe.pkey_index,
        slid: cqe.slid,
        sl: cqe.sl,
        dlid_path_bits: cqe.dlid_path_bits,
    }
}

/// The state of a CQ that its lock guards.
#[derive(Debug)]
pub struct CqState<M> {
    /// The mapped ring, or `None` once a resize has left the CQ without a
    /// usable one (every poll then fails with `EIO`).
    ring: Option<Ring<M>>,
    /// During an extended polling batch: the completion `start_poll` or
    /// `next_poll` returned last, still in its slot (not consumed yet).
    current: Option<Cqe>,
}

impl<M: RingMemory> CqState<M> {
    /// A CQ without a ring yet.
    pub const fn new() -> Self {
        Self {
            ring: None,
            current: None,
        }
    }

    /// Replaces the ring (after a resize), returning the old one.
    pub fn replace_ring(&mut self, ring: Option<Ring<M>>) -> Option<Ring<M>> {
        self.current = None;
        core::mem::replace(&mut self.ring, ring)
    }

    /// Drops the unconsumed completions of QP `qpn` (see
    /// [`Ring::discard_qp`]); nothing if the CQ has no ring or is in the
    /// middle of an extended polling batch.
    pub fn discard_qp(&mut self, qpn: u32) {
        if self.current.is_none() {
            if let Some(r) = self.ring.as_mut() {
                let _ = r.discard_qp(qpn);
            }
        }
    }

    /// The ring, if the CQ has one.
    pub fn ring(&self) -> Option<&Ring<M>> {
        self.ring.as_ref()
    }

    /// Consumes up to `max` completions, oldest first, handing each to
    /// `sink` as an `ibv_wc`, and returns how many.
    ///
    /// Fails with `EIO`, reading nothing, if the CQ has no ring or the
    /// ring's producer index is impossible.
    pub fn poll(&mut self, max: usize, mut sink: impl FnMut(ibv::Wc)) -> Result<usize, Errno> {
        let ring = self.ring.as_mut().ok_or(Errno::EIO)?;
        let ready = ring.ready()?;
        // CAST: a u32 fits usize on every target this crate builds for.
        let count = max.min(ready as usize);
        for _ in 0..count {
            sink(wc_from_cqe(&ring.peek()));
            ring.consume();
        }
        Ok(count)
    }

    /// Starts an extended polling batch: returns the oldest completion and
    /// makes it current, without consuming it.
    ///
    /// Fails with `ENOENT` if there is none, and with `EIO` as [`Self::poll`]
    /// does.
    pub fn start_poll(&mut self) -> Result<Cqe, Errno> {
        self.current = None;
        self.load_current()
    }

    /// Consumes the current completion and makes the next one current.
    ///
    /// Fails with `ENOENT` if there is none (the batch stays open until
    /// [`Self::end_poll`]), and with `EIO` as [`Self::poll`] does.
    pub fn next_poll(&mut self) -> Result<Cqe, Errno> {
        self.consume_current();
        self.load_current()
    }

    /// Ends an extended polling batch, consuming the current completion if
    /// there is one.
    pub fn end_poll(&mut self) {
        self.consume_current();
    }

    /// The current completion of an extended polling batch.
    pub fn current(&self) -> Option<&Cqe> {
        self.current.as_ref()
    }

    fn load_current(&mut self) -> Result<Cqe, Errno> {
        let ring = self.ring.as_ref().ok_or(Errno::EIO)?;
        if ring.ready()? == 0 {
            return Err(Errno::ENOENT);
        }
        let cqe = ring.peek();
        self.current = Some(cqe);
        Ok(cqe)
    }

    fn consume_current(&mut self) {
        if self.current.take().is_some() {
            if let Some(ring) = self.ring.as_mut() {
                ring.consume();
            }
        }
    }
}

impl<M: RingMemory> Default for CqState<M> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::tests::{FakeRing, cqe};

    fn state(num_slots: u32) -> CqState<FakeRing> {
        let mut state = CqState::new();
        state.replace_ring(Some(Ring::new(FakeRing::new(num_slots, 0))));
        state
    }

    fn fake(state: &CqState<FakeRing>) -> &FakeRing {
        state.ring().expect("test CQ has a ring").memory()
    }

    fn stores(state: &CqState<FakeRing>) -> Vec<u32> {
        fake(state).consumer_stores.borrow().clone()
    }

    /// Polls up to `max` completions into a vector.
    fn poll(state: &mut CqState<FakeRing>, max: usize) -> Result<Vec<ibv::Wc>, Errno> {
        let mut got = Vec::new();
        let count = state.poll(max, |wc| got.push(wc))?;
        assert_eq!(count, got.len());
        Ok(got)
    }

    fn wcs(range: core::ops::Range<u32>) -> Vec<ibv::Wc> {
        range.map(|n| wc_from_cqe(&cqe(n))).collect()
    }

    #[test]
    fn wc_gets_every_field_of_the_cqe() {
        let c = Cqe {
            wr_id: 0x0102_0304_0506_0708,
            status: 12,
            opcode: 129,
            vendor_err: 0x11,
            byte_len: 0x22,
            imm_data: 0x3344_5566,
            qp_num: 0x77,
            src_qp: 0x88,
            wc_flags: 0x99,
            pkey_index: 0xaa,
            slid: 0xbb,
            sl: 0xc,
            dlid_path_bits: 0xd,
            port_num: 1,
            ..Cqe::default()
        };
        let wc = wc_from_cqe(&c);
        assert_eq!(
            wc,
            ibv::Wc {
                wr_id: 0x0102_0304_0506_0708,
                status: 12,
                opcode: 129,
                vendor_err: 0x11,
                byte_len: 0x22,
                imm_data: 0x3344_5566,
                qp_num: 0x77,
                src_qp: 0x88,
                wc_flags: 0x99,
                pkey_index: 0xaa,
                slid: 0xbb,
                sl: 0xc,
                dlid_path_bits: 0xd,
            }
        );
    }

    #[test]
    fn poll_on_an_empty_cq_returns_nothing() {
        let mut cq = state(4);
        assert_eq!(poll(&mut cq, 16), Ok(vec![]));
        assert!(stores(&cq).is_empty());
    }

    #[test]
    fn poll_returns_completions_in_order_and_frees_each_slot() {
        let mut cq = state(8);
        for n in 0..5 {
            fake(&cq).produce(cqe(n));
        }
        assert_eq!(poll(&mut cq, 2), Ok(wcs(0..2)));
        assert_eq!(stores(&cq), [1, 2]);
        assert_eq!(poll(&mut cq, 16), Ok(wcs(2..5)));
        assert_eq!(stores(&cq), [1, 2, 3, 4, 5]);
        assert_eq!(poll(&mut cq, 16), Ok(vec![]));
    }

    #[test]
    fn poll_with_room_for_nothing_consumes_nothing() {
        let mut cq = state(4);
        fake(&cq).produce(cqe(0));
        assert_eq!(poll(&mut cq, 0), Ok(vec![]));
        assert!(stores(&cq).is_empty());
        assert_eq!(poll(&mut cq, 1), Ok(wcs(0..1)));
    }

    #[test]
    fn poll_drains_a_full_ring_across_the_slot_wrap() {
        let mut cq = state(4);
        for n in 0..3 {
            fake(&cq).produce(cqe(n));
        }
        assert_eq!(poll(&mut cq, 3), Ok(wcs(0..3)));
        for n in 3..7 {
            fake(&cq).produce(cqe(n));
        }
        assert_eq!(poll(&mut cq, 16), Ok(wcs(3..7)));
    }

    #[test]
    fn poll_refuses_a_corrupt_producer_and_reads_nothing() {
        let mut cq = state(4);
        fake(&cq).produce(cqe(0));
        fake(&cq).set_producer(6);
        assert_eq!(poll(&mut cq, 16), Err(Errno::EIO));
        fake(&cq).set_producer(u32::MAX);
        assert_eq!(poll(&mut cq, 16), Err(Errno::EIO));
        assert!(fake(&cq).reads.borrow().is_empty());
        assert!(stores(&cq).is_empty());
        // A sane producer again: polling resumes where it was.
        fake(&cq).set_producer(1);
        assert_eq!(poll(&mut cq, 16), Ok(wcs(0..1)));
    }

    #[test]
    fn poll_without_a_ring_fails() {
        let mut cq = CqState::<FakeRing>::new();
        assert_eq!(poll(&mut cq, 1), Err(Errno::EIO));
        assert_eq!(cq.start_poll(), Err(Errno::EIO));
    }

    #[test]
    fn start_poll_on_an_empty_cq_reports_enoent() {
        let mut cq = state(4);
        assert_eq!(cq.start_poll(), Err(Errno::ENOENT));
        assert_eq!(cq.current(), None);
        assert!(stores(&cq).is_empty());
    }

    #[test]
    fn a_batch_consumes_each_completion_once() {
        let mut cq = state(4);
        for n in 0..3 {
            fake(&cq).produce(cqe(n));
        }
        assert_eq!(cq.start_poll(), Ok(cqe(0)));
        assert_eq!(cq.current(), Some(&cqe(0)));
        // Looking at a completion does not consume it.
        assert!(stores(&cq).is_empty());
        assert_eq!(cq.next_poll(), Ok(cqe(1)));
        assert_eq!(stores(&cq), [1]);
        assert_eq!(cq.next_poll(), Ok(cqe(2)));
        assert_eq!(cq.next_poll(), Err(Errno::ENOENT));
        assert_eq!(stores(&cq), [1, 2, 3]);
        assert_eq!(cq.current(), None);
        // end_poll after ENOENT must not consume a fourth time.
        cq.end_poll();
        assert_eq!(stores(&cq), [1, 2, 3]);
    }

    #[test]
    fn end_poll_consumes_the_current_completion() {
        let mut cq = state(4);
        for n in 0..2 {
            fake(&cq).produce(cqe(n));
        }
        assert_eq!(cq.start_poll(), Ok(cqe(0)));
        cq.end_poll();
        assert_eq!(stores(&cq), [1]);
        assert_eq!(cq.start_poll(), Ok(cqe(1)));
        cq.end_poll();
        assert_eq!(cq.start_poll(), Err(Errno::ENOENT));
    }

    #[test]
    fn next_poll_sees_completions_published_during_the_batch() {
        let mut cq = state(4);
        fake(&cq).produce(cqe(0));
        assert_eq!(cq.start_poll(), Ok(cqe(0)));
        fake(&cq).produce(cqe(1));
        assert_eq!(cq.next_poll(), Ok(cqe(1)));
        cq.end_poll();
        assert_eq!(stores(&cq), [1, 2]);
    }

    #[test]
    fn a_batch_stops_at_a_corrupt_producer() {
        let mut cq = state(4);
        fake(&cq).produce(cqe(0));
        assert_eq!(cq.start_poll(), Ok(cqe(0)));
        fake(&cq).set_producer(100);
        assert_eq!(cq.next_poll(), Err(Errno::EIO));
        assert_eq!(cq.current(), None);
        cq.end_poll();
        assert_eq!(stores(&cq), [1]);
        assert_eq!(*fake(&cq).reads.borrow(), [0]);
    }

    #[test]
    fn replacing_the_ring_drops_the_current_completion() {
        let mut cq = state(4);
        fake(&cq).produce(cqe(0));
        assert_eq!(cq.start_poll(), Ok(cqe(0)));
        let old = cq.replace_ring(Some(Ring::new(FakeRing::new(8, 0))));
        assert!(old.is_some());
        assert_eq!(cq.current(), None);
        cq.end_poll();
        assert!(stores(&cq).is_empty());
    }

    #[test]
    fn init_attr_accepts_the_standard_fields() {
        assert_eq!(check_init_attr(0, 0, 0), Ok(()));
        assert_eq!(check_init_attr(ibv::WC_STANDARD_FLAGS, 0, 0), Ok(()));
        assert_eq!(
            check_init_attr(
                ibv::WC_EX_WITH_BYTE_LEN,
                ibv::CQ_INIT_ATTR_MASK_FLAGS,
                ibv::CREATE_CQ_ATTR_SINGLE_THREADED
            ),
            Ok(())
        );
        assert_eq!(check_init_attr(0, ibv::CQ_INIT_ATTR_MASK_PD, 0), Ok(()));
        // Flags only count when comp_mask says they are there.
        assert_eq!(
            check_init_attr(0, 0, ibv::CREATE_CQ_ATTR_IGNORE_OVERRUN),
            Ok(())
        );
    }

    #[test]
    fn init_attr_rejects_what_roxe_cannot_do() {
        let unsupported = Err(Errno::EOPNOTSUPP);
        // IBV_WC_EX_WITH_COMPLETION_TIMESTAMP and friends.
        for bit in 7..64 {
            assert_eq!(check_init_attr(1 << bit, 0, 0), unsupported, "wc bit {bit}");
        }
        assert_eq!(check_init_attr(0, 1 << 2, 0), unsupported);
        assert_eq!(
            check_init_attr(
                0,
                ibv::CQ_INIT_ATTR_MASK_FLAGS,
                ibv::CREATE_CQ_ATTR_IGNORE_OVERRUN
            ),
            unsupported
        );
        assert_eq!(
            check_init_attr(0, ibv::CQ_INIT_ATTR_MASK_FLAGS, 1 << 2),
            unsupported
        );
    }
}
