// SPDX-License-Identifier: GPL-2.0

//! A device's packet counters (`ports/1/hw_counters`, `rdma statistic`):
//! the receive hook's events and parse errors, and why the engines dropped
//! a packet ([`Drop`]). Every part of the data path counts here; this
//! module depends on none of them.

use crate::proto::headers::ParseError;
use crate::proto::pma;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::c_str;
use kernel::str::CStr;

/// Counters that are not a parse error or a data-path drop.
#[derive(Clone, Copy)]
pub(crate) enum Event {
    /// Packets delivered to a QP.
    RxDelivered = 0,
    /// Packets whose ICRC did not match.
    RxBadIcrc,
    /// Packets for a QP number that does not exist.
    RxUnknownQp,
    /// Packets with an IP header roxe does not take (options, not UDP).
    RxBadIp,
    /// Packets the kernel could not make linear.
    RxNoMemory,
    /// Read requests sent on overdrawn read-response credits, by QPs that
    /// starved for them (`proto::req::CREDIT_STARVED_MS`).
    ReadCreditOverdraft,
    /// RC FLUSH requests taken with rxe's ICRC (`Icrc::finish_rxe_flush`).
    RxFlushIcrcRxe,
    /// RC FLUSH requests sent with rxe's ICRC.
    TxFlushIcrcRxe,
    /// Requester: the retry timer went off with work unacknowledged, and
    /// the QP sent again from the oldest unacknowledged PSN.
    ReqTimeout,
    /// Requester: a WQE failed with `RETRY_EXC_ERR` (the retry count was
    /// spent without progress).
    ReqRetryExceeded,
    /// Requester: PSN sequence error NAKs that made the QP go back (one
    /// that arrives while a go-back is under way changes nothing).
    ReqNakSeq,
    /// Requester: RNR NAKs acted on.
    ReqRnrNak,
    /// Requester: a WQE failed with `RNR_RETRY_EXC_ERR`.
    ReqRnrRetryExceeded,
    /// Requester: read responses after a gap that made the QP ask again
    /// from the first one missing (once per go-back).
    ReqResponseGap,
    /// Responder: PSN sequence error NAKs sent (one per gap).
    RespNakSeq,
    /// Responder: RNR NAKs sent.
    RespRnrNak,
    /// Packets handed to the IP layer (rxe's `sent_pkts`).
    TxPackets,
    /// Packets that could not be sent: no skb, or the IP layer or a qdisc
    /// dropped them (rxe's `send_err`). The engines treat them as lost on
    /// the wire: RC sends them again after a NAK or the retry timeout.
    TxErr,
    /// Octets in the packets counted by `TxPackets`, BTH to ICRC.
    TxBytes,
    /// RoCE packets the receive hook took in, good or bad (every packet
    /// that reached the port, and could be read, counts here).
    RxPackets,
    /// Octets in the packets counted by `RxPackets`, BTH to ICRC.
    RxBytes,
    /// Of `TxPackets`, those sent to a multicast group.
    TxMulticast,
    /// Of `RxPackets`, those sent to a multicast group.
    RxMulticast,
    /// Requester: a message's data was in memory paged on demand that was
    /// not mapped; it waited for the fault before sending the packet.
    ReqOdpWait,
    /// A UD datagram met a receive buffer paged on demand that was not
    /// mapped: it was kept until the fault mapped it.
    RespUdParked,
    /// A QP's route no longer stood (its device went down and came back,
    /// or the routing tables changed) and was looked up again at a retry.
    RouteRenewed,
    /// Notification point: packets for a QP that arrived marked CE
    /// (ConnectX's name).
    NpEcnMarked,
    /// Notification point: CNPs sent for them (at most one per QP per
    /// `cnp::Notifier::GAP_US`).
    NpCnpSent,
    /// Reaction point: CNPs that cut a QP's rate.
    RpCnpHandled,
    /// Reaction point: CNPs that came within the decrease period of the
    /// last cut. (A CNP for a QP that is not RC or UC is dropped and
    /// counted in `rx_drop_transport`.)
    RpCnpIgnored,
    /// Raw packet QPs: frames a flow steered to a QP that landed in its
    /// receive queue (one per QP the frame went to).
    RawRx,
    /// Raw packet QPs: frames a flow steered to a QP that had no receive
    /// posted, or whose receive buffer could not take them (lost, as a
    /// NIC's queue would lose them).
    RawRxDrop,
    /// Raw packet QPs: frames handed to the netdev's queue.
    RawTx,
    /// Responder: requests an RC QP kept while its DCQCN rate held its
    /// read responses back (a read request, and those behind it).
    RespPaced,
}

