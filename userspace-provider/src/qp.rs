// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Queue pairs and shared receive queues: which creation attributes roxe
//! accepts, which QP states allow posting, and how work requests become
//! the WQEs of `roxe_uapi` in the rings of [`crate::wq`].
//!
//! A send WQE is a [`SendWqe`] followed by `num_sge` [`Sge`]s, or by
//! `inline_len` bytes of inline data with `IBV_SEND_INLINE`; a receive WQE
//! is a [`RecvWqe`] followed by its [`Sge`]s. Every length is checked
//! against what the kernel granted, and against the slot the WQE goes into,
//! before anything is written.
//!
//! [`SendQueue`] and [`RecvQueue`] are the parts of a QP (or SRQ) that its
//! send lock and its receive lock guard; the `ffi` module owns the locks,
//! walks the caller's work-request lists and rings the doorbell.

use core::ffi::c_int;
use core::mem::{offset_of, size_of};

use roxe_uapi::{RecvWqe, RingInfo, SendWqe, Sge};

use crate::abi::ibv;
use crate::errno::Errno;
use crate::wq::{Producer, WqMemory};

/// Bytes of the fixed part of a send WQE.
pub const SEND_WQE_HEADER: usize = size_of::<SendWqe>();
/// Bytes of the fixed part of a receive WQE.
pub const RECV_WQE_HEADER: usize = size_of::<RecvWqe>();
/// Bytes of one scatter/gather element in a WQE.
pub const SGE_SIZE: usize = size_of::<Sge>();

/// The `ibv_qp_init_attr_ex.comp_mask` bits roxe accepts: the PD (which a
/// QP must have) and creation flags, as long as none is set.
pub const SUPPORTED_INIT_ATTR_MASK: u32 = ibv::QP_INIT_ATTR_PD | ibv::QP_INIT_ATTR_CREATE_FLAGS;

/// Checks the fields of an `ibv_qp_init_attr_ex` that roxe interprets.
///
/// Fails with `EOPNOTSUPP` for QP types other than RC, UC and UD, for
/// `comp_mask` bits roxe does not support (XRC domains, TSO, RSS, the
/// `ibv_wr_*` send interface, ...) and for any creation flag; with `EINVAL`
/// if no PD is given.
pub fn check_init_attr(qp_type: u32, comp_mask: u32, create_flags: u32) -> Result<(), Errno> {
    if comp_mask & !SUPPORTED_INIT_ATTR_MASK != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if comp_mask & ibv::QP_INIT_ATTR_CREATE_FLAGS != 0 && create_flags != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if !matches!(qp_type, ibv::QPT_RC | ibv::QPT_UC | ibv::QPT_UD) {
        return Err(Errno::EOPNOTSUPP);
    }
    if comp_mask & ibv::QP_INIT_ATTR_PD == 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Whether the kernel's create response has a receive ring exactly when
/// the QP has no SRQ. Fails with `EPROTO` if not.
pub fn check_rq_presence(rq: &RingInfo, has_srq: bool) -> Result<bool, Errno> {
    let has_rq = rq.num_slots != 0;
    if has_rq == has_srq {
        return Err(Errno::EPROTO);
    }
    Ok(has_rq)
}

/// Whether send work requests may be posted to a QP in `state`
/// (`enum ibv_qp_state`). Before RTS the kernel refuses the doorbell, so
/// the provider refuses the work requests before they reach the ring. In
/// SQE and ERR they are accepted and complete with a flush error.
pub fn can_post_send(state: u32) -> bool {
    matches!(
        state,
        ibv::QPS_RTS | ibv::QPS_SQD | ibv::QPS_SQE | ibv::QPS_ERR
    )
}

/// Whether receive work requests may be posted to a QP in `state`: in any
/// state but RESET.
pub fn can_post_recv(state: u32) -> bool {
    matches!(
        state,
        ibv::QPS_INIT | ibv::QPS_RTR | ibv::QPS_RTS | ibv::QPS_SQD | ibv::QPS_SQE | ibv::QPS_ERR
    )
}

/// The number of SGEs a work request names, if it is at most `max`.
///
/// `num_sge` comes from the caller's `int`; a negative count or one above
/// the limit fails with `EINVAL`. The `ffi` module calls this before it
/// makes a slice of the caller's SGE list.
pub fn check_num_sge(num_sge: c_int, max: u32) -> Result<usize, Errno> {
    let n = u32::try_from(num_sge).map_err(|_| Errno::EINVAL)?;
    if n > max {
        return Err(Errno::EINVAL);
    }
    usize::try_from(n).map_err(|_| Errno::EINVAL)
}

/// Which member of the `wr` union of an `ibv_send_wr` holds the
/// operation's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrPart {
    /// None: sends, local invalidates.
    None,
    /// `wr.rdma`: RDMA Write (with immediate), RDMA Read, atomic write.
    Rdma,
    /// `wr.atomic`: compare-and-swap and fetch-and-add.
    Atomic,
    /// `wr.ud`: every work request on a UD QP.
    Ud,
}

