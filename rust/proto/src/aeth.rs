// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The AETH syndrome (IBTA vol 1, chapter 9): ACK with an end-to-end credit
//! count, RNR NAK with a timer, or NAK with an error code.
//!
//! ```text
//! bit 7    0 (1 is reserved)
//! bits 6:5 00 ACK, 01 RNR NAK, 10 reserved, 11 NAK
//! bits 4:0 credit code, RNR timer code or NAK code
//! ```

/// End-to-end flow control credits: a 5-bit code for a number of receive
/// WQEs (the IBTA's credit encoding table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Credits(u8);

/// Receive WQE counts for credit codes `0..=30`; code 31 means the
/// responder does not report credits.
const CREDIT_COUNTS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

impl Credits {
    /// "Invalid credit count": the responder does not limit the
    /// requester (what rxe always sends).
    pub const UNLIMITED: Credits = Credits(0x1f);

    /// The credits for a 5-bit code, or `None` if `code` does not fit.
    pub const fn from_code(code: u8) -> Option<Credits> {
        if code <= 0x1f {
            Some(Credits(code))
        } else {
            None
        }
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The largest code whose count does not exceed `wqes`.
    pub fn from_count(wqes: u32) -> Credits {
        let code = CREDIT_COUNTS.iter().rposition(|&n| n <= wqes).unwrap_or(0);
        // CAST: code < 31.
        Credits(code as u8)
    }

    /// The number of receive WQEs, or `None` for [`Credits::UNLIMITED`].
    pub fn count(self) -> Option<u32> {
        CREDIT_COUNTS.get(usize::from(self.0)).copied()
    }
}

/// An RNR NAK timer: a 5-bit code for how long the requester waits before
/// it retries (the IBTA's RNR NAK timer table; `enum ib_rnr_timeout`
/// names the same codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RnrTimer(u8);

/// Microseconds for each timer code. Code 0 is the longest wait, 655.36 ms.
/// (rxe's table has 61410 for code 25; the IBTA says 61.44 ms.)
const RNR_USECS: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

impl RnrTimer {
    /// The timer for a 5-bit code, or `None` if `code` does not fit.
    pub const fn from_code(code: u8) -> Option<RnrTimer> {
        if code <= 0x1f {
            Some(RnrTimer(code))
        } else {
            None
        }
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The wait in microseconds.
    pub const fn usecs(self) -> u32 {
        // CAST: u8 to usize is lossless; the invariant keeps it below 32,
        // and the mask makes that visible.
        RNR_USECS[(self.0 & 0x1f) as usize]
    }
}

/// NAK codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// PSN sequence error: the requester must resend from the AETH's PSN.
    PsnSequenceError = 0,
    /// Invalid request.
    InvalidRequest = 1,
    /// Remote access error.
    RemoteAccessError = 2,
    /// Remote operational error.
    RemoteOperationalError = 3,
    /// Invalid RD request.
    InvalidRdRequest = 4,
}

impl NakCode {
    /// The code for its 5-bit value, or `None` for a reserved one.
    pub const fn from_u8(v: u8) -> Option<NakCode> {
        Some(match v {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            _ => return None,
        })
    }
}

/// A decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement.
    Ack(Credits),
    /// Receiver not ready: retry after the timer.
    RnrNak(RnrTimer),
    /// Negative acknowledgement.
    Nak(NakCode),
}

const TYPE_MASK: u8 = 0xe0;
const TYPE_ACK: u8 = 0x00;
const TYPE_RNR_NAK: u8 = 0x20;
const TYPE_NAK: u8 = 0x60;
const VALUE_MASK: u8 = 0x1f;

impl Syndrome {
    /// An ACK that reports no credits, as rxe sends.
    pub const ACK: Syndrome = Syndrome::Ack(Credits::UNLIMITED);

    /// Decodes a syndrome byte; `None` for a reserved type or NAK code.
    pub const fn from_u8(v: u8) -> Option<Syndrome> {
        let value = v & VALUE_MASK;
        match v & TYPE_MASK {
            TYPE_ACK => Some(Syndrome::Ack(Credits(value))),
            TYPE_RNR_NAK => Some(Syndrome::RnrNak(RnrTimer(value))),
            TYPE_NAK => match NakCode::from_u8(value) {
                Some(code) => Some(Syndrome::Nak(code)),
                None => None,
            },
            _ => None,
        }
    }

