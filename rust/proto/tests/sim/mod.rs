// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A deterministic discrete-event simulation of RC (or XRC) QP pairs: a
//! [`Requester`] and a [`Responder`] per pair, joined by a link that
//! loses, duplicates, delays and reorders packets, with a test
//! application on each side that posts work and checks every completion
//! and every byte against an oracle.
//!
//! Packets cross the link as bytes: the requester's segments and the
//! responder's answers are encoded with `headers::encode_packet` and
//! parsed with `headers::parse` on the other side, as the driver does.
//! Time is simulated in microseconds; nothing here reads a clock.

use roxe_proto::access::{FLUSH_GLOBAL, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use roxe_proto::aeth::{NakCode, Syndrome};
use roxe_proto::headers::{
    self, Aeth, AtomicAckEth, AtomicEth, Bth, Ext, Feth, ImmDt, Reth, Xrceth, DEFAULT_PKEY,
};
use roxe_proto::opcode::{ExtHeaders, Opcode, Operation, Transport};
use roxe_proto::psn::Psn;
use roxe_proto::req::{self, Completion, Requester, Segment, Span, Wqe};
use roxe_proto::responder::{
    self, AtomicOp, MemError, ReadSegment, RecvCompletion, Responder, ScatterError,
};
use roxe_proto::wr::{SendOp, WcOp, WcStatus};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// xorshift64*: small, fast and the same on every host.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng((seed ^ 0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (0 for `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// True with probability `ppm` per million.
    pub fn ppm(&mut self, ppm: u32) -> bool {
        self.below(1_000_000) < u64::from(ppm)
    }
}

/// How the link misbehaves, per packet and per direction.
#[derive(Clone, Copy, Debug)]
pub struct LinkCfg {
    /// Loss, per million packets.
    pub drop_ppm: u32,
    /// Chance that an outage (everything lost) starts, and its longest
    /// length in microseconds.
    pub burst_ppm: u32,
    pub burst_us: u64,
    /// Duplication, per million.
    pub dup_ppm: u32,
    /// Chance of an extra delay (which reorders), and its largest value.
    pub reorder_ppm: u32,
    pub reorder_us: u64,
    /// Propagation delay, and a jitter on every packet.
    pub latency_us: u64,
    pub jitter_us: u64,
    /// Serialisation: bytes per microsecond (1250 is 10 Gb/s).
    pub bytes_per_us: u64,
}

impl LinkCfg {
    pub const CLEAN: LinkCfg = LinkCfg {
        drop_ppm: 0,
        burst_ppm: 0,
        burst_us: 0,
        dup_ppm: 0,
        reorder_ppm: 0,
        reorder_us: 0,
        latency_us: 20,
        jitter_us: 0,
        bytes_per_us: 1250,
    };

    pub const LOSSY: LinkCfg = LinkCfg {
        drop_ppm: 10_000,
        burst_ppm: 200,
        burst_us: 100,
        dup_ppm: 10_000,
        reorder_ppm: 5_000,
        reorder_us: 100,
        latency_us: 20,
        jitter_us: 0,
        bytes_per_us: 1250,
    };
}

/// The operations a test application posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// Every operation.
    All,
    /// SENDs only.
    Sends,
    /// RDMA READs only.
    Reads,
    /// CmpSwap and FetchAdd only.
    Atomics,
}

/// One QP pair's settings.
#[derive(Clone, Copy, Debug)]
pub struct PairCfg {
    /// RC, or XRC (an initiator QP and a target QP).
    pub transport: Transport,
    pub mtu: u32,
    pub sq_psn: u32,
    pub messages: u64,
    pub max_rd_atomic: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub timeout: u8,
    pub min_rnr_timer: u8,
    /// Receive WQEs the responder's application keeps posted, and how
    /// often (us) it tops them up.
    pub recv_target: usize,
    pub recv_period_us: u64,
    /// The largest message.
    pub max_len: u32,
    /// Which operations the application posts.
    pub mix: Mix,
    /// The test expects the pair to fail.
    pub may_fail: bool,
    /// Per million accesses, the memory is not mapped yet, as with
    /// on-demand paging before the driver faulted it in: the responder's
    /// (a receive buffer, the target of a write, read or atomic) and the
    /// requester's (a SEND's or WRITE's source, where a read's or
    /// atomic's result lands).
    pub absent_ppm: u32,
}

impl PairCfg {
    pub fn new(mtu: u32, sq_psn: u32, messages: u64) -> PairCfg {
        PairCfg {
            transport: Transport::Rc,
            mtu,
            sq_psn,
            messages,
            max_rd_atomic: 16,
            retry_cnt: 7,
            rnr_retry: 7,
            timeout: 12,
            min_rnr_timer: 1,
            recv_target: 64,
            recv_period_us: 20,
            max_len: 64 * 1024,
            mix: Mix::All,
            may_fail: false,
            absent_ppm: 0,
        }
    }
}

pub const SQ_SLOTS: u32 = 128;
const MEM_SIZE: usize = 256 * 1024;
const MEM_VA: u64 = 0x7f00_0000_1000;
const RKEY: u32 = 0x0012_3401;
/// The bytes at the start of the remote memory that atomics target.
const ATOMIC_AREA: usize = 512;
const POOL_SIZE: usize = 1 << 20;
/// The whole device's read credits (`limits::READ_CREDITS`).
pub const READ_CREDITS: i64 = 192;
const DEST_QPN: u32 = 0x11;
/// The XRC SRQ every XRC request names.
const SRQN: u32 = 0x00ab_cd01;

/// The device's read credit pool, shared by every pair.
pub struct Credits {
    avail: i64,
    pub overdrafts: u64,
}

