// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The port's Performance Management Agent (IBTA vol. 1, chapter 16.1):
//! answers PerfMgt `Get` and `Set` MADs for `ClassPortInfo`,
//! `PortCounters` and `PortCountersExtended` from the port's own counts.
//!
//! The RDMA core asks it through the driver's `process_mad` verb: for the
//! `ports/N/counters/` files in sysfs, and for every MAD that arrives on
//! QP1 (perfquery from user space, here or on a peer). Any other MAD is
//! not ours and goes on to the core's agents, the CM's among them.
//!
//! A MAD is 256 bytes: a 24-byte common header, then for this class 40
//! reserved bytes and the attribute's 192 bytes. Multi-byte fields are
//! big-endian.

/// The size of an IB MAD.
pub const MAD_LEN: usize = 256;

const CLASS_PERF_MGMT: u8 = 0x04;
const METHOD_GET: u8 = 0x01;
const METHOD_SET: u8 = 0x02;
/// The response bit of the method byte.
const METHOD_RESP: u8 = 0x80;

const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
const ATTR_PORT_COUNTERS: u16 = 0x0012;
const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;

/// MAD status values (vol. 1, table 120).
const STATUS_BAD_VERSION: u16 = 0x0004;
const STATUS_BAD_METHOD: u16 = 0x0008;
const STATUS_BAD_METHOD_ATTR: u16 = 0x000c;
const STATUS_BAD_FIELD: u16 = 0x001c;

/// Where the attribute's data starts in the MAD.
const DATA: usize = 64;
/// `PortSelect` asking for every port of the node at once.
const ALL_PORTS: u8 = 0xff;

/// `ClassPortInfo.CapabilityMask` bits: `PortSelect` may be 0xFF, and
/// `PortCountersExtended` carries all eight 64-bit counters.
const CAP_ALL_PORT_SELECT: u16 = 1 << 8;
const CAP_EXT_WIDTH: u16 = 1 << 9;
/// `ClassPortInfo.RespTimeValue`: 4.096 us << 18, about a second.
const RESP_TIME_VALUE: u8 = 18;

/// One counter the port reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Octets sent in RoCE packets (BTH to ICRC).
    XmitBytes = 0,
    /// Octets received in RoCE packets (BTH to ICRC).
    RcvBytes,
    /// RoCE packets sent.
    XmitPkts,
    /// RoCE packets received, good or bad.
    RcvPkts,
    /// Of the packets sent, those to a unicast address.
    UnicastXmitPkts,
    /// Of the packets received, those to a unicast address.
    UnicastRcvPkts,
    /// Of the packets sent, those to a multicast group.
    MulticastXmitPkts,
    /// Of the packets received, those to a multicast group.
    MulticastRcvPkts,
    /// Packets received and dropped as malformed (IP, headers, ICRC).
    RcvErrors,
    /// Packets the port could not send.
    XmitDiscards,
}

/// How many [`Field`]s there are.
pub const FIELDS: usize = 10;

/// Every field's value, indexed by `Field as usize`.
pub type Values = [u64; FIELDS];

/// A set of [`Field`]s, one bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldSet(pub u16);

impl FieldSet {
    fn with(self, f: Field) -> Self {
        Self(self.0 | 1 << f as u16)
    }

    /// Whether `f` is in the set.
    pub fn has(self, f: Field) -> bool {
        self.0 & 1 << f as u16 != 0
    }
}

/// The port the agent answers for.
pub trait Port {
    /// The counters as the agent reports them (since the last clear).
    fn values(&self) -> Values;
    /// Starts the counters in `which` again from zero.
    fn clear(&self, which: FieldSet);
}

fn be16(m: &[u8; MAD_LEN], at: usize) -> u16 {
    u16::from_be_bytes([m[at], m[at + 1]])
}