    /// The syndrome byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            Syndrome::Ack(c) => TYPE_ACK | c.0,
            Syndrome::RnrNak(t) => TYPE_RNR_NAK | t.0,
            Syndrome::Nak(code) => TYPE_NAK | code as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_syndromes() {
        // The values rxe names in rxe_hdr.h.
        assert_eq!(Syndrome::ACK.to_u8(), 0x1f);
        assert_eq!(Syndrome::Nak(NakCode::PsnSequenceError).to_u8(), 0x60);
        assert_eq!(Syndrome::Nak(NakCode::InvalidRequest).to_u8(), 0x61);
        assert_eq!(Syndrome::Nak(NakCode::RemoteAccessError).to_u8(), 0x62);
        assert_eq!(Syndrome::Nak(NakCode::RemoteOperationalError).to_u8(), 0x63);
        assert_eq!(Syndrome::Nak(NakCode::InvalidRdRequest).to_u8(), 0x64);
        assert_eq!(
            Syndrome::from_u8(0x2e),
            Some(Syndrome::RnrNak(RnrTimer::from_code(14).unwrap()))
        );
        assert_eq!(
            Syndrome::from_u8(0x00),
            Some(Syndrome::Ack(Credits::from_code(0).unwrap()))
        );
    }

    #[test]
    fn reserved_syndromes() {
        for v in 0x40..=0x5f {
            assert_eq!(Syndrome::from_u8(v), None, "{v:#x}");
        }
        for v in 0x65..=0x7f {
            assert_eq!(Syndrome::from_u8(v), None, "{v:#x}");
        }
        for v in 0x80..=0xff {
            assert_eq!(Syndrome::from_u8(v), None, "{v:#x}");
        }
    }

    #[test]
    fn every_valid_byte_round_trips() {
        let mut valid = 0;
        for v in 0..=u8::MAX {
            if let Some(s) = Syndrome::from_u8(v) {
                assert_eq!(s.to_u8(), v);
                valid += 1;
            }
        }
        // 32 ACKs, 32 RNR NAKs, 5 NAKs.
        assert_eq!(valid, 69);
    }

    #[test]
    fn rnr_timer_table() {
        let t = |c| RnrTimer::from_code(c).unwrap().usecs();
        assert_eq!(t(0), 655_360);
        assert_eq!(t(1), 10);
        assert_eq!(t(12), 640);
        assert_eq!(t(25), 61_440);
        assert_eq!(t(31), 491_520);
        assert_eq!(RnrTimer::from_code(32), None);
        // Codes 1..=31 grow strictly.
        for c in 2..=31 {
            assert!(t(c) > t(c - 1), "{c}");
        }
        // The table alternates 1x and 1.5x powers of two, so from code 6
        // on each entry doubles the one two codes below it.
        for c in 6..=31 {
            assert_eq!(t(c), t(c - 2) * 2, "{c}");
        }
    }

    #[test]
    fn credit_table() {
        assert_eq!(Credits::UNLIMITED.count(), None);
        assert_eq!(Credits::from_code(0).unwrap().count(), Some(0));
        assert_eq!(Credits::from_code(5).unwrap().count(), Some(6));
        assert_eq!(Credits::from_code(30).unwrap().count(), Some(32768));
        assert_eq!(Credits::from_code(32), None);
        assert_eq!(Credits::from_count(0).code(), 0);
        assert_eq!(Credits::from_count(5).code(), 4);
        assert_eq!(Credits::from_count(6).code(), 5);
        assert_eq!(Credits::from_count(u32::MAX).code(), 30);
        for c in 6..=30u8 {
            let n = |c| Credits::from_code(c).unwrap().count().unwrap();
            assert_eq!(n(c), n(c - 2) * 2, "{c}");
        }
    }

    proptest! {
        #[test]
        fn from_count_never_overstates(n in any::<u32>()) {
            let c = Credits::from_count(n);
            let got = c.count().unwrap();
            prop_assert!(got <= n);
            // The next code up would overstate.
            if let Some(next) = Credits::from_code(c.code() + 1).and_then(Credits::count) {
                prop_assert!(next > n);
            }
        }
    }
}