/// A send WQE as the test application posted it, with what it expects.
struct SimWqe {
    op: SendOp,
    len: u32,
    fence: bool,
    /// Offset of its data in the source pool.
    src: usize,
    /// Remote offset (into the responder's memory).
    roff: usize,
    imm: u32,
    swap_add: u64,
    compare: u64,
    /// Where a read or atomic result lands.
    local: Vec<u8>,
    /// A read's expected bytes, an atomic's expected original value.
    expect: Vec<u8>,
}

/// A receive completion the responder's application expects.
struct ExpectRecv {
    op: WcOp,
    len: u32,
    src: usize,
    imm: Option<u32>,
}

/// A receive WQE handed to the responder: its id and capacity.
pub struct RecvWqe {
    id: u64,
    cap: u32,
}

#[derive(Default, Debug, Clone)]
pub struct Stats {
    pub to_resp: u64,
    pub to_req: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub retransmitted: u64,
    pub seq_naks: u64,
    pub rnr_naks: u64,
    /// Accesses that found the responder's memory not mapped yet.
    pub not_present: u64,
    /// Accesses that found the requester's memory not mapped yet.
    pub req_not_present: u64,
    pub timers: u64,
    pub req_discards: HashMap<String, u64>,
    pub resp_discards: HashMap<String, u64>,
    pub completions: u64,
    pub recvs: u64,
    pub atomics_executed: u64,
    /// CmpSwap and FetchAdd WQEs posted.
    pub atomics_posted: u64,
    /// ATOMIC ACKNOWLEDGEs sent (replays included).
    pub atomic_acks: u64,
    /// Read response packets sent again for a duplicate request.
    pub read_replays: u64,
    /// Read credit takes that found the pool short.
    pub credit_shortages: u64,
}

/// Requester-side state outside the machine.
struct ReqSide {
    cfg: PairCfg,
    sq: Vec<Option<SimWqe>>,
    producer: u32,
    /// The next completion expected, in SQ order.
    expect_next: u32,
    posted: u64,
    completed: u64,
    /// Completions with an error, in order.
    errors: Vec<Completion>,
    fatal: bool,
    fatal_at: Option<u64>,
    flushed: u64,
    timer_gen: u64,
    /// When the timer fired (and found its expiry current).
    timer_fires: Vec<u64>,
    /// One past the highest PSN sent so far.
    high_psn: Psn,
    retransmitted: u64,
    /// Transmissions of each PSN (kept only when asked for).
    psn_sends: Option<HashMap<u32, Vec<u64>>>,
}

/// Responder-side state outside the machine.
struct RespSide {
    rq: VecDeque<RecvWqe>,
    bufs: HashMap<u64, Vec<u8>>,
    next_recv_id: u64,
    mem: Vec<u8>,
    expect: VecDeque<ExpectRecv>,
    recvs: u64,
    fatal: bool,
    /// Post no receives (the RNR test).
    starve: bool,
    /// One past the highest read response PSN sent.
    read_high: Option<Psn>,
    /// [`PairCfg::absent_ppm`].
    absent_ppm: u32,
    /// [`PairCfg::transport`].
    transport: Transport,
}

pub struct Pair {
    req: Requester<Vec<Span>>,
    resp: Responder<RecvWqe>,
    rs: ReqSide,
    ps: RespSide,
    /// The application's own copy of the responder's memory, updated in
    /// post order.
    shadow: Vec<u8>,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A packet reaches the responder (`true`) or the requester.
    Deliver(usize, bool, Vec<u8>),
    Timer(usize, u64),
    PostRecv(usize),
}

struct Net {
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Kind)>>,
    rng: Rng,
    link: LinkCfg,
    /// Per pair and direction (0 to the responder): serialisation end,
    /// and the end of an outage.
    busy: Vec<[u64; 2]>,
    burst: Vec<[u64; 2]>,
    /// From this time on nothing crosses the link.
    cut_at: Option<u64>,
    stats: Stats,
    /// The last events of each pair, for a failure message.
    trace: Vec<VecDeque<String>>,
}

impl Net {
    fn note(&mut self, pair: usize, line: String) {
        let t = &mut self.trace[pair];
        if t.len() == 400 {
            t.pop_front();
        }
        t.push_back(format!("{:>10} {line}", self.now));
    }

    fn push(&mut self, at: u64, kind: Kind) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, kind)));
    }

    fn send(&mut self, pair: usize, to_resp: bool, bytes: Vec<u8>) {
        let d = usize::from(!to_resp);
        if to_resp {
            self.stats.to_resp += 1;
        } else {
            self.stats.to_req += 1;
        }
        let start = self.busy[pair][d].max(self.now);
        // CAST: a packet is a few KiB.
        let end = start + (bytes.len() as u64).div_ceil(self.link.bytes_per_us);
        self.busy[pair][d] = end;
        if self.cut_at.is_some_and(|t| self.now >= t) {
            self.stats.dropped += 1;
            return;
        }
        let l = self.link;
        if self.now < self.burst[pair][d] {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.ppm(l.burst_ppm) {
            self.burst[pair][d] = self.now + 1 + self.rng.below(l.burst_us);
            self.stats.dropped += 1;
            return;
        }
        if self.rng.ppm(l.drop_ppm) {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.ppm(l.dup_ppm) {
            self.stats.duplicated += 1;
            self.schedule(pair, to_resp, end, bytes.clone());
        }
        self.schedule(pair, to_resp, end, bytes);
    }

    /// Delivers a packet that left the wire at `end`, late if it is one of
    /// the packets the link reorders.
    fn schedule(&mut self, pair: usize, to_resp: bool, end: u64, bytes: Vec<u8>) {
        let l = self.link;
        let mut at = end + l.latency_us + self.rng.below(l.jitter_us + 1);
        if self.rng.ppm(l.reorder_ppm) {
            self.stats.reordered += 1;
            at += 1 + self.rng.below(l.reorder_us);
        }
        self.push(at, Kind::Deliver(pair, to_resp, bytes));
    }
}

fn encode(bth: &mut Bth, ext: &Ext, payload: &[u8]) -> Vec<u8> {
    bth.pad = headers::pad_len(payload.len());
    let opcode = Opcode::from_u8(bth.opcode).expect("an opcode the machines chose");
    let n = headers::packet_len(opcode, payload.len()).expect("a packet length");
    let mut out = vec![0u8; n];
    headers::encode_packet(bth, ext, payload, &mut out).expect("the machines' headers encode");
    out
}

/// The requester's kernel side, for one call.
struct ReqIo<'a> {
    pair: usize,
    side: &'a mut ReqSide,
    net: &'a mut Net,
    pool: &'a [u8],
    credits: &'a mut Credits,
}

