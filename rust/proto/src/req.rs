// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The RC, XRC and UC requester, with its completer, as a pure state
//! machine.
//!
//! [`Requester`] decides what a connected QP's send queue puts on the wire
//! and what the answers do to it: PSN assignment, the send window, read
//! pieces and read credits, ACK requests, go-back-N after a sequence NAK,
//! a gap in read responses or a timeout, the retry and RNR retry counts,
//! and the in-order completion of work requests. Everything the kernel
//! owns (the rings, memory, packet buffers, the timer, the device's read
//! credit pool) is reached through the [`Io`] trait, and time is an
//! argument: nothing here reads a clock.
//!
//! # In the driver
//!
//! `drivers/infiniband/sw/roxe/qp/req.rs` (`SendIo`) is the [`Io`] the
//! kernel runs it with: the doorbell calls [`Requester::send_pending`],
//! the receive hook [`Requester::on_response`] (`qp/comp.rs`), the QP
//! timer [`Requester::on_timer`], and `modify` the `set_*` methods, which
//! take the fields `SQ_PSN`, `RETRY_CNT`, `RNR_RETRY`, `TIMEOUT`,
//! `MAX_QP_RD_ATOMIC` and the path MTU. The doorbell's checks end in
//! [`Requester::set_checked`]; the move to ERR in [`Requester::flush`],
//! the move to RESET in [`Requester::reset`].
//!
//! What stays in the driver: reading and checking WQEs (`Io::wqe`: opcode,
//! length, SGEs, the atomic and FLUSH argument checks), building and
//! sending packets from a [`Segment`] (`Io::transmit`) and whole datagrams
//! (`Io::datagram`), copying response data into the WQE's buffers
//! (`Io::scatter`), completion queue entries and flushing (`Io::complete`,
//! `Io::fatal`), the timer, the device's read credit pool, local memory
//! operations, the QP's rate (`Io::hold`) and the counters (`Io::event`).
//!
//! The path MTU ([`Requester::set_mtu`]) cuts messages and places read
//! responses; change it only with nothing outstanding.
//!
//! # Where it departed from the driver's own requester
//!
//! Until 2026-12-05 the driver had its own copy of these rules. The link
//! tests (or a reading) showed four of its behaviours to be wrong, and the
//! driver lost them when it moved onto this machine:
//!
//! 1. A read response or atomic acknowledge acknowledges the requests
//!    before it only if its PSN is one still awaited (`una..npsn`). The
//!    driver's `ack_before_read` ran first, for any response, so a
//!    duplicated or late response completed the SEND or WRITE queued after
//!    the read as if it had been acknowledged, even when it was lost.
//! 2. A NAK or RNR NAK for a message still being sent (its first packets
//!    out, the window stopping the rest) is acted on. The driver tested
//!    `sq_sent == sq_consumer`, which holds for such a message, and dropped
//!    the NAK as unexpected: the QP then timed out to `RETRY_EXC_ERR`.
//! 3. A WQE that failed locally behind others is not sent again, and only
//!    that WQE fails once the ones before it complete. The driver kept
//!    trying to send it (with new PSNs for packets it had sent before the
//!    failure), and after a go-back, which sets `sq_sent` back to
//!    `sq_consumer`, failed the oldest WQE with the blocked one's status.
//! 4. A WQE's operation, length and packet count are read once, when its
//!    first packet goes out, and a resumed WQE keeps them. The driver read
//!    them from the ring again on each resumption, so a WQE rewritten by
//!    user space mid-message changed packet sizes under a fixed PSN span.

use core::ops::DerefMut;

use super::aeth::{NakCode, Syndrome};
use super::headers::Packet;
use super::opcode::{Opcode, Operation, Position, Transport};
use super::psn::Psn;
pub use super::responder::ScatterError;
use super::seg;
use super::wr::{self, SendOp, WcStatus};

/// PSNs an RC requester keeps unacknowledged before it waits; it asks for
/// an ACK every quarter window ([`ACK_EVERY`] packets at this size). The
/// driver uses this value (`qp/req.rs`).
///
/// Virtual links drop long bursts: between two QEMU guests the receiving
/// QEMU's host UDP socket holds about 90 datagrams (`rmem_default`), and
/// what its guest has not taken by then is lost (`UdpRcvbufErrors`), each
/// loss a go-back. With 256, a 1 MiB RDMA WRITE lost 52 to 113 packets per
/// 20 writes; with 128, write and send still lost some on the bench
/// kernel; with 64, none, and no cell of `tests/guest/bw-probe.sh` was
/// slower (Documentation/bench.md, "The send window"). rxe keeps 128 PSNs
/// and at most 64 packets queued per QP.
pub const WINDOW: u32 = 64;
/// At the driver's window, packets between ACK requests (besides the one at
/// the end of each message): a quarter window. At half a window (32) a busy
/// receiver, such as `ib_send_bw`'s server polling its CQ on one vCPU, sent
/// its ACKs late enough to shut the window: `ib_send_bw` 64K moved 7.2 to
/// 11.2 MB/s in four runs of `tests/guest/bw-probe.sh`, and 10.6 to 16.7 at
/// a quarter, with writes and reads unchanged and no datagram lost.
pub const ACK_EVERY: u32 = WINDOW / 4;
/// The least a QP's congestion window falls to after losses, in packets:
/// at a quarter window, an ACK request every 2 packets.
pub const MIN_CWND: u32 = 8;

/// The most bytes an RC requester keeps unacknowledged: [`WINDOW`] packets
/// up to a 2048-byte path MTU, 32 at 4096. At netdev MTU 9000 (RoCE MTU
/// 4096) a window of 64 packets moved `ib_write_bw` 1M at 20.9 MB/s (range
/// 19.5 to 51.1 over three rounds) and `ib_send_bw` 1M at 7.2; at 32,
/// 45.3 (43.8 to 47.2) and 15.2.
pub const WINDOW_BYTES: u32 = 128 * 1024;

/// The send window at path MTU `mtu`: [`WINDOW`], fewer where
/// [`WINDOW_BYTES`] holds fewer packets, at least 4.
pub const fn window(mtu: u32) -> u32 {
    match WINDOW_BYTES.checked_div(mtu) {
        Some(n) if n < 4 => 4,
        Some(n) if n < WINDOW => n,
        _ => WINDOW,
    }
}

/// Packets between ACK requests at path MTU `mtu`: a quarter window.
pub const fn ack_every(mtu: u32) -> u32 {
    window(mtu) / 4
}
/// Read response packets one requester may have asked for and not yet
/// received, and the largest piece one read request asks for.
///
/// The responders answer each request at once, so what a requester asks
/// for arrives as one burst, and the bursts of several QPs reading at once
/// land together. A tail lost from a burst is found only by the retry
/// timeout: at 128, `ib_read_bw` 4K and 64K on the bench kernel timed out
/// 22 and 77 times in a run (the host dropped 6,220 datagrams), at 64
/// never, and moved 4 to 10 times as much.
pub const READ_WINDOW: u32 = 64;
/// The most response bytes one requester may have asked for and not yet
/// received: 64 packets at a 1024-byte path MTU. The host socket that
/// bounds a burst counts bytes (about 208 KiB of buffer, headers
/// included), so at 4096 bytes a packet 64 packets overflowed it: reads at
/// netdev MTU 9000 moved 1.7 to 2.0 MB/s, a retry timeout per burst.
pub const READ_WINDOW_BYTES: u32 = 64 * 1024;

/// Response packets one requester may have asked for and not yet received
/// at path MTU `mtu`: [`READ_WINDOW`], fewer where [`READ_WINDOW_BYTES`]
/// holds fewer packets, at least 1.
pub const fn read_window(mtu: u32) -> u32 {
    match READ_WINDOW_BYTES.checked_div(mtu) {
        Some(0) => 1,
        Some(n) if n < READ_WINDOW => n,
        _ => READ_WINDOW,
    }
}
/// Read response packets a responder sends for one request, at most: a
/// requester that asks for more asks again from where they stop.
pub const RESPONSE_BURST: u32 = 256;
/// Packets one call of [`Requester::send_pending`] (the driver's
/// `send_pending`) sends before it leaves the rest to the timer.
pub const BUDGET: u32 = 256;
/// How long (ms) a read may wait for read credits, holding none, before it
/// overdraws the pool: other QPs' reads hold it, perhaps to peers that
/// never answer, for up to `retry_cnt + 1` timeouts of a minute each
/// (forever with `timeout` 0). Far longer than a burst takes to drain, so
/// it only matters when QPs hog the pool.
pub const CREDIT_STARVED_MS: i64 = 200;
/// The `rnr_retry` value that means "retry forever".
pub const RNR_RETRY_FOREVER: u8 = 7;
/// The longest message (2^31 bytes).
pub const MAX_MSG: u32 = 1 << 31;

/// The local ACK timeout in milliseconds for the IBTA `timeout` code
/// (4.096 us << `timeout`), at least 10 ms (so a slow virtual machine does
/// not retry needlessly) and at most a minute, or `None` for code 0, which
/// the standard makes infinite. The driver's retry timer uses it.
pub fn timeout_ms(timeout: u8) -> Option<u32> {
    let t = timeout.min(31);
    if t == 0 {
        return None;
    }
    let ms = (4096u64 << t) / 1_000_000;
    // CAST: clamped to a minute.
    Some(ms.clamp(10, 60_000) as u32)
}

/// The requester's settings: the QP's attributes and the driver's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// RC, XRC or UC. (UD does not go through this machine.)
    pub transport: Transport,
    /// The path MTU messages are cut at, in bytes.
    pub mtu: u32,
    /// Reads and atomics the responder takes at once (`max_rd_atomic`).
    pub max_rd_atomic: u8,
    /// Retries after a timeout (`retry_cnt`).
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (`rnr_retry`; 7 is forever).
    pub rnr_retry: u8,
    /// The local ACK timeout code (`timeout`).
    pub timeout: u8,
    /// PSNs kept unacknowledged ([`WINDOW`]); at least 2.
    pub window: u32,
    /// Read response packets outstanding ([`READ_WINDOW`]); at least 1,
    /// at most `window`.
    pub read_window: u32,
    /// Packets per call ([`BUDGET`]); at least 1.
    pub budget: u32,
    /// [`CREDIT_STARVED_MS`].
    pub credit_starved_ms: i64,
}

impl Config {
    /// The driver's settings for `transport` at path MTU `mtu`, with the
    /// QP attributes at the values a QP leaves RESET with.
    pub const fn new(transport: Transport, mtu: u32) -> Config {
        Config {
            transport,
            mtu,
            max_rd_atomic: 1,
            retry_cnt: 7,
            rnr_retry: 7,
            timeout: 14,
            window: window(mtu),
            read_window: read_window(mtu),
            budget: BUDGET,
            credit_starved_ms: CREDIT_STARVED_MS,
        }
    }
}

/// What the requester recorded of a WQE when its first packet went out.
///
/// The driver keeps one per SQ slot ([`Requester::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    first: Psn,
    last: Psn,
    len: u32,
    op: SendOp,
    waits: bool,
    /// A read's piece: the response packets one request asks for, fixed
    /// when the read starts, so a piece asked for again is a subset of the
    /// first request whatever the window does meanwhile.
    piece: u32,
}

impl Span {
    /// An unused slot.
    pub const EMPTY: Span = Span {
        first: Psn::ZERO,
        last: Psn::ZERO,
        len: 0,
        op: SendOp::Send,
        waits: false,
        piece: 0,
    };

    /// The WQE's first PSN.
    pub fn first(&self) -> Psn {
        self.first
    }

    /// The WQE's last PSN.
    pub fn last(&self) -> Psn {
        self.last
    }

    /// Whether it waits for a response (a read, an atomic, an Atomic
    /// Write or a FLUSH) rather than an ACK.
    pub fn waits(&self) -> bool {
        self.waits
    }
}

/// A send WQE as the driver read it from the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wqe {
    /// The opcode, or `None` if it names no operation.
    pub op: Option<SendOp>,
    /// The message length, or the local error the WQE fails with (its
    /// SGEs or inline data do not fit, the message is over 2^31 bytes, an
    /// atomic is not 8 aligned bytes, a FLUSH's arguments are bad, the QP
    /// has no path): `msg_len` and the checks of `send_connected` and
    /// `send_flush`. For a FLUSH, the length of the range.
    pub len: Result<u32, WcStatus>,
    /// `IBV_SEND_FENCE`.
    pub fence: bool,
}

/// One packet to build and send: which WQE, which part of it, and the
/// transport fields the machine chose. The driver adds the rest from the
/// WQE (addresses, keys, immediate data, atomic arguments, the solicited
/// bit on a message's last packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The SQ index of the WQE.
    pub wqe: u32,
    /// Its operation.
    pub op: SendOp,
    /// The packet's opcode.
    pub opcode: Opcode,
    /// The packet's PSN.
    pub psn: Psn,
    /// Where in the message the payload (or a read request's piece)
    /// starts.
    pub offset: u32,
    /// Payload bytes; for a read request the piece's DMA length; for a
    /// FLUSH the range's; 0 for an atomic.
    pub len: u32,
    /// The whole message's length (an RDMA WRITE's RETH DMA length).
    pub msg_len: u32,
    /// The BTH AckReq bit.
    pub ack_req: bool,
    /// A FLUSH that takes rxe's ICRC (`Icrc::finish_rxe_flush`).
    pub rxe_flush_icrc: bool,
}