/// Which member of `ibv_send_wr.wr` a work request with `opcode` uses on
/// a QP of `qp_type`, as in libibverbs' `ibv_cmd_post_send`.
///
/// Fails with `EOPNOTSUPP` for memory-window binds: a [`SendWqe`] has no
/// room for the MR, range and access flags of a bind, so the kernel could
/// never carry one out. Other opcodes are passed on unchecked; the kernel's
/// doorbell completes one it does not accept with an error and moves the QP
/// to ERR.
pub fn wr_part(qp_type: u32, opcode: u32) -> Result<WrPart, Errno> {
    if opcode == ibv::WR_BIND_MW {
        return Err(Errno::EOPNOTSUPP);
    }
    if qp_type == ibv::QPT_UD {
        return Ok(WrPart::Ud);
    }
    Ok(match opcode {
        ibv::WR_RDMA_WRITE | ibv::WR_RDMA_WRITE_WITH_IMM | ibv::WR_RDMA_READ => WrPart::Rdma,
        ibv::WR_ATOMIC_WRITE => WrPart::Rdma,
        ibv::WR_ATOMIC_CMP_AND_SWP | ibv::WR_ATOMIC_FETCH_AND_ADD => WrPart::Atomic,
        _ => WrPart::None,
    })
}

/// The operation's fields of a send work request, read from the member of
/// `ibv_send_wr.wr` that [`wr_part`] chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrFields {
    /// No fields.
    None,
    /// `wr.rdma`.
    Rdma {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `wr.atomic`.
    Atomic {
        /// Remote address.
        remote_addr: u64,
        /// Compare (CAS) or add (FAA) operand.
        compare_add: u64,
        /// Swap operand.
        swap: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `wr.ud`, with the AH already turned into roxe's AH number.
    Ud {
        /// `CreateAhResp.ah_num` of the AH.
        ah_num: u32,
        /// Destination QP number.
        remote_qpn: u32,
        /// Destination Q_Key.
        remote_qkey: u32,
    },
}

/// The fixed part of a send WQE for a work request, without its SGE or
/// inline counts (which [`SendQueue::push`] fills in).
///
/// `imm_data` is the union of `imm_data` and `invalidate_rkey`; it is
/// copied unchanged, and a local invalidate also carries its key in `rkey`.
pub fn send_wqe(
    wr_id: u64,
    opcode: u32,
    send_flags: u32,
    imm_data: u32,
    fields: WrFields,
) -> SendWqe {
    let mut w = SendWqe {
        wr_id,
        opcode,
        send_flags,
        imm_data,
        ..SendWqe::default()
    };
    match fields {
        WrFields::None => {}
        WrFields::Rdma { remote_addr, rkey } => {
            w.remote_addr = remote_addr;
            w.rkey = rkey;
        }
        WrFields::Atomic {
            remote_addr,
            compare_add,
            swap,
            rkey,
        } => {
            w.remote_addr = remote_addr;
            w.compare_add = compare_add;
            w.swap = swap;
            w.rkey = rkey;
        }
        WrFields::Ud {
            ah_num,
            remote_qpn,
            remote_qkey,
        } => {
            w.ah_num = ah_num;
            w.remote_qpn = remote_qpn;
            w.remote_qkey = remote_qkey;
        }
    }
    if opcode == ibv::WR_LOCAL_INV {
        w.rkey = imm_data;
    }
    w
}

/// A slot being filled: bounds-checked writes of native-endian fields.
struct SlotWriter<'a> {
    buf: &'a mut [u8],
}

