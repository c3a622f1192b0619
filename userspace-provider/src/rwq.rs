// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Receive work queues (WQs), their indirection tables, and RSS QPs: what
//! libroxe checks before they go to the kernel, the driver input of an RSS
//! QP, and the RSS capabilities the kernel's device attributes leave out.
//!
//! A WQ (`ibv_create_wq`, type `IBV_WQT_RQ`) is a receive queue of its own,
//! with a ring like an SRQ's: the same `RecvWqe` slots, produced by the same
//! [`crate::qp::RecvQueue`] without entering the kernel
//! (`ibv_post_wq_recv`). An indirection table (`ibv_create_rwq_ind_table`)
//! lists `1 << log_ind_tbl_size` WQs. An RSS QP is a raw packet QP created
//! over such a table (`IBV_QP_INIT_ATTR_IND_TABLE` with
//! `IBV_QP_INIT_ATTR_RX_HASH`): the kernel hashes the chosen header fields
//! of each frame the QP receives with a Toeplitz key and puts the frame into
//! the WQ the hash selects. The QP itself is receive-only and has no rings.

use roxe_uapi::{CreateRssQpCmd, RSS_KEY_MAX};

use crate::abi::{ibv, uverbs};
use crate::errno::Errno;

/// Checks the fields of an `ibv_wq_init_attr` that roxe interprets.
///
/// Fails with `EINVAL` for `comp_mask` bits libibverbs does not define,
/// and with `EOPNOTSUPP` for a type other than `IBV_WQT_RQ` or, with
/// `IBV_WQ_INIT_ATTR_FLAGS`, any creation flag (roxe has none of the
/// offloads they ask for). Without the mask bit the flags are not looked
/// at.
pub fn check_wq_init_attr(comp_mask: u32, wq_type: u32, create_flags: u32) -> Result<(), Errno> {
    if comp_mask >= ibv::WQ_INIT_ATTR_RESERVED {
        return Err(Errno::EINVAL);
    }
    if wq_type != ibv::WQT_RQ {
        return Err(Errno::EOPNOTSUPP);
    }
    if comp_mask & ibv::WQ_INIT_ATTR_FLAGS != 0 && create_flags != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// Checks the `attr_mask` of an `ibv_wq_attr`: the state (and the current
/// state the caller assumes) may change, the flags may not (`EOPNOTSUPP`);
/// unknown bits fail with `EINVAL`. Which state changes are allowed is the
/// kernel's to decide.
pub fn check_wq_attr(attr_mask: u32) -> Result<(), Errno> {
    if attr_mask >= ibv::WQ_ATTR_RESERVED {
        return Err(Errno::EINVAL);
    }
    if attr_mask & ibv::WQ_ATTR_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// Checks an `ibv_rwq_ind_table_init_attr` and returns the number of
/// entries of its table.
///
/// Fails with `EINVAL` for any `comp_mask` bit (none is defined) and for a
/// table larger than the kernel takes (`IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE`).
/// The second check also bounds what `ibv_cmd_create_rwq_ind_table` puts
/// on the stack (four bytes an entry) and the entries the provider reads.
pub fn check_ind_table_init_attr(comp_mask: u32, log_ind_tbl_size: u32) -> Result<usize, Errno> {
    if comp_mask != 0 || log_ind_tbl_size > uverbs::MAX_LOG_IND_TBL_SIZE {
        return Err(Errno::EINVAL);
    }
    Ok(1 << log_ind_tbl_size)
}

/// The header fields an RSS QP of roxe can hash: IPv4 and IPv6 source and
/// destination addresses, TCP and UDP source and destination ports. Not
/// IPsec SPIs, and not the inner headers of tunnelled frames.
pub const SUPPORTED_RX_HASH_FIELDS: u64 = ibv::RX_HASH_SRC_IPV4
    | ibv::RX_HASH_DST_IPV4
    | ibv::RX_HASH_SRC_IPV6
    | ibv::RX_HASH_DST_IPV6
    | ibv::RX_HASH_SRC_PORT_TCP
    | ibv::RX_HASH_DST_PORT_TCP
    | ibv::RX_HASH_SRC_PORT_UDP
    | ibv::RX_HASH_DST_PORT_UDP;

/// Checks the parts of an RSS QP's `ibv_qp_init_attr_ex` that are not its
/// hash: the QP type and mask bits are [`crate::qp::check_init_attr`]'s.
///
/// An RSS QP receives into the WQs of its indirection table and sends
/// nothing, so every limit in `cap` must be 0 and it may have no SRQ; and
/// it needs the table (`has_ind_table`), whose handle libibverbs reads.
/// Any of these fails with `EINVAL`. Its CQs are not looked at: the kernel
/// takes none for it (its WQs have theirs).
pub fn check_rss_qp(cap: &ibv::QpCap, has_srq: bool, has_ind_table: bool) -> Result<(), Errno> {
    if *cap != ibv::QpCap::default() || has_srq || !has_ind_table {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Checks an RSS QP's `ibv_rx_hash_conf` and returns the key's length.
///
/// The hash function must be `IBV_RX_HASH_FUNC_TOEPLITZ` and the fields
/// within [`SUPPORTED_RX_HASH_FIELDS`] (`EOPNOTSUPP` otherwise); the key
/// (`has_key`: its pointer is not NULL) must be 1 to
/// [`RSS_KEY_MAX`] bytes long (`EINVAL` otherwise). Which combinations of
/// fields make sense is the kernel's to judge.
pub fn check_rx_hash(
    function: u8,
    key_len: u8,
    has_key: bool,
    fields: u64,
) -> Result<usize, Errno> {
    if function != ibv::RX_HASH_FUNC_TOEPLITZ {
        return Err(Errno::EOPNOTSUPP);
    }
    let len = usize::from(key_len);
    if !has_key || !(1..=RSS_KEY_MAX).contains(&len) {
        return Err(Errno::EINVAL);
    }
    if fields & !SUPPORTED_RX_HASH_FIELDS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(len)
}

/// The driver input of an RSS QP: the hash `function`, the `fields` it
/// covers and the `key`, as [`check_rx_hash`] accepted them. Fails with
/// `EINVAL` for a key of 0 or more than [`RSS_KEY_MAX`] bytes.
pub fn rss_cmd(function: u8, fields: u64, key: &[u8]) -> Result<CreateRssQpCmd, Errno> {
    let key_len = u8::try_from(key.len()).map_err(|_| Errno::EINVAL)?;
    let mut cmd = CreateRssQpCmd {
        hash_fields: fields,
        hash_function: function,
        key_len,
        ..CreateRssQpCmd::default()
    };
    cmd.key
        .get_mut(..key.len())
        .filter(|k| !k.is_empty())
        .ok_or(Errno::EINVAL)?
        .copy_from_slice(key);
    Ok(cmd)
}

/// The two RSS capabilities of `ibv_device_attr_ex.rss_caps` that the
/// kernel's response does not carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxHashCaps {
    /// `rx_hash_function`: `enum ibv_rx_hash_function_flags`.
    pub function: u8,
    /// `rx_hash_fields_mask`: `enum ibv_rx_hash_fields`.
    pub fields: u64,
}

/// What to report as the hash function and fields of RSS QPs, given the QP
/// types the kernel reported RSS for (`rss_caps.supported_qpts`): the
/// Toeplitz function and [`SUPPORTED_RX_HASH_FIELDS`] when that is any,
/// and nothing (the fields stay 0) for a kernel without RSS.
pub fn rx_hash_caps(supported_qpts: u32) -> Option<RxHashCaps> {
    (supported_qpts != 0).then_some(RxHashCaps {
        function: ibv::RX_HASH_FUNC_TOEPLITZ,
        fields: SUPPORTED_RX_HASH_FIELDS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wq_init_attr_checks() {
        let flags = ibv::WQ_INIT_ATTR_FLAGS;
        assert_eq!(check_wq_init_attr(0, ibv::WQT_RQ, 0), Ok(()));
        assert_eq!(check_wq_init_attr(flags, ibv::WQT_RQ, 0), Ok(()));
        // Unknown mask bits, before anything else.
        for bit in 1..32 {
            assert_eq!(
                check_wq_init_attr(1 << bit, 7, 1),
                Err(Errno::EINVAL),
                "bit {bit}"
            );
        }
        for t in [1, 2, u32::MAX] {
            assert_eq!(
                check_wq_init_attr(0, t, 0),
                Err(Errno::EOPNOTSUPP),
                "type {t}"
            );
        }
        // IBV_WQ_FLAGS_CVLAN_STRIPPING to _PCI_WRITE_END_PADDING, and one
        // libibverbs does not know.
        for flag in [1, 2, 4, 8, 16] {
            assert_eq!(
                check_wq_init_attr(flags, ibv::WQT_RQ, flag),
                Err(Errno::EOPNOTSUPP),
                "flag {flag}"
            );
        }
        // Flags without the mask bit are not looked at.
        assert_eq!(check_wq_init_attr(0, ibv::WQT_RQ, 1), Ok(()));
    }

    #[test]
    fn wq_attr_checks() {
        let (state, curr) = (ibv::WQ_ATTR_STATE, ibv::WQ_ATTR_CURR_STATE);
        for mask in [0, state, curr, state | curr] {
            assert_eq!(check_wq_attr(mask), Ok(()), "mask {mask}");
        }
        assert_eq!(check_wq_attr(ibv::WQ_ATTR_FLAGS), Err(Errno::EOPNOTSUPP));
        assert_eq!(
            check_wq_attr(state | ibv::WQ_ATTR_FLAGS),
            Err(Errno::EOPNOTSUPP)
        );
        for bit in 3..32 {
            assert_eq!(check_wq_attr(1 << bit), Err(Errno::EINVAL), "bit {bit}");
        }
    }

    #[test]
    fn ind_table_checks() {
        assert_eq!(check_ind_table_init_attr(0, 0), Ok(1));
        assert_eq!(check_ind_table_init_attr(0, 3), Ok(8));
        assert_eq!(check_ind_table_init_attr(0, 13), Ok(8192));
        for log in [14, 31, 32, 64, u32::MAX] {
            assert_eq!(
                check_ind_table_init_attr(0, log),
                Err(Errno::EINVAL),
                "log {log}"
            );
        }
        for bit in 0..32 {
            assert_eq!(
                check_ind_table_init_attr(1 << bit, 1),
                Err(Errno::EINVAL),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn an_rss_qp_is_receive_only_over_a_table() {
        let none = ibv::QpCap::default();
        assert_eq!(check_rss_qp(&none, false, true), Ok(()));
        assert_eq!(check_rss_qp(&none, true, true), Err(Errno::EINVAL));
        assert_eq!(check_rss_qp(&none, false, false), Err(Errno::EINVAL));
        let caps = [
            ibv::QpCap {
                max_send_wr: 1,
                ..none
            },
            ibv::QpCap {
                max_recv_wr: 1,
                ..none
            },
            ibv::QpCap {
                max_send_sge: 1,
                ..none
            },
            ibv::QpCap {
                max_recv_sge: 1,
                ..none
            },
            ibv::QpCap {
                max_inline_data: 1,
                ..none
            },
        ];
        for cap in caps {
            assert_eq!(
                check_rss_qp(&cap, false, true),
                Err(Errno::EINVAL),
                "{cap:?}"
            );
        }
    }

    #[test]
    fn rx_hash_checks() {
        let toeplitz = ibv::RX_HASH_FUNC_TOEPLITZ;
        let ipv4 = ibv::RX_HASH_SRC_IPV4 | ibv::RX_HASH_DST_IPV4;
        assert_eq!(check_rx_hash(toeplitz, 40, true, ipv4), Ok(40));
        assert_eq!(check_rx_hash(toeplitz, 1, true, 0), Ok(1));
        assert_eq!(
            check_rx_hash(toeplitz, 40, true, SUPPORTED_RX_HASH_FIELDS),
            Ok(40)
        );
        // Only Toeplitz.
        for f in [0, 2, 3, 0x80, 0xff] {
            assert_eq!(
                check_rx_hash(f, 40, true, ipv4),
                Err(Errno::EOPNOTSUPP),
                "function {f}"
            );
        }
        // A key of 1 to 40 bytes, which is there.
        for len in [0, 41, 52, 255] {
            assert_eq!(
                check_rx_hash(toeplitz, len, true, ipv4),
                Err(Errno::EINVAL),
                "len {len}"
            );
        }
        assert_eq!(check_rx_hash(toeplitz, 40, false, ipv4), Err(Errno::EINVAL));
        // Every field outside the eight: IPsec SPI, inner headers, bits
        // libibverbs does not name.
        for bit in 8..64 {
            assert_eq!(
                check_rx_hash(toeplitz, 40, true, ipv4 | 1 << bit),
                Err(Errno::EOPNOTSUPP),
                "field bit {bit}"
            );
        }
        assert_eq!(SUPPORTED_RX_HASH_FIELDS, 0xff);
    }

    #[test]
    fn the_rss_command_carries_the_hash() {
        let key: Vec<u8> = (1..=40).collect();
        let cmd = rss_cmd(1, 0x33, &key).expect("a whole key");
        assert_eq!(
            (cmd.hash_function, cmd.hash_fields, cmd.key_len),
            (1, 0x33, 40)
        );
        assert_eq!(cmd.key.as_slice(), key.as_slice());
        assert_eq!(cmd._reserved, [0; 6]);
        // A short key leaves the rest of the array zero.
        let cmd = rss_cmd(1, 0x3, &key[..4]).expect("a short key");
        assert_eq!(cmd.key_len, 4);
        assert_eq!(cmd.key[..4], [1, 2, 3, 4]);
        assert!(cmd.key[4..].iter().all(|&b| b == 0));
        assert_eq!(rss_cmd(1, 0x3, &[]), Err(Errno::EINVAL));
        assert_eq!(rss_cmd(1, 0x3, &[7; 41]), Err(Errno::EINVAL));
        assert_eq!(rss_cmd(1, 0x3, &[7; 300]), Err(Errno::EINVAL));
    }

    #[test]
    fn hash_caps_follow_the_kernel() {
        assert_eq!(rx_hash_caps(0), None);
        let caps = rx_hash_caps(1 << ibv::QPT_RAW_PACKET).expect("RSS");
        assert_eq!(caps.function, ibv::RX_HASH_FUNC_TOEPLITZ);
        assert_eq!(caps.fields, SUPPORTED_RX_HASH_FIELDS);
    }
}