impl Segment {
    /// The packet's place in its message.
    pub fn position(&self) -> Position {
        self.opcode.position()
    }
}

/// A work completion for the send queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The SQ index of the WQE; always the oldest.
    pub wqe: u32,
    /// Its operation.
    pub op: SendOp,
    /// The status.
    pub status: WcStatus,
    /// Bytes transferred (the message length; 8 for an atomic).
    pub byte_len: u32,
}

/// Why a response was not taken; the driver counts each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    /// A response to a QP that is not reliable, or one of another
    /// transport than the QP's.
    Transport,
    /// The requester stopped (an error, a flush).
    State,
    /// Out of sequence: a duplicate, a gap, a NAK outside the window.
    Psn,
    /// A response nothing waits for.
    Unexpected,
    /// A read response whose size is not what the path MTU cuts.
    Length,
    /// A response whose data lands in memory paged on demand that is not
    /// mapped: a fault was asked for, and the requester asks again from
    /// the first response missing once a short wait is over.
    NotPresent,
}

/// What the requester reports for the driver to count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The retry timer went off with work unacknowledged.
    Timeout,
    /// A WQE failed with `RETRY_EXC_ERR`.
    RetryExceeded,
    /// A PSN sequence error NAK made the requester go back.
    NakSeq,
    /// An RNR NAK was acted on.
    RnrNak,
    /// A WQE failed with `RNR_RETRY_EXC_ERR`.
    RnrRetryExceeded,
    /// A gap in read responses made the requester ask again.
    ResponseGap,
    /// A message's data is in memory paged on demand that is not mapped
    /// yet: sending stopped until the fault is served.
    FaultWait,
    /// A read starved of credits overdrew the device's pool.
    CreditOverdraft,
}

/// Why sending a WQE stopped at the packet it was building.
enum Halt {
    /// The WQE fails with this status.
    Fail(WcStatus),
    /// Its data is not mapped yet (memory paged on demand): nothing was
    /// sent for this packet, and it goes once the memory is in.
    Fault,
}

impl From<WcStatus> for Halt {
    fn from(s: WcStatus) -> Self {
        Halt::Fail(s)
    }
}

impl From<ScatterError> for Halt {
    fn from(e: ScatterError) -> Self {
        match e {
            ScatterError::Failed(s) => Halt::Fail(s),
            ScatterError::NotPresent => Halt::Fault,
        }
    }
}

/// The kernel side of the requester.
pub trait Io {
    /// How many WQEs the ring holds past `consumer` (producer minus
    /// consumer), or `None` if user space corrupted the producer index.
    fn queued(&mut self, consumer: u32) -> Option<u32>;

    /// The WQE at SQ index `idx`, read (again) from the ring.
    fn wqe(&mut self, idx: u32) -> Wqe;

    /// Carries out local memory operation `op` of WQE `idx` (invalidate,
    /// fast registration, memory window bind).
    fn local_op(&mut self, idx: u32, op: SendOp) -> Result<(), WcStatus>;

    /// Builds and sends one packet. `Err` if the payload could not be
    /// gathered from the WQE's buffers: `Failed` fails the WQE with its
    /// status, `NotPresent` (memory paged on demand, not mapped yet; a
    /// fault was asked for) sends nothing and tries this packet again
    /// after a short wait. A packet lost on the way is `Ok`, as on a wire.
    fn transmit(&mut self, seg: &Segment) -> Result<(), ScatterError>;

    /// Sends WQE `idx` of a UD or raw packet QP, whose operation is `op`,
    /// as one datagram with PSN `psn`. `Ok(Some(len))` once it is sent or
    /// lost on the way (it completes with `len`), `Ok(None)` if it cannot
    /// be sent now (the QP has no netdev; nothing is armed), `Err` as for
    /// [`Io::transmit`].
    fn datagram(&mut self, idx: u32, op: SendOp, psn: Psn) -> Result<Option<u32>, ScatterError>;

    /// Copies response data into WQE `idx`'s buffers at message offset
    /// `off` (a read's data, an atomic's original value). `NotPresent`
    /// copies nothing.
    fn scatter(&mut self, idx: u32, off: u32, data: &[u8]) -> Result<(), ScatterError>;

    /// The QP's rate (congestion control): microseconds until its next
    /// packet may go, 0 for now. Asked before each packet of a connected
    /// QP's message; the timer sends once the wait is over.
    fn hold(&mut self) -> u32 {
        0
    }

    /// A UD QP's rate toward the destination of WQE `idx` (congestion
    /// control per destination): microseconds until that datagram may go,
    /// 0 for now. Asked before each datagram; the timer sends once the
    /// wait is over, and the datagrams after it wait their turn.
    fn hold_datagram(&mut self, idx: u32) -> u32 {
        let _ = idx;
        0
    }

    /// Counts `e`.
    fn event(&mut self, e: Event) {
        let _ = e;
    }

    /// Completes the oldest WQE and retires it (its CQE if signaled or
    /// failed; the consumer index moves on).
    fn complete(&mut self, c: &Completion);

    /// After a completion with an error: move the QP to ERR and flush the
    /// rest of its work, the send queue from SQ index `from` on. Returns
    /// the consumer index after the flush. The requester has given back its
    /// read credits and stops until [`Requester::reset`].
    fn fatal(&mut self, from: u32) -> u32;

    /// (Re)arms the QP's one timer to fire after `ms` milliseconds,
    /// replacing any expiry it had; 0 fires as soon as possible.
    fn arm_timer(&mut self, ms: u32);

    /// Takes `n` credits from the device's read credit pool, all or none.
    fn take_credits(&mut self, n: u32) -> bool;

    /// Takes `n` credits the pool may not have, down to its floor.
    fn overdraw_credits(&mut self, n: u32) -> bool;

    /// Gives back `n` credits.
    fn give_back_credits(&mut self, n: u32);
}

/// A WQE that failed locally behind others still in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Blocked {
    wqe: u32,
    op: SendOp,
    status: WcStatus,
}

/// An RC, XRC or UC requester and completer.
///
/// `S` holds one [`Span`] per send queue slot (a power of two, as the ring
/// has), indexed by SQ index modulo its length: the driver's `KVVec`, a
/// `Vec` or a boxed slice.
pub struct Requester<S> {
    cfg: Config,
    spans: S,
    /// WQEs past `consumer` that the doorbell checked.
    checked: u32,
    /// The oldest WQE not completed.
    consumer: u32,
    /// The next WQE to send; WQEs `consumer..sent` are wholly sent.
    sent: u32,
    /// The next packet of WQE `sent` (counted as sent only once all are).
    pkt: u32,
    /// The next PSN to send.
    npsn: Psn,
    /// The oldest PSN not acknowledged.
    una: Psn,
    /// The budget ran out with work left; the timer continues.
    kick: bool,
    /// The next read response expected, counted from the read's first PSN.
    read_next: u32,
    blocked: Option<Blocked>,
    retry_left: u8,
    rnr_left: u8,
    /// Waiting out an RNR NAK's delay.
    rnr_wait: bool,
    /// Reads and atomics sent and not answered.
    reads_out: u32,
    /// Went back after a gap and has heard of no progress since.
    retrying: bool,
    /// Read credits held.
    read_held: u32,
    /// A read waits for credits.
    credit_wait: bool,
    /// When (ms) a read last found the pool short with no normal take since.
    credit_short_since: Option<i64>,
    flush_icrc_rxe: bool,
    flush_icrc_known: bool,
    /// Stopped by an error or a flush, until [`Requester::reset`].
    stopped: bool,
    /// The QP is in a state that sends ([`Requester::set_sending`]).
    sending: bool,
    /// A packet's data was not mapped; the timer tries again.
    fault_wait: bool,
    /// The QP's rate held the next packet back this many microseconds.
    pace_us: u32,
    /// When (ms) the requester last sent or heard of progress: the retry
    /// timeout counts from here, so calls that send nothing (a duplicate
    /// ACK, a doorbell with the window full) cannot put it off.
    active: i64,
    /// The time (ms) the current call was given.
    now: i64,
    /// The congestion window in packets: `cfg.window` until a loss, halved
    /// at each (at least [`MIN_CWND`]), one more for each window's worth
    /// acknowledged since. It bounds the send and the read window.
    cwnd: u32,
    /// Packets acknowledged towards the next step up of `cwnd`.
    cwnd_acked: u32,
    /// The PSN after the last one ever sent. After a go-back, PSNs before
    /// it are sent again up to the configured window whatever `cwnd` is:
    /// the responder may hold them all already and answers each duplicate
    /// with an ACK of its newest, which counts only once it is sent again.
    high: Psn,
}

fn waits_for_response(op: SendOp) -> bool {
    matches!(
        op,
        SendOp::RdmaRead | SendOp::CmpSwap | SendOp::FetchAdd | SendOp::AtomicWrite | SendOp::Flush
    )
}

fn wr_transport(t: Transport) -> wr::Transport {
    match t {
        Transport::Rc => wr::Transport::Rc,
        Transport::Uc => wr::Transport::Uc,
        Transport::Ud => wr::Transport::Ud,
        Transport::Xrc => wr::Transport::Xrc,
    }
}

impl<S: DerefMut<Target = [Span]>> Requester<S> {
    /// A requester with nothing sent, sending from PSN `sq_psn`. `spans`
    /// has one slot per send queue slot.
    pub fn new(cfg: Config, spans: S, sq_psn: Psn) -> Self {
        let mut r = Requester {
            cfg,
            spans,
            checked: 0,
            consumer: 0,
            sent: 0,
            pkt: 0,
            npsn: sq_psn,
            una: sq_psn,
            kick: false,
            read_next: 0,
            blocked: None,
            retry_left: cfg.retry_cnt,
            rnr_left: cfg.rnr_retry,
            rnr_wait: false,
            reads_out: 0,
            retrying: false,
            read_held: 0,
            credit_wait: false,
            credit_short_since: None,
            flush_icrc_rxe: false,
            flush_icrc_known: false,
            stopped: false,
            sending: true,
            fault_wait: false,
            pace_us: 0,
            active: 0,
            now: 0,
            cwnd: cfg.window,
            cwnd_acked: 0,
            high: sq_psn,
        };
        r.sanitise();
        r
    }

    fn sanitise(&mut self) {
        self.cfg.window = self.cfg.window.max(2);
        // A read piece must fit the window.
        self.cfg.read_window = self.cfg.read_window.clamp(1, self.cfg.window);
        self.cfg.budget = self.cfg.budget.max(1);
        self.cwnd = self.cfg.window;
        self.cwnd_acked = 0;
    }

    /// The send window in force: the configured one, or less after losses.
    fn win(&self) -> u32 {
        self.cfg.window.min(self.cwnd)
    }

    /// The read window in force, likewise.
    fn read_win(&self) -> u32 {
        self.cfg.read_window.min(self.cwnd)
    }

    /// A loss (a retry timeout, a sequence NAK, a gap in read responses):
    /// halves the congestion window. Each QP's window alone fits the wire,
    /// but several QPs' windows together can overflow a buffer on the way;
    /// backing off as TCP does lets them share it (Documentation/bench.md,
    /// "Several QPs on one link").
    fn congested(&mut self) {
        self.cwnd = (self.cwnd / 2).max(MIN_CWND).min(self.cfg.window);
        self.cwnd_acked = 0;
    }

    /// `n` more packets acknowledged: one step up of the congestion window
    /// for each window's worth, up to the configured window.
    fn grow(&mut self, n: u32) {
        // Kept close behind `npsn`, so the 24-bit comparison holds.
        self.note_high();
        if self.cwnd >= self.cfg.window {
            return;
        }
        self.cwnd_acked = self.cwnd_acked.saturating_add(n);
        while self.cwnd < self.cfg.window && self.cwnd_acked >= self.cwnd {
            self.cwnd_acked -= self.cwnd;
            self.cwnd += 1;
        }
    }

    fn note_high(&mut self) {
        if self.npsn.diff(self.high) > 0 {
            self.high = self.npsn;
        }
    }

    /// Whether the send window `window` is full: PSNs sent again after a
    /// go-back count against the configured window only.
    fn window_full(&self, window: u32) -> bool {
        let out = self.una.distance(self.npsn);
        out >= self.cfg.window || (out >= window && self.npsn.diff(self.high) >= 0)
    }

