// SPDX-License-Identifier: GPL-2.0 OR MIT

//! IB path MTUs and how they follow the Ethernet MTU.

/// Bytes that RoCEv2 adds around an IB payload in the worst case: an IPv6
/// header (40), UDP (8), BTH (12), the largest extended header that
/// travels with a full payload (RETH, 16) and the ICRC (4).
pub const ROCE_V2_OVERHEAD: u32 = 40 + 8 + 12 + 16 + 4;

/// An IB MTU (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// The largest MTU roxe supports.
    pub const MAX: IbMtu = IbMtu::Mtu4096;

    const ALL: [IbMtu; 5] = [
        IbMtu::Mtu256,
        IbMtu::Mtu512,
        IbMtu::Mtu1024,
        IbMtu::Mtu2048,
        IbMtu::Mtu4096,
    ];

    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// The `enum ib_mtu` value.
    pub const fn to_enum(self) -> u32 {
        self as u32
    }

    /// Parses an `enum ib_mtu` value.
    pub fn from_enum(v: u32) -> Option<IbMtu> {
        Self::ALL.iter().copied().find(|m| m.to_enum() == v)
    }

    /// The largest IB MTU whose packets fit an Ethernet link of
    /// `netdev_mtu` bytes, or `None` if not even 256-byte payloads fit.
    pub fn for_netdev_mtu(netdev_mtu: u32) -> Option<IbMtu> {
        let room = netdev_mtu.checked_sub(ROCE_V2_OVERHEAD)?;
        Self::ALL.iter().rev().copied().find(|m| m.bytes() <= room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_match_the_ib_encoding() {
        assert_eq!(IbMtu::Mtu256.bytes(), 256);
        assert_eq!(IbMtu::Mtu1024.bytes(), 1024);
        assert_eq!(IbMtu::Mtu4096.bytes(), 4096);
        for v in 1..=5 {
            assert_eq!(IbMtu::from_enum(v).map(IbMtu::to_enum), Some(v));
        }
        assert_eq!(IbMtu::from_enum(0), None);
        assert_eq!(IbMtu::from_enum(6), None);
    }

    #[test]
    fn standard_ethernet_gives_1024() {
        // The same figure rxe reports on a 1500-byte link.
        assert_eq!(IbMtu::for_netdev_mtu(1500), Some(IbMtu::Mtu1024));
    }

    #[test]
    fn jumbo_frames_give_4096() {
        assert_eq!(IbMtu::for_netdev_mtu(9000), Some(IbMtu::Mtu4096));
        assert_eq!(
            IbMtu::for_netdev_mtu(4096 + ROCE_V2_OVERHEAD),
            Some(IbMtu::Mtu4096)
        );
        assert_eq!(
            IbMtu::for_netdev_mtu(4096 + ROCE_V2_OVERHEAD - 1),
            Some(IbMtu::Mtu2048)
        );
    }

    #[test]
    fn tiny_links_have_no_mtu() {
        assert_eq!(IbMtu::for_netdev_mtu(0), None);
        assert_eq!(IbMtu::for_netdev_mtu(ROCE_V2_OVERHEAD + 255), None);
        assert_eq!(
            IbMtu::for_netdev_mtu(ROCE_V2_OVERHEAD + 256),
            Some(IbMtu::Mtu256)
        );
    }

    #[test]
    fn result_always_fits() {
        for mtu in 0..20_000u32 {
            if let Some(m) = IbMtu::for_netdev_mtu(mtu) {
                assert!(m.bytes() + ROCE_V2_OVERHEAD <= mtu);
                // And the next size up would not have fit.
                if m != IbMtu::MAX {
                    assert!(2 * m.bytes() + ROCE_V2_OVERHEAD > mtu);
                }
            }
        }
    }
}
