// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Memory windows: allocation and deallocation through the kernel, with
//! no driver data in either direction. Binding is not offered yet: the
//! kernel cannot bind, so `bind_mw` stays libibverbs' `EOPNOTSUPP` dummy.

use core::ffi::c_int;
use core::mem::size_of_val;
use core::ptr::{self, NonNull};

use super::{cmd_result, drop_box, ibv_cmd_alloc_mw, ibv_cmd_dealloc_mw, set_errno, try_box};
use crate::abi::{ibv, uverbs};
use crate::errno::Errno;

/// `verbs_context_ops.alloc_mw`.
///
/// Returns NULL with `errno` set on failure. `ibv_cmd_alloc_mw` fills in
/// every field of the `ibv_mw`; the kernel picks the rkey and refuses an
/// unknown type.
///
/// # Safety
///
/// `pd` is a live roxe PD.
pub(super) unsafe extern "C" fn alloc_mw(pd: *mut ibv::Pd, mw_type: ibv::MwType) -> *mut ibv::Mw {
    let Some(mw) = try_box(ibv::Mw::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    let mut cmd = ibv::AllocMw::default();
    let mut resp = uverbs::AllocMwResp::default();
    // SAFETY: `pd` is live per the contract; `mw` is a live `ibv_mw`;
    // `cmd` and `resp` are writable for exactly the (core) sizes passed,
    // so there is no driver data either way.
    let ret = unsafe {
        ibv_cmd_alloc_mw(
            pd,
            mw_type,
            mw.as_ptr(),
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `mw` came from `try_box` and was never published.
        unsafe { drop_box(mw) };
        set_errno(err);
        return ptr::null_mut();
    }
    mw.as_ptr()
}

/// `verbs_context_ops.dealloc_mw`: returns 0 or a positive errno, which
/// `ibv_dealloc_mw` returns unchanged. On failure the MW stays valid.
///
/// # Safety
///
/// `mw` was returned by [`alloc_mw`] and is not deallocated yet; the caller
/// does not use it after a successful call.
pub(super) unsafe extern "C" fn dealloc_mw(mw: *mut ibv::Mw) -> c_int {
    let Some(mw) = NonNull::new(mw) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: `mw` is a live MW of an open context per the contract.
    let ret = unsafe { ibv_cmd_dealloc_mw(mw.as_ptr()) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: `mw` came from `try_box` in `alloc_mw`; the kernel object is
    // gone and the caller no longer uses it.
    unsafe { drop_box(mw) };
    0
}
