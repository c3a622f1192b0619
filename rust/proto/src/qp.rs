// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Queue pair states and the layout of work-request slots.

/// QP states (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum State {
    /// Reset.
    Reset = 0,
    /// Initialised.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained.
    Sqd = 4,
    /// Send queue error.
    Sqe = 5,
    /// Error.
    Err = 6,
}

impl State {
    /// Parses an `enum ib_qp_state` value.
    pub fn from_raw(v: u32) -> Option<State> {
        Some(match v {
            0 => State::Reset,
            1 => State::Init,
            2 => State::Rtr,
            3 => State::Rts,
            4 => State::Sqd,
            5 => State::Sqe,
            6 => State::Err,
            _ => return None,
        })
    }

    /// Whether receive work requests may be posted.
    pub fn can_post_recv(self) -> bool {
        !matches!(self, State::Reset)
    }

    /// Whether send work requests may be posted (they are processed only
    /// in RTS).
    pub fn can_post_send(self) -> bool {
        !matches!(self, State::Reset | State::Init | State::Rtr)
    }

    /// Whether entering this state flushes outstanding work requests with
    /// `IBV_WC_WR_FLUSH_ERR`.
    pub fn flushes(self) -> bool {
        matches!(self, State::Err)
    }
}

/// Size of a send slot's fixed part (`SendWqe`).
pub const SEND_WQE_HEADER: u32 = 72;
/// Size of a receive slot's fixed part (`RecvWqe`).
pub const RECV_WQE_HEADER: u32 = 16;
/// Size of one scatter/gather element.
pub const SGE_SIZE: u32 = 16;
/// Slots are multiples of this many bytes.
pub const SLOT_ALIGN: u32 = 64;

fn round_slot(bytes: u32) -> Option<u32> {
    bytes
        .checked_add(SLOT_ALIGN - 1)
        .map(|b| b / SLOT_ALIGN * SLOT_ALIGN)
}

/// The slot size for send WQEs with up to `max_sge` SGEs or `max_inline`
/// bytes of inline data.
pub fn send_slot_size(max_sge: u32, max_inline: u32) -> Option<u32> {
    let body = max_sge.checked_mul(SGE_SIZE)?.max(max_inline);
    round_slot(SEND_WQE_HEADER.checked_add(body)?)
}

/// The slot size for receive WQEs with up to `max_sge` SGEs.
pub fn recv_slot_size(max_sge: u32) -> Option<u32> {
    round_slot(RECV_WQE_HEADER.checked_add(max_sge.checked_mul(SGE_SIZE)?)?)
}

/// How many SGEs a send slot of `slot_size` bytes holds.
pub fn send_sge_capacity(slot_size: u32) -> u32 {
    slot_size.saturating_sub(SEND_WQE_HEADER) / SGE_SIZE
}

/// How many inline bytes a send slot of `slot_size` bytes holds.
pub fn send_inline_capacity(slot_size: u32) -> u32 {
    slot_size.saturating_sub(SEND_WQE_HEADER)
}

/// How many SGEs a receive slot of `slot_size` bytes holds.
pub fn recv_sge_capacity(slot_size: u32) -> u32 {
    slot_size.saturating_sub(RECV_WQE_HEADER) / SGE_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for v in 0..7 {
            assert_eq!(State::from_raw(v).map(|s| s as u32), Some(v));
        }
        assert_eq!(State::from_raw(7), None);
        assert!(State::Err.flushes());
        assert!(!State::Rts.flushes());
        assert!(!State::Reset.can_post_recv());
        assert!(State::Init.can_post_recv());
        assert!(!State::Rtr.can_post_send());
        assert!(State::Rts.can_post_send());
    }

    #[test]
    fn slot_sizes_hold_what_was_asked() {
        for sge in 0..=32 {
            for inline in [0, 1, 16, 64, 100, 512] {
                let s = send_slot_size(sge, inline).unwrap();
                assert_eq!(s % SLOT_ALIGN, 0);
                assert!(send_sge_capacity(s) >= sge);
                assert!(send_inline_capacity(s) >= inline);
            }
            let r = recv_slot_size(sge).unwrap();
            assert_eq!(r % SLOT_ALIGN, 0);
            assert!(recv_sge_capacity(r) >= sge);
        }
        assert_eq!(send_slot_size(1, 0), Some(128));
        assert_eq!(recv_slot_size(1), Some(64));
        assert_eq!(recv_slot_size(3), Some(64));
        assert_eq!(recv_slot_size(4), Some(128));
    }

    #[test]
    fn huge_requests_do_not_overflow() {
        assert_eq!(send_slot_size(u32::MAX, 0), None);
        assert_eq!(send_slot_size(0, u32::MAX), None);
        assert_eq!(recv_slot_size(u32::MAX / 8), None);
        assert_eq!(send_sge_capacity(0), 0);
    }
}