    /// The congestion window, in packets (for counters and tests).
    pub fn cwnd(&self) -> u32 {
        self.win()
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// `modify` with `SQ_PSN`: the next PSN, and the oldest unacknowledged.
    pub fn set_sq_psn(&mut self, psn: Psn) {
        self.npsn = psn;
        self.una = psn;
        self.high = psn;
    }

    /// `modify` with `RETRY_CNT`: the count and the retries left.
    pub fn set_retry_cnt(&mut self, n: u8) {
        self.cfg.retry_cnt = n;
        self.retry_left = n;
    }

    /// `modify` with `RNR_RETRY`: the count and the retries left.
    pub fn set_rnr_retry(&mut self, n: u8) {
        self.cfg.rnr_retry = n;
        self.rnr_left = n;
    }

    /// `modify` with `TIMEOUT`.
    pub fn set_timeout(&mut self, timeout: u8) {
        self.cfg.timeout = timeout;
    }

    /// `modify` with `PATH_MTU` (or a new route): the MTU new messages are
    /// cut at, and the windows of that MTU ([`window`], [`read_window`]).
    pub fn set_mtu(&mut self, mtu: u32) {
        if mtu != self.cfg.mtu {
            self.cfg.mtu = mtu;
            self.cfg.window = window(mtu);
            self.cfg.read_window = read_window(mtu);
            self.sanitise();
        }
    }

    /// Whether the QP is in a state that sends (RTS): outside it nothing
    /// is sent, while answers are still taken (SQD drains).
    pub fn set_sending(&mut self, on: bool) {
        self.sending = on;
    }

    /// The FLUSH ICRC flavour, for the driver's counters: whether FLUSH
    /// packets carry rxe's ICRC now.
    pub fn flush_icrc_rxe(&self) -> bool {
        self.flush_icrc_rxe
    }

    /// `modify` with `MAX_QP_RD_ATOMIC`.
    pub fn set_max_rd_atomic(&mut self, n: u8) {
        self.cfg.max_rd_atomic = n;
    }

    /// The doorbell checked the `n` WQEs past [`Requester::consumer`]; only
    /// those are sent.
    pub fn set_checked(&mut self, n: u32) {
        self.checked = n;
    }

    /// WQEs past the consumer that the doorbell checked.
    pub fn checked(&self) -> u32 {
        self.checked
    }

    /// The SQ index of the oldest WQE not completed.
    pub fn consumer(&self) -> u32 {
        self.consumer
    }

    /// The SQ index of the next WQE to send.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// The next PSN to send.
    pub fn npsn(&self) -> Psn {
        self.npsn
    }

    /// The oldest PSN not acknowledged.
    pub fn una(&self) -> Psn {
        self.una
    }

    /// Reads and atomics sent and not answered.
    pub fn reads_out(&self) -> u32 {
        self.reads_out
    }

    /// Read credits held.
    pub fn credits_held(&self) -> u32 {
        self.read_held
    }

    /// Whether it waits out an RNR NAK.
    pub fn rnr_waiting(&self) -> bool {
        self.rnr_wait
    }

    /// Whether an error or a flush stopped it.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Whether sent work waits for acknowledgement.
    pub fn outstanding(&self) -> bool {
        self.sent != self.consumer || self.pkt != 0
    }

    /// The span recorded for SQ index `idx`.
    pub fn span(&self, idx: u32) -> Span {
        let n = self.spans.len();
        if n == 0 {
            return Span::EMPTY;
        }
        // CAST: u32 to usize is lossless on every target roxe builds for.
        self.spans[idx as usize % n]
    }

    fn set_span(&mut self, idx: u32, s: Span) {
        let n = self.spans.len();
        if n != 0 {
            // CAST: as in `span`.
            self.spans[idx as usize % n] = s;
        }
    }

    /// Gives back every read credit held: the responses still coming no
    /// longer count (`QpState::release_reads`).
    pub fn release_credits(&mut self, io: &mut impl Io) {
        io.give_back_credits(core::mem::take(&mut self.read_held));
        self.credit_wait = false;
    }

    fn forget_progress(&mut self) {
        self.sent = self.consumer;
        self.pkt = 0;
        self.una = self.npsn;
        self.high = self.npsn;
        self.kick = false;
        self.fault_wait = false;
        self.pace_us = 0;
        self.credit_short_since = None;
        self.checked = 0;
        self.read_next = 0;
        self.blocked = None;
        self.rnr_wait = false;
        self.reads_out = 0;
        self.retrying = false;
    }

    /// The driver flushed the send queue up to SQ index `consumer` (the QP
    /// went to ERR): credits go back, progress is forgotten, and nothing
    /// more is sent until [`Requester::reset`] (`qp.rs` `flush`).
    pub fn flush(&mut self, consumer: u32, io: &mut impl Io) {
        self.release_credits(io);
        self.consumer = consumer;
        self.forget_progress();
        self.stopped = true;
    }

    /// The QP went to RESET with its send queue emptied up to `consumer`:
    /// as new, sending from PSN 0, with the settings kept.
    pub fn reset(&mut self, consumer: u32, io: &mut impl Io) {
        self.release_credits(io);
        self.consumer = consumer;
        self.npsn = Psn::ZERO;
        self.forget_progress();
        self.flush_icrc_rxe = false;
        self.flush_icrc_known = false;
        self.retry_left = self.cfg.retry_cnt;
        self.rnr_left = self.cfg.rnr_retry;
        self.stopped = false;
        self.cwnd = self.cfg.window;
        self.cwnd_acked = 0;
    }

    /// Retires the oldest WQE with `status` (`complete_send`).
    fn complete(&mut self, io: &mut impl Io, op: SendOp, status: WcStatus, byte_len: u32) {
        let c = Completion {
            wqe: self.consumer,
            op,
            status,
            byte_len,
        };
        self.consumer = self.consumer.wrapping_add(1);
        self.checked = self.checked.saturating_sub(1);
        io.complete(&c);
    }

    /// Fails the oldest WQE and stops (`fail`).
    fn fail(&mut self, io: &mut impl Io, op: SendOp, status: WcStatus) {
        self.complete(io, op, status, 0);
        self.release_credits(io);
        let consumer = io.fatal(self.consumer);
        self.flush(consumer, io);
    }

    /// Sends what the send queue holds, as far as the window, the read
    /// limits, the credits and the budget allow, and arms the timer for
    /// what is left: a kick when the budget ran out, a credit poll, or the
    /// retransmission timeout. `now` is a monotonic time in milliseconds.
    pub fn send_pending(&mut self, now: i64, io: &mut impl Io) {
        self.now = now;
        if self.stopped {
            return;
        }
        let mut budget = self.cfg.budget;
        self.send_loop(now, io, &mut budget);
        if self.stopped {
            return;
        }
        if budget != self.cfg.budget {
            self.active = now;
        }
        let pace_us = core::mem::take(&mut self.pace_us);
        if budget == 0 {
            self.kick = true;
            io.arm_timer(0);
        } else if pace_us != 0 {
            // Held back by the QP's rate: the timer sends the next packet.
            // The retry timeout is not armed meanwhile; each kick that
            // sends moves `active` on, and once nothing holds the QP back
            // it is armed again.
            self.kick = true;
            io.arm_timer(pace_us.div_ceil(1000));
        } else if core::mem::take(&mut self.fault_wait) {
            // The fault is under way: look again soon. (A fault that fails
            // makes the next look an error, so this ends.)
            self.kick = true;
            io.arm_timer(1);
        } else if core::mem::take(&mut self.credit_wait) && self.una == self.npsn {
            // Other QPs' reads hold the credits and nothing of this QP is
            // in flight to resume it: poll soon, spending no retry.
            self.kick = true;
            io.arm_timer(1);
        } else if self.cfg.transport.is_reliable() {
            self.arm_retry(io);
        }
    }

    /// Arms the retry timer while work waits for acknowledgement, to go
    /// off one timeout after `active`, however often this is called in
    /// between.
    fn arm_retry(&mut self, io: &mut impl Io) {
        if self.outstanding() && !self.rnr_wait && timeout_ms(self.cfg.timeout).is_some() {
            // This replaces a pending kick's expiry; the send it was for
            // has just run.
            self.kick = false;
            io.arm_timer(self.retry_due_in(self.now).unwrap_or(0));
        }
    }

    /// How long (ms) from `now` until the retry timeout is due, or `None`
    /// if it is due (or the timeout is infinite).
    fn retry_due_in(&self, now: i64) -> Option<u32> {
        let ms = timeout_ms(self.cfg.timeout)?;
        let left = self
            .active
            .saturating_add(i64::from(ms))
            .saturating_sub(now);
        // CAST: between 1 and `ms`.
        (left > 0).then(|| left.min(i64::from(ms)) as u32)
    }

    /// Whether the QP's rate holds its next packet back ([`Io::hold`]); the
    /// wait is kept for [`Requester::send_pending`] to arm the timer with.
    fn paced(&mut self, io: &mut impl Io) -> bool {
        let us = io.hold();
        if us != 0 {
            self.pace_us = us;
        }
        us != 0
    }

    fn send_loop(&mut self, now: i64, io: &mut impl Io, budget: &mut u32) {
        let reliable = self.cfg.transport.is_reliable();
        loop {
            // After an RNR NAK nothing is sent until the timer says so.
            if self.stopped || !self.sending || self.rnr_wait || *budget == 0 {
                return;
            }
            let Some(used) = io.queued(self.consumer) else {
                return;
            };
            let in_flight = self.sent.wrapping_sub(self.consumer);
            if in_flight >= used.min(self.checked) {
                return;
            }
            let idx = self.sent;
            if self.blocked.is_some_and(|b| b.wqe == idx) {
                // Departure 3: it fails once the WQEs before it are done.
                return;
            }
            let (op, w) = if self.pkt != 0 {
                // Departure 4: a WQE part-way out goes on as it started.
                (self.span(idx).op, None)
            } else {
                let w = io.wqe(idx);
                let t = wr_transport(self.cfg.transport);
                let Some(op) = w.op.filter(|o| o.allowed_on(t)) else {
                    if in_flight == 0 {
                        self.fail(io, SendOp::Send, WcStatus::LocQpOpErr);
                    }
                    return;
                };
                (op, Some(w))
            };
            if op.is_local() && w.is_some() {
                // Memory operations run once everything before them is
                // complete, and complete at once.
                if in_flight != 0 {
                    return;
                }
                match io.local_op(idx, op) {
                    Ok(()) => {
                        self.sent = self.sent.wrapping_add(1);
                        self.complete(io, op, WcStatus::Success, 0);
                        continue;
                    }
                    Err(status) => {
                        self.fail(io, op, status);
                        return;
                    }
                }
            }
            if self.cfg.transport == Transport::Ud {
                // A datagram: one packet, complete once sent, unless the
                // rate toward its destination holds it back.
                let us = io.hold_datagram(idx);
                if us != 0 {
                    self.pace_us = us;
                    return;
                }
                *budget -= 1;
                match io.datagram(idx, op, self.npsn) {
                    Ok(Some(len)) => {
                        self.npsn = self.npsn.next();
                        self.sent = self.sent.wrapping_add(1);
                        self.complete(io, op, WcStatus::Success, len);
                        continue;
                    }
                    Ok(None) => *budget += 1,
                    Err(ScatterError::NotPresent) => {
                        self.fault_wait = true;
                        io.event(Event::FaultWait);
                    }
                    Err(ScatterError::Failed(status)) => self.fail(io, op, status),
                }
                return;
            }
            if let (true, Some(w)) = (reliable && in_flight != 0, &w) {
                // IBV_SEND_FENCE: wait for outstanding reads and atomics.
                if self.reads_out != 0 && w.fence {
                    return;
                }
                // No more of them in flight than the responder takes.
                let limit = u32::from(self.cfg.max_rd_atomic).max(1);
                if waits_for_response(op) && self.reads_out >= limit {
                    return;
                }
            }
            match self.send_wqe(now, io, idx, w.as_ref(), op, budget) {
                Ok(Some(len)) => {
                    self.sent = self.sent.wrapping_add(1);
                    if !reliable {
                        // Unreliable: complete once sent.
                        self.complete(io, op, WcStatus::Success, len);
                    }
                }
                // Stopped part-way by the window, the credits, the rate or
                // the budget.
                Ok(None) => return,
                Err(Halt::Fault) => {
                    // Where it stopped, it goes on once the memory is in.
                    self.fault_wait = true;
                    io.event(Event::FaultWait);
                    return;
                }
                Err(Halt::Fail(status)) => {
                    self.pkt = 0;
                    if in_flight == 0 {
                        self.fail(io, op, status);
                    } else {
                        // Complete in order: it fails once the WQEs before
                        // it are done.
                        self.blocked = Some(Blocked {
                            wqe: idx,
                            op,
                            status,
                        });
                    }
                    return;
                }
            }
        }
    }

    /// Takes `n` read credits, or marks the requester as waiting for them.
    /// A requester that holds none and has found the pool short for
    /// `credit_starved_ms` overdraws it, and keeps doing so while the pool
    /// stays short.
    fn take_read_credits(&mut self, now: i64, io: &mut impl Io, n: u32) -> bool {
        if io.take_credits(n) {
            self.read_held += n;
            self.credit_short_since = None;
            return true;
        }
        let since = *self.credit_short_since.get_or_insert(now);
        if self.read_held == 0
            && now.saturating_sub(since) >= self.cfg.credit_starved_ms
            && io.overdraw_credits(n)
        {
            self.read_held += n;
            io.event(Event::CreditOverdraft);
            return true;
        }
        self.credit_wait = true;
        false
    }

    /// Sends (more of) WQE `idx` from packet `self.pkt` on: `w` is the WQE
    /// as read to start it, `None` to resume it. Returns the message length
    /// once every packet is out, or `None` when the window, the read
    /// limits, the credits or the budget stopped it part-way.
    fn send_wqe(
        &mut self,
        now: i64,
        io: &mut impl Io,
        idx: u32,
        w: Option<&Wqe>,
        op: SendOp,
        budget: &mut u32,
    ) -> Result<Option<u32>, Halt> {
        let reliable = self.cfg.transport.is_reliable();
        let (window, rw, mtu) = (self.win(), self.read_win(), self.cfg.mtu);
        let mut prepaid = false;
        let span = match w {
            // Departure 4: a resumed WQE keeps what it started with.
            None => self.span(idx),
            Some(w) if op == SendOp::Flush => return Ok(self.send_flush(io, idx, w, budget)?),
            Some(w) => {
                let wlen = w.len?;
                if wlen > MAX_MSG {
                    return Err(WcStatus::LocLenErr.into());
                }
                let n = if matches!(op, SendOp::CmpSwap | SendOp::FetchAdd) {
                    1
                } else {
                    seg::packet_count(wlen, mtu).ok_or(WcStatus::LocLenErr)?
                };
                let read = op == SendOp::RdmaRead;
                // A read sent again after a go-back asks in the pieces of
                // its first pass: the responder takes a request it has seen
                // only if it is part of one it answered. A new read asks in
                // pieces of the read window in force.
                let old = self.span(idx);
                let piece = if read
                    && self.npsn.diff(self.high) < 0
                    && old.first == self.npsn
                    && old.op == SendOp::RdmaRead
                    && old.piece != 0
                {
                    old.piece
                } else {
                    rw
                };
                // Nothing is recorded for a WQE that cannot start yet.
                let read_full = read
                    && self.una != self.npsn
                    && self.una.distance(self.npsn) + n.min(piece) > rw;
                if *budget == 0
                    || (reliable && self.window_full(window))
                    || read_full
                    || self.paced(io)
                {
                    return Ok(None);
                }
                if read && !self.take_read_credits(now, io, n.min(piece)) {
                    return Ok(None);
                }
                prepaid = read;
                let waits = waits_for_response(op);
                let s = Span {
                    first: self.npsn,
                    last: self.npsn.wrapping_add(n - 1),
                    len: wlen,
                    op,
                    waits,
                    piece,
                };
                self.set_span(idx, s);
                if waits {
                    self.reads_out += 1;
                }
                s
            }
        };
        let (op, len) = (span.op, span.len);
        let n = span.first.distance(span.last) + 1;
        let first = span.first;
        let piece_len = span.piece.max(1);
        while self.pkt < n {
            if *budget == 0 || (reliable && self.window_full(window)) || self.paced(io) {
                return Ok(None);
            }
            *budget -= 1;
            let i = self.pkt;
            // Below 2^31 + MTU: a message is at most 2^31 bytes.
            let off = i.saturating_mul(mtu);
            if matches!(op, SendOp::CmpSwap | SendOp::FetchAdd) {
                let opcode = seg::request_opcode(self.cfg.transport, op, Position::Only)
                    .ok_or(WcStatus::LocQpOpErr)?;
                let _ = io.transmit(&Segment {
                    wqe: idx,
                    op,
                    opcode,
                    psn: self.npsn,
                    offset: 0,
                    len: 0,
                    msg_len: len,
                    ack_req: true,
                    rxe_flush_icrc: false,
                });
                self.pkt = 1;
                self.npsn = self.npsn.next();
                continue;
            }
            if op == SendOp::RdmaRead {
                if i != 0 && i.checked_rem(piece_len) == Some(0) && self.una != self.npsn {
                    // The pieces of one read go one at a time: each is a
                    // request the responder keeps a resource for.
                    *budget += 1;
                    return Ok(None);
                }
                // Requests cover fixed `rw`-packet pieces, so one asked
                // again part-way is a subset of the one sent first.
                let piece = (n - i).min(piece_len - i % piece_len);
                if !core::mem::take(&mut prepaid) {
                    if self.una != self.npsn && self.una.distance(self.npsn) + piece > rw {
                        // Resumed by the responses.
                        *budget += 1;
                        return Ok(None);
                    }
                    if !self.take_read_credits(now, io, piece) {
                        *budget += 1;
                        return Ok(None);
                    }
                }
                let opcode = seg::request_opcode(self.cfg.transport, op, Position::Only)
                    .ok_or(WcStatus::LocQpOpErr)?;
                let _ = io.transmit(&Segment {
                    wqe: idx,
                    op,
                    opcode,
                    psn: first.wrapping_add(i),
                    offset: off,
                    len: len.saturating_sub(off).min(piece.saturating_mul(mtu)),
                    msg_len: len,
                    ack_req: true,
                    rxe_flush_icrc: false,
                });
                self.pkt += piece;
                self.npsn = first.wrapping_add(self.pkt);
                continue;
            }
            let pos = seg::position(i, n);
            let opcode =
                seg::request_opcode(self.cfg.transport, op, pos).ok_or(WcStatus::LocQpOpErr)?;
            // ACK requests at the end of each message and twice per window,
            // so the window keeps opening inside long messages.
            let ack_req =
                reliable && (pos.ends_message() || (i + 1).checked_rem(window / 4) == Some(0));
            let sent = io.transmit(&Segment {
                wqe: idx,
                op,
                opcode,
                psn: self.npsn,
                offset: off,
                len: len.saturating_sub(off).min(mtu),
                msg_len: len,
                ack_req,
                rxe_flush_icrc: false,
            });
            if let Err(e) = sent {
                if e == ScatterError::NotPresent && i == 0 && span.waits {
                    // Counted as started above; it starts again once its
                    // data is in.
                    self.reads_out = self.reads_out.saturating_sub(1);
                }
                return Err(e.into());
            }
            self.pkt += 1;
            self.npsn = self.npsn.next();
        }
        self.pkt = 0;
        Ok(Some(len))
    }

    /// A FLUSH: one packet, answered like a read.
    fn send_flush(
        &mut self,
        io: &mut impl Io,
        idx: u32,
        w: &Wqe,
        budget: &mut u32,
    ) -> Result<Option<u32>, WcStatus> {
        // RC only: XRC and UC have no FLUSH opcode.
        let opcode = seg::request_opcode(self.cfg.transport, SendOp::Flush, Position::Only)
            .ok_or(WcStatus::LocQpOpErr)?;
        let len = w.len?;
        if *budget == 0 || self.window_full(self.win()) {
            return Ok(None);
        }
        *budget -= 1;
        self.set_span(
            idx,
            Span {
                first: self.npsn,
                last: self.npsn,
                len: 0,
                op: SendOp::Flush,
                waits: true,
                piece: 1,
            },
        );
        self.reads_out += 1;
        let _ = io.transmit(&Segment {
            wqe: idx,
            op: SendOp::Flush,
            opcode,
            psn: self.npsn,
            offset: 0,
            len,
            msg_len: len,
            ack_req: true,
            rxe_flush_icrc: self.flush_icrc_rxe,
        });
        self.pkt = 0;
        self.npsn = self.npsn.next();
        Ok(Some(0))
    }

    /// Takes a response packet (RDMA READ response, ATOMIC ACKNOWLEDGE,
    /// ACKNOWLEDGE) addressed to this QP, whose ICRC, addresses and QP
    /// state the driver has checked. `now` is a monotonic time in
    /// milliseconds.
    pub fn on_response(
        &mut self,
        pkt: &Packet<'_>,
        now: i64,
        io: &mut impl Io,
    ) -> Result<(), Discard> {
        self.now = now;
        let t = self.cfg.transport;
        if !t.is_reliable() || pkt.opcode.transport() != t {
            return Err(Discard::Transport);
        }
        if self.stopped {
            return Err(Discard::State);
        }
        match pkt.opcode.operation() {
            Operation::RdmaReadResponse => self.read_response(pkt, now, io),
            Operation::AtomicAcknowledge => self.atomic_ack(pkt, now, io),
            _ => self.ack(pkt, now, io),
        }
    }

    /// A read response or atomic acknowledge at `psn` acknowledges every
    /// request before it, if `psn` is one still awaited (departure 1).
    fn ack_before_response(&mut self, psn: Psn, io: &mut impl Io) {
        if psn.in_range(self.una, self.npsn) {
            self.ack_up_to(io, psn.wrapping_sub(1));
        }
    }

    fn read_response(
        &mut self,
        pkt: &Packet<'_>,
        now: i64,
        io: &mut impl Io,
    ) -> Result<(), Discard> {
        let psn = pkt.bth.psn;
        self.ack_before_response(psn, io);
        if self.stopped {
            return Ok(());
        }
        // The oldest unfinished WQE must be a read whose range holds `psn`.
        if !self.outstanding() {
            return Err(Discard::Unexpected);
        }
        let idx = self.consumer;
        let s = self.span(idx);
        if !s.waits || !psn.in_range(s.first, s.last.next()) {
            return Err(Discard::Unexpected);
        }
        if psn.diff(self.npsn) >= 0 {
            // Not asked for (any more): after a go-back, a read waiting for
            // credits has not asked again, and what still arrives from
            // before must not complete it.
            return Err(Discard::Unexpected);
        }
        let i = s.first.distance(psn);
        if i != self.read_next {
            // A gap: ask again from the first response missing.
            if i > self.read_next && self.go_back_once(now, io) {
                self.congested();
                io.event(Event::ResponseGap);
            }
            return Err(Discard::Psn);
        }
        // A Last or Only at the read's last PSN, a First or Only at its
        // first; in between anything (a read asked for in pieces).
        let pos = pkt.opcode.position();
        if (psn == s.last && !pos.ends_message()) || (i == 0 && !pos.starts_message()) {
            return Err(Discard::Unexpected);
        }
        let off = i.saturating_mul(self.cfg.mtu);
        if s.op == SendOp::RdmaRead {
            // What the responder cuts at this path MTU: a full MTU, or the
            // rest at the end.
            let want = s.len.saturating_sub(off).min(self.cfg.mtu);
            // CAST: u32 to usize is lossless.
            if pkt.payload.len() != want as usize {
                return Err(Discard::Length);
            }
        }
        let status = match s.op {
            SendOp::RdmaRead => match io.scatter(idx, off, pkt.payload) {
                Ok(()) => Ok(()),
                Err(ScatterError::Failed(e)) => Err(e),
                Err(ScatterError::NotPresent) => {
                    self.wait_for_fault(io);
                    return Err(Discard::NotPresent);
                }
            },
            // An Atomic Write's or FLUSH's answer carries no data.
            SendOp::AtomicWrite | SendOp::Flush if pkt.payload.is_empty() => Ok(()),
            _ => return Err(Discard::Unexpected),
        };
        self.read_next += 1;
        self.grow(1);
        self.una = psn.next();
        self.progress();
        if s.op == SendOp::Flush {
            // The peer takes this QP's FLUSH ICRC: keep it.
            self.flush_icrc_known = true;
        }
        if s.op == SendOp::RdmaRead && self.read_held != 0 {
            self.read_held -= 1;
            io.give_back_credits(1);
        }
        if let Err(e) = status {
            self.read_next = 0;
            self.fail(io, s.op, e);
            return Ok(());
        }
        if psn == s.last {
            self.read_next = 0;
            self.reads_out = self.reads_out.saturating_sub(1);
            let byte_len = if s.op == SendOp::AtomicWrite {
                8
            } else {
                s.len
            };
            self.complete(io, s.op, WcStatus::Success, byte_len);
            self.ack_up_to(io, psn);
            if !self.outstanding() {
                // Nothing asked for is still due: a responder that answered
                // short leaves nothing held.
                self.release_credits(io);
            }
            self.send_pending(now, io);
        } else if self.pkt != 0 {
            // The window moved: more of this read may be requested.
            self.send_pending(now, io);
        }
        Ok(())
    }

    fn atomic_ack(&mut self, pkt: &Packet<'_>, now: i64, io: &mut impl Io) -> Result<(), Discard> {
        let psn = pkt.bth.psn;
        self.ack_before_response(psn, io);
        if self.stopped {
            return Ok(());
        }
        if !self.outstanding() {
            return Err(Discard::Unexpected);
        }
        let s = self.span(self.consumer);
        if !s.waits || s.first != psn || !matches!(s.op, SendOp::CmpSwap | SendOp::FetchAdd) {
            return Err(Discard::Unexpected);
        }
        let orig = pkt.ext.atomic_ack_eth.ok_or(Discard::Unexpected)?.orig;
        let placed = io.scatter(self.consumer, 0, &orig.to_ne_bytes());
        if placed == Err(ScatterError::NotPresent) {
            // Asked again, the responder answers from its memory of the
            // atomic and does not run it twice.
            self.wait_for_fault(io);
            return Err(Discard::NotPresent);
        }
        self.grow(1);
        self.una = psn.next();
        self.progress();
        self.reads_out = self.reads_out.saturating_sub(1);
        match placed {
            Ok(()) => self.complete(io, s.op, WcStatus::Success, 8),
            Err(ScatterError::Failed(e)) => {
                self.fail(io, s.op, e);
                return Ok(());
            }
            Err(ScatterError::NotPresent) => return Err(Discard::NotPresent),
        }
        self.ack_up_to(io, psn);
        self.send_pending(now, io);
        Ok(())
    }

    fn ack(&mut self, pkt: &Packet<'_>, now: i64, io: &mut impl Io) -> Result<(), Discard> {
        let psn = pkt.bth.psn;
        let aeth = pkt.ext.aeth.ok_or(Discard::Unexpected)?;
        let syndrome = Syndrome::from_u8(aeth.syndrome);
        // A NAK names a packet sent and not yet acknowledged: at or after
        // `una`, within the window (`npsn` itself may have gone back behind
        // a NAK still in flight). An older one (delayed, duplicated) or one
        // out of reach (forged without the live PSN) must not fail or
        // rewind today's work. An ACK may also repeat the last one (`una -
        // 1`, what a responder answers a duplicate with); one further out
        // would complete everything sent, and a blind forger's random PSN
        // lies ahead half the time.
        let end = self.una.wrapping_add(self.cfg.window + 1);
        let from = match syndrome {
            Some(Syndrome::Ack(_)) => self.una.wrapping_sub(1),
            Some(Syndrome::Nak(_) | Syndrome::RnrNak(_)) => self.una,
            None => return Err(Discard::Unexpected),
        };
        if !psn.in_range(from, end) {
            return Err(Discard::Psn);
        }
        match syndrome {
            Some(Syndrome::Ack(_)) => {
                self.ack_up_to(io, psn);
                self.send_pending(now, io);
                Ok(())
            }
            Some(Syndrome::Nak(code)) => {
                // Everything before the NAKed PSN was done.
                self.ack_up_to(io, psn.wrapping_sub(1));
                if self.stopped {
                    return Ok(());
                }
                if code == NakCode::PsnSequenceError {
                    if self.go_back_once(now, io) {
                        self.congested();
                        io.event(Event::NakSeq);
                    }
                    return Ok(());
                }
                // Departure 2: a message still being sent counts.
                if !self.outstanding() {
                    return Err(Discard::Unexpected);
                }
                let status = match code {
                    NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                    NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                    _ => WcStatus::RemInvReqErr,
                };
                let op = self.span(self.consumer).op;
                self.fail(io, op, status);
                Ok(())
            }
            Some(Syndrome::RnrNak(_)) if self.rnr_wait && psn == self.una => {
                // The same RNR NAK again (duplicated on the way) while its
                // wait runs: it must not cost a second retry.
                Err(Discard::Psn)
            }
            Some(Syndrome::RnrNak(t)) => {
                self.ack_up_to(io, psn.wrapping_sub(1));
                if self.stopped {
                    return Ok(());
                }
                if !self.outstanding() {
                    return Err(Discard::Unexpected);
                }
                io.event(Event::RnrNak);
                self.rnr_nak(io, t.usecs());
                Ok(())
            }
            None => Err(Discard::Unexpected),
        }
    }

    /// Waits the time an RNR NAK asked for, then sends again from the
    /// oldest unacknowledged packet, `rnr_retry` times (7 is forever).
    fn rnr_nak(&mut self, io: &mut impl Io, usecs: u32) {
        if self.rnr_left == 0 {
            io.event(Event::RnrRetryExceeded);
            let op = self.span(self.consumer).op;
            self.fail(io, op, WcStatus::RnrRetryExcErr);
            return;
        }
        if self.cfg.rnr_retry != RNR_RETRY_FOREVER {
            self.rnr_left -= 1;
        }
        self.go_back(io);
        self.rnr_wait = true;
        // The RNR timer replaces a pending kick, and its end resumes.
        self.kick = false;
        io.arm_timer(usecs.div_ceil(1000).max(1));
    }

    /// The QP's timer fired: a kick (more to send after a full budget or a
    /// credit poll), the end of an RNR wait, or a retransmission timeout,
    /// which goes back `retry_cnt` times and then fails the oldest WQE
    /// with `RETRY_EXC_ERR`. `now` is a monotonic time in milliseconds.
    pub fn on_timer(&mut self, now: i64, io: &mut impl Io) {
        self.now = now;
        if self.stopped {
            self.rnr_wait = false;
            return;
        }
        if core::mem::take(&mut self.kick) {
            self.send_pending(now, io);
            return;
        }
        if !self.cfg.transport.is_reliable() {
            return;
        }
        if self.rnr_wait {
            // The RNR NAK already went back: send again from there.
            self.rnr_wait = false;
        } else if !self.outstanding() {
            return;
        } else if let Some(left) = self.retry_due_in(now) {
            // Armed early (a kick's timer that found nothing to send), or
            // the QP sent or heard something since.
            io.arm_timer(left);
            return;
        } else if self.retry_left == 0 {
            io.event(Event::RetryExceeded);
            let op = self.span(self.consumer).op;
            self.fail(io, op, WcStatus::RetryExcErr);
            return;
        } else {
            io.event(Event::Timeout);
            self.congested();
            self.retry_left -= 1;
            // The next timeout counts from this retry, whether or not
            // anything can be sent now.
            self.active = now;
            // Until a FLUSH of this QP is answered, each timeout of one
            // switches between the standard ICRC and rxe's.
            if !self.flush_icrc_known && self.span(self.consumer).op == SendOp::Flush {
                self.flush_icrc_rxe = !self.flush_icrc_rxe;
            }
        }
        self.retrying = true;
        self.go_back(io);
        self.send_pending(now, io);
    }

    /// Go-back-N: the oldest unfinished WQE is sent again from the packet
    /// not acknowledged (a read asks again for the rest), and everything
    /// after it again in full.
    fn go_back(&mut self, io: &mut impl Io) {
        // The reads asked again take their credits again.
        self.release_credits(io);
        if self.outstanding() {
            let s = self.span(self.consumer);
            let resume = if self.una.in_range(s.first, s.last.next()) {
                self.una
            } else {
                s.first
            };
            self.sent = self.consumer;
            self.pkt = s.first.distance(resume);
            self.note_high();
            self.npsn = resume;
            self.una = resume;
            // A read resumed part-way is still outstanding; its responses
            // so far count.
            self.read_next = if s.waits { self.pkt } else { 0 };
            self.reads_out = u32::from(s.waits && self.pkt != 0);
        }
    }

    /// Goes back after a gap, unless a go-back is under way already: the
    /// packets still arriving from before it would each trigger another.
    /// Returns whether it went back.
    fn go_back_once(&mut self, now: i64, io: &mut impl Io) -> bool {
        if self.retrying {
            return false;
        }
        self.retrying = true;
        self.go_back(io);
        self.send_pending(now, io);
        true
    }

    /// A response's data could not land: the local buffer is paged on
    /// demand and not mapped yet, and a fault was asked for. Asks again
    /// from the first response missing after a short wait, as after an RNR
    /// NAK, without spending a retry. (A fault that fails makes the next
    /// landing an error, so this ends.)
    fn wait_for_fault(&mut self, io: &mut impl Io) {
        self.go_back(io);
        self.rnr_wait = true;
        self.kick = false;
        io.arm_timer(1);
    }

    /// The responder acknowledged something new: the retry budgets start
    /// again, the retry timeout counts from now, and a later gap may go
    /// back again.
    fn progress(&mut self) {
        self.active = self.now;
        self.retrying = false;
        self.retry_left = self.cfg.retry_cnt;
        self.rnr_left = self.cfg.rnr_retry;
    }

    /// Completes every sent WQE, up to the first that waits for a
    /// response, whose last PSN is at or before `psn`, and moves `una`.
    fn ack_up_to(&mut self, io: &mut impl Io, psn: Psn) {
        self.note_high();
        let before = self.consumer;
        self.ack_loop(io, psn);
        if self.stopped {
            return;
        }
        if self.consumer != before {
            self.progress();
        }
        // An ACK does not stand for read responses or atomic results that
        // never arrived: `una` stops at the first of those missing.
        let mut acked = psn.next();
        if self.outstanding() {
            let s = self.span(self.consumer);
            if s.waits {
                let got = s.first.wrapping_add(self.read_next);
                if got.diff(acked) < 0 {
                    acked = got;
                }
            }
        }
        if acked.wrapping_sub(1).in_range(self.una, self.npsn) {
            self.grow(self.una.distance(acked));
            self.una = acked;
            self.progress();
        } else if self.una != self.npsn && acked.wrapping_sub(1).in_range(self.npsn, self.high) {
            // After a go-back, an ACK of what the responder held from the
            // first pass: everything sent again is acknowledged.
            self.grow(self.una.distance(self.npsn));
            self.una = self.npsn;
            self.progress();
        }
    }

    fn ack_loop(&mut self, io: &mut impl Io, psn: Psn) {
        while self.consumer != self.sent {
            let s = self.span(self.consumer);
            if s.waits || psn.diff(s.last) < 0 {
                break;
            }
            self.complete(io, s.op, WcStatus::Success, s.len);
        }
        if self.consumer == self.sent && self.pkt == 0 {
            // Departure 3: only the blocked WQE itself, once it is the
            // oldest.
            if let Some(b) = self.blocked.filter(|b| b.wqe == self.consumer) {
                self.blocked = None;
                self.fail(io, b.op, b.status);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aeth::RnrTimer;
    use crate::headers::{Aeth, AtomicAckEth, Bth, Ext, DEFAULT_PKEY};
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    /// A kernel side that records what the requester does.
    struct TestIo {
        wqes: Vec<Wqe>,
        segs: Vec<Segment>,
        done: Vec<Completion>,
        fatal: Option<u32>,
        timer: Option<u32>,
        credits: i64,
        scatter_err: Option<ScatterError>,
        /// Gathers that find the memory not mapped, from now on.
        absent: u32,
        /// What `hold` answers.
        hold_us: u32,
        /// `hold` answers 1000 once this many packets are out.
        hold_after: Option<usize>,
        events: Vec<Event>,
        /// Datagrams sent: WQE and PSN.
        datagrams: Vec<(u32, Psn)>,
        /// What `hold_datagram` answers, by WQE.
        hold_dgram: Vec<(u32, u32)>,
    }

    impl TestIo {
        fn new() -> TestIo {
            TestIo {
                wqes: Vec::new(),
                segs: Vec::new(),
                done: Vec::new(),
                fatal: None,
                timer: None,
                credits: 192,
                scatter_err: None,
                absent: 0,
                hold_us: 0,
                hold_after: None,
                events: Vec::new(),
                datagrams: Vec::new(),
                hold_dgram: Vec::new(),
            }
        }

        fn post(&mut self, op: SendOp, len: u32) {
            self.wqes.push(Wqe {
                op: Some(op),
                len: Ok(len),
                fence: false,
            });
        }

        fn psns(&self) -> Vec<u32> {
            self.segs.iter().map(|s| s.psn.get()).collect()
        }
    }

    impl Io for TestIo {
        fn queued(&mut self, consumer: u32) -> Option<u32> {
            // CAST: the tests post far fewer than 2^32.
            Some((self.wqes.len() as u32).wrapping_sub(consumer))
        }

        fn wqe(&mut self, idx: u32) -> Wqe {
            self.wqes[idx as usize]
        }

        fn local_op(&mut self, _idx: u32, _op: SendOp) -> Result<(), WcStatus> {
            Ok(())
        }

        fn transmit(&mut self, seg: &Segment) -> Result<(), ScatterError> {
            if seg.opcode.operation() != Operation::RdmaReadRequest && self.absent != 0 {
                self.absent -= 1;
                return Err(ScatterError::NotPresent);
            }
            self.segs.push(*seg);
            Ok(())
        }

        fn datagram(
            &mut self,
            idx: u32,
            _op: SendOp,
            psn: Psn,
        ) -> Result<Option<u32>, ScatterError> {
            if self.absent != 0 {
                self.absent -= 1;
                return Err(ScatterError::NotPresent);
            }
            self.datagrams.push((idx, psn));
            Ok(Some(self.wqes[idx as usize].len.unwrap_or(0)))
        }

        fn scatter(&mut self, _idx: u32, _off: u32, _data: &[u8]) -> Result<(), ScatterError> {
            self.scatter_err.map_or(Ok(()), Err)
        }

        fn hold_datagram(&mut self, idx: u32) -> u32 {
            self.hold_dgram
                .iter()
                .find(|(i, _)| *i == idx)
                .map_or(0, |(_, us)| *us)
        }

        fn hold(&mut self) -> u32 {
            match self.hold_after {
                Some(n) if self.segs.len() >= n => 1000,
                _ => self.hold_us,
            }
        }

        fn event(&mut self, e: Event) {
            self.events.push(e);
        }

        fn complete(&mut self, c: &Completion) {
            self.done.push(*c);
        }

        fn fatal(&mut self, from: u32) -> u32 {
            self.fatal = Some(from);
            // CAST: as in `queued`.
            self.wqes.len() as u32
        }

        fn arm_timer(&mut self, ms: u32) {
            self.timer = Some(ms);
        }

        fn take_credits(&mut self, n: u32) -> bool {
            if self.credits >= i64::from(n) {
                self.credits -= i64::from(n);
                true
            } else {
                false
            }
        }

        fn overdraw_credits(&mut self, n: u32) -> bool {
            self.credits -= i64::from(n);
            true
        }

        fn give_back_credits(&mut self, n: u32) {
            self.credits += i64::from(n);
        }
    }

    fn requester(mtu: u32, psn: u32) -> Requester<Vec<Span>> {
        let mut c = Config::new(Transport::Rc, mtu);
        c.max_rd_atomic = 4;
        Requester::new(c, vec![Span::EMPTY; 64], Psn::new(psn))
    }

    /// A requester with a window of 256 PSNs and reads of 128 packets (the
    /// driver's until 2026-12-02), for the tests whose numbers are written
    /// for them: the budget (256) runs out with the window.
    fn wide_requester(mtu: u32, psn: u32) -> Requester<Vec<Span>> {
        let mut c = Config::new(Transport::Rc, mtu);
        c.max_rd_atomic = 4;
        (c.window, c.read_window) = (256, 128);
        Requester::new(c, vec![Span::EMPTY; 64], Psn::new(psn))
    }

    fn packet(opcode: Opcode, psn: u32, ext: Ext, payload: &[u8]) -> Packet<'_> {
        Packet {
            opcode,
            bth: Bth::new(opcode, DEFAULT_PKEY, 1, Psn::new(psn)),
            ext,
            payload,
            icrc: 0,
        }
    }

    fn aeth(s: Syndrome) -> Ext {
        Ext {
            aeth: Some(Aeth {
                syndrome: s.to_u8(),
                msn: 0,
            }),
            ..Ext::default()
        }
    }

    fn ack(psn: u32) -> Packet<'static> {
        packet(Opcode::RcAcknowledge, psn, aeth(Syndrome::ACK), &[])
    }

    fn nak(psn: u32, code: NakCode) -> Packet<'static> {
        packet(Opcode::RcAcknowledge, psn, aeth(Syndrome::Nak(code)), &[])
    }

    fn rnr(psn: u32) -> Packet<'static> {
        let t = RnrTimer::from_code(1).unwrap();
        packet(Opcode::RcAcknowledge, psn, aeth(Syndrome::RnrNak(t)), &[])
    }