const EVENTS: usize = 34;
const PARSE: usize = ParseError::ALL.len();
const DROPS: usize = Drop::ALL.len();
/// How many counters a device has.
const COUNT: usize = EVENTS + PARSE + DROPS;

/// The counters' names, in order: the events, the parse errors in
/// `ParseError::ALL` order, then the data path's drops in `Drop::ALL` order.
pub(crate) const NAMES: [&CStr; COUNT] = [
    c_str!("rx_delivered"),
    c_str!("rx_drop_icrc"),
    c_str!("rx_drop_unknown_qp"),
    c_str!("rx_drop_ip"),
    c_str!("rx_drop_nomem"),
    c_str!("read_credit_overdraft"),
    c_str!("rx_flush_icrc_rxe"),
    c_str!("tx_flush_icrc_rxe"),
    c_str!("req_timeout"),
    c_str!("req_retry_exceeded"),
    c_str!("req_rx_nak_seq"),
    c_str!("req_rx_rnr_nak"),
    c_str!("req_rnr_retry_exceeded"),
    c_str!("req_response_gap"),
    c_str!("resp_tx_nak_seq"),
    c_str!("resp_tx_rnr_nak"),
    c_str!("tx_packets"),
    c_str!("tx_err"),
    c_str!("tx_bytes"),
    c_str!("rx_packets"),
    c_str!("rx_bytes"),
    c_str!("tx_multicast_packets"),
    c_str!("rx_multicast_packets"),
    c_str!("req_odp_wait"),
    c_str!("resp_ud_parked"),
    c_str!("tx_route_renewed"),
    c_str!("np_ecn_marked_roce_packets"),
    c_str!("np_cnp_sent"),
    c_str!("rp_cnp_handled"),
    c_str!("rp_cnp_ignored"),
    c_str!("raw_rx_frames"),
    c_str!("raw_rx_drop"),
    c_str!("raw_tx_frames"),
    c_str!("resp_paced"),
    c_str!("rx_drop_parse_too_short"),
    c_str!("rx_drop_parse_unknown_opcode"),
    c_str!("rx_drop_parse_bad_version"),
    c_str!("rx_drop_parse_truncated"),
    c_str!("rx_drop_parse_unexpected_payload"),
    c_str!("rx_drop_parse_misaligned"),
    c_str!("rx_drop_transport"),
    c_str!("rx_drop_qp_state"),
    c_str!("rx_drop_qkey"),
    c_str!("rx_drop_psn"),
    c_str!("rx_drop_no_recv"),
    c_str!("rx_drop_key"),
    c_str!("rx_drop_unexpected"),
    c_str!("rx_drop_length"),
    c_str!("rx_drop_duplicate"),
    c_str!("rx_drop_address"),
    c_str!("rx_drop_invalid"),
    c_str!("rx_drop_not_present"),
    c_str!("rx_drop_xrc_srq"),
    c_str!("rx_drop_paced"),
];

/// A device's packet counters.
pub(crate) struct Counters {
    c: [AtomicU64; COUNT],
    /// Where each PMA counter last started from zero (a PMA `Set`). Only
    /// the PMA's view restarts; `hw_counters` keeps counting.
    pma_base: [AtomicU64; pma::FIELDS],
}

impl Counters {
    pub(crate) fn new() -> Self {
        Self {
            c: [const { AtomicU64::new(0) }; COUNT],
            pma_base: [const { AtomicU64::new(0) }; pma::FIELDS],
        }
    }

