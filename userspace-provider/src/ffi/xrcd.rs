// SPDX-License-Identifier: GPL-2.0 OR MIT

//! XRC domains: opened and closed through the kernel, with no driver data
//! in either direction.
//!
//! A domain is libibverbs' `verbs_xrcd`, which libroxe allocates and
//! `ibv_cmd_open_xrcd` fills in (the kernel's handle among it). XRC SRQs,
//! XRC receive QPs and `ibv_open_qp` name a domain by that handle; the
//! kernel keeps a domain busy while they exist, so closing it fails then.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr::{self, NonNull};

use super::{cmd_result, drop_box, ibv_cmd_close_xrcd, ibv_cmd_open_xrcd, set_errno, try_box};
use crate::abi::{ibv, uverbs, verbs};
use crate::errno::Errno;

/// `verbs_context_ops.open_xrcd`: opens an XRC domain (`ibv_open_xrcd`),
/// a new one or, through `attr->fd`, one shared with other processes.
///
/// Returns NULL with `errno` set on failure: `EINVAL` without `attr` or
/// without its `fd` and `oflags`, `EOPNOTSUPP` for unknown `comp_mask`
/// bits (both from `ibv_cmd_open_xrcd`), or the kernel's errno.
///
/// # Safety
///
/// `context` is an open roxe context and `attr` is NULL or points to a
/// readable `ibv_xrcd_init_attr`.
pub(super) unsafe extern "C" fn open_xrcd(
    context: *mut ibv::Context,
    attr: *mut ibv::XrcdInitAttr,
) -> *mut ibv::Xrcd {
    if attr.is_null() {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    let Some(xrcd) = try_box(verbs::Xrcd::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    let mut cmd = ibv::OpenXrcd::default();
    let mut resp = uverbs::OpenXrcdResp::default();
    // CAST: `verbs_xrcd` is 16 bytes.
    let size = size_of::<verbs::Xrcd>() as c_int;
    // SAFETY: `context` and `attr` are valid per the contract; `xrcd` is a
    // live `verbs_xrcd` of `size` bytes; `cmd` and `resp` are writable for
    // exactly the (core) sizes passed, so there is no driver data either
    // way. The command returns 0 or a positive errno, without touching
    // `errno` for its own argument checks.
    let ret = unsafe {
        ibv_cmd_open_xrcd(
            context,
            xrcd.as_ptr(),
            size,
            attr,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `xrcd` came from `try_box` and was never published.
        unsafe { drop_box(xrcd) };
        set_errno(err);
        return ptr::null_mut();
    }
    // SAFETY: `xrcd` is live; `xrcd` is its first field.
    unsafe { &raw mut (*xrcd.as_ptr()).xrcd }
}

/// `verbs_context_ops.close_xrcd`: closes the domain in the kernel, then
/// frees it. Returns 0 or a positive errno, which `ibv_close_xrcd` returns
/// unchanged; on failure (for example while SRQs or QPs of the domain
/// exist) the domain stays valid.
///
/// # Safety
///
/// `ibxrcd` is a domain [`open_xrcd`] returned that no other thread uses;
/// the caller does not use it after a successful call.
pub(super) unsafe extern "C" fn close_xrcd(ibxrcd: *mut ibv::Xrcd) -> c_int {
    // SAFETY: `ibv_xrcd` is the first field of the `verbs_xrcd` that
    // `open_xrcd` allocated, per the contract.
    let vxrcd = unsafe { ibxrcd.byte_sub(offset_of!(verbs::Xrcd, xrcd)) }.cast::<verbs::Xrcd>();
    // SAFETY: a live domain of an open context.
    let ret = unsafe { ibv_cmd_close_xrcd(vxrcd) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    if let Some(vxrcd) = NonNull::new(vxrcd) {
        // SAFETY: it came from `try_box` in `open_xrcd`; the kernel domain
        // is gone and nothing uses it.
        unsafe { drop_box(vxrcd) };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_xrcd_needs_its_attributes() {
        // SAFETY: a NULL attribute is refused before the context (NULL
        // here) is used.
        let xrcd = unsafe { open_xrcd(ptr::null_mut(), ptr::null_mut()) };
        assert!(xrcd.is_null());
        assert_eq!(crate::ffi::last_errno(), Errno::EINVAL);
    }
}