fn slot(idx: u32) -> usize {
    (idx % SQ_SLOTS) as usize
}

impl ReqIo<'_> {
    /// Whether this access finds the requester's memory not mapped yet.
    fn absent(&mut self) -> bool {
        let hit = self.net.rng.ppm(self.side.cfg.absent_ppm);
        if hit {
            self.net.stats.req_not_present += 1;
        }
        hit
    }
}

impl req::Io for ReqIo<'_> {
    fn queued(&mut self, consumer: u32) -> Option<u32> {
        Some(self.side.producer.wrapping_sub(consumer))
    }

    fn wqe(&mut self, idx: u32) -> Wqe {
        let w = self.side.sq[slot(idx)].as_ref().expect("a posted WQE");
        Wqe {
            op: Some(w.op),
            len: Ok(w.len),
            fence: w.fence,
        }
    }

    fn local_op(&mut self, _idx: u32, _op: SendOp) -> Result<(), WcStatus> {
        Ok(())
    }

    fn transmit(&mut self, seg: &Segment) -> Result<(), ScatterError> {
        let carries_data = matches!(
            seg.opcode.operation(),
            Operation::Send | Operation::RdmaWrite | Operation::AtomicWrite
        );
        if carries_data && self.absent() {
            return Err(ScatterError::NotPresent);
        }
        let w = self.side.sq[slot(seg.wqe)].as_ref().expect("a posted WQE");
        assert_eq!(w.op, seg.op, "segment of {seg:?}");
        if seg.psn.diff(self.side.high_psn) < 0 {
            self.net.stats.retransmitted += 1;
            self.side.retransmitted += 1;
        } else {
            let n = if seg.opcode.operation() == Operation::RdmaReadRequest {
                seg.len.div_ceil(self.side.cfg.mtu).max(1)
            } else {
                1
            };
            self.side.high_psn = seg.psn.wrapping_add(n);
        }
        if let Some(m) = self.side.psn_sends.as_mut() {
            m.entry(seg.psn.get()).or_default().push(self.net.now);
        }
        let mut bth = Bth::new(seg.opcode, DEFAULT_PKEY, DEST_QPN, seg.psn);
        bth.ack_req = seg.ack_req;
        let va = MEM_VA + w.roff as u64;
        let mut ext = Ext {
            xrceth: seg
                .opcode
                .ext_headers()
                .contains(ExtHeaders::XRCETH)
                .then_some(Xrceth { srqn: SRQN }),
            ..Ext::default()
        };
        let mut payload: &[u8] = &[];
        match seg.opcode.operation() {
            Operation::Send | Operation::RdmaWrite => {
                let at = w.src + seg.offset as usize;
                payload = &self.pool[at..at + seg.len as usize];
                if seg.opcode.operation() == Operation::RdmaWrite && seg.position().starts_message()
                {
                    ext.reth = Some(Reth {
                        va,
                        rkey: RKEY,
                        dma_len: seg.msg_len,
                    });
                }
                if seg.opcode.has_immediate() {
                    ext.immdt = Some(ImmDt(w.imm));
                }
            }
            Operation::RdmaReadRequest => {
                ext.reth = Some(Reth {
                    va: va + u64::from(seg.offset),
                    rkey: RKEY,
                    dma_len: seg.len,
                });
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                ext.atomic_eth = Some(AtomicEth {
                    va,
                    rkey: RKEY,
                    swap_add: w.swap_add,
                    compare: w.compare,
                });
            }
            Operation::AtomicWrite => {
                payload = &self.pool[w.src..w.src + 8];
                ext.reth = Some(Reth {
                    va,
                    rkey: RKEY,
                    dma_len: 8,
                });
            }
            Operation::Flush => {
                ext.feth = Some(Feth {
                    selectivity: 0,
                    placement_type: 1,
                });
                ext.reth = Some(Reth {
                    va,
                    rkey: RKEY,
                    dma_len: seg.len,
                });
            }
            o => panic!("the requester sent {o:?}"),
        }
        self.net.note(
            self.pair,
            format!(
                "req -> {:?} {:?}{} wqe {} off {} len {}",
                seg.opcode,
                seg.psn,
                if seg.ack_req { " A" } else { "" },
                seg.wqe,
                seg.offset,
                seg.len
            ),
        );
        let bytes = encode(&mut bth, &ext, payload);
        self.net.send(self.pair, true, bytes);
        Ok(())
    }

    fn datagram(&mut self, _idx: u32, _op: SendOp, _psn: Psn) -> Result<Option<u32>, ScatterError> {
        unreachable!("the simulated pairs are connected")
    }

    fn scatter(&mut self, idx: u32, off: u32, data: &[u8]) -> Result<(), ScatterError> {
        if self.absent() {
            return Err(ScatterError::NotPresent);
        }
        let w = self.side.sq[slot(idx)].as_mut().expect("a posted WQE");
        let off = off as usize;
        let dst = w
            .local
            .get_mut(off..off + data.len())
            .ok_or(ScatterError::Failed(WcStatus::LocLenErr))?;
        dst.copy_from_slice(data);
        Ok(())
    }

    fn complete(&mut self, c: &Completion) {
        let s = &mut *self.side;
        assert_eq!(c.wqe, s.expect_next, "completions in order");
        s.expect_next = s.expect_next.wrapping_add(1);
        let w = s.sq[slot(c.wqe)].take().expect("completed once");
        assert_eq!(c.op, w.op);
        self.net.stats.completions += 1;
        if c.status != WcStatus::Success {
            s.errors.push(*c);
            return;
        }
        s.completed += 1;
        let want_len = match w.op {
            SendOp::CmpSwap | SendOp::FetchAdd | SendOp::AtomicWrite => 8,
            SendOp::Flush => 0,
            _ => w.len,
        };
        assert_eq!(c.byte_len, want_len, "{:?} byte_len", w.op);
        match w.op {
            SendOp::RdmaRead | SendOp::CmpSwap | SendOp::FetchAdd => {
                assert!(
                    w.local == w.expect,
                    "{:?} of {} bytes at remote offset {} returned other data",
                    w.op,
                    w.len,
                    w.roff
                );
            }
            _ => {}
        }
    }

    fn fatal(&mut self, from: u32) -> u32 {
        let s = &mut *self.side;
        s.fatal = true;
        s.fatal_at = Some(self.net.now);
        let mut i = from;
        while i != s.producer {
            s.sq[slot(i)] = None;
            s.flushed += 1;
            i = i.wrapping_add(1);
        }
        s.expect_next = s.producer;
        s.producer
    }

    fn arm_timer(&mut self, ms: u32) {
        self.side.timer_gen += 1;
        let at = self.net.now + u64::from(ms) * 1000;
        self.net
            .push(at, Kind::Timer(self.pair, self.side.timer_gen));
    }

    fn take_credits(&mut self, n: u32) -> bool {
        let n = i64::from(n);
        if self.credits.avail >= n {
            self.credits.avail -= n;
            true
        } else {
            self.net.stats.credit_shortages += 1;
            false
        }
    }

    fn overdraw_credits(&mut self, n: u32) -> bool {
        let n = i64::from(n);
        if self.credits.avail - n >= -READ_CREDITS {
            self.credits.avail -= n;
            self.credits.overdrafts += 1;
            true
        } else {
            false
        }
    }

    fn give_back_credits(&mut self, n: u32) {
        self.credits.avail += i64::from(n);
    }
}

