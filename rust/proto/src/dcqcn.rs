// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DCQCN reaction point: one QP's sending rate, cut when a CNP comes
//! back for it and raised again as time passes and bytes go out (Zhu et
//! al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM
//! 2015; the constants are those of `Documentation/congestion.md`).
//!
//! Everything is integer arithmetic over caller-supplied time in
//! microseconds, so the same machine runs in the kernel and under
//! `cargo test`. The driver keeps one per connected QP (`qp/cc.rs`), moves
//! it on CNPs and paces the QP's requests by it.

/// How late (ns) a paced packet may leave and still keep its place in the
/// schedule.
pub const CATCH_UP_NS: u64 = 20_000;

/// Alpha is shown in 1/1024ths: [`ALPHA_ONE`] is 1.0.
pub const ALPHA_ONE: u32 = 1024;

/// Alpha is kept in 1/2^20ths. In 1/1024ths, g = 1/256 is 4 units and a
/// decay step rounds up to 1 unit per 55 us, so with CNPs more than 0.7 ms
/// apart alpha sank to 0 and CNPs stopped cutting at all (seen between
/// two guests, where CNPs come every 0.6 ms).
const ALPHA_FULL: u32 = 1 << 20;

/// The most decay or increase steps one call takes one at a time, so that
/// no setting of the tunables makes a call run long.
const STEPS_MAX: u64 = 4096;

/// [`decay_factor`]'s fixed point: 1.0 is `1 << FACTOR_SHIFT`.
const FACTOR_SHIFT: u32 = 31;

/// (1 - 2^-`g`)^`k` in 1/2^31ths, by squaring (a product of two factors
/// is below 2^62).
fn decay_factor(g: u32, mut k: u64) -> u64 {
    let one = 1u64 << FACTOR_SHIFT;
    let mut base = one - (one >> g.min(FACTOR_SHIFT));
    let mut acc = one;
    while k > 0 {
        if k & 1 == 1 {
            acc = (acc * base) >> FACTOR_SHIFT;
        }
        base = (base * base) >> FACTOR_SHIFT;
        k >>= 1;
    }
    acc
}

/// The reaction point's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// The rate with no congestion, and the ceiling, in kbit/s.
    pub line_kbps: u64,
    /// No cut goes below this, in kbit/s.
    pub min_kbps: u64,
    /// Additive increase of the target rate, in kbit/s.
    pub ai_kbps: u64,
    /// Hyper increase of the target rate per stage past `threshold`.
    pub hai_kbps: u64,
    /// Alpha's gain g as a shift: g = 1 / 2^`g_shift`.
    pub g_shift: u32,
    /// Alpha decays once per this many microseconds without a CNP.
    pub alpha_period_us: u64,
    /// The rate-increase timer, in microseconds.
    pub increase_period_us: u64,
    /// The rate-increase byte counter: one stage per this many bytes sent.
    pub byte_reset: u64,
    /// Stages of fast recovery before additive increase (F).
    pub threshold: u32,
    /// At most one cut per this many microseconds; CNPs in between only
    /// count as ignored.
    pub decrease_period_us: u64,
}

impl Params {
    /// The paper's constants with ConnectX's increase steps, for a link of
    /// `line_kbps` ([`Knobs::DEFAULT`]).
    pub const fn new(line_kbps: u64) -> Params {
        Params::tuned(line_kbps, &Knobs::DEFAULT)
    }
}

/// The reaction point's tunable constants as an administrator set them
/// (roxe's `dcqcn_*` module parameters), not yet checked: see
/// [`Params::tuned`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// The rate-increase timer, us ([`Params::increase_period_us`]).
    pub time_reset_us: u32,
    /// Additive increase, kbit/s.
    pub ai_rate_kbps: u32,
    /// Hyper increase, kbit/s.
    pub hai_rate_kbps: u32,
    /// The floor, kbit/s.
    pub min_rate_kbps: u32,
    /// Bytes per byte-counter stage.
    pub byte_reset: u32,
    /// Stages of fast recovery (F).
    pub threshold: u32,
    /// Alpha's gain as a shift.
    pub g_shift: u32,
    /// Alpha's decay period, us.
    pub alpha_period_us: u32,
    /// At most one cut per this many us.
    pub reduce_period_us: u32,
}