    fn read_resp(opcode: Opcode, psn: u32, payload: &[u8]) -> Packet<'_> {
        let ext = match opcode {
            Opcode::RcRdmaReadResponseMiddle => Ext::default(),
            _ => aeth(Syndrome::ACK),
        };
        packet(opcode, psn, ext, payload)
    }

    fn atomic_ack(psn: u32, orig: u64) -> Packet<'static> {
        let mut ext = aeth(Syndrome::ACK);
        ext.atomic_ack_eth = Some(AtomicAckEth { orig });
        packet(Opcode::RcAtomicAcknowledge, psn, ext, &[])
    }

    fn start(r: &mut Requester<Vec<Span>>, io: &mut TestIo) {
        // CAST: as in `queued`.
        r.set_checked(io.wqes.len() as u32 - r.consumer());
        r.send_pending(0, io);
    }

    #[test]
    fn psns_wrap_at_2_pow_24() {
        let mut io = TestIo::new();
        let mut r = requester(256, 0xff_fffe);
        for _ in 0..3 {
            io.post(SendOp::Send, 512);
        }
        start(&mut r, &mut io);
        assert_eq!(io.psns(), [0xff_fffe, 0xff_ffff, 0, 1, 2, 3]);
        assert_eq!(r.npsn(), Psn::new(4));
        // The ACK of the second message completes the first two.
        r.on_response(&ack(1), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 2);
        assert_eq!(r.una(), Psn::new(2));
        r.on_response(&ack(3), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 3);
        assert!(!r.outstanding());
        assert!(io
            .done
            .iter()
            .all(|c| c.status == WcStatus::Success && c.byte_len == 512));
    }

    #[test]
    fn ack_requests_end_messages_and_split_windows() {
        let mut io = TestIo::new();
        let mut r = wide_requester(256, 10);
        io.post(SendOp::RdmaWrite, 300 * 256);
        start(&mut r, &mut io);
        // The window stops the message after 256 packets.
        assert_eq!(io.segs.len(), 256);
        let acked: Vec<u32> = io
            .segs
            .iter()
            .filter(|s| s.ack_req)
            .map(|s| s.psn.get())
            .collect();
        assert_eq!(acked, [10 + 63, 10 + 127, 10 + 191, 10 + 255]);
        // The budget ran out with them: the timer goes on at once, and finds
        // the window shut.
        assert_eq!(io.timer, Some(0));
        r.on_timer(0, &mut io);
        assert_eq!(io.segs.len(), 256);
        assert_eq!(io.timer, Some(timeout_ms(14).unwrap()));
        // An ACK half-way opens the window by 128 packets.
        r.on_response(&ack(10 + 127), 0, &mut io).unwrap();
        assert_eq!(io.segs.len(), 256 + 44);
        let last = io.segs.last().unwrap();
        assert_eq!(last.opcode, Opcode::RcRdmaWriteLast);
        assert!(last.ack_req);
        assert!(io.done.is_empty());
        r.on_response(&ack(10 + 299), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 1);
    }

    #[test]
    fn windows_follow_the_mtu_in_bytes() {
        assert_eq!(read_window(256), READ_WINDOW);
        assert_eq!(read_window(1024), 64);
        assert_eq!(read_window(2048), 32);
        assert_eq!(read_window(4096), 16);
        assert_eq!(read_window(1 << 20), 1);
        assert_eq!(read_window(0), READ_WINDOW);
        assert_eq!(Config::new(Transport::Rc, 4096).read_window, 16);
        assert_eq!((window(1024), ack_every(1024)), (WINDOW, ACK_EVERY));
        assert_eq!((window(4096), ack_every(4096)), (32, 8));
        assert_eq!(window(1 << 20), 4);
        assert_eq!(Config::new(Transport::Rc, 4096).window, 32);
    }

    #[test]
    fn losses_halve_the_window_and_acks_grow_it_back() {
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        let to = i64::from(timeout_ms(14).unwrap());
        io.post(SendOp::RdmaWrite, 4000 * 1024);
        start(&mut r, &mut io);
        assert_eq!(r.cwnd(), WINDOW);
        assert_eq!(io.psns(), (0..64).collect::<Vec<_>>());
        // A timeout halves the window. What was sent goes again in full:
        // the responder may hold all of it.
        io.segs.clear();
        r.on_timer(to, &mut io);
        assert_eq!(r.cwnd(), 32);
        assert_eq!(io.psns(), (0..64).collect::<Vec<_>>());
        // Past what was ever sent, only the smaller window goes out, with
        // an ACK request every quarter of it. 64 acknowledged: 32 of them
        // step the window up to 33, and 32 are left towards the next step.
        io.segs.clear();
        r.on_response(&ack(63), to, &mut io).unwrap();
        assert_eq!(r.cwnd(), 33);
        assert_eq!(io.psns(), (64..97).collect::<Vec<_>>());
        let asked: Vec<u32> = io
            .segs
            .iter()
            .filter(|s| s.ack_req)
            .map(|s| s.psn.get())
            .collect();
        assert_eq!(asked, [71, 79, 87, 95]);
        // A sequence NAK halves it again (after its implied ACK of 64..=69
        // stepped it up to 34).
        r.on_response(&nak(70, NakCode::PsnSequenceError), to, &mut io)
            .unwrap();
        assert_eq!(r.cwnd(), 17);
        // So do timeouts, down to MIN_CWND and no further.
        let mut now = to;
        for _ in 0..3 {
            now += to;
            r.on_timer(now, &mut io);
        }
        assert_eq!(r.cwnd(), MIN_CWND);
        // Progress without loss grows it back to the window and no further.
        for _ in 0..400 {
            let una = r.npsn().get() - 1;
            r.on_response(&ack(una), to, &mut io).unwrap();
        }
        assert_eq!(r.cwnd(), WINDOW);
        // A QP reset starts at the full window.
        r.reset(r.consumer(), &mut io);
        assert_eq!(r.cwnd(), WINDOW);
    }

    #[test]
    fn an_ack_past_what_was_sent_again_counts() {
        // After a go-back, the responder may be ahead of what the smaller
        // window sent again; its ACK of the newest PSN it holds (as a
        // responder answers a duplicate) acknowledges all of that.
        // Here the budget per call (16) cuts the sending again short.
        let mut io = TestIo::new();
        let mut c = Config::new(Transport::Rc, 1024);
        c.budget = 16;
        let mut r = Requester::new(c, vec![Span::EMPTY; 64], Psn::new(0));
        let to = i64::from(timeout_ms(14).unwrap());
        io.post(SendOp::RdmaWrite, 100 * 1024);
        start(&mut r, &mut io);
        while io.segs.len() < 64 {
            r.on_timer(0, &mut io);
        }
        // The kick that found the window shut.
        r.on_timer(0, &mut io);
        io.segs.clear();
        r.on_timer(to, &mut io);
        assert_eq!(io.psns(), (0..16).collect::<Vec<_>>());
        // The responder held 0..=63 from the first pass.
        io.segs.clear();
        r.on_response(&ack(63), to, &mut io).unwrap();
        assert_eq!(r.una().get(), 16);
        assert_eq!(io.psns(), (16..32).collect::<Vec<_>>());
        // Beyond the window it is refused.
        assert_eq!(r.on_response(&ack(200), to, &mut io), Err(Discard::Psn));
        assert_eq!(r.una().get(), 16);
    }

    #[test]
    fn a_read_sent_again_keeps_its_pieces() {
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        let to = i64::from(timeout_ms(14).unwrap());
        io.post(SendOp::RdmaRead, 100 * 1024);
        start(&mut r, &mut io);
        assert_eq!((io.segs[0].psn.get(), io.segs[0].len), (0, 64 * 1024));
        // The responses never came: the window halves, but the read is
        // asked for again in its first piece, which the responder knows.
        io.segs.clear();
        r.on_timer(to, &mut io);
        assert_eq!(r.cwnd(), 32);
        assert_eq!((io.segs[0].psn.get(), io.segs[0].len), (0, 64 * 1024));
        let data = [7u8; 1024];
        for i in 0..64 {
            let op = match i {
                0 => Opcode::RcRdmaReadResponseFirst,
                63 => Opcode::RcRdmaReadResponseLast,
                _ => Opcode::RcRdmaReadResponseMiddle,
            };
            r.on_response(&read_resp(op, i, &data), to, &mut io)
                .unwrap();
        }
        // The rest of the same read keeps the 64-packet grid.
        let last = io.segs.last().unwrap();
        assert_eq!((last.psn.get(), last.len), (64, 36 * 1024));
        for i in 64..100 {
            let op = match i {
                64 => Opcode::RcRdmaReadResponseFirst,
                99 => Opcode::RcRdmaReadResponseLast,
                _ => Opcode::RcRdmaReadResponseMiddle,
            };
            r.on_response(&read_resp(op, i, &data), to, &mut io)
                .unwrap();
        }
        assert_eq!(io.done.len(), 1);
        // A new read after it asks in pieces of the window in force.
        io.post(SendOp::RdmaRead, 100 * 1024);
        start(&mut r, &mut io);
        let last = io.segs.last().unwrap();
        assert_eq!(last.psn.get(), 100);
        assert_eq!(last.len, r.cwnd() * 1024);
        assert!(r.cwnd() < 64);
    }

    #[test]
    fn reads_go_in_pieces_and_take_credits() {
        let mut io = TestIo::new();
        let mut r = wide_requester(256, 0);
        io.post(SendOp::RdmaRead, 300 * 256);
        start(&mut r, &mut io);
        // The first piece: 128 packets' worth, paid for.
        assert_eq!(io.segs.len(), 1);
        assert_eq!((io.segs[0].offset, io.segs[0].len), (0, 128 * 256));
        assert_eq!(r.credits_held(), 128);
        assert_eq!(io.credits, 192 - 128);
        let data = [7u8; 256];
        for i in 0..128 {
            let op = match i {
                0 => Opcode::RcRdmaReadResponseFirst,
                127 => Opcode::RcRdmaReadResponseLast,
                _ => Opcode::RcRdmaReadResponseMiddle,
            };
            r.on_response(&read_resp(op, i, &data), 0, &mut io).unwrap();
        }
        // Each response gave its credit back; the second piece went out
        // once the first was answered.
        assert_eq!(io.segs.len(), 2);
        assert_eq!((io.segs[1].psn.get(), io.segs[1].offset), (128, 128 * 256));
        assert_eq!(r.credits_held(), 128);
        // A response out of order asks again from the first missing.
        let early = read_resp(Opcode::RcRdmaReadResponseMiddle, 130, &data);
        assert_eq!(r.on_response(&early, 0, &mut io), Err(Discard::Psn));
        assert_eq!(io.segs.len(), 3);
        assert_eq!(io.segs[2].psn.get(), 128);
        // A response of the wrong size is refused.
        let short = read_resp(Opcode::RcRdmaReadResponseFirst, 128, &data[..100]);
        assert_eq!(r.on_response(&short, 0, &mut io), Err(Discard::Length));
    }

    #[test]
    fn timeouts_go_back_then_fail() {
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        r.set_retry_cnt(2);
        io.post(SendOp::Send, 3000);
        io.post(SendOp::Send, 10);
        start(&mut r, &mut io);
        assert_eq!(io.psns(), [0, 1, 2, 3]);
        r.on_response(&ack(0), 0, &mut io).unwrap();
        let to = i64::from(timeout_ms(14).unwrap());
        // A timer that fires early (a kick's that found nothing to send)
        // arms again for what is left, and sends nothing.
        io.segs.clear();
        r.on_timer(to - 3, &mut io);
        assert!(io.segs.is_empty());
        assert_eq!(io.timer, Some(3));
        let mut now = 0;
        for round in 0..2 {
            io.segs.clear();
            now += to;
            r.on_timer(now, &mut io);
            // Back to the first packet not acknowledged, in the middle of
            // the first message.
            assert_eq!(io.psns(), [1, 2, 3], "round {round}");
            assert_eq!(io.segs[0].opcode, Opcode::RcSendMiddle);
            // The next timeout counts from this retry.
            assert_eq!(io.timer, Some(timeout_ms(14).unwrap()));
        }
        // A duplicate ACK does not put the timeout off.
        assert_eq!(r.on_response(&ack(0), now + to / 2, &mut io), Ok(()));
        r.on_timer(now + to, &mut io);
        assert_eq!(
            io.events,
            [Event::Timeout, Event::Timeout, Event::RetryExceeded]
        );
        assert_eq!(io.done.len(), 1);
        assert_eq!(io.done[0].status, WcStatus::RetryExcErr);
        assert_eq!(io.fatal, Some(1));
        assert!(r.is_stopped());
        // Progress starts the count again.
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        r.set_retry_cnt(1);
        io.post(SendOp::Send, 3000);
        start(&mut r, &mut io);
        r.on_timer(to, &mut io);
        r.on_response(&ack(0), to, &mut io).unwrap();
        r.on_timer(2 * to, &mut io);
        assert!(!r.is_stopped());
        r.on_timer(3 * to, &mut io);
        assert!(r.is_stopped());
    }

    #[test]
    fn one_go_back_per_gap() {
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        for _ in 0..4 {
            io.post(SendOp::Send, 100);
        }
        start(&mut r, &mut io);
        io.segs.clear();
        r.on_response(&nak(1, NakCode::PsnSequenceError), 0, &mut io)
            .unwrap();
        assert_eq!(io.psns(), [1, 2, 3]);
        assert_eq!(io.done.len(), 1, "the NAK acknowledges what is before it");
        // The same NAK again (duplicated on the wire) goes back no more.
        r.on_response(&nak(1, NakCode::PsnSequenceError), 0, &mut io)
            .unwrap();
        assert_eq!(io.psns(), [1, 2, 3]);
        // A NAK for a later PSN acknowledges the one before it: that is
        // progress, and the gap it names is a new one.
        r.on_response(&nak(2, NakCode::PsnSequenceError), 0, &mut io)
            .unwrap();
        assert_eq!(io.psns(), [1, 2, 3, 2, 3]);
        // A NAK beyond the window is ignored.
        let far = r.on_response(&nak(1000, NakCode::PsnSequenceError), 0, &mut io);
        assert_eq!(far, Err(Discard::Psn));
    }

    #[test]
    fn rnr_waits_then_sends_again() {
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        r.set_rnr_retry(1);
        io.post(SendOp::Send, 10);
        io.post(SendOp::Send, 10);
        start(&mut r, &mut io);
        r.on_response(&rnr(0), 0, &mut io).unwrap();
        assert!(r.rnr_waiting());
        assert_eq!(io.timer, Some(1));
        // Nothing goes out while it waits, not even for a new ACK.
        io.segs.clear();
        r.send_pending(0, &mut io);
        assert!(io.segs.is_empty());
        r.on_timer(0, &mut io);
        assert_eq!(io.psns(), [0, 1]);
        // The retry was spent: the next RNR NAK fails the WQE.
        r.on_response(&rnr(0), 0, &mut io).unwrap();
        assert_eq!(io.done[0].status, WcStatus::RnrRetryExcErr);
    }

    #[test]
    fn remote_errors_fail_the_wqe() {
        for (code, status) in [
            (NakCode::RemoteAccessError, WcStatus::RemAccessErr),
            (NakCode::RemoteOperationalError, WcStatus::RemOpErr),
            (NakCode::InvalidRequest, WcStatus::RemInvReqErr),
        ] {
            let mut io = TestIo::new();
            let mut r = requester(256, 0);
            io.post(SendOp::RdmaWrite, 10);
            io.post(SendOp::RdmaWrite, 10);
            start(&mut r, &mut io);
            r.on_response(&nak(1, code), 0, &mut io).unwrap();
            assert_eq!(io.done.len(), 2);
            assert_eq!(io.done[0].status, WcStatus::Success);
            assert_eq!((io.done[1].wqe, io.done[1].status), (1, status));
            assert!(r.is_stopped());
        }
    }

    /// Departure 1: a duplicated read response does not acknowledge the
    /// SEND after the read, which the responder never saw.
    #[test]
    fn a_stale_response_acknowledges_nothing_new() {
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        io.post(SendOp::RdmaRead, 8);
        io.post(SendOp::Send, 8);
        start(&mut r, &mut io);
        assert_eq!(io.psns(), [0, 1]);
        let resp = read_resp(Opcode::RcRdmaReadResponseOnly, 0, &[1; 8]);
        r.on_response(&resp, 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 1);
        // The SEND at PSN 1 was lost; the read response comes again.
        let again = r.on_response(&resp, 0, &mut io);
        assert_eq!(again, Err(Discard::Unexpected));
        assert_eq!(io.done.len(), 1, "the SEND is not complete");
        assert_eq!(r.una(), Psn::new(1));
        // The same for an atomic acknowledge.
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        io.post(SendOp::FetchAdd, 8);
        io.post(SendOp::RdmaWrite, 8);
        start(&mut r, &mut io);
        r.on_response(&atomic_ack(0, 5), 0, &mut io).unwrap();
        let again = r.on_response(&atomic_ack(0, 5), 0, &mut io);
        assert_eq!(again, Err(Discard::Unexpected));
        assert_eq!(io.done.len(), 1);
        // A response that is awaited does acknowledge what came before it.
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        io.post(SendOp::Send, 8);
        io.post(SendOp::RdmaRead, 8);
        start(&mut r, &mut io);
        let resp = read_resp(Opcode::RcRdmaReadResponseOnly, 1, &[1; 8]);
        r.on_response(&resp, 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 2);
    }

    /// Departure 2: a NAK for a message the window stopped part-way.
    #[test]
    fn naks_reach_a_message_still_being_sent() {
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        io.post(SendOp::Send, 300 * 256);
        start(&mut r, &mut io);
        assert_eq!(r.sent(), 0, "still being sent");
        r.on_response(&rnr(0), 0, &mut io).unwrap();
        assert!(r.rnr_waiting());
        r.on_timer(0, &mut io);
        r.on_response(&nak(0, NakCode::RemoteAccessError), 0, &mut io)
            .unwrap();
        assert_eq!(io.done[0].status, WcStatus::RemAccessErr);
    }

    /// Departure 3: a WQE that fails locally behind others is not sent,
    /// and a go-back does not pin its failure on an older WQE.
    #[test]
    fn the_rate_holds_packets_back_and_the_timer_sends_them() {
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        io.post(SendOp::RdmaWrite, 3000);
        io.hold_us = 2500;
        start(&mut r, &mut io);
        // Nothing goes, nothing is recorded, and the timer kicks.
        assert!(io.segs.is_empty());
        assert!(!r.outstanding());
        assert_eq!(io.timer, Some(3));
        io.hold_us = 0;
        r.on_timer(3, &mut io);
        assert_eq!(io.psns(), [0, 1, 2]);
        // Held part-way, the message goes on from where it stopped.
        let mut io2 = TestIo::new();
        let mut r = requester(1024, 0);
        io2.post(SendOp::Send, 3000);
        r.set_checked(1);
        // The rate allows the first packet only.
        io2.hold_after = Some(1);
        r.send_pending(0, &mut io2);
        io2.hold_after = None;
        assert_eq!(io2.psns(), [0]);
        assert_eq!(io2.timer, Some(1));
        r.on_timer(1, &mut io2);
        assert_eq!(io2.psns(), [0, 1, 2]);
        assert_eq!(io2.segs[2].opcode, Opcode::RcSendLast);
    }

    #[test]
    fn data_not_mapped_waits_for_the_fault() {
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        io.post(SendOp::AtomicWrite, 8);
        io.post(SendOp::Send, 100);
        io.absent = 1;
        start(&mut r, &mut io);
        // Nothing sent, nothing counted as outstanding, a look soon.
        assert!(io.segs.is_empty());
        assert_eq!(r.reads_out(), 0);
        assert_eq!(io.timer, Some(1));
        assert_eq!(io.events, [Event::FaultWait]);
        r.on_timer(1, &mut io);
        assert_eq!(io.psns(), [0, 1]);
        assert_eq!(r.reads_out(), 1);
        // A read response whose buffer is not mapped: asked again after a
        // short wait, with no retry spent.
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        r.set_retry_cnt(0);
        io.post(SendOp::RdmaRead, 2048);
        start(&mut r, &mut io);
        io.scatter_err = Some(ScatterError::NotPresent);
        let data = [7u8; 1024];
        let first = read_resp(Opcode::RcRdmaReadResponseFirst, 0, &data);
        assert_eq!(r.on_response(&first, 0, &mut io), Err(Discard::NotPresent));
        assert!(r.rnr_waiting());
        assert_eq!(io.timer, Some(1));
        io.scatter_err = None;
        io.segs.clear();
        r.on_timer(1, &mut io);
        assert_eq!(io.psns(), [0]);
        r.on_response(&first, 1, &mut io).unwrap();
        let last = read_resp(Opcode::RcRdmaReadResponseLast, 1, &data);
        r.on_response(&last, 1, &mut io).unwrap();
        assert_eq!(io.done.len(), 1);
        assert_eq!(io.done[0].status, WcStatus::Success);
        // An atomic's result that cannot land leaves it unanswered.
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        io.post(SendOp::FetchAdd, 8);
        start(&mut r, &mut io);
        io.scatter_err = Some(ScatterError::NotPresent);
        assert_eq!(
            r.on_response(&atomic_ack(0, 5), 0, &mut io),
            Err(Discard::NotPresent)
        );
        assert_eq!(r.una(), Psn::new(0));
        assert!(io.done.is_empty());
    }

    #[test]
    fn a_duplicated_rnr_nak_costs_one_retry() {
        let mut io = TestIo::new();
        let mut r = requester(1024, 0);
        r.set_rnr_retry(1);
        io.post(SendOp::Send, 100);
        start(&mut r, &mut io);
        r.on_response(&rnr(0), 0, &mut io).unwrap();
        assert_eq!(r.on_response(&rnr(0), 0, &mut io), Err(Discard::Psn));
        assert!(!r.is_stopped());
        assert_eq!(io.events, [Event::RnrNak]);
        // After the wait and the one retry, a second RNR NAK fails it.
        r.on_timer(1, &mut io);
        assert!(!r.is_stopped());
        r.on_response(&rnr(0), 1, &mut io).unwrap();
        assert!(r.is_stopped());
        assert_eq!(io.done[0].status, WcStatus::RnrRetryExcErr);
    }

    #[test]
    fn acks_out_of_reach_are_refused() {
        let mut io = TestIo::new();
        let mut r = requester(1024, 100);
        io.post(SendOp::Send, 100);
        io.post(SendOp::Send, 100);
        start(&mut r, &mut io);
        // Far ahead (a forger's guess), or long behind: neither completes.
        assert_eq!(r.on_response(&ack(5000), 0, &mut io), Err(Discard::Psn));
        assert_eq!(r.on_response(&ack(90), 0, &mut io), Err(Discard::Psn));
        assert!(io.done.is_empty());
        // The last ACK again (`una - 1`) is taken and does nothing.
        assert_eq!(r.on_response(&ack(99), 0, &mut io), Ok(()));
        r.on_response(&ack(101), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 2);
    }

    #[test]
    fn a_datagram_held_by_its_rate_waits_and_those_after_it_too() {
        let mut io = TestIo::new();
        let mut c = Config::new(Transport::Ud, 1024);
        c.max_rd_atomic = 0;
        let mut r = Requester::new(c, vec![Span::EMPTY; 8], Psn::new(0));
        r.set_sending(true);
        for _ in 0..3 {
            io.post(SendOp::Send, 100);
        }
        // The second's destination is slowed down: 2.5 ms to wait.
        io.hold_dgram.push((1, 2500));
        r.set_checked(3);
        r.send_pending(0, &mut io);
        assert_eq!(io.datagrams, [(0, Psn::new(0))]);
        assert_eq!(io.done.len(), 1);
        assert_eq!(io.timer, Some(3), "the timer is armed for the wait");
        // Still held when the timer comes early: nothing goes.
        r.on_timer(3, &mut io);
        assert_eq!(io.datagrams.len(), 1);
        // Its time has come: it goes, and the one behind it.
        io.hold_dgram.clear();
        r.on_timer(6, &mut io);
        assert_eq!(
            io.datagrams,
            [(0, Psn::new(0)), (1, Psn::new(1)), (2, Psn::new(2))]
        );
        assert_eq!(io.done.len(), 3);
        assert!(!r.outstanding());
    }

    #[test]
    fn datagrams_complete_once_sent() {
        let mut io = TestIo::new();
        let mut c = Config::new(Transport::Ud, 1024);
        c.max_rd_atomic = 0;
        let mut r = Requester::new(c, vec![Span::EMPTY; 8], Psn::new(7));
        io.post(SendOp::Send, 100);
        io.post(SendOp::SendImm, 200);
        io.post(SendOp::Send, 300);
        io.absent = 0;
        r.set_sending(false);
        start(&mut r, &mut io);
        assert!(io.datagrams.is_empty(), "nothing outside RTS");
        r.set_sending(true);
        io.absent = 0;
        r.send_pending(0, &mut io);
        assert_eq!(
            io.datagrams,
            [(0, Psn::new(7)), (1, Psn::new(8)), (2, Psn::new(9))]
        );
        let lens: Vec<u32> = io.done.iter().map(|c| c.byte_len).collect();
        assert_eq!(lens, [100, 200, 300]);
        assert!(!r.outstanding());
        // One whose data is not mapped goes, with its PSN, after the wait.
        io.post(SendOp::Send, 50);
        io.absent = 1;
        r.set_checked(1);
        r.send_pending(0, &mut io);
        assert_eq!(io.timer, Some(1));
        r.on_timer(1, &mut io);
        assert_eq!(io.datagrams[3], (3, Psn::new(10)));
    }

    #[test]
    fn a_blocked_wqe_fails_alone() {
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        io.post(SendOp::Send, 10);
        io.wqes.push(Wqe {
            op: Some(SendOp::Send),
            len: Err(WcStatus::LocLenErr),
            fence: false,
        });
        start(&mut r, &mut io);
        assert_eq!(io.psns(), [0]);
        r.on_response(&rnr(0), 0, &mut io).unwrap();
        // A stale ACK while the requester waits.
        r.on_response(&ack(0xff_ffff), 0, &mut io).unwrap();
        assert!(io.done.is_empty(), "{:?}", io.done);
        r.on_timer(0, &mut io);
        assert_eq!(io.psns(), [0, 0]);
        r.on_response(&ack(0), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 2);
        assert_eq!(io.done[0].status, WcStatus::Success);
        assert_eq!(
            (io.done[1].wqe, io.done[1].status),
            (1, WcStatus::LocLenErr)
        );
    }

    /// Departure 4: a WQE resumed part-way keeps its length.
    #[test]
    fn a_resumed_wqe_keeps_its_shape() {
        let mut io = TestIo::new();
        let mut r = wide_requester(256, 0);
        io.post(SendOp::RdmaWrite, 300 * 256);
        start(&mut r, &mut io);
        io.wqes[0].len = Ok(10);
        r.on_response(&ack(255), 0, &mut io).unwrap();
        assert_eq!(io.segs.len(), 300);
        assert!(io
            .segs
            .iter()
            .all(|s| s.msg_len == 300 * 256 && s.len == 256));
    }

    #[test]
    fn limits_on_reads_and_fences() {
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        r.set_max_rd_atomic(2);
        for _ in 0..3 {
            io.post(SendOp::CmpSwap, 8);
        }
        io.post(SendOp::Send, 8);
        start(&mut r, &mut io);
        assert_eq!(io.psns(), [0, 1], "two atomics at once");
        assert_eq!(r.reads_out(), 2);
        r.on_response(&atomic_ack(0, 1), 0, &mut io).unwrap();
        assert_eq!(io.psns(), [0, 1, 2, 3]);
        // A fenced WRITE waits for the reads and atomics before it.
        let mut io = TestIo::new();
        let mut r = requester(256, 0);
        io.post(SendOp::RdmaRead, 8);
        io.post(SendOp::RdmaWrite, 8);
        io.wqes[1].fence = true;
        start(&mut r, &mut io);
        assert_eq!(io.psns(), [0]);
        let resp = read_resp(Opcode::RcRdmaReadResponseOnly, 0, &[0; 8]);
        r.on_response(&resp, 0, &mut io).unwrap();
        assert_eq!(io.psns(), [0, 1]);
    }

    #[test]
    fn uc_completes_once_sent() {
        let mut io = TestIo::new();
        let mut r = Requester::new(
            Config::new(Transport::Uc, 256),
            vec![Span::EMPTY; 8],
            Psn::ZERO,
        );
        io.post(SendOp::Send, 600);
        io.post(SendOp::RdmaRead, 8);
        start(&mut r, &mut io);
        assert_eq!(io.segs.len(), 3);
        assert!(io.segs.iter().all(|s| !s.ack_req));
        assert_eq!(io.done.len(), 2);
        assert_eq!(io.done[1].status, WcStatus::LocQpOpErr, "UC cannot read");
        assert_eq!(r.on_response(&ack(0), 0, &mut io), Err(Discard::Transport));
    }

    #[test]
    fn xrc_is_reliable_with_its_own_opcodes() {
        let mut io = TestIo::new();
        let mut c = Config::new(Transport::Xrc, 256);
        c.max_rd_atomic = 4;
        let mut r = Requester::new(c, vec![Span::EMPTY; 8], Psn::ZERO);
        io.post(SendOp::Send, 300);
        io.post(SendOp::RdmaRead, 8);
        io.post(SendOp::FetchAdd, 8);
        io.post(SendOp::RdmaWriteImm, 8);
        start(&mut r, &mut io);
        let ops: Vec<Opcode> = io.segs.iter().map(|s| s.opcode).collect();
        assert_eq!(
            ops,
            [
                Opcode::XrcSendFirst,
                Opcode::XrcSendLast,
                Opcode::XrcRdmaReadRequest,
                Opcode::XrcFetchAdd,
                Opcode::XrcRdmaWriteOnlyImm,
            ]
        );
        // Nothing completes until answered, and the retry timer runs.
        assert!(io.done.is_empty());
        assert_eq!(io.timer, Some(timeout_ms(14).unwrap()));
        assert!(io.segs.last().unwrap().ack_req);
        // An RC answer is another transport's: refused.
        assert_eq!(r.on_response(&ack(1), 0, &mut io), Err(Discard::Transport));
        let xrc = |p: Packet<'static>| Packet {
            opcode: p.opcode.on_transport(Transport::Xrc).unwrap(),
            ..p
        };
        r.on_response(&xrc(ack(1)), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 1);
        let resp = read_resp(Opcode::XrcRdmaReadResponseOnly, 2, &[1; 8]);
        r.on_response(&resp, 0, &mut io).unwrap();
        r.on_response(&xrc(atomic_ack(3, 9)), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 3);
        // A sequence NAK goes back, as on RC.
        r.on_response(&xrc(nak(4, NakCode::PsnSequenceError)), 0, &mut io)
            .unwrap();
        assert_eq!(io.psns(), [0, 1, 2, 3, 4, 4]);
        assert_eq!(io.segs[5].opcode, Opcode::XrcRdmaWriteOnlyImm);
        r.on_response(&xrc(ack(4)), 0, &mut io).unwrap();
        assert_eq!(io.done.len(), 4);
        assert!(io.done.iter().all(|c| c.status == WcStatus::Success));
        assert!(!r.outstanding());
    }

    #[test]
    fn xrc_has_no_flush_or_atomic_write() {
        for op in [SendOp::Flush, SendOp::AtomicWrite] {
            let mut io = TestIo::new();
            let c = Config::new(Transport::Xrc, 256);
            let mut r = Requester::new(c, vec![Span::EMPTY; 8], Psn::ZERO);
            io.post(op, 8);
            start(&mut r, &mut io);
            assert!(io.segs.is_empty());
            assert_eq!(io.done[0].status, WcStatus::LocQpOpErr, "{op:?}");
        }
    }

    #[test]
    fn starved_reads_overdraw() {
        let mut io = TestIo::new();
        io.credits = 10;
        let mut r = requester(256, 0);
        io.post(SendOp::RdmaRead, 64 * 256);
        start(&mut r, &mut io);
        assert!(io.segs.is_empty());
        assert_eq!(io.timer, Some(1), "it polls without a retry");
        r.on_timer(CREDIT_STARVED_MS - 1, &mut io);
        assert!(io.segs.is_empty());
        r.on_timer(CREDIT_STARVED_MS, &mut io);
        assert_eq!(io.segs.len(), 1);
        assert_eq!(io.credits, 10 - 64);
        // A go-back gives them back.
        r.on_timer(CREDIT_STARVED_MS, &mut io);
        assert_eq!(r.credits_held(), 64);
        assert_eq!(io.credits, 10 - 64);
    }

    #[derive(Clone, Debug)]
    enum Step {
        Post(u8, u32, bool),
        Ack(i32),
        Nak(i32, u8),
        Rnr(i32),
        ReadResp(i32, u8, u16),
        AtomicAck(i32),
        Timer(u8),
    }

    fn event() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u8..9, 0u32..1400, any::<bool>()).prop_map(|(o, l, f)| Step::Post(o, l, f)),
            (-4i32..300).prop_map(Step::Ack),
            (-4i32..300, 0u8..4).prop_map(|(p, c)| Step::Nak(p, c)),
            (-4i32..300).prop_map(Step::Rnr),
            (-4i32..300, 0u8..4, 0u16..300).prop_map(|(p, o, l)| Step::ReadResp(p, o, l)),
            (-4i32..300).prop_map(Step::AtomicAck),
            (0u8..250).prop_map(Step::Timer),
        ]
    }

    const ZEROS: [u8; 300] = [0; 300];

    const OPS: [SendOp; 9] = [
        SendOp::Send,
        SendOp::SendImm,
        SendOp::RdmaWrite,
        SendOp::RdmaWriteImm,
        SendOp::RdmaRead,
        SendOp::CmpSwap,
        SendOp::FetchAdd,
        SendOp::AtomicWrite,
        SendOp::Flush,
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever a peer answers, and in whatever order: the window and
        /// the read limits hold, PSNs are handed out in order across the
        /// 2^24 wrap, WQEs complete once each and in order, and nothing
        /// is sent once stopped.
        #[test]
        fn requester_invariants(
            near_wrap in any::<bool>(),
            psn in any::<u32>(),
            window in 2u32..40,
            read_window in 1u32..20,
            max_rd_atomic in 0u8..4,
            events in proptest::collection::vec(event(), 1..200),
        ) {
            let sq_psn = if near_wrap { 0xff_ffff - psn % 64 } else { psn & 0xff_ffff };
            let mut c = Config::new(Transport::Rc, 256);
            c.window = window;
            c.read_window = read_window;
            c.max_rd_atomic = max_rd_atomic;
            c.budget = 16;
            let mut r = Requester::new(c, vec![Span::EMPTY; 64], Psn::new(sq_psn));
            let mut io = TestIo::new();
            let mut now = 0i64;
            // One past the highest PSN handed out.
            let mut high = Psn::new(sq_psn);
            for e in events {
                let before = io.segs.len();
                let stopped = r.is_stopped();
                let base = r.una();
                // CAST: a signed step from `una`, wrapping.
                let at = |d: i32| base.wrapping_add(d as u32).get();
                let reply = match e {
                    Step::Post(o, len, fence) => {
                        if io.wqes.len() - r.consumer() as usize >= 64 {
                            continue;
                        }
                        let op = OPS[usize::from(o)];
                        let len = match op {
                            SendOp::CmpSwap | SendOp::FetchAdd | SendOp::AtomicWrite => 8,
                            _ => len,
                        };
                        io.wqes.push(Wqe { op: Some(op), len: Ok(len), fence });
                        r.set_checked(io.wqes.len() as u32 - r.consumer());
                        r.send_pending(now, &mut io);
                        None
                    }
                    Step::Ack(d) => Some(ack(at(d))),
                    Step::Nak(d, code) => Some(nak(at(d), NakCode::from_u8(code).unwrap())),
                    Step::Rnr(d) => Some(rnr(at(d))),
                    Step::ReadResp(d, o, len) => {
                        let op = [
                            Opcode::RcRdmaReadResponseFirst,
                            Opcode::RcRdmaReadResponseMiddle,
                            Opcode::RcRdmaReadResponseLast,
                            Opcode::RcRdmaReadResponseOnly,
                        ][usize::from(o)];
                        let data = &ZEROS[..usize::from(len)];
                        Some(read_resp(op, at(d), data))
                    }
                    Step::AtomicAck(d) => Some(atomic_ack(at(d), 0)),
                    Step::Timer(ms) => {
                        now += i64::from(ms);
                        r.on_timer(now, &mut io);
                        None
                    }
                };
                if let Some(p) = reply {
                    let _ = r.on_response(&p, now, &mut io);
                }
                prop_assert!(r.una().distance(r.npsn()) <= window);
                prop_assert!(r.reads_out() <= u32::from(max_rd_atomic).max(1));
                prop_assert!(io.credits + i64::from(r.credits_held()) == 192);
                if stopped {
                    prop_assert_eq!(io.segs.len(), before, "nothing sent once stopped");
                }
                for s in &io.segs[before..] {
                    // From the window: at or after `una`, and new PSNs in
                    // order.
                    prop_assert!(s.psn.diff(r.una()) >= 0, "{:?} before una", s.psn);
                    prop_assert!(s.psn.diff(high) <= 0, "{:?} after {:?}", s.psn, high);
                    prop_assert_eq!(Some(s.op), io.wqes[s.wqe as usize].op);
                    let n = if s.opcode == Opcode::RcRdmaReadRequest {
                        s.len.div_ceil(256).max(1)
                    } else {
                        1
                    };
                    if s.psn == high {
                        high = high.wrapping_add(n);
                    }
                    if s.opcode == Opcode::RcRdmaReadRequest {
                        // One piece, and responses due from before it
                        // leave room for it in the read window.
                        let rw = read_window.min(window);
                        prop_assert!(n <= rw);
                        let due = r.una().distance(s.psn);
                        prop_assert!(due == 0 || due + n <= rw, "{} due, {} asked", due, n);
                    }
                }
                for (i, c) in io.done.iter().enumerate() {
                    prop_assert_eq!(c.wqe as usize, i, "in order, once each");
                }
            }
        }
    }
}