fn put16(m: &mut [u8; MAD_LEN], at: usize, v: u16) {
    m[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put32(m: &mut [u8; MAD_LEN], at: usize, v: u32) {
    m[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn put64(m: &mut [u8; MAD_LEN], at: usize, v: u64) {
    m[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// A count in a field of `bits` bits: IB counters stop at all ones.
fn sat(v: u64, bits: u32) -> u64 {
    v.min((1u64 << bits) - 1)
}

/// `PortCounters.CounterSelect` bits and the fields each clears.
const COUNTERS_SELECT: [(u16, Field); 6] = [
    (1 << 3, Field::RcvErrors),
    (1 << 6, Field::XmitDiscards),
    (1 << 12, Field::XmitBytes),
    (1 << 13, Field::RcvBytes),
    (1 << 14, Field::XmitPkts),
    (1 << 15, Field::RcvPkts),
];

/// `PortCountersExtended.CounterSelect` bits and the fields each clears.
const EXT_SELECT: [(u16, Field); 8] = [
    (1 << 0, Field::XmitBytes),
    (1 << 1, Field::RcvBytes),
    (1 << 2, Field::XmitPkts),
    (1 << 3, Field::RcvPkts),
    (1 << 4, Field::UnicastXmitPkts),
    (1 << 5, Field::UnicastRcvPkts),
    (1 << 6, Field::MulticastXmitPkts),
    (1 << 7, Field::MulticastRcvPkts),
];

fn selected(select: u16, map: &[(u16, Field)]) -> FieldSet {
    map.iter()
        .filter(|(bit, _)| select & bit != 0)
        .fold(FieldSet::default(), |s, (_, f)| s.with(*f))
}

fn write_counters(out: &mut [u8; MAD_LEN], v: &Values) {
    let d = DATA;
    put16(out, d + 8, sat(v[Field::RcvErrors as usize], 16) as u16);
    put16(out, d + 14, sat(v[Field::XmitDiscards as usize], 16) as u16);
    // Data counters are in units of four octets.
    put32(
        out,
        d + 24,
        sat(v[Field::XmitBytes as usize] / 4, 32) as u32,
    );
    put32(out, d + 28, sat(v[Field::RcvBytes as usize] / 4, 32) as u32);
    put32(out, d + 32, sat(v[Field::XmitPkts as usize], 32) as u32);
    put32(out, d + 36, sat(v[Field::RcvPkts as usize], 32) as u32);
}

fn write_ext(out: &mut [u8; MAD_LEN], v: &Values) {
    let d = DATA;
    put64(out, d + 8, v[Field::XmitBytes as usize] / 4);
    put64(out, d + 16, v[Field::RcvBytes as usize] / 4);
    put64(out, d + 24, v[Field::XmitPkts as usize]);
    put64(out, d + 32, v[Field::RcvPkts as usize]);
    put64(out, d + 40, v[Field::UnicastXmitPkts as usize]);
    put64(out, d + 48, v[Field::UnicastRcvPkts as usize]);
    put64(out, d + 56, v[Field::MulticastXmitPkts as usize]);
    put64(out, d + 64, v[Field::MulticastRcvPkts as usize]);
}

/// Answers `mad`, a MAD that arrived for port `port_num`, into `out`.
/// Returns whether `out` holds a reply to send; `false` means the MAD is
/// not for the PMA (another class, or a response) and `out` is untouched.
pub fn process(
    mad: &[u8; MAD_LEN],
    port_num: u8,
    port: &impl Port,
    out: &mut [u8; MAD_LEN],
) -> bool {
    let (base_version, class, class_version, method) = (mad[0], mad[1], mad[2], mad[3]);
    if class != CLASS_PERF_MGMT || method & METHOD_RESP != 0 {
        return false;
    }
    // The reply: the request's header (its transaction ID above all),
    // turned into a GetResp, with an attribute written from zero.
    out[..24].copy_from_slice(&mad[..24]);
    out[24..].fill(0);
    out[3] = METHOD_GET | METHOD_RESP;
    let status = reply(
        mad,
        base_version,
        class_version,
        method,
        port_num,
        port,
        out,
    );
    put16(out, 4, status);
    // No class-specific status.
    put16(out, 6, 0);
    true
}

fn reply(
    mad: &[u8; MAD_LEN],
    base_version: u8,
    class_version: u8,
    method: u8,
    port_num: u8,
    port: &impl Port,
    out: &mut [u8; MAD_LEN],
) -> u16 {
    if base_version != 1 || class_version != 1 {
        return STATUS_BAD_VERSION;
    }
    if method != METHOD_GET && method != METHOD_SET {
        return STATUS_BAD_METHOD;
    }
    let attr = be16(mad, 16);
    if attr == ATTR_CLASS_PORT_INFO {
        if method != METHOD_GET {
            return STATUS_BAD_METHOD_ATTR;
        }
        out[DATA] = 1;
        out[DATA + 1] = 1;
        put16(out, DATA + 2, CAP_ALL_PORT_SELECT | CAP_EXT_WIDTH);
        out[DATA + 7] = RESP_TIME_VALUE;
        return 0;
    }
    if attr != ATTR_PORT_COUNTERS && attr != ATTR_PORT_COUNTERS_EXT {
        return STATUS_BAD_METHOD_ATTR;
    }
    let port_select = mad[DATA + 1];
    // The request's attribute comes back, with the counters filled in.
    out[DATA..DATA + 4].copy_from_slice(&mad[DATA..DATA + 4]);
    if port_select != port_num && port_select != ALL_PORTS {
        return STATUS_BAD_FIELD;
    }
    let select = be16(mad, DATA + 2);
    if method == METHOD_SET {
        let map: &[(u16, Field)] = if attr == ATTR_PORT_COUNTERS {
            &COUNTERS_SELECT
        } else {
            &EXT_SELECT
        };
        port.clear(selected(select, map));
    }
    let v = port.values();
    if attr == ATTR_PORT_COUNTERS {
        write_counters(out, &v);
    } else {
        write_ext(out, &v);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::{Cell, RefCell};

    /// A port whose raw counts a test sets, cleared the way the driver
    /// does it: a baseline per field.
    struct TestPort {
        raw: Cell<Values>,
        base: RefCell<Values>,
    }

    impl TestPort {
        fn new(raw: Values) -> Self {
            Self {
                raw: Cell::new(raw),
                base: RefCell::new([0; FIELDS]),
            }
        }
    }

    impl Port for TestPort {
        fn values(&self) -> Values {
            let raw = self.raw.get();
            let base = self.base.borrow();
            core::array::from_fn(|i| raw[i].wrapping_sub(base[i]))
        }
        fn clear(&self, which: FieldSet) {
            let raw = self.raw.get();
            let mut base = self.base.borrow_mut();
            for (i, b) in base.iter_mut().enumerate() {
                if which.0 & 1 << i != 0 {
                    *b = raw[i];
                }
            }
        }
    }

    fn mad(method: u8, attr: u16, port_select: u8) -> [u8; MAD_LEN] {
        let mut m = [0u8; MAD_LEN];
        m[0] = 1;
        m[1] = CLASS_PERF_MGMT;
        m[2] = 1;
        m[3] = method;
        m[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[DATA + 1] = port_select;
        m
    }

    fn u32_at(m: &[u8; MAD_LEN], at: usize) -> u32 {
        u32::from_be_bytes(m[at..at + 4].try_into().unwrap())
    }

    fn u64_at(m: &[u8; MAD_LEN], at: usize) -> u64 {
        u64::from_be_bytes(m[at..at + 8].try_into().unwrap())
    }

    const RAW: Values = [4000, 8004, 10, 11, 7, 9, 3, 2, 5, 1];

    #[test]
    fn port_counters() {
        let p = TestPort::new(RAW);
        let mut out = [0xaau8; MAD_LEN];
        assert!(process(
            &mad(METHOD_GET, ATTR_PORT_COUNTERS, 1),
            1,
            &p,
            &mut out
        ));
        assert_eq!(out[3], 0x81);
        assert_eq!(be16(&out, 4), 0);
        assert_eq!(&out[8..16], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(out[DATA + 1], 1);
        assert_eq!(be16(&out, DATA + 8), 5);
        assert_eq!(be16(&out, DATA + 14), 1);
        assert_eq!(u32_at(&out, DATA + 24), 1000);
        assert_eq!(u32_at(&out, DATA + 28), 2001);
        assert_eq!(u32_at(&out, DATA + 32), 10);
        assert_eq!(u32_at(&out, DATA + 36), 11);
        // The reserved area and the counters roxe has no use for are 0.
        assert!(out[24..DATA].iter().all(|&b| b == 0));
        assert!(out[DATA + 40..].iter().all(|&b| b == 0));
    }

    /// The offsets the kernel's sysfs files read (`ports/N/counters`):
    /// byte `40 + bit / 8` of the MAD's data, which starts at byte 24.
    #[test]
    fn sysfs_offsets() {
        let p = TestPort::new(RAW);
        let mut out = [0u8; MAD_LEN];
        process(&mad(METHOD_GET, ATTR_PORT_COUNTERS, 1), 1, &p, &mut out);
        let at = |bit: usize| 24 + 40 + bit / 8;
        assert_eq!(u32_at(&out, at(192)), 1000); // port_xmit_data
        assert_eq!(u32_at(&out, at(288)), 11); // port_rcv_packets
        process(&mad(METHOD_GET, ATTR_PORT_COUNTERS_EXT, 1), 1, &p, &mut out);
        assert_eq!(u64_at(&out, at(64)), 1000); // port_xmit_data
        assert_eq!(u64_at(&out, at(128)), 2001); // port_rcv_data
        assert_eq!(u64_at(&out, at(192)), 10); // port_xmit_packets
        assert_eq!(u64_at(&out, at(256)), 11); // port_rcv_packets
        assert_eq!(u64_at(&out, at(320)), 7); // unicast_xmit_packets
        assert_eq!(u64_at(&out, at(384)), 9); // unicast_rcv_packets
        assert_eq!(u64_at(&out, at(448)), 3); // multicast_xmit_packets
        assert_eq!(u64_at(&out, at(512)), 2); // multicast_rcv_packets
    }

    #[test]
    fn class_port_info_says_extended() {
        let p = TestPort::new(RAW);
        let mut out = [0u8; MAD_LEN];
        assert!(process(
            &mad(METHOD_GET, ATTR_CLASS_PORT_INFO, 0),
            1,
            &p,
            &mut out
        ));
        assert_eq!(be16(&out, 4), 0);
        // What the kernel's sysfs checks to choose the 64-bit files.
        assert_ne!(be16(&out, DATA + 2) & CAP_EXT_WIDTH, 0);
        let mut set = mad(METHOD_SET, ATTR_CLASS_PORT_INFO, 0);
        set[DATA] = 9;
        assert!(process(&set, 1, &p, &mut out));
        assert_eq!(be16(&out, 4), STATUS_BAD_METHOD_ATTR);
    }

    #[test]
    fn saturates() {
        let mut raw = RAW;
        raw[Field::XmitBytes as usize] = 4 << 40;
        raw[Field::RcvErrors as usize] = 1 << 20;
        let p = TestPort::new(raw);
        let mut out = [0u8; MAD_LEN];
        process(&mad(METHOD_GET, ATTR_PORT_COUNTERS, 1), 1, &p, &mut out);
        assert_eq!(u32_at(&out, DATA + 24), u32::MAX);
        assert_eq!(be16(&out, DATA + 8), u16::MAX);
        process(&mad(METHOD_GET, ATTR_PORT_COUNTERS_EXT, 1), 1, &p, &mut out);
        assert_eq!(u64_at(&out, DATA + 8), 1 << 40);
    }

    #[test]
    fn set_clears_only_what_is_selected() {
        let p = TestPort::new(RAW);
        let mut out = [0u8; MAD_LEN];
        let mut set = mad(METHOD_SET, ATTR_PORT_COUNTERS, 1);
        // PortXmitData and PortRcvPkts.
        set[DATA + 2..DATA + 4].copy_from_slice(&((1u16 << 12) | (1 << 15)).to_be_bytes());
        assert!(process(&set, 1, &p, &mut out));
        assert_eq!(be16(&out, 4), 0);
        assert_eq!(u32_at(&out, DATA + 24), 0);
        assert_eq!(u32_at(&out, DATA + 28), 2001);
        assert_eq!(u32_at(&out, DATA + 36), 0);
        let mut raw = RAW;
        raw[Field::XmitBytes as usize] += 40;
        p.raw.set(raw);
        process(&mad(METHOD_GET, ATTR_PORT_COUNTERS, 1), 1, &p, &mut out);
        assert_eq!(u32_at(&out, DATA + 24), 10);
        assert_eq!(u32_at(&out, DATA + 32), 10);
        // The extended attribute's bits: unicast received only.
        let mut set = mad(METHOD_SET, ATTR_PORT_COUNTERS_EXT, ALL_PORTS);
        set[DATA + 2..DATA + 4].copy_from_slice(&(1u16 << 5).to_be_bytes());
        process(&set, 1, &p, &mut out);
        assert_eq!(u64_at(&out, DATA + 48), 0);
        assert_eq!(u64_at(&out, DATA + 40), 7);
    }

    #[test]
    fn refuses_what_it_cannot_answer() {
        let p = TestPort::new(RAW);
        let mut out = [0u8; MAD_LEN];
        // Another port.
        assert!(process(
            &mad(METHOD_GET, ATTR_PORT_COUNTERS, 2),
            1,
            &p,
            &mut out
        ));
        assert_eq!(be16(&out, 4), STATUS_BAD_FIELD);
        assert!(out[DATA + 4..].iter().all(|&b| b == 0));
        // An attribute roxe does not keep (PortSamplesControl).
        assert!(process(&mad(METHOD_GET, 0x0010, 1), 1, &p, &mut out));
        assert_eq!(be16(&out, 4), STATUS_BAD_METHOD_ATTR);
        // A method the class has but the agent does not (Trap).
        assert!(process(&mad(0x05, ATTR_PORT_COUNTERS, 1), 1, &p, &mut out));
        assert_eq!(be16(&out, 4), STATUS_BAD_METHOD);
        // Another class version.
        let mut m = mad(METHOD_GET, ATTR_PORT_COUNTERS, 1);
        m[2] = 2;
        assert!(process(&m, 1, &p, &mut out));
        assert_eq!(be16(&out, 4), STATUS_BAD_VERSION);
        // A refused Set clears nothing.
        let mut set = mad(METHOD_SET, ATTR_PORT_COUNTERS, 3);
        set[DATA + 2..DATA + 4].copy_from_slice(&u16::MAX.to_be_bytes());
        process(&set, 1, &p, &mut out);
        assert_eq!(p.values(), RAW);
    }

    #[test]
    fn leaves_other_mads_alone() {
        let p = TestPort::new(RAW);
        let mut out = [0x5au8; MAD_LEN];
        // A CM REQ (class 0x07) and a PMA response are for the core's agents.
        let mut cm = mad(0x03, 0x0010, 0);
        cm[1] = 0x07;
        assert!(!process(&cm, 1, &p, &mut out));
        assert!(!process(&mad(0x81, ATTR_PORT_COUNTERS, 1), 1, &p, &mut out));
        assert!(out.iter().all(|&b| b == 0x5a));
    }
}