impl Knobs {
    /// The values of [`Params::new`].
    pub const DEFAULT: Knobs = Knobs {
        time_reset_us: 300,
        ai_rate_kbps: 5_000,
        hai_rate_kbps: 50_000,
        min_rate_kbps: 1_000,
        byte_reset: 10 << 20,
        threshold: 5,
        g_shift: 8,
        alpha_period_us: 55,
        reduce_period_us: 50,
    };
}

impl Params {
    /// The constants for a link of `line_kbps` as `k` sets them, bounded
    /// so that no setting breaks the arithmetic: alpha's gain between 1/2
    /// and 1/65536 (a shift of 1 to 16), and a floor of at least 1 kbit/s
    /// and at most the line. A period of 0 turns its mechanism off (no
    /// timer stages, no alpha decay, no byte stages) or, for the cut
    /// period, lets every CNP cut.
    pub const fn tuned(line_kbps: u64, k: &Knobs) -> Params {
        let g = if k.g_shift < 1 {
            1
        } else if k.g_shift > 16 {
            16
        } else {
            k.g_shift
        };
        let min = k.min_rate_kbps as u64;
        let min = if min < 1 {
            1
        } else if min > line_kbps {
            line_kbps
        } else {
            min
        };
        Params {
            line_kbps,
            min_kbps: min,
            ai_kbps: k.ai_rate_kbps as u64,
            hai_kbps: k.hai_rate_kbps as u64,
            g_shift: g,
            alpha_period_us: k.alpha_period_us as u64,
            increase_period_us: k.time_reset_us as u64,
            byte_reset: k.byte_reset as u64,
            threshold: k.threshold,
            decrease_period_us: k.reduce_period_us as u64,
        }
    }
}

/// What became of a CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cnp {
    /// It cut the rate (`rp_cnp_handled`).
    Handled,
    /// It came within the decrease period of the last cut and only moved
    /// alpha (`rp_cnp_ignored`).
    Ignored,
}

/// One QP's rate state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Current rate (Rc), kbit/s.
    rc: u64,
    /// Target rate (Rt), kbit/s.
    rt: u64,
    /// Alpha, in 1/2^20ths ([`ALPHA_FULL`]).
    alpha: u32,
    /// Timer stages (T) and byte stages (BC) since the last cut.
    t: u32,
    bc: u32,
    /// Bytes sent toward the next byte stage.
    bytes: u64,
    /// When the last cut was, and when alpha and the timer last moved.
    cut_at: Option<u64>,
    alpha_at: u64,
    timer_at: u64,
    /// Earliest time the next packet may leave, while limited, in
    /// nanoseconds (so that packet times do not round away).
    next_ns: u64,
}

impl Rate {
    /// A QP that has seen no CNP: full rate, not paced.
    pub const fn new(p: &Params) -> Rate {
        Rate {
            rc: p.line_kbps,
            rt: p.line_kbps,
            alpha: ALPHA_FULL,
            t: 0,
            bc: 0,
            bytes: 0,
            cut_at: None,
            alpha_at: 0,
            timer_at: 0,
            next_ns: 0,
        }
    }

    /// The current rate, kbit/s.
    pub fn rate_kbps(&self) -> u64 {
        self.rc
    }

    /// The target rate, kbit/s.
    pub fn target_kbps(&self) -> u64 {
        self.rt
    }

    /// Alpha, in 1/1024ths.
    pub fn alpha(&self) -> u32 {
        self.alpha / (ALPHA_FULL / ALPHA_ONE)
    }

    /// Whether the QP is held below the line rate.
    pub fn limited(&self, p: &Params) -> bool {
        self.rc < p.line_kbps
    }

    /// A CNP for this QP arrived at `now`.
    pub fn on_cnp(&mut self, p: &Params, now: u64) -> Cnp {
        self.advance(p, now);
        // Alpha moves toward 1 on every CNP: (1 - g) alpha + g.
        self.alpha = self.alpha - (self.alpha >> p.g_shift) + (ALPHA_FULL >> p.g_shift);
        self.alpha = self.alpha.min(ALPHA_FULL);
        self.alpha_at = now;
        if let Some(at) = self.cut_at {
            if now.saturating_sub(at) < p.decrease_period_us {
                return Cnp::Ignored;
            }
        }
        if self.cut_at.is_none() {
            // The first CNP: alpha starts at 1, so the first cut halves.
            self.alpha = ALPHA_FULL;
        }
        self.rt = self.rc;
        // Rc (1 - alpha / 2): with alpha at most 1, at most a halving.
        // Below 2^47: rates fit in 2^27 kbit/s for any real link.
        let cut = self.rc * u64::from(self.alpha) / u64::from(2 * ALPHA_FULL);
        self.rc = (self.rc - cut).max(p.min_kbps).min(p.line_kbps);
        self.t = 0;
        self.bc = 0;
        self.bytes = 0;
        self.cut_at = Some(now);
        self.timer_at = now;
        Cnp::Handled
    }