/// The responder's kernel side, for one call.
struct RespIo<'a> {
    pair: usize,
    side: &'a mut RespSide,
    net: &'a mut Net,
    pool: &'a [u8],
}

impl RespIo<'_> {
    /// Whether this access finds its memory not mapped yet.
    fn absent(&mut self) -> bool {
        let hit = self.net.rng.ppm(self.side.absent_ppm);
        if hit {
            self.net.stats.not_present += 1;
        }
        hit
    }

    fn range(&self, rkey: u32, va: u64, len: u32) -> Option<std::ops::Range<usize>> {
        if rkey != RKEY || va < MEM_VA {
            return None;
        }
        let off = usize::try_from(va - MEM_VA).ok()?;
        let end = off.checked_add(len as usize)?;
        (end <= self.side.mem.len()).then_some(off..end)
    }

    fn answer(&mut self, bth: &mut Bth, ext: &Ext, payload: &[u8]) {
        let what = format!(
            "resp -> {:?} {:?} {:?} len {}",
            Opcode::from_u8(bth.opcode),
            bth.psn,
            ext.aeth.and_then(|a| Syndrome::from_u8(a.syndrome)),
            payload.len()
        );
        self.net.note(self.pair, what);
        let bytes = encode(bth, ext, payload);
        self.net.send(self.pair, false, bytes);
    }
}

