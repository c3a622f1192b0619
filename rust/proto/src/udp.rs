// SPDX-License-Identifier: GPL-2.0 OR MIT

//! RoCEv2 UDP ports (IBTA vol 1, Annex A17).
//!
//! The destination port is always 4791. The source port carries flow
//! entropy for ECMP and RSS; the annex lets a sender pick any value in
//! `0xc000..=0xffff` as long as a flow keeps one value, so packets of a QP
//! are not reordered.
//!
//! roxe derives it the way the kernel's RDMA core asks RoCEv2 drivers to
//! (`rdma_calc_flow_label` and `rdma_flow_label_to_udp_sport` in
//! `include/rdma/ib_verbs.h`, which mlx5 and hns use): a 20-bit flow label
//! from the product of the two QPNs, folded to 14 bits. The product makes
//! the port the same in both directions of a connection. rxe instead
//! hashes its own QPN alone; receivers never check the source port, so
//! either choice interoperates.

/// The RoCEv2 UDP destination port.
pub const ROCE_V2_PORT: u16 = 4791;
/// The lowest RoCEv2 source port.
pub const SPORT_MIN: u16 = 0xc000;
/// The highest RoCEv2 source port.
pub const SPORT_MAX: u16 = 0xffff;
/// The bits of an IPv6 / GRH flow label.
pub const FLOW_LABEL_MASK: u32 = 0x000f_ffff;

/// The flow label of the connection between two QPs: symmetric in its
/// arguments, 20 bits.
pub const fn flow_label(src_qpn: u32, dest_qpn: u32) -> u32 {
    // CAST: widening u32 to u64 is lossless.
    let mut v = (src_qpn as u64) * (dest_qpn as u64);
    v ^= v >> 20;
    v ^= v >> 40;
    // CAST: masked to 20 bits.
    (v & FLOW_LABEL_MASK as u64) as u32
}

/// The source port for a flow label: its low 14 bits XOR its high 6,
/// placed in `0xc000..=0xffff`.
pub const fn sport_from_flow_label(fl: u32) -> u16 {
    let low = fl & 0x3fff;
    let high = (fl & 0xf_c000) >> 14;
    // CAST: below 0x4000, so it fits after the OR with 0xc000.
    ((low ^ high) as u16) | SPORT_MIN
}

/// The UDP source port for packets between QPs `src_qpn` and `dest_qpn`
/// (a connected QP's own and its remote QPN), when the address handle
/// carries no flow label of its own.
pub const fn source_port(src_qpn: u32, dest_qpn: u32) -> u16 {
    sport_from_flow_label(flow_label(src_qpn, dest_qpn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // Worked by hand: 0x11 * 0x22 = 0x242; the folds change nothing and
        // the label fits in 14 bits.
        assert_eq!(flow_label(0x11, 0x22), 0x242);
        assert_eq!(source_port(0x11, 0x22), 0xc242);
        // A zero QPN gives label 0 and the lowest port.
        assert_eq!(source_port(0, 0x1234), SPORT_MIN);
        // The largest QPNs, worked by hand: the product is 0xfffffe000001,
        // the fold by 20 gives 0xfffff1ffffe1, the fold by 40 gives
        // 0xfffff1ffff1e, the label is 0xfff1e, and 0x3f1e ^ 0x3f = 0x3f21.
        assert_eq!(flow_label(0xff_ffff, 0xff_ffff), 0xf_ff1e);
        assert_eq!(source_port(0xff_ffff, 0xff_ffff), 0xff21);
        // Two arbitrary QPNs, the same way (product 0x7336bf94116).
        assert_eq!(flow_label(0x12_3456, 0x65_4321), 0xa_77ae);
        assert_eq!(source_port(0x65_4321, 0x12_3456), 0xf787);
        // Label 0xfc000 has only high bits: 0x3f lands in the low bits.
        assert_eq!(sport_from_flow_label(0xf_c000), 0xc03f);
        assert_eq!(sport_from_flow_label(0xf_ffff), 0xc000 | (0x3fff ^ 0x3f));
    }

    proptest! {
        #[test]
        fn symmetric_and_in_range(a in 0u32..=0xff_ffff, b in 0u32..=0xff_ffff) {
            let p = source_port(a, b);
            prop_assert!(p >= SPORT_MIN);
            prop_assert_eq!(p, source_port(b, a));
            prop_assert!(flow_label(a, b) <= FLOW_LABEL_MASK);
        }

        #[test]
        fn every_label_maps_into_range(fl in any::<u32>()) {
            prop_assert!(sport_from_flow_label(fl) >= SPORT_MIN);
        }
    }
}