    /// Brings alpha's decay and the increase timer up to `now`.
    pub fn advance(&mut self, p: &Params, now: u64) {
        if self.cut_at.is_none() {
            self.alpha_at = now;
            self.timer_at = now;
            return;
        }
        match now
            .saturating_sub(self.alpha_at)
            .checked_div(p.alpha_period_us)
        {
            // No decay while the period is 0: none is owed later either.
            None => self.alpha_at = now,
            Some(0) => {}
            Some(k) => {
                // (1 - g)^k; past 16/g periods alpha is below e^-16, a
                // tenth of its unit.
                let limit = 16u64 << p.g_shift;
                if k >= limit {
                    self.alpha = 0;
                } else if k > STEPS_MAX {
                    // A small gain over a long gap: in closed form.
                    let f = decay_factor(p.g_shift, k);
                    // CAST: below alpha, a u32.
                    self.alpha = ((u64::from(self.alpha) * f) >> FACTOR_SHIFT) as u32;
                } else {
                    for _ in 0..k {
                        if self.alpha == 0 {
                            break;
                        }
                        let d = (self.alpha >> p.g_shift).max(1);
                        self.alpha -= d;
                    }
                }
                self.alpha_at += k * p.alpha_period_us;
            }
        }
        if p.increase_period_us == 0 {
            // No timer stages while the period is 0, and none owed later.
            self.timer_at = now;
        } else if let Some(k) = now
            .saturating_sub(self.timer_at)
            .checked_div(p.increase_period_us)
        {
            for _ in 0..k.min(STEPS_MAX) {
                if self.rc >= p.line_kbps {
                    break;
                }
                self.t = self.t.saturating_add(1);
                self.increase(p);
            }
            self.timer_at += k * p.increase_period_us;
        }
    }

    /// One stage of increase (the timer's or the byte counter's).
    fn increase(&mut self, p: &Params) {
        let f = p.threshold;
        if self.t > f && self.bc > f {
            let n = u64::from(self.t.min(self.bc) - f);
            self.rt = self.rt.saturating_add(n.saturating_mul(p.hai_kbps));
        } else if self.t >= f || self.bc >= f {
            self.rt = self.rt.saturating_add(p.ai_kbps);
        }
        // Fast recovery only averages toward the target.
        self.rt = self.rt.min(p.line_kbps);
        self.rc = (self.rt + self.rc).div_ceil(2).min(p.line_kbps);
    }

    /// Microseconds to wait before a packet may leave at `now` (0: now).
    ///
    /// `burst_us` lets the schedule run that far ahead of the clock: a
    /// sender woken by a timer of that granularity sends what the rate
    /// allowed since its last wake-up in one go, so the rate holds on
    /// average however coarse the timer (a QP's timer ticks in jiffies).
    pub fn wait_us(&self, p: &Params, now: u64, burst_us: u64) -> u64 {
        if !self.limited(p) {
            return 0;
        }
        let horizon = now.saturating_add(burst_us).saturating_mul(1000);
        self.next_ns.saturating_sub(horizon).div_ceil(1000)
    }