impl SlotWriter<'_> {
    /// The `len` bytes at `offset`, or `EINVAL` if they are not all inside
    /// the slot.
    fn region(&mut self, offset: usize, len: usize) -> Result<&mut [u8], Errno> {
        let end = offset.checked_add(len).ok_or(Errno::EINVAL)?;
        self.buf.get_mut(offset..end).ok_or(Errno::EINVAL)
    }

    fn put(&mut self, offset: usize, bytes: &[u8]) -> Result<(), Errno> {
        self.region(offset, bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    fn put_u32(&mut self, offset: usize, value: u32) -> Result<(), Errno> {
        self.put(offset, &value.to_ne_bytes())
    }

    fn put_u64(&mut self, offset: usize, value: u64) -> Result<(), Errno> {
        self.put(offset, &value.to_ne_bytes())
    }

    /// Writes `w` at offset 0, field by field in `SendWqe`'s layout.
    fn send_header(&mut self, w: &SendWqe) -> Result<(), Errno> {
        self.put_u64(offset_of!(SendWqe, wr_id), w.wr_id)?;
        self.put_u32(offset_of!(SendWqe, opcode), w.opcode)?;
        self.put_u32(offset_of!(SendWqe, send_flags), w.send_flags)?;
        self.put_u32(offset_of!(SendWqe, imm_data), w.imm_data)?;
        self.put_u32(offset_of!(SendWqe, num_sge), w.num_sge)?;
        self.put_u32(offset_of!(SendWqe, inline_len), w.inline_len)?;
        self.put_u32(offset_of!(SendWqe, rkey), w.rkey)?;
        self.put_u64(offset_of!(SendWqe, remote_addr), w.remote_addr)?;
        self.put_u64(offset_of!(SendWqe, compare_add), w.compare_add)?;
        self.put_u64(offset_of!(SendWqe, swap), w.swap)?;
        self.put_u32(offset_of!(SendWqe, ah_num), w.ah_num)?;
        self.put_u32(offset_of!(SendWqe, remote_qpn), w.remote_qpn)?;
        self.put_u32(offset_of!(SendWqe, remote_qkey), w.remote_qkey)?;
        self.put_u32(offset_of!(SendWqe, _reserved), 0)
    }

    /// Writes `w` at offset 0, field by field in `RecvWqe`'s layout.
    fn recv_header(&mut self, w: &RecvWqe) -> Result<(), Errno> {
        self.put_u64(offset_of!(RecvWqe, wr_id), w.wr_id)?;
        self.put_u32(offset_of!(RecvWqe, num_sge), w.num_sge)?;
        self.put_u32(offset_of!(RecvWqe, _reserved), 0)
    }

    /// Writes `sges` as `Sge`s starting at `offset`.
    fn sges(&mut self, offset: usize, sges: &[ibv::Sge]) -> Result<(), Errno> {
        let mut at = offset;
        for s in sges {
            self.put_u64(at + offset_of!(Sge, addr), s.addr)?;
            self.put_u32(at + offset_of!(Sge, length), s.length)?;
            self.put_u32(at + offset_of!(Sge, lkey), s.lkey)?;
            at = at.checked_add(SGE_SIZE).ok_or(Errno::EINVAL)?;
        }
        Ok(())
    }
}

/// Bytes a WQE with a `header`-byte fixed part and `n` SGEs takes.
fn wqe_len(header: usize, n: usize) -> Result<usize, Errno> {
    n.checked_mul(SGE_SIZE)
        .and_then(|b| b.checked_add(header))
        .ok_or(Errno::EINVAL)
}

/// The total length of the buffers an inline send gathers, or `EINVAL` if
/// it exceeds `max_inline` (or `u32`).
pub fn inline_len(sges: &[ibv::Sge], max_inline: u32) -> Result<u32, Errno> {
    let total = sges
        .iter()
        .try_fold(0u32, |acc, s| acc.checked_add(s.length))
        .ok_or(Errno::EINVAL)?;
    if total > max_inline {
        return Err(Errno::EINVAL);
    }
    Ok(total)
}

/// A QP's send queue: its ring, and the limits the kernel granted.
///
/// # Invariants
///
/// A send WQE with `max_sge` SGEs, or with `max_inline` bytes of inline
/// data, fits one slot of the ring.
#[derive(Debug)]
pub struct SendQueue<M> {
    ring: Producer<M>,
    max_sge: u32,
    max_inline: u32,
}

impl<M: WqMemory> SendQueue<M> {
    /// A send queue over `ring` with the granted `max_sge` and `max_inline`
    /// (`ibv_qp_cap.max_send_sge` and `max_inline_data` after creation).
    ///
    /// Fails with `EPROTO` if the kernel granted more than a slot holds.
    pub fn new(ring: Producer<M>, max_sge: u32, max_inline: u32) -> Result<Self, Errno> {
        let slot = ring.memory().geometry().slot_size();
        let sges = usize::try_from(max_sge).map_err(|_| Errno::EPROTO)?;
        let inline = usize::try_from(max_inline).map_err(|_| Errno::EPROTO)?;
        let fits = |body: Option<usize>| {
            body.and_then(|b| b.checked_add(SEND_WQE_HEADER))
                .is_some_and(|len| len <= slot)
        };
        if !fits(sges.checked_mul(SGE_SIZE)) || !fits(Some(inline)) {
            return Err(Errno::EPROTO);
        }
        // INVARIANT: both limits were just checked against the slot size.
        Ok(Self {
            ring,
            max_sge,
            max_inline,
        })
    }

    /// The most SGEs one work request may carry.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// The most inline bytes one work request may carry.
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Writes one send WQE: `wqe` (whose `num_sge` and `inline_len` are
    /// replaced) and then either the `sges`, or with `IBV_SEND_INLINE` in
    /// `wqe.send_flags` the bytes they describe, which `copy_inline` copies
    /// into the slice it is given (exactly `sge.length` bytes, for every
    /// SGE with a non-zero length, in order).
    ///
    /// Fails, with nothing written, with `EINVAL` if there are more than
    /// [`SendQueue::max_sge`] SGEs or (inline) more than
    /// [`SendQueue::max_inline`] bytes, and as [`Producer::push`] does.
    pub fn push(
        &mut self,
        wqe: SendWqe,
        sges: &[ibv::Sge],
        mut copy_inline: impl FnMut(&ibv::Sge, &mut [u8]),
    ) -> Result<(), Errno> {
        let num_sge = u32::try_from(sges.len()).map_err(|_| Errno::EINVAL)?;
        if num_sge > self.max_sge {
            return Err(Errno::EINVAL);
        }
        let inline = wqe.send_flags & ibv::SEND_INLINE != 0;
        let w = if inline {
            SendWqe {
                num_sge: 0,
                inline_len: inline_len(sges, self.max_inline)?,
                ..wqe
            }
        } else {
            SendWqe {
                num_sge,
                inline_len: 0,
                ..wqe
            }
        };
        self.ring.push(|out| {
            let mut slot = SlotWriter { buf: out };
            slot.send_header(&w)?;
            if inline {
                let mut at = SEND_WQE_HEADER;
                for s in sges.iter().filter(|s| s.length != 0) {
                    // CAST: lengths add up to at most `max_inline`.
                    let len = s.length as usize;
                    copy_inline(s, slot.region(at, len)?);
                    at += len;
                }
                Ok(at)
            } else {
                slot.sges(SEND_WQE_HEADER, sges)?;
                wqe_len(SEND_WQE_HEADER, sges.len())
            }
        })
    }

    /// Makes the pushed WQEs visible to the kernel; returns whether there
    /// were any.
    pub fn publish(&mut self) -> bool {
        self.ring.publish()
    }

    /// The ring.
    pub fn ring(&self) -> &Producer<M> {
        &self.ring
    }
}

/// A receive queue (a QP's own, or an SRQ): its ring, and the SGE limit
/// the kernel granted.
///
/// # Invariants
///
/// A receive WQE with `max_sge` SGEs fits one slot of the ring.
#[derive(Debug)]
pub struct RecvQueue<M> {
    ring: Producer<M>,
    max_sge: u32,
}

impl<M: WqMemory> RecvQueue<M> {
    /// A receive queue over `ring` with the granted `max_sge`
    /// (`ibv_qp_cap.max_recv_sge` or `ibv_srq_attr.max_sge`).
    ///
    /// Fails with `EPROTO` if the kernel granted more than a slot holds.
    pub fn new(ring: Producer<M>, max_sge: u32) -> Result<Self, Errno> {
        let slot = ring.memory().geometry().slot_size();
        let len = usize::try_from(max_sge)
            .ok()
            .and_then(|n| wqe_len(RECV_WQE_HEADER, n).ok());
        if len.is_none_or(|len| len > slot) {
            return Err(Errno::EPROTO);
        }
        // INVARIANT: checked just above.
        Ok(Self { ring, max_sge })
    }

    /// The most SGEs one work request may carry.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Writes one receive WQE.
    ///
    /// Fails, with nothing written, with `EINVAL` if there are more than
    /// [`RecvQueue::max_sge`] SGEs, and as [`Producer::push`] does.
    pub fn push(&mut self, wr_id: u64, sges: &[ibv::Sge]) -> Result<(), Errno> {
        let num_sge = u32::try_from(sges.len()).map_err(|_| Errno::EINVAL)?;
        if num_sge > self.max_sge {
            return Err(Errno::EINVAL);
        }
        let w = RecvWqe {
            wr_id,
            num_sge,
            _reserved: 0,
        };
        self.ring.push(|out| {
            let mut slot = SlotWriter { buf: out };
            slot.recv_header(&w)?;
            slot.sges(RECV_WQE_HEADER, sges)?;
            wqe_len(RECV_WQE_HEADER, sges.len())
        })
    }

    /// Makes the pushed WQEs visible to the kernel; returns whether there
    /// were any.
    pub fn publish(&mut self) -> bool {
        self.ring.publish()
    }

    /// The ring.
    pub fn ring(&self) -> &Producer<M> {
        &self.ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wq::tests::FakeWq;

    // The offsets the kernel reads, written out by hand (not through
    // `offset_of!`), so that a layout change cannot go unnoticed.
    fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
    }
    fn u64_at(b: &[u8], off: usize) -> u64 {
        u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
    }

    fn decode_send(b: &[u8]) -> SendWqe {
        SendWqe {
            wr_id: u64_at(b, 0),
            opcode: u32_at(b, 8),
            send_flags: u32_at(b, 12),
            imm_data: u32_at(b, 16),
            num_sge: u32_at(b, 20),
            inline_len: u32_at(b, 24),
            rkey: u32_at(b, 28),
            remote_addr: u64_at(b, 32),
            compare_add: u64_at(b, 40),
            swap: u64_at(b, 48),
            ah_num: u32_at(b, 56),
            remote_qpn: u32_at(b, 60),
            remote_qkey: u32_at(b, 64),
            _reserved: u32_at(b, 68),
        }
    }

    fn decode_sge(b: &[u8], off: usize) -> ibv::Sge {
        ibv::Sge {
            addr: u64_at(b, off),
            length: u32_at(b, off + 8),
            lkey: u32_at(b, off + 12),
        }
    }

    fn sge(n: u32, length: u32) -> ibv::Sge {
        ibv::Sge {
            addr: 0x1000_0000_0000 + u64::from(n) * 0x100,
            length,
            lkey: 0x40 + n,
        }
    }

    /// A send queue as the kernel grants one for `max_send_sge = 2` and
    /// `max_inline_data = 100`: 192-byte slots (72 + max(32, 100), rounded
    /// up), 2 SGEs, 100 inline bytes.
    fn send_queue(num_slots: u32) -> SendQueue<FakeWq> {
        let ring = Producer::new(FakeWq::new(num_slots, 192, 0)).expect("producer");
        SendQueue::new(ring, 2, 100).expect("limits fit")
    }

    fn recv_queue(num_slots: u32, max_sge: u32) -> RecvQueue<FakeWq> {
        let ring = Producer::new(FakeWq::new(num_slots, 64, 0)).expect("producer");
        RecvQueue::new(ring, max_sge).expect("limits fit")
    }

    /// Copies inline data from a fake address space: SGE `n`'s bytes are
    /// all `n`.
    fn fake_copy(s: &ibv::Sge, dst: &mut [u8]) {
        assert_eq!(dst.len(), s.length as usize);
        dst.fill((s.addr >> 8) as u8);
    }

    fn no_copy(_: &ibv::Sge, _: &mut [u8]) {
        panic!("not an inline send");
    }

    #[test]
    fn header_sizes_follow_the_uapi() {
        assert_eq!((SEND_WQE_HEADER, RECV_WQE_HEADER, SGE_SIZE), (72, 16, 16));
    }

    #[test]
    fn init_attr_checks() {
        let pd = ibv::QP_INIT_ATTR_PD;
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD] {
            assert_eq!(check_init_attr(t, pd, 0), Ok(()));
            assert_eq!(
                check_init_attr(t, pd | ibv::QP_INIT_ATTR_CREATE_FLAGS, 0),
                Ok(())
            );
        }
        // XRC, raw packet and driver QPs.
        for t in [9, 10, 8, 0xff, 0, 5] {
            assert_eq!(
                check_init_attr(t, pd, 0),
                Err(Errno::EOPNOTSUPP),
                "type {t}"
            );
        }
        for bit in [
            ibv::QP_INIT_ATTR_XRCD,
            ibv::QP_INIT_ATTR_MAX_TSO_HEADER,
            ibv::QP_INIT_ATTR_IND_TABLE,
            ibv::QP_INIT_ATTR_RX_HASH,
            ibv::QP_INIT_ATTR_SEND_OPS_FLAGS,
            1 << 7,
        ] {
            assert_eq!(
                check_init_attr(ibv::QPT_RC, pd | bit, 0),
                Err(Errno::EOPNOTSUPP),
                "mask {bit:#x}"
            );
        }
        // IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, IBV_QP_CREATE_SOURCE_QPN.
        for flag in [1 << 1, 1 << 10] {
            let mask = pd | ibv::QP_INIT_ATTR_CREATE_FLAGS;
            assert_eq!(
                check_init_attr(ibv::QPT_UD, mask, flag),
                Err(Errno::EOPNOTSUPP)
            );
        }
        // Flags without the mask bit are not looked at.
        assert_eq!(check_init_attr(ibv::QPT_UD, pd, 1 << 1), Ok(()));
        assert_eq!(check_init_attr(ibv::QPT_RC, 0, 0), Err(Errno::EINVAL));
    }

    #[test]
    fn rq_presence_must_match_the_srq() {
        let ring = RingInfo {
            num_slots: 4,
            ..RingInfo::default()
        };
        let none = RingInfo::default();
        assert_eq!(check_rq_presence(&ring, false), Ok(true));
        assert_eq!(check_rq_presence(&none, true), Ok(false));
        assert_eq!(check_rq_presence(&none, false), Err(Errno::EPROTO));
        assert_eq!(check_rq_presence(&ring, true), Err(Errno::EPROTO));
    }

    #[test]
    fn posting_depends_on_the_state() {
        let send: Vec<u32> = (0..8).filter(|&s| can_post_send(s)).collect();
        assert_eq!(
            send,
            [ibv::QPS_RTS, ibv::QPS_SQD, ibv::QPS_SQE, ibv::QPS_ERR]
        );
        let recv: Vec<u32> = (0..8).filter(|&s| can_post_recv(s)).collect();
        assert_eq!(recv, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn num_sge_limits() {
        assert_eq!(check_num_sge(0, 0), Ok(0));
        assert_eq!(check_num_sge(2, 2), Ok(2));
        assert_eq!(check_num_sge(3, 2), Err(Errno::EINVAL));
        assert_eq!(check_num_sge(-1, 32), Err(Errno::EINVAL));
        assert_eq!(check_num_sge(c_int::MIN, 32), Err(Errno::EINVAL));
        assert_eq!(check_num_sge(c_int::MAX, u32::MAX), Ok(c_int::MAX as usize));
    }

    #[test]
    fn wr_parts_follow_ibv_cmd_post_send() {
        use WrPart::*;
        let rc = |op| wr_part(ibv::QPT_RC, op);
        assert_eq!(rc(ibv::WR_SEND), Ok(None));
        assert_eq!(rc(ibv::WR_SEND_WITH_IMM), Ok(None));
        assert_eq!(rc(ibv::WR_SEND_WITH_INV), Ok(None));
        assert_eq!(rc(ibv::WR_LOCAL_INV), Ok(None));
        assert_eq!(rc(ibv::WR_RDMA_WRITE), Ok(Rdma));
        assert_eq!(rc(ibv::WR_RDMA_WRITE_WITH_IMM), Ok(Rdma));
        assert_eq!(rc(ibv::WR_RDMA_READ), Ok(Rdma));
        assert_eq!(rc(ibv::WR_ATOMIC_WRITE), Ok(Rdma));
        assert_eq!(rc(ibv::WR_ATOMIC_CMP_AND_SWP), Ok(Atomic));
        assert_eq!(rc(ibv::WR_ATOMIC_FETCH_AND_ADD), Ok(Atomic));
        assert_eq!(wr_part(ibv::QPT_UC, ibv::WR_RDMA_WRITE), Ok(Rdma));
        // Unknown opcodes are the kernel's to refuse.
        assert_eq!(rc(200), Ok(None));
        // Every UD work request reads `wr.ud`, whatever its opcode.
        assert_eq!(wr_part(ibv::QPT_UD, ibv::WR_SEND), Ok(Ud));
        assert_eq!(wr_part(ibv::QPT_UD, ibv::WR_RDMA_WRITE), Ok(Ud));
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD] {
            assert_eq!(wr_part(t, ibv::WR_BIND_MW), Err(Errno::EOPNOTSUPP));
        }
    }

    #[test]
    fn send_wqe_fields() {
        let rdma = send_wqe(
            7,
            ibv::WR_RDMA_WRITE_WITH_IMM,
            2,
            0x1234,
            WrFields::Rdma {
                remote_addr: 0xdead_0000,
                rkey: 0x99,
            },
        );
        assert_eq!(
            rdma,
            SendWqe {
                wr_id: 7,
                opcode: ibv::WR_RDMA_WRITE_WITH_IMM,
                send_flags: 2,
                imm_data: 0x1234,
                rkey: 0x99,
                remote_addr: 0xdead_0000,
                ..SendWqe::default()
            }
        );
        let atomic = send_wqe(
            8,
            ibv::WR_ATOMIC_CMP_AND_SWP,
            0,
            0,
            WrFields::Atomic {
                remote_addr: 0x1000,
                compare_add: 1,
                swap: 2,
                rkey: 3,
            },
        );
        assert_eq!(
            (
                atomic.remote_addr,
                atomic.compare_add,
                atomic.swap,
                atomic.rkey
            ),
            (0x1000, 1, 2, 3)
        );
        let inv = send_wqe(9, ibv::WR_LOCAL_INV, 0, 0xabcd, WrFields::None);
        assert_eq!((inv.imm_data, inv.rkey), (0xabcd, 0xabcd));
        let send_inv = send_wqe(9, ibv::WR_SEND_WITH_INV, 0, 0xabcd, WrFields::None);
        assert_eq!((send_inv.imm_data, send_inv.rkey), (0xabcd, 0));
    }

    #[test]
    fn a_send_lands_in_the_slot_with_its_sges() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(
            0x1122_3344_5566_7788,
            ibv::WR_RDMA_WRITE,
            2, // IBV_SEND_SIGNALED
            0,
            WrFields::Rdma {
                remote_addr: 0xfeed_0000,
                rkey: 0x77,
            },
        );
        let sges = [sge(1, 100), sge(2, 200)];
        sq.push(wqe, &sges, no_copy).expect("fits");
        assert!(sq.publish());
        let slot = sq.ring().memory().slot(0);
        assert_eq!(decode_send(slot), SendWqe { num_sge: 2, ..wqe });
        assert_eq!(decode_sge(slot, 72), sges[0]);
        assert_eq!(decode_sge(slot, 88), sges[1]);
        assert_eq!(*sq.ring().memory().producer_stores.borrow(), [1]);
    }

    #[test]
    fn ud_fields_land_in_the_slot() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(
            5,
            ibv::WR_SEND_WITH_IMM,
            0,
            0x0a0b_0c0d,
            WrFields::Ud {
                ah_num: 17,
                remote_qpn: 0x00ab_cdef,
                remote_qkey: 0x1111_2222,
            },
        );
        sq.push(wqe, &[sge(0, 64)], no_copy).expect("fits");
        let w = decode_send(sq.ring().memory().slot(0));
        assert_eq!(
            (w.ah_num, w.remote_qpn, w.remote_qkey, w.imm_data, w.num_sge),
            (17, 0x00ab_cdef, 0x1111_2222, 0x0a0b_0c0d, 1)
        );
        assert_eq!((w.remote_addr, w.rkey, w._reserved), (0, 0, 0));
    }

    #[test]
    fn too_many_sges_are_refused() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(1, ibv::WR_SEND, 0, 0, WrFields::None);
        let sges = [sge(0, 1), sge(1, 1), sge(2, 1)];
        assert_eq!(sq.push(wqe, &sges, no_copy), Err(Errno::EINVAL));
        let mut rq = recv_queue(4, 3);
        let four = [sge(0, 1), sge(1, 1), sge(2, 1), sge(3, 1)];
        assert_eq!(rq.push(1, &four), Err(Errno::EINVAL));
        rq.push(2, &four[..3]).expect("three fit");
        assert!(sq.ring().memory().writes.is_empty());
        assert_eq!(rq.ring().memory().writes, [0]);
    }

    #[test]
    fn inline_data_is_gathered_into_the_slot() {
        let ring = Producer::new(FakeWq::new(4, 192, 0)).expect("producer");
        let mut sq = SendQueue::new(ring, 3, 100).expect("limits fit");
        let wqe = send_wqe(3, ibv::WR_SEND, ibv::SEND_INLINE, 0, WrFields::None);
        // An empty SGE in the middle is skipped, not copied.
        let sges = [sge(1, 60), sge(9, 0), sge(2, 40)];
        sq.push(wqe, &sges, fake_copy).expect("100 bytes fit");
        let slot = sq.ring().memory().slot(0);
        let w = decode_send(slot);
        assert_eq!(
            (w.num_sge, w.inline_len, w.send_flags),
            (0, 100, ibv::SEND_INLINE)
        );
        assert_eq!(slot[72..132], [1; 60]);
        assert_eq!(slot[132..172], [2; 40]);
    }

    #[test]
    fn inline_length_is_limited() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(3, ibv::WR_SEND, ibv::SEND_INLINE, 0, WrFields::None);
        assert_eq!(
            sq.push(wqe, &[sge(1, 60), sge(2, 41)], fake_copy),
            Err(Errno::EINVAL)
        );
        // Lengths whose sum overflows 32 bits.
        assert_eq!(
            sq.push(wqe, &[sge(1, u32::MAX), sge(2, 2)], fake_copy),
            Err(Errno::EINVAL)
        );
        // The SGE limit holds for inline sends too.
        let three = [sge(1, 1), sge(2, 1), sge(3, 1)];
        assert_eq!(sq.push(wqe, &three, fake_copy), Err(Errno::EINVAL));
        assert!(sq.ring().memory().writes.is_empty());
        assert_eq!(inline_len(&[sge(1, 60), sge(2, 40)], 100), Ok(100));
        assert_eq!(inline_len(&[], 0), Ok(0));
        // An empty inline send is fine, even with no inline room at all.
        let ring = Producer::new(FakeWq::new(2, 128, 0)).expect("producer");
        let mut no_inline = SendQueue::new(ring, 1, 0).expect("fits");
        no_inline
            .push(wqe, &[sge(1, 0)], fake_copy)
            .expect("zero bytes");
        assert_eq!(
            no_inline.push(wqe, &[sge(1, 1)], fake_copy),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn the_send_ring_fills_and_wraps() {
        let mut sq = send_queue(2);
        let wqe = |id| send_wqe(id, ibv::WR_SEND, 0, 0, WrFields::None);
        sq.push(wqe(1), &[], no_copy).expect("room");
        sq.push(wqe(2), &[], no_copy).expect("room");
        assert_eq!(sq.push(wqe(3), &[], no_copy), Err(Errno::ENOMEM));
        assert!(sq.publish());
        sq.ring().memory().consume(1);
        sq.push(wqe(3), &[sge(4, 8)], no_copy)
            .expect("one slot free");
        assert_eq!(decode_send(sq.ring().memory().slot(2)).wr_id, 3);
        assert_eq!(decode_send(sq.ring().memory().slot(1)).wr_id, 2);
        assert_eq!(sq.push(wqe(4), &[], no_copy), Err(Errno::ENOMEM));
    }

    #[test]
    fn a_receive_lands_in_the_slot() {
        let mut rq = recv_queue(2, 3);
        let sges = [sge(1, 4096), sge(2, 8)];
        rq.push(0xabc, &sges).expect("fits");
        rq.push(0xdef, &[]).expect("fits");
        assert_eq!(rq.push(0x123, &[]), Err(Errno::ENOMEM));
        assert!(rq.publish());
        let m = rq.ring().memory();
        let s0 = m.slot(0);
        assert_eq!(
            (u64_at(s0, 0), u32_at(s0, 8), u32_at(s0, 12)),
            (0xabc, 2, 0)
        );
        assert_eq!(decode_sge(s0, 16), sges[0]);
        assert_eq!(decode_sge(s0, 32), sges[1]);
        let s1 = m.slot(1);
        assert_eq!((u64_at(s1, 0), u32_at(s1, 8)), (0xdef, 0));
        assert_eq!(*m.producer_stores.borrow(), [2]);
    }

    #[test]
    fn granted_limits_must_fit_the_slot() {
        let ring = |size| Producer::new(FakeWq::new(2, size, 0)).expect("producer");
        // 128-byte send slots: 72 + 3 * 16 = 120 fits, 4 SGEs do not;
        // 56 inline bytes fit, 57 do not.
        assert!(SendQueue::new(ring(128), 3, 56).is_ok());
        assert_eq!(
            SendQueue::new(ring(128), 4, 0).map(|_| ()),
            Err(Errno::EPROTO)
        );
        assert_eq!(
            SendQueue::new(ring(128), 0, 57).map(|_| ()),
            Err(Errno::EPROTO)
        );
        assert_eq!(
            SendQueue::new(ring(128), u32::MAX, 0).map(|_| ()),
            Err(Errno::EPROTO)
        );
        // 64-byte receive slots: 16 + 3 * 16 fits, 4 SGEs do not.
        assert!(RecvQueue::new(ring(64), 3).is_ok());
        assert_eq!(RecvQueue::new(ring(64), 4).map(|_| ()), Err(Errno::EPROTO));
        assert_eq!(
            RecvQueue::new(ring(64), u32::MAX).map(|_| ()),
            Err(Errno::EPROTO)
        );
    }
}