impl responder::Io for RespIo<'_> {
    type Recv = RecvWqe;

    fn pop_recv(&mut self) -> Option<RecvWqe> {
        self.side.rq.pop_front()
    }

    fn scatter(&mut self, r: &RecvWqe, off: u64, data: &[u8]) -> Result<(), ScatterError> {
        let end = off + data.len() as u64;
        if end > u64::from(r.cap) {
            return Err(ScatterError::Failed(WcStatus::LocLenErr));
        }
        if self.absent() {
            return Err(ScatterError::NotPresent);
        }
        let buf = self.side.bufs.get_mut(&r.id).expect("a posted receive");
        let (off, end) = (off as usize, end as usize);
        if buf.len() < end {
            buf.resize(end, 0);
        }
        buf[off..end].copy_from_slice(data);
        Ok(())
    }

    fn complete_recv(&mut self, r: RecvWqe, c: &RecvCompletion) {
        let buf = self.side.bufs.remove(&r.id).expect("completed once");
        let e = self
            .side
            .expect
            .pop_front()
            .expect("a receive completion expected");
        assert_eq!(c.status, WcStatus::Success, "receive completion");
        assert_eq!(c.op, e.op);
        assert_eq!(c.byte_len, e.len);
        assert_eq!(c.imm, e.imm);
        if e.op == WcOp::Recv {
            let len = e.len as usize;
            let mut got = buf;
            got.resize(len.max(got.len()), 0);
            assert!(
                got[..len] == self.pool[e.src..e.src + len],
                "SEND of {len} bytes arrived with other data"
            );
        }
        self.side.recvs += 1;
        self.net.stats.recvs += 1;
    }

    fn check_key(&mut self, rkey: u32, va: u64, len: u32, _access: u32) -> bool {
        self.range(rkey, va, len).is_some()
    }

    fn write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), MemError> {
        // CAST: a payload is at most one MTU.
        match self.range(rkey, va, data.len() as u32) {
            Some(_) if self.absent() => Err(MemError::NotPresent),
            Some(r) => {
                self.side.mem[r].copy_from_slice(data);
                Ok(())
            }
            None => Err(MemError::Refused),
        }
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        let r = self.range(rkey, va, 8).ok_or(MemError::Refused)?;
        if self.absent() {
            return Err(MemError::NotPresent);
        }
        let b: [u8; 8] = self.side.mem[r.clone()].try_into().unwrap();
        let v = u64::from_ne_bytes(b);
        self.side.mem[r].copy_from_slice(&op.apply(v).to_ne_bytes());
        self.net.stats.atomics_executed += 1;
        Ok(v)
    }

    fn readable_now(&mut self, _rkey: u32, _va: u64, _len: u32) -> Result<(), MemError> {
        if self.absent() {
            Err(MemError::NotPresent)
        } else {
            Ok(())
        }
    }

    fn flush(&mut self, rkey: u32, va: u64, len: u32, _need: u32, whole: bool) -> bool {
        whole || self.range(rkey, va, len).is_some()
    }

    fn invalidate(&mut self, _rkey: u32) -> bool {
        true
    }

    fn send_ack(&mut self, psn: Psn, syndrome: Syndrome, msn: u32) {
        match syndrome {
            Syndrome::Nak(NakCode::PsnSequenceError) => self.net.stats.seq_naks += 1,
            Syndrome::RnrNak(_) => self.net.stats.rnr_naks += 1,
            _ => {}
        }
        let op = Opcode::acknowledge(self.side.transport);
        let mut bth = Bth::new(op, DEFAULT_PKEY, DEST_QPN, psn);
        let ext = Ext {
            aeth: Some(Aeth {
                syndrome: syndrome.to_u8(),
                msn,
            }),
            ..Ext::default()
        };
        self.answer(&mut bth, &ext, &[]);
    }

    fn send_atomic_ack(&mut self, psn: Psn, orig: u64, msn: u32) {
        self.net.stats.atomic_acks += 1;
        let op = Opcode::atomic_acknowledge(self.side.transport);
        let mut bth = Bth::new(op, DEFAULT_PKEY, DEST_QPN, psn);
        let ext = Ext {
            aeth: Some(Aeth {
                syndrome: Syndrome::ACK.to_u8(),
                msn,
            }),
            atomic_ack_eth: Some(AtomicAckEth { orig }),
            ..Ext::default()
        };
        self.answer(&mut bth, &ext, &[]);
    }

    fn send_read_response(&mut self, seg: &ReadSegment) {
        match self.side.read_high {
            Some(h) if seg.psn.diff(h) < 0 => self.net.stats.read_replays += 1,
            _ => self.side.read_high = Some(seg.psn.next()),
        }
        let mut bth = Bth::new(seg.opcode, DEFAULT_PKEY, DEST_QPN, seg.psn);
        let ext = Ext {
            aeth: seg.msn.map(|msn| Aeth {
                syndrome: Syndrome::ACK.to_u8(),
                msn,
            }),
            ..Ext::default()
        };
        let data = if seg.len == 0 {
            Vec::new()
        } else {
            match self.range(seg.rkey, seg.va, seg.len) {
                Some(r) => self.side.mem[r].to_vec(),
                // The driver sends nothing when the copy fails.
                None => return,
            }
        };
        self.answer(&mut bth, &ext, &data);
    }

    fn fatal(&mut self, _held: Option<RecvWqe>) {
        self.side.fatal = true;
    }
}

pub struct Sim {
    net: Net,
    pub pairs: Vec<Pair>,
    pool: Vec<u8>,
    pub credits: Credits,
    rng: Rng,
    /// Check the machines' invariants after every event.
    pub check_invariants: bool,
}