    /// A packet of `bytes` left at `now`: the pacing clock moves on by its
    /// time at the current rate, and the byte counter counts it.
    pub fn sent(&mut self, p: &Params, bytes: u64, now: u64) {
        self.advance(p, now);
        let now_ns = now.saturating_mul(1000);
        if self.limited(p) && self.rc > 0 {
            // bits / (kbit/s) = ms; times 10^6 for ns.
            let cost = bytes.saturating_mul(8_000_000) / self.rc;
            // A packet sent a little late (a timer's granularity) does
            // not push the schedule back: lateness up to `CATCH_UP_NS`
            // is made up by the packets after it.
            let base = self.next_ns.max(now_ns.saturating_sub(CATCH_UP_NS));
            self.next_ns = base.saturating_add(cost);
        } else {
            self.next_ns = now_ns;
        }
        if self.cut_at.is_some() && p.byte_reset > 0 {
            self.bytes = self.bytes.saturating_add(bytes);
            let mut stages = 0;
            while self.bytes >= p.byte_reset && self.rc < p.line_kbps {
                if stages == STEPS_MAX {
                    // A byte count shrunk under a large backlog: the rest
                    // is forgiven.
                    self.bytes %= p.byte_reset;
                    break;
                }
                self.bytes -= p.byte_reset;
                self.bc = self.bc.saturating_add(1);
                self.increase(p);
                stages += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINE: u64 = 1_000_000; // 1 Gbit/s

    fn p() -> Params {
        Params::new(LINE)
    }

    #[test]
    fn a_fresh_qp_is_not_paced() {
        let p = p();
        let mut r = Rate::new(&p);
        assert!(!r.limited(&p));
        assert_eq!(r.wait_us(&p, 5, 0), 0);
        r.sent(&p, 1 << 20, 10);
        assert_eq!(r.wait_us(&p, 10, 0), 0);
        assert_eq!(r.rate_kbps(), LINE);
    }

    #[test]
    fn the_first_cnp_halves_the_rate() {
        let p = p();
        let mut r = Rate::new(&p);
        assert_eq!(r.on_cnp(&p, 100), Cnp::Handled);
        assert_eq!(r.rate_kbps(), LINE / 2);
        assert_eq!(r.target_kbps(), LINE);
        assert!(r.limited(&p));
    }

    #[test]
    fn cnps_within_the_decrease_period_are_ignored() {
        let p = p();
        let mut r = Rate::new(&p);
        assert_eq!(r.on_cnp(&p, 1000), Cnp::Handled);
        let after_one = r.rate_kbps();
        assert_eq!(r.on_cnp(&p, 1010), Cnp::Ignored);
        assert_eq!(r.on_cnp(&p, 1049), Cnp::Ignored);
        assert_eq!(r.rate_kbps(), after_one);
        assert_eq!(r.on_cnp(&p, 1050), Cnp::Handled);
        assert!(r.rate_kbps() < after_one);
    }

    #[test]
    fn steady_cnps_drive_the_rate_to_the_floor_and_no_lower() {
        let p = p();
        let mut r = Rate::new(&p);
        let mut last = r.rate_kbps();
        for i in 0..200u64 {
            r.on_cnp(&p, 1000 + i * 50);
            assert!(r.rate_kbps() <= last);
            assert!(r.rate_kbps() >= p.min_kbps);
            last = r.rate_kbps();
        }
        assert_eq!(r.rate_kbps(), p.min_kbps);
    }

    #[test]
    fn alpha_decays_without_cnps() {
        let p = p();
        let mut r = Rate::new(&p);
        r.on_cnp(&p, 0);
        assert_eq!(r.alpha(), ALPHA_ONE);
        r.advance(&p, 55 * 100);
        let a = r.alpha();
        assert!(a < ALPHA_ONE && a > ALPHA_ONE / 2, "{a}");
        r.advance(&p, 55 * 100_000);
        assert_eq!(r.alpha(), 0);
    }

    #[test]
    fn the_timer_recovers_the_rate_to_the_line() {
        let p = p();
        let mut r = Rate::new(&p);
        r.on_cnp(&p, 0);
        let cut = r.rate_kbps();
        // Fast recovery: five stages halve the gap to the target each time.
        r.advance(&p, 300 * 5);
        let gap = LINE - r.rate_kbps();
        assert!(gap <= (LINE - cut) / 32 + 1, "gap {gap}");
        // Additive and then hyper increase reach the line.
        r.advance(&p, 300 * 4000);
        assert_eq!(r.rate_kbps(), LINE);
        assert!(!r.limited(&p));
    }

    #[test]
    fn bytes_sent_also_raise_the_rate() {
        let p = Params {
            increase_period_us: 0,
            ..p()
        };
        let mut r = Rate::new(&p);
        r.on_cnp(&p, 0);
        let cut = r.rate_kbps();
        r.sent(&p, p.byte_reset * 3, 1);
        assert!(r.rate_kbps() > cut);
    }

    #[test]
    fn pacing_spaces_packets_at_the_current_rate() {
        let p = Params {
            increase_period_us: 0,
            byte_reset: u64::MAX,
            ..p()
        };
        let mut r = Rate::new(&p);
        r.on_cnp(&p, 0);
        let rate = r.rate_kbps(); // 500 Mbit/s
        let mut now = 0u64;
        let pkt = 1024u64;
        for _ in 0..1000 {
            now += r.wait_us(&p, now, 0);
            r.sent(&p, pkt, now);
        }
        // 1000 packets of 1 KiB at `rate`: 8,192,000 bits.
        let want = 1000 * pkt * 8_000 / rate;
        assert!(
            now + 20 >= want && now <= want + 20,
            "now {now}, want {want}"
        );
    }

    #[test]
    fn a_coarse_timer_keeps_the_rate_on_average() {
        let p = Params {
            increase_period_us: 0,
            byte_reset: u64::MAX,
            ..p()
        };
        let mut r = Rate::new(&p);
        for t in [0, 100, 200, 300] {
            r.on_cnp(&p, t);
        }
        let rate = r.rate_kbps();
        assert!(rate < LINE / 8, "{rate}");
        // The sender only wakes on 4 ms ticks and sends while allowed.
        let (tick, pkt) = (4_000u64, 1082u64);
        let (mut now, mut bytes, mut most) = (1_000u64, 0u64, 0u64);
        let start = now;
        while now < start + 1_000_000 {
            let mut burst = 0;
            while r.wait_us(&p, now, tick) == 0 {
                r.sent(&p, pkt, now);
                bytes += pkt;
                burst += pkt;
            }
            most = most.max(burst);
            now += tick;
        }
        // One second's bytes at `rate`, within one burst.
        let want = rate * 1000 / 8;
        let allow = rate * tick / 8_000 + pkt;
        assert!(bytes.abs_diff(want) <= allow, "{bytes} vs {want}");
        // No wake-up sends more than a tick's worth and a packet.
        assert!(most <= allow + pkt, "{most} vs {allow}");
    }

    #[test]
    fn cnps_further_apart_than_the_alpha_period_still_cut() {
        // Two guests: a CNP every 600 us, more than ten alpha periods.
        // The first CNPs halve the rate while alpha is near 1; once alpha
        // has settled (after 100 ms), each CNP must still cut more than
        // the two stages of fast recovery between them give back.
        let p = p();
        let mut r = Rate::new(&p);
        let mut now = 0;
        let mut settled = None;
        while now < 500_000 {
            r.on_cnp(&p, now);
            now += 600;
            if now >= 100_000 && settled.is_none() {
                settled = Some(r.rate_kbps());
            }
        }
        let settled = settled.unwrap();
        assert!(r.alpha() > 0, "alpha {}", r.alpha());
        assert!(
            r.rate_kbps() < settled / 4,
            "{} after 500 ms, {settled} after 100 ms",
            r.rate_kbps()
        );
    }

    #[derive(Clone, Debug)]
    enum Ev {
        Cnp(u64),
        Sent(u64, u64),
        Tick(u64),
    }

    #[test]
    fn the_closed_form_decay_agrees_with_the_steps() {
        // g = 1/2^12 over 5,000 periods: (1 - g)^k = e^-1.22 = 0.295.
        let f = decay_factor(12, 5_000) as f64 / (1u64 << FACTOR_SHIFT) as f64;
        assert!((f - 0.2951).abs() < 0.001, "{f}");
        assert_eq!(decay_factor(8, 0), 1 << FACTOR_SHIFT);
    }

    /// A byte count set to 1 under a large backlog, and a large gain over a
    /// long gap, take at most `STEPS_MAX` steps a call (this would take
    /// 2^32 byte stages and 2^20 decay steps one at a time).
    #[test]
    fn a_retuned_machine_takes_bounded_steps() {
        let mut k = Knobs::DEFAULT;
        k.threshold = u32::MAX;
        k.byte_reset = u32::MAX;
        let p = Params::tuned(LINE, &k);
        let mut r = Rate::new(&p);
        r.on_cnp(&p, 1);
        r.sent(&p, u64::from(u32::MAX) - 1, 2);
        k.byte_reset = 1;
        k.g_shift = 16;
        k.alpha_period_us = 1;
        let p = Params::tuned(LINE, &k);
        r.sent(&p, 1, 3);
        assert!(r.bc as u64 <= STEPS_MAX, "{}", r.bc);
        let a = r.alpha();
        r.advance(&p, 3 + 500_000);
        assert!(r.alpha() < a);
    }

    /// A period that was 0 owes nothing when it is set again.
    #[test]
    fn a_period_off_then_on_owes_no_stages() {
        let mut k = Knobs::DEFAULT;
        k.time_reset_us = 0;
        let p0 = Params::tuned(LINE, &k);
        let mut r = Rate::new(&p0);
        r.on_cnp(&p0, 10);
        let cut = r.rate_kbps();
        r.advance(&p0, 10_000_000);
        assert_eq!(r.rate_kbps(), cut);
        let p = Params::new(LINE);
        r.advance(&p, 10_000_100);
        assert_eq!(
            r.rate_kbps(),
            cut,
            "no stage is due 100 us after the timer came back"
        );
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            (0u64..500).prop_map(Ev::Cnp),
            (0u64..5000, 1u64..65536).prop_map(|(d, b)| Ev::Sent(d, b)),
            (0u64..100_000).prop_map(Ev::Tick),
        ]
    }

    #[test]
    fn the_defaults_are_the_papers() {
        let p = Params::new(LINE);
        assert_eq!(
            (
                p.min_kbps,
                p.ai_kbps,
                p.hai_kbps,
                p.g_shift,
                p.alpha_period_us
            ),
            (1_000, 5_000, 50_000, 8, 55)
        );
        assert_eq!(
            (
                p.increase_period_us,
                p.byte_reset,
                p.threshold,
                p.decrease_period_us
            ),
            (300, 10 << 20, 5, 50)
        );
    }

    fn knobs() -> impl Strategy<Value = Knobs> {
        let any = || {
            prop_oneof![
                Just(0u32),
                Just(1u32),
                Just(u32::MAX),
                any::<u32>(),
                0u32..100_000
            ]
        };
        (
            any(),
            any(),
            any(),
            any(),
            any(),
            any(),
            any(),
            any(),
            any(),
        )
            .prop_map(|(a, b, c, d, e, f, g, h, i)| Knobs {
                time_reset_us: a,
                ai_rate_kbps: b,
                hai_rate_kbps: c,
                min_rate_kbps: d,
                byte_reset: e,
                threshold: f,
                g_shift: g,
                alpha_period_us: h,
                reduce_period_us: i,
            })
    }

    proptest! {
        /// Whatever an administrator writes, the machine neither overflows
        /// (the host tests build with overflow checks) nor leaves its
        /// bounds.
        #[test]
        fn any_tuning_keeps_the_arithmetic_sound(
            ks in proptest::collection::vec(knobs(), 1..4),
            evs in proptest::collection::vec(ev(), 1..200),
        ) {
            // The tunables may change between any two calls.
            let mut r = Rate::new(&Params::tuned(LINE, &ks[0]));
            let mut now = 0u64;
            for (i, e) in evs.into_iter().enumerate() {
                let p = Params::tuned(LINE, &ks[i % ks.len()]);
                prop_assert!((1..=16).contains(&p.g_shift));
                prop_assert!(p.min_kbps >= 1 && p.min_kbps <= LINE);
                match e {
                    Ev::Cnp(d) => { now += d; r.on_cnp(&p, now); }
                    Ev::Sent(d, b) => { now += d; r.sent(&p, b, now); }
                    Ev::Tick(d) => { now += d; r.advance(&p, now); }
                }
                // A floor raised after a cut applies from the next cut or stage.
                prop_assert!(r.rate_kbps() >= 1 && r.rate_kbps() <= p.line_kbps);
                prop_assert!(r.alpha() <= ALPHA_ONE);
                // The sends here do not wait their turn, so the schedule
                // runs ahead without bound; asking must still not overflow.
                let _ = r.wait_us(&p, now, 1000);
            }
        }

        #[test]
        fn rates_stay_between_the_floor_and_the_line(evs in proptest::collection::vec(ev(), 1..300)) {
            let p = p();
            let mut r = Rate::new(&p);
            let mut now = 0u64;
            for e in evs {
                match e {
                    Ev::Cnp(d) => { now += d; r.on_cnp(&p, now); }
                    Ev::Sent(d, b) => { now += d; r.sent(&p, b, now); }
                    Ev::Tick(d) => { now += d; r.advance(&p, now); }
                }
                prop_assert!(r.rate_kbps() >= p.min_kbps && r.rate_kbps() <= p.line_kbps);
                prop_assert!(r.target_kbps() <= p.line_kbps);
                prop_assert!(r.alpha() <= ALPHA_ONE);
            }
        }
    }
}
