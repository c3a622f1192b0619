// SPDX-License-Identifier: GPL-2.0 OR MIT

//! RSS QPs: raw packet QPs created over a receive WQ indirection table
//! (`IBV_QP_INIT_ATTR_IND_TABLE` with `IBV_QP_INIT_ATTR_RX_HASH`).
//!
//! The kernel hashes the header fields `rx_hash_fields_mask` names with the
//! Toeplitz key of `rx_hash_conf` and puts each frame the QP receives into
//! the WQ of the table the hash selects. The QP has no rings of its own:
//! its receives are posted to those WQs (`ibv_post_wq_recv`) and complete
//! on their CQs. So it is a [`Qp`] without queues, whose posting ops refuse
//! every work request (`EINVAL`), with no `ibv_wr_*` interface, and which
//! gives the kernel no CQs ([`KernelCqs::NONE`]). Modify, query and destroy
//! are those of every QP.

use core::mem::size_of_val;
use core::ptr;
use core::slice;

use super::{Qp, destroy_unpublished, new_kernel_qp};
use crate::abi::{driver, ibv};
use crate::errno::Errno;
use crate::ffi::ibv_cmd_create_qp_ex2;
use crate::qp::{KernelCqs, RSS_INIT_ATTR_MASK, check_ring_presence};
use crate::rwq::{check_rss_qp, check_rx_hash, rss_cmd};

/// An RSS QP before the kernel knows it: a raw packet QP that gives the
/// kernel no CQs and never gets rings.
pub(super) fn new_qp() -> Qp {
    Qp {
        cqs: KernelCqs::NONE,
        ..Qp::new(ibv::QPT_RAW_PACKET)
    }
}

/// Creates an RSS QP, after [`crate::qp::check_init_attr`] has accepted
/// the type (raw packet) and the mask bits (both RSS bits, a PD, no send
/// ops).
///
/// The command is `ibv_cmd_create_qp_ex2`, which sends the table's handle,
/// with roxe's `CreateRssQpCmd` (the hash) as driver input. The CQs are
/// left out of it: libibverbs sends none for a QP with a table and no send
/// queue, but would record the caller's in the `ibv_qp`, where nothing
/// keeps them alive.
///
/// Fails with `EINVAL` for a non-zero limit in `attr.cap`, an SRQ or no
/// table ([`check_rss_qp`]), a key that is missing or not 1 to 40 bytes;
/// with `EOPNOTSUPP` for a hash function other than Toeplitz or fields
/// roxe cannot hash ([`check_rx_hash`]); with `EPROTO` if the kernel
/// describes a ring (the kernel QP is destroyed again); or with the
/// kernel's errno (`EPERM` without `CAP_NET_RAW`). On success `attr.cap`
/// holds what the kernel granted.
///
/// # Safety
///
/// `context` is an open roxe context; `attr.pd` is a live roxe PD of it;
/// `attr.rwq_ind_tbl` is NULL or a live indirection table of it; and
/// `attr.rx_hash_conf.rx_hash_key` is NULL or points to
/// `rx_hash_key_len` readable bytes.
pub(super) unsafe fn create(
    context: *mut ibv::Context,
    attr: &mut ibv::QpInitAttrEx,
) -> Result<*mut ibv::Qp, Errno> {
    check_rss_qp(&attr.cap, !attr.srq.is_null(), !attr.rwq_ind_tbl.is_null())?;
    let hash = attr.rx_hash_conf;
    let key_len = check_rx_hash(
        hash.rx_hash_function,
        hash.rx_hash_key_len,
        !hash.rx_hash_key.is_null(),
        hash.rx_hash_fields_mask,
    )?;
    // SAFETY: the key is not NULL (checked) and holds `rx_hash_key_len`
    // readable bytes per the contract, of which `key_len` is the count;
    // the slice lives only until the command below copied it.
    let key = unsafe { slice::from_raw_parts(hash.rx_hash_key, key_len) };
    let mut cmd = driver::CreateRssQp {
        drv: rss_cmd(hash.rx_hash_function, hash.rx_hash_fields_mask, key)?,
        ..driver::CreateRssQp::default()
    };
    // Creation flags are all zero (checked), so their bit means nothing.
    let mut kattr = ibv::QpInitAttrEx {
        send_cq: ptr::null_mut(),
        recv_cq: ptr::null_mut(),
        comp_mask: attr.comp_mask & (ibv::QP_INIT_ATTR_PD | RSS_INIT_ATTR_MASK),
        ..*attr
    };
    let mut resp = driver::CreateQpExResp::default();
    let qp = new_kernel_qp(new_qp(), |vqp| {
        // SAFETY: `context`, the PD and the table are live per the
        // contract, and the table is not NULL (checked); `vqp` is as
        // `new_kernel_qp` describes; `cmd` is writable for its full size,
        // the core command first and the driver input right after it;
        // `resp` likewise, the driver part right after `ibv_resp`.
        unsafe {
            ibv_cmd_create_qp_ex2(
                context,
                vqp,
                &raw mut kattr,
                &raw mut cmd.ibv_cmd,
                size_of_val(&cmd),
                &raw mut resp.ibv_resp,
                size_of_val(&resp),
            )
        }
    })?;
    attr.cap = kattr.cap;
    let no_rings =
        check_ring_presence(&resp.drv.sq, false).and(check_ring_presence(&resp.drv.rq, false));
    if let Err(err) = no_rings {
        // SAFETY: the create command succeeded, and `qp` was never
        // published.
        unsafe { destroy_unpublished(qp) };
        return Err(err);
    }
    // SAFETY: the QP is live.
    Ok(unsafe { qp.as_ref() }.ibv())
}