impl Sim {
    pub fn new(seed: u64, link: LinkCfg, cfgs: &[PairCfg]) -> Sim {
        let mut rng = Rng::new(seed);
        let mut pool = vec![0u8; POOL_SIZE];
        for c in pool.chunks_mut(8) {
            let v = rng.next().to_ne_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
        let mut mem = vec![0u8; MEM_SIZE];
        for c in mem.chunks_mut(8) {
            let v = rng.next().to_ne_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
        let mut pairs = Vec::new();
        for c in cfgs {
            let mut rc = req::Config::new(c.transport, c.mtu);
            rc.max_rd_atomic = c.max_rd_atomic;
            rc.retry_cnt = c.retry_cnt;
            rc.rnr_retry = c.rnr_retry;
            rc.timeout = c.timeout;
            let mut pc = responder::Config::new(c.transport, c.mtu);
            pc.access = REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC | FLUSH_GLOBAL;
            pc.max_dest_rd_atomic = c.max_rd_atomic;
            pc.min_rnr_timer = c.min_rnr_timer;
            let spans = vec![Span::EMPTY; SQ_SLOTS as usize];
            let psn = Psn::new(c.sq_psn);
            pairs.push(Pair {
                req: Requester::new(rc, spans, psn),
                resp: Responder::new(pc, psn),
                rs: ReqSide {
                    cfg: *c,
                    sq: (0..SQ_SLOTS).map(|_| None).collect(),
                    producer: 0,
                    expect_next: 0,
                    posted: 0,
                    completed: 0,
                    errors: Vec::new(),
                    fatal: false,
                    fatal_at: None,
                    flushed: 0,
                    timer_gen: 0,
                    timer_fires: Vec::new(),
                    high_psn: psn,
                    retransmitted: 0,
                    psn_sends: None,
                },
                ps: RespSide {
                    rq: VecDeque::new(),
                    bufs: HashMap::new(),
                    next_recv_id: 1,
                    mem: mem.clone(),
                    expect: VecDeque::new(),
                    recvs: 0,
                    fatal: false,
                    starve: false,
                    read_high: None,
                    absent_ppm: c.absent_ppm,
                    transport: c.transport,
                },
                shadow: mem.clone(),
            });
        }
        let n = pairs.len();
        let mut sim = Sim {
            net: Net {
                now: 0,
                seq: 0,
                queue: BinaryHeap::new(),
                rng: Rng::new(seed.wrapping_mul(31).wrapping_add(7)),
                link,
                busy: vec![[0; 2]; n],
                burst: vec![[0; 2]; n],
                cut_at: None,
                stats: Stats::default(),
                trace: vec![VecDeque::new(); n],
            },
            pairs,
            pool,
            credits: Credits {
                avail: READ_CREDITS,
                overdrafts: 0,
            },
            rng,
            check_invariants: true,
        };
        for i in 0..n {
            sim.net.push(0, Kind::PostRecv(i));
        }
        sim
    }

    pub fn stats(&self) -> &Stats {
        &self.net.stats
    }

    pub fn now_us(&self) -> u64 {
        self.net.now
    }

    /// Nothing crosses the link from `at` (us) on.
    pub fn cut_link_at(&mut self, at: u64) {
        self.net.cut_at = Some(at);
    }

    /// Pair `i`'s responder posts no receives.
    pub fn starve_receives(&mut self, i: usize) {
        self.pairs[i].ps.starve = true;
    }

    /// Counts transmissions per PSN on pair `i`.
    pub fn count_psn_sends(&mut self, i: usize) {
        self.pairs[i].rs.psn_sends = Some(HashMap::new());
    }

    /// When pair `i` sent PSN `psn` (after [`Sim::count_psn_sends`]).
    pub fn psn_sends(&self, i: usize, psn: u32) -> Vec<u64> {
        self.pairs[i]
            .rs
            .psn_sends
            .as_ref()
            .and_then(|m| m.get(&psn).cloned())
            .unwrap_or_default()
    }

    pub fn errors(&self, i: usize) -> &[Completion] {
        &self.pairs[i].rs.errors
    }

    pub fn completed(&self, i: usize) -> u64 {
        self.pairs[i].rs.completed
    }

    /// When pair `i`'s requester failed.
    pub fn fatal_at(&self, i: usize) -> Option<u64> {
        self.pairs[i].rs.fatal_at
    }

    /// When pair `i`'s timer fired.
    pub fn timer_fires(&self, i: usize) -> &[u64] {
        &self.pairs[i].rs.timer_fires
    }

    /// WQEs pair `i` posted.
    pub fn posted(&self, i: usize) -> u64 {
        self.pairs[i].rs.posted
    }

    /// Read credits in the pool.
    pub fn credits_available(&self) -> i64 {
        self.credits.avail
    }

    pub fn flushed(&self, i: usize) -> u64 {
        self.pairs[i].rs.flushed
    }

    pub fn requester(&self, i: usize) -> &Requester<Vec<Span>> {
        &self.pairs[i].req
    }

    /// Each pair's state, for a failure message, with the last events of
    /// each pair that failed (of every pair with `ROXE_SIM_TRACE` set).
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for (i, p) in self.pairs.iter().enumerate() {
            let r = &p.req;
            out += &format!(
                "pair {i} (mtu {}): retransmitted {} posted {} completed {} errors {:?} \
                 fatal {}/{}; \
                 requester consumer {} sent {} producer {} una {:?} npsn {:?} outstanding {} \
                 reads_out {} rnr_wait {} credits {} stopped {}; responder epsn {:?} msn {} \
                 nak_sent {} rq {} expected recvs {}\n",
                p.rs.cfg.mtu,
                p.rs.retransmitted,
                p.rs.posted,
                p.rs.completed,
                p.rs.errors,
                p.rs.fatal,
                p.ps.fatal,
                r.consumer(),
                r.sent(),
                p.rs.producer,
                r.una(),
                r.npsn(),
                r.outstanding(),
                r.reads_out(),
                r.rnr_waiting(),
                r.credits_held(),
                r.is_stopped(),
                p.resp.epsn(),
                p.resp.msn(),
                p.resp.nak_sent(),
                p.ps.rq.len(),
                p.ps.expect.len(),
            );
        }
        out += &format!("credits {} at {} us\n", self.credits.avail, self.net.now);
        for (i, p) in self.pairs.iter().enumerate() {
            if p.rs.fatal || p.ps.fatal || std::env::var_os("ROXE_SIM_TRACE").is_some() {
                out += &format!("pair {i}'s last events:\n");
                for l in &self.net.trace[i] {
                    out += l;
                    out += "\n";
                }
            }
        }
        out
    }

    fn done(&self, i: usize) -> bool {
        let p = &self.pairs[i];
        if p.rs.fatal || p.ps.fatal {
            return p.rs.cfg.may_fail;
        }
        p.rs.posted == p.rs.cfg.messages
            && p.rs.expect_next == p.rs.producer
            && p.ps.expect.is_empty()
    }

    /// Runs until every pair has completed all its messages (or failed),
    /// or the simulated time passes `limit_us`. Returns whether all are
    /// done.
    pub fn run(&mut self, limit_us: u64) -> bool {
        for i in 0..self.pairs.len() {
            self.post_sends(i);
        }
        while let Some(Reverse((at, _, kind))) = self.net.queue.pop() {
            if at > limit_us {
                return false;
            }
            self.net.now = at;
            let now_ms = (at / 1000) as i64;
            let i = match kind {
                Kind::Deliver(i, true, bytes) => {
                    let pkt = headers::parse(&bytes).expect("a packet the machines built");
                    assert_eq!(pkt.opcode.transport(), self.pairs[i].rs.cfg.transport);
                    if pkt.opcode.transport() == Transport::Xrc {
                        assert_eq!(pkt.ext.xrceth, Some(Xrceth { srqn: SRQN }));
                    }
                    self.net.note(
                        i,
                        format!(
                            "resp <- {:?} {:?}{} len {} reth {:?}",
                            pkt.opcode,
                            pkt.bth.psn,
                            if pkt.bth.ack_req { " A" } else { "" },
                            pkt.payload.len(),
                            pkt.ext.reth.map(|r| (r.va - MEM_VA, r.dma_len))
                        ),
                    );
                    let p = &mut self.pairs[i];
                    let mut io = RespIo {
                        pair: i,
                        side: &mut p.ps,
                        net: &mut self.net,
                        pool: &self.pool,
                    };
                    let r = p.resp.on_request(&pkt, &mut io);
                    self.net
                        .note(i, format!("   -> {r:?}: epsn {:?}", p.resp.epsn()));
                    if let Err(d) = r {
                        *self
                            .net
                            .stats
                            .resp_discards
                            .entry(format!("{d:?}"))
                            .or_default() += 1;
                    }
                    i
                }
                Kind::Deliver(i, false, bytes) => {
                    let pkt = headers::parse(&bytes).expect("a packet the machines built");
                    assert_eq!(pkt.opcode.transport(), self.pairs[i].rs.cfg.transport);
                    self.net.note(
                        i,
                        format!(
                            "req <- {:?} {:?} {:?} len {}",
                            pkt.opcode,
                            pkt.bth.psn,
                            pkt.ext.aeth.and_then(|a| Syndrome::from_u8(a.syndrome)),
                            pkt.payload.len()
                        ),
                    );
                    let p = &mut self.pairs[i];
                    let mut io = ReqIo {
                        pair: i,
                        side: &mut p.rs,
                        net: &mut self.net,
                        pool: &self.pool,
                        credits: &mut self.credits,
                    };
                    let r = p.req.on_response(&pkt, now_ms, &mut io);
                    self.net.note(
                        i,
                        format!(
                            "   -> {r:?}: una {:?} npsn {:?} consumer {} sent {}",
                            p.req.una(),
                            p.req.npsn(),
                            p.req.consumer(),
                            p.req.sent()
                        ),
                    );
                    if let Err(d) = r {
                        *self
                            .net
                            .stats
                            .req_discards
                            .entry(format!("{d:?}"))
                            .or_default() += 1;
                    }
                    i
                }
                Kind::Timer(i, gen) => {
                    let p = &mut self.pairs[i];
                    if gen != p.rs.timer_gen {
                        continue;
                    }
                    self.net.stats.timers += 1;
                    p.rs.timer_fires.push(at);
                    self.net.note(i, "timer".into());
                    let mut io = ReqIo {
                        pair: i,
                        side: &mut p.rs,
                        net: &mut self.net,
                        pool: &self.pool,
                        credits: &mut self.credits,
                    };
                    p.req.on_timer(now_ms, &mut io);
                    i
                }
                Kind::PostRecv(i) => {
                    self.post_recvs(i);
                    if !self.done(i) {
                        let at = self.net.now + self.pairs[i].rs.cfg.recv_period_us;
                        self.net.push(at, Kind::PostRecv(i));
                    }
                    i
                }
            };
            self.post_sends(i);
            if self.check_invariants {
                self.check(i);
            }
            let p = &self.pairs[i];
            if (p.rs.fatal || p.ps.fatal) && !p.rs.cfg.may_fail {
                return false;
            }
            if (0..self.pairs.len()).all(|i| self.done(i)) {
                return true;
            }
        }
        (0..self.pairs.len()).all(|i| self.done(i))
    }

    fn check(&self, i: usize) {
        let r = &self.pairs[i].req;
        let c = r.config();
        assert!(
            r.una().distance(r.npsn()) <= c.window,
            "window exceeded: una {:?} npsn {:?}",
            r.una(),
            r.npsn()
        );
        assert!(r.reads_out() <= u32::from(c.max_rd_atomic).max(1));
        let held: i64 = self
            .pairs
            .iter()
            .map(|p| i64::from(p.req.credits_held()))
            .sum();
        assert_eq!(self.credits.avail + held, READ_CREDITS, "credits leak");
    }

    fn post_recvs(&mut self, i: usize) {
        let p = &mut self.pairs[i];
        if p.ps.starve {
            return;
        }
        let cap = p.rs.cfg.max_len;
        while p.ps.rq.len() < p.rs.cfg.recv_target {
            let id = p.ps.next_recv_id;
            p.ps.next_recv_id += 1;
            p.ps.bufs.insert(id, Vec::new());
            p.ps.rq.push_back(RecvWqe { id, cap });
        }
    }

    /// The requester's application posts new WQEs, then rings the
    /// doorbell.
    fn post_sends(&mut self, i: usize) {
        let p = &mut self.pairs[i];
        if p.rs.fatal || p.ps.fatal || p.rs.posted == p.rs.cfg.messages {
            return;
        }
        let consumer = p.req.consumer();
        let room = SQ_SLOTS - p.rs.producer.wrapping_sub(consumer);
        if room < SQ_SLOTS / 4 {
            return;
        }
        let batch = 1 + self.rng.below(16) as u32;
        let mut posted = 0;
        while posted < batch.min(room) && p.rs.posted < p.rs.cfg.messages {
            let w = gen_wqe(&mut self.rng, p, &self.pool);
            if matches!(w.op, SendOp::CmpSwap | SendOp::FetchAdd) {
                self.net.stats.atomics_posted += 1;
            }
            let idx = p.rs.producer;
            assert!(p.rs.sq[slot(idx)].is_none(), "SQ slot reused while busy");
            p.rs.sq[slot(idx)] = Some(w);
            p.rs.producer = idx.wrapping_add(1);
            p.rs.posted += 1;
            posted += 1;
        }
        let now_ms = (self.net.now / 1000) as i64;
        p.req.set_checked(p.rs.producer.wrapping_sub(consumer));
        let mut io = ReqIo {
            pair: i,
            side: &mut p.rs,
            net: &mut self.net,
            pool: &self.pool,
            credits: &mut self.credits,
        };
        p.req.send_pending(now_ms, &mut io);
    }

    /// After a run: every byte of every responder's memory is what the
    /// application meant, and the read credits are all back.
    pub fn check_end(&self) {
        for (i, p) in self.pairs.iter().enumerate() {
            assert!(
                p.ps.mem == p.shadow,
                "pair {i}: the responder's memory is not what the requester wrote"
            );
            assert!(p.ps.expect.is_empty(), "pair {i}: receives still expected");
            assert_eq!(p.rs.completed, p.rs.cfg.messages, "pair {i}: completions");
            assert!(!p.req.outstanding());
        }
        let held: u32 = self.pairs.iter().map(|p| p.req.credits_held()).sum();
        assert_eq!(
            self.credits.avail + i64::from(held),
            READ_CREDITS,
            "read credits lost"
        );
    }
}

fn gen_len(rng: &mut Rng, mtu: u32, max: u32) -> u32 {
    let l = match rng.below(100) {
        0..=39 => rng.below(65) as u32,
        40..=69 => rng.below(u64::from(mtu) + 1) as u32,
        70..=94 => rng.below(4 * u64::from(mtu) + 1) as u32,
        _ => rng.below(u64::from(max) + 1) as u32,
    };
    l.min(max)
}

/// A random WQE for pair `p`, with the oracle updated as the responder
/// will execute it (in post order).
fn gen_wqe(rng: &mut Rng, p: &mut Pair, pool: &[u8]) -> SimWqe {
    let c = p.rs.cfg;
    let op = match c.mix {
        Mix::Sends => SendOp::Send,
        Mix::Reads => SendOp::RdmaRead,
        Mix::Atomics if rng.below(2) == 0 => SendOp::CmpSwap,
        Mix::Atomics => SendOp::FetchAdd,
        Mix::All => match rng.below(100) {
            0..=14 => SendOp::Send,
            15..=29 => SendOp::SendImm,
            30..=44 => SendOp::RdmaWrite,
            45..=59 => SendOp::RdmaWriteImm,
            60..=74 => SendOp::RdmaRead,
            75..=84 => SendOp::CmpSwap,
            85..=94 => SendOp::FetchAdd,
            // XRC has no ATOMIC WRITE or FLUSH: a write or a send instead.
            95..=97 if c.transport == Transport::Xrc => SendOp::RdmaWrite,
            95..=97 => SendOp::AtomicWrite,
            _ if c.transport == Transport::Xrc => SendOp::Send,
            _ => SendOp::Flush,
        },
    };
    let atomic = matches!(op, SendOp::CmpSwap | SendOp::FetchAdd | SendOp::AtomicWrite);
    let len = match op {
        SendOp::CmpSwap | SendOp::FetchAdd | SendOp::AtomicWrite => 8,
        _ => gen_len(rng, c.mtu, c.max_len),
    };
    let src = rng.below((POOL_SIZE - len as usize) as u64) as usize;
    let roff = if atomic {
        let area = if op == SendOp::AtomicWrite {
            MEM_SIZE
        } else {
            ATOMIC_AREA
        };
        rng.below((area / 8) as u64) as usize * 8
    } else {
        rng.below((MEM_SIZE - len as usize + 1) as u64) as usize
    };
    let mut w = SimWqe {
        op,
        len,
        fence: false,
        src,
        roff,
        imm: rng.next() as u32,
        swap_add: rng.next(),
        compare: 0,
        local: Vec::new(),
        expect: Vec::new(),
    };
    // A read answered again after a later write to its bytes would return
    // the new bytes: the application fences writes and atomics that
    // overlap a read not yet complete, as RDMA semantics ask.
    let writes = matches!(
        op,
        SendOp::RdmaWrite | SendOp::RdmaWriteImm | SendOp::CmpSwap | SendOp::FetchAdd
    ) || op == SendOp::AtomicWrite;
    if writes {
        let (a, b) = (roff, roff + len as usize);
        let mut i = p.req.consumer();
        while i != p.rs.producer {
            if let Some(r) = p.rs.sq[slot(i)].as_ref() {
                if r.op == SendOp::RdmaRead && r.roff < b && a < r.roff + r.len as usize {
                    w.fence = true;
                }
            }
            i = i.wrapping_add(1);
        }
    }
    let sh = &mut p.shadow;
    match op {
        SendOp::Send | SendOp::SendImm => p.ps.expect.push_back(ExpectRecv {
            op: WcOp::Recv,
            len,
            src,
            imm: (op == SendOp::SendImm).then_some(w.imm),
        }),
        SendOp::RdmaWrite | SendOp::RdmaWriteImm => {
            sh[roff..roff + len as usize].copy_from_slice(&pool[src..src + len as usize]);
            if op == SendOp::RdmaWriteImm {
                p.ps.expect.push_back(ExpectRecv {
                    op: WcOp::RecvRdmaImm,
                    len,
                    src,
                    imm: Some(w.imm),
                });
            }
        }
        SendOp::RdmaRead => {
            w.expect = sh[roff..roff + len as usize].to_vec();
            w.local = vec![0; len as usize];
        }
        SendOp::CmpSwap | SendOp::FetchAdd => {
            let cur = u64::from_ne_bytes(sh[roff..roff + 8].try_into().expect("8 bytes"));
            let aop = if op == SendOp::CmpSwap {
                // Half of them find the value they compare with.
                w.compare = if rng.below(2) == 0 { cur } else { rng.next() };
                AtomicOp::CmpSwap {
                    swap: w.swap_add,
                    compare: w.compare,
                }
            } else {
                AtomicOp::FetchAdd { add: w.swap_add }
            };
            sh[roff..roff + 8].copy_from_slice(&aop.apply(cur).to_ne_bytes());
            w.expect = cur.to_ne_bytes().to_vec();
            w.local = vec![0; 8];
        }
        SendOp::AtomicWrite => {
            sh[roff..roff + 8].copy_from_slice(&pool[src..src + 8]);
        }
        _ => {}
    }
    w
}
