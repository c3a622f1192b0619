// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Protection domains and memory regions: thin wrappers around the
//! libibverbs commands, with no driver data in either direction.
//!
//! The objects are libibverbs' own `ibv_pd` and `verbs_mr`; roxe keeps no
//! state of its own for them. Every PD and MR that reaches these ops was made
//! here: roxe implements no other way to make one (`import_pd`,
//! `alloc_parent_domain`, `alloc_null_mr`, `reg_dmabuf_mr` and friends stay
//! libibverbs' `EOPNOTSUPP` dummies).

use core::ffi::{c_int, c_void};
use core::mem::size_of_val;
use core::ptr::{self, NonNull};

use super::{
    cmd_result, drop_box, errno_ret, ibv_cmd_alloc_pd, ibv_cmd_dealloc_pd, ibv_cmd_dereg_mr,
    ibv_cmd_reg_mr, ibv_cmd_rereg_mr, set_errno, try_box,
};
use crate::abi::{ibv, uverbs, verbs};
use crate::errno::Errno;

/// `verbs_context_ops.alloc_pd`.
///
/// Returns NULL with `errno` set on failure. libibverbs' `ibv_alloc_pd` sets
/// `pd->context` again afterwards.
///
/// # Safety
///
/// `context` is an open roxe context.
pub(super) unsafe extern "C" fn alloc_pd(context: *mut ibv::Context) -> *mut ibv::Pd {
    let Some(pd) = try_box(ibv::Pd::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    let mut cmd = ibv::AllocPd::default();
    let mut resp = uverbs::AllocPdResp::default();
    // SAFETY: `context` is open per the contract; `pd` is a live `ibv_pd`;
    // `cmd` and `resp` are writable for exactly the sizes passed, which are
    // the core sizes, so there is no driver data either way.
    let ret = unsafe {
        ibv_cmd_alloc_pd(
            context,
            pd.as_ptr(),
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `pd` came from `try_box` and was never published.
        unsafe { drop_box(pd) };
        set_errno(err);
        return ptr::null_mut();
    }
    pd.as_ptr()
}

/// `verbs_context_ops.dealloc_pd`: returns 0 or a positive errno, which
/// `ibv_dealloc_pd` returns unchanged. On failure the PD stays valid.
///
/// # Safety
///
/// `pd` was returned by [`alloc_pd`] and is not deallocated yet; the caller
/// does not use it after a successful call.
pub(super) unsafe extern "C" fn dealloc_pd(pd: *mut ibv::Pd) -> c_int {
    let Some(pd) = NonNull::new(pd) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: `pd` is a live PD of an open context per the contract.
    let ret = unsafe { ibv_cmd_dealloc_pd(pd.as_ptr()) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: `pd` came from `try_box` in `alloc_pd`; the kernel object is
    // gone and the caller no longer uses it.
    unsafe { drop_box(pd) };
    0
}

/// `verbs_context_ops.reg_mr`.
///
/// Returns NULL with `errno` set on failure. `ibv_cmd_reg_mr` fills in the
/// handle, keys, type and access flags; libibverbs' `ibv_reg_mr_iova2` then
/// sets `context`, `pd`, `addr` and `length`.
///
/// # Safety
///
/// `pd` is a live PD from [`alloc_pd`]; the other arguments are passed on to
/// the kernel, which checks them.
pub(super) unsafe extern "C" fn reg_mr(
    pd: *mut ibv::Pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut ibv::Mr {
    let Some(vmr) = try_box(verbs::Mr::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    let mut cmd = ibv::RegMr::default();
    let mut resp = uverbs::RegMrResp::default();
    // SAFETY: `pd` is live per the contract; `vmr` is a live `verbs_mr`;
    // `cmd` and `resp` are writable for exactly the (core) sizes passed.
    let ret = unsafe {
        ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            vmr.as_ptr(),
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `vmr` came from `try_box` and was never published.
        unsafe { drop_box(vmr) };
        set_errno(err);
        return ptr::null_mut();
    }
    // SAFETY: `vmr` is live; `ibv_mr` is its first field.
    unsafe { &raw mut (*vmr.as_ptr()).ibv_mr }
}

/// `verbs_context_ops.rereg_mr`.
///
/// Returns 0, or a positive errno with `errno` also set; `ibv_rereg_mr`
/// turns any failure into `IBV_REREG_MR_ERR_CMD` and callers read `errno`.
/// libibverbs has already checked `flags` and the argument combinations, and
/// updates `pd`, `addr` and `length` of the `ibv_mr` after a success.
///
/// # Safety
///
/// `vmr` was returned by [`reg_mr`] and is not deregistered; `pd` is a live
/// PD if `flags` has `IBV_REREG_MR_CHANGE_PD`. No other thread uses the MR
/// during the call.
pub(super) unsafe extern "C" fn rereg_mr(
    vmr: *mut verbs::Mr,
    flags: c_int,
    pd: *mut ibv::Pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    // CAST: `ibv_cmd_rereg_mr` takes the same `IBV_REREG_MR_*` bits as a
    // `uint32_t`; libibverbs rejected unknown (and so negative) ones.
    let flags = flags as u32;
    // CAST: `usize` is 64 bits on the only target this crate builds for;
    // this is C's `(uintptr_t)addr`.
    let hca_va = addr.addr() as u64;
    let mut cmd = ibv::ReregMr::default();
    let mut resp = uverbs::ReregMrResp::default();
    // SAFETY: per the contract `vmr` is a live registered MR and `pd` is
    // live whenever `ibv_cmd_rereg_mr` reads it; `cmd` and `resp` are
    // writable for exactly the (core) sizes passed. As in rdma-core's own
    // providers, a new translation keeps I/O virtual address == address.
    let ret = unsafe {
        ibv_cmd_rereg_mr(
            vmr,
            flags,
            addr,
            length,
            hca_va,
            access,
            pd,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        set_errno(err);
        return err.get();
    }
    if flags & ibv::REREG_MR_CHANGE_ACCESS != 0 {
        // `ibv_dereg_mr` reads `access` to decide about `ibv_dofork_range`,
        // so keep it current (`ibv_cmd_rereg_mr` does not).
        // SAFETY: `vmr` is live and not used concurrently per the contract.
        unsafe { (*vmr).access = access };
    }
    0
}

/// `verbs_context_ops.dereg_mr`: returns 0 or a positive errno, which
/// `ibv_dereg_mr` returns unchanged. On failure the MR stays valid.
///
/// # Safety
///
/// `vmr` was returned by [`reg_mr`] and is not deregistered yet; the caller
/// does not use it after a successful call.
pub(super) unsafe extern "C" fn dereg_mr(vmr: *mut verbs::Mr) -> c_int {
    let Some(vmr) = NonNull::new(vmr) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: `vmr` is a live registered MR per the contract.
    let ret = unsafe { ibv_cmd_dereg_mr(vmr.as_ptr()) };
    if ret == 0 {
        // SAFETY: `vmr` came from `try_box` in `reg_mr`; the kernel object
        // is gone and the caller no longer uses it.
        unsafe { drop_box(vmr) };
    }
    errno_ret(cmd_result(ret))
}
