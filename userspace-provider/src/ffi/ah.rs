// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Address handles.

use core::ffi::c_int;
use core::mem::{offset_of, size_of_val};
use core::ptr::{self, NonNull};

use super::{cmd_result, drop_box, ibv_cmd_create_ah, ibv_cmd_destroy_ah, set_errno, try_box};
use crate::abi::{driver, ibv};
use crate::errno::Errno;

/// A roxe address handle: libibverbs' `ibv_ah` and the kernel's AH number.
#[repr(C)]
struct Ah {
    /// libibverbs' part. `ibv_create_ah` writes `context` and `pd` after
    /// [`create_ah`] returns; nothing writes it later.
    ibv: ibv::Ah,
    /// The number UD work requests name this AH by (`CreateAhResp.ah_num`).
    num: u32,
}

/// The kernel's number for a roxe AH, which UD send WQEs carry; `None` for
/// a NULL AH.
///
/// # Safety
///
/// `ibah` is NULL or was returned by [`create_ah`] and is not destroyed
/// yet (the contract of a UD work request's `wr.ud.ah`).
pub(super) unsafe fn number(ibah: *mut ibv::Ah) -> Option<u32> {
    if ibah.is_null() {
        return None;
    }
    // SAFETY: per the contract `ibah` is the `ibv` field of a live `Ah`;
    // `num` is written once, before `create_ah` publishes the AH.
    Some(unsafe { (*ibah.byte_sub(offset_of!(Ah, ibv)).cast::<Ah>()).num })
}

/// `verbs_context_ops.create_ah`.
///
/// The kernel resolves the destination (including the MAC address for
/// RoCE) and answers with the AH number roxe keeps for UD sends. Returns
/// NULL with `errno` set on failure.
///
/// # Safety
///
/// `pd` is a live roxe PD and `attr` points to a readable `ibv_ah_attr`.
pub(super) unsafe extern "C" fn create_ah(
    pd: *mut ibv::Pd,
    attr: *mut ibv::AhAttr,
) -> *mut ibv::Ah {
    let Some(ah) = try_box(Ah {
        ibv: ibv::Ah::ZERO,
        num: 0,
    }) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `ah` is live; `ibv` is a field of it.
    let ibah = unsafe { &raw mut (*ah.as_ptr()).ibv };
    let mut resp = driver::CreateAhResp::default();
    // SAFETY: `pd` and `attr` are valid per the contract; `ibah` is a live
    // `ibv_ah`; `resp` is writable for its full size, with the driver part
    // right after `ibv_resp` (libibverbs builds the command itself, with no
    // driver input).
    let ret =
        unsafe { ibv_cmd_create_ah(pd, ibah, attr, &raw mut resp.ibv_resp, size_of_val(&resp)) };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `ah` came from `try_box` and was never published.
        unsafe { drop_box(ah) };
        set_errno(err);
        return ptr::null_mut();
    }
    // SAFETY: `ah` is live and not published yet.
    unsafe { (*ah.as_ptr()).num = resp.drv.ah_num };
    ibah
}

/// `verbs_context_ops.destroy_ah`: returns 0 or a positive errno, which
/// `ibv_destroy_ah` returns unchanged. On failure the AH stays valid.
///
/// # Safety
///
/// `ibah` was returned by [`create_ah`] and is not destroyed yet; the caller
/// does not use it after a successful call.
pub(super) unsafe extern "C" fn destroy_ah(ibah: *mut ibv::Ah) -> c_int {
    // SAFETY: `ibah` is a live AH of an open context per the contract.
    let ret = unsafe { ibv_cmd_destroy_ah(ibah) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: `ibah` is the `ibv` field of an `Ah`.
    let ah = unsafe { ibah.byte_sub(offset_of!(Ah, ibv)) }.cast::<Ah>();
    if let Some(ah) = NonNull::new(ah) {
        // SAFETY: every roxe AH comes from `try_box` in `create_ah`; the
        // kernel AH is gone and nothing uses it.
        unsafe { drop_box(ah) };
    }
    0
}