    fn add_at(&self, i: usize, n: u64) {
        if let Some(c) = self.c.get(i) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn bump(&self, i: usize) {
        self.add_at(i, 1);
    }

    fn get(&self, e: Event) -> u64 {
        self.c
            .get(e as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    pub(crate) fn event(&self, e: Event) {
        self.bump(e as usize);
    }

    /// Adds `n` to the count of `e` (the byte counters).
    pub(crate) fn add(&self, e: Event, n: u64) {
        self.add_at(e as usize, n);
    }

    /// The PMA's counters since the port came up, before any `Set`.
    fn pma_raw(&self) -> pma::Values {
        let parse: u64 = (EVENTS..EVENTS + PARSE)
            .filter_map(|i| self.c.get(i))
            .map(|c| c.load(Ordering::Relaxed))
            .sum();
        let (tx, rx) = (self.get(Event::TxPackets), self.get(Event::RxPackets));
        let (tx_mc, rx_mc) = (self.get(Event::TxMulticast), self.get(Event::RxMulticast));
        let mut v = [0; pma::FIELDS];
        v[pma::Field::XmitBytes as usize] = self.get(Event::TxBytes);
        v[pma::Field::RcvBytes as usize] = self.get(Event::RxBytes);
        v[pma::Field::XmitPkts as usize] = tx;
        v[pma::Field::RcvPkts as usize] = rx;
        v[pma::Field::UnicastXmitPkts as usize] = tx.saturating_sub(tx_mc);
        v[pma::Field::UnicastRcvPkts as usize] = rx.saturating_sub(rx_mc);
        v[pma::Field::MulticastXmitPkts as usize] = tx_mc;
        v[pma::Field::MulticastRcvPkts as usize] = rx_mc;
        v[pma::Field::RcvErrors as usize] =
            self.get(Event::RxBadIcrc) + self.get(Event::RxBadIp) + parse;
        v[pma::Field::XmitDiscards as usize] = self.get(Event::TxErr);
        v
    }

    pub(crate) fn parse(&self, e: ParseError) {
        self.bump(EVENTS + e.index());
    }

    pub(crate) fn drop(&self, d: Drop) {
        if let Some(i) = Drop::ALL.iter().position(|x| *x == d) {
            self.bump(EVENTS + PARSE + i);
        }
    }

    /// The counters' values, in [`NAMES`] order.
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, c) in out.iter_mut().zip(self.c.iter()) {
            *o = c.load(Ordering::Relaxed);
        }
    }
}

/// The port's Performance Management Agent reads and clears these.
impl pma::Port for Counters {
    fn values(&self) -> pma::Values {
        let raw = self.pma_raw();
        core::array::from_fn(|i| {
            let base = self
                .pma_base
                .get(i)
                .map_or(0, |b| b.load(Ordering::Relaxed));
            raw[i].wrapping_sub(base)
        })
    }

    fn clear(&self, which: pma::FieldSet) {
        let raw = self.pma_raw();
        for (i, b) in self.pma_base.iter().enumerate() {
            if which.0 & 1 << i != 0 {
                b.store(raw[i], Ordering::Relaxed);
            }
        }
    }
}

/// Why a packet that parsed was dropped (each has a counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drop {
    /// The opcode's transport is not the QP's.
    Transport,
    /// The QP is not in a state that receives.
    State,
    /// A UD packet with the wrong Q_Key.
    Qkey,
    /// Out of sequence.
    Psn,
    /// No receive WQE was posted.
    NoRecv,
    /// A bad R_Key, access or range.
    Key,
    /// A response nothing waits for.
    Unexpected,
    /// A request packet whose payload is not the size its place in the
    /// message demands, or that runs past (or stops short of) its RDMA
    /// WRITE's DMA length, or a DMA length over 2^31; a SEND that overruns
    /// its receive buffer or 2^31 bytes; a datagram longer than the port's
    /// MTU.
    Length,
    /// A duplicate RDMA READ request that matches no request the responder
    /// served and remembers, or that the QP or the key no longer allows.
    Duplicate,
    /// An RC or UC packet whose IP source and destination are not its QP's
    /// peer and own address; a packet for a unicast QP that was not sent
    /// to this host alone (a broadcast, a looped-back multicast); a
    /// multicast QP number without a multicast address, or the reverse.
    Address,
    /// An invalid request: an opcode out of sequence (an RC message that
    /// starts inside another or continues none), an operation the QP does
    /// not take, or an RDMA READ or atomic for a QP with no responder
    /// resources (`max_dest_rd_atomic` 0).
    Invalid,
    /// Memory the packet needs (its receive buffer, its RDMA target, the
    /// buffer a read response lands in) is paged on demand and not mapped
    /// yet: nothing was done, a fault was asked for, and the packet comes
    /// again (RC: an RNR NAK, or the requester asks again).
    NotPresent,
    /// An XRC request naming an SRQ that does not exist, is not an XRC SRQ,
    /// or belongs to another XRC domain than the target QP's; or a packet
    /// inside an XRC SEND naming another SRQ than the message began with.
    XrcSrq,
    /// A request that came while its RC QP already kept as many requests
    /// as it may for its rate (`qp::resp` `Park`), or that it had no
    /// memory to keep: the requester sends it again.
    Paced,
}

impl Drop {
    /// All reasons, in counter order.
    const ALL: [Drop; 14] = [
        Drop::Transport,
        Drop::State,
        Drop::Qkey,
        Drop::Psn,
        Drop::NoRecv,
        Drop::Key,
        Drop::Unexpected,
        Drop::Length,
        Drop::Duplicate,
        Drop::Address,
        Drop::Invalid,
        Drop::NotPresent,
        Drop::XrcSrq,
        Drop::Paced,
    ];
}
