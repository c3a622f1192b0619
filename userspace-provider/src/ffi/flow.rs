// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Flow steering rules: created and destroyed through the kernel, with no
//! driver data in either direction.
//!
//! A rule is libibverbs' `struct ibv_flow`, which libroxe allocates and
//! `ibv_cmd_create_flow` fills in (its context and the kernel's handle).
//! libibverbs never frees it; [`destroy_flow`] does, once the kernel's
//! rule is gone. The kernel decides which QPs take rules (raw packet QPs)
//! and requires `CAP_NET_RAW` for them.

use core::ffi::c_int;
use core::ptr::{self, NonNull};

use super::{cmd_result, drop_box, ibv_cmd_create_flow, ibv_cmd_destroy_flow, set_errno, try_box};
use crate::abi::ibv;
use crate::errno::Errno;
use crate::flow::check_attr;

/// `verbs_context_ops.create_flow`: steers the frames that match
/// `flow_attr` to `qp` (`ibv_create_flow`).
///
/// Returns NULL with `errno` set on failure: `EINVAL` without a QP or
/// attributes, `EOPNOTSUPP` for a `comp_mask` bit ([`check_attr`]),
/// `ENOMEM`, or the errno of `ibv_cmd_create_flow`: `EINVAL` for a
/// specification type libibverbs does not know, or the kernel's (`EPERM`
/// without `CAP_NET_RAW`, `EINVAL` for a QP that takes no rules).
///
/// # Safety
///
/// `qp` is NULL or a live roxe QP; `flow_attr` is NULL or points to a
/// readable `ibv_flow_attr` followed by its `num_of_specs` specifications,
/// each as long as its `hdr.size` says, as `ibv_create_flow` requires.
pub(super) unsafe extern "C" fn create_flow(
    qp: *mut ibv::Qp,
    flow_attr: *mut ibv::FlowAttr,
) -> *mut ibv::Flow {
    // SAFETY: NULL or readable per the contract; only `comp_mask` is
    // copied out, and no reference outlives this statement.
    let comp_mask = unsafe { flow_attr.as_ref() }.map(|a| a.comp_mask);
    let checked = match comp_mask {
        Some(comp_mask) if !qp.is_null() => check_attr(comp_mask),
        _ => Err(Errno::EINVAL),
    };
    if let Err(err) = checked {
        set_errno(err);
        return ptr::null_mut();
    }
    let Some(flow) = try_box(ibv::Flow::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `qp` is a live QP of an open context and `flow_attr` a
    // well-formed rule, per the contract; `flow` is a live, zeroed
    // `ibv_flow`, which the command fills in on success. NULL and 0 send
    // no driver data. The command returns 0 or a positive errno.
    let ret = unsafe { ibv_cmd_create_flow(qp, flow.as_ptr(), flow_attr, ptr::null_mut(), 0) };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `flow` came from `try_box` and was never published.
        unsafe { drop_box(flow) };
        set_errno(err);
        return ptr::null_mut();
    }
    flow.as_ptr()
}

/// `verbs_context_ops.destroy_flow`: removes the rule in the kernel, then
/// frees it. Returns 0 or a positive errno, which `ibv_destroy_flow`
/// returns unchanged; on failure the rule stays valid.
///
/// # Safety
///
/// `flow` is NULL or a rule [`create_flow`] returned that no other thread
/// uses; the caller does not use it after a successful call.
pub(super) unsafe extern "C" fn destroy_flow(flow: *mut ibv::Flow) -> c_int {
    let Some(flow) = NonNull::new(flow) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: a live rule of an open context, per the contract.
    let ret = unsafe { ibv_cmd_destroy_flow(flow.as_ptr()) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: it came from `try_box` in `create_flow`; the kernel's rule
    // is gone and nothing uses it.
    unsafe { drop_box(flow) };
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::last_errno;

    fn attr(comp_mask: u32) -> ibv::FlowAttr {
        ibv::FlowAttr {
            comp_mask,
            type_: 0,
            size: 20,
            priority: 0,
            num_of_specs: 0,
            port: 1,
            flags: 0,
        }
    }

    #[test]
    fn create_flow_refuses_before_the_kernel() {
        // A QP handle the command never reads: every case fails first.
        let mut qp = ibv::Qp::ZERO;
        let qp: *mut ibv::Qp = &raw mut qp;
        let mut good = attr(0);
        let mut masked = attr(1);
        for (what, qp, a, err) in [
            ("no attributes", qp, ptr::null_mut(), Errno::EINVAL),
            ("no QP", ptr::null_mut(), &raw mut good, Errno::EINVAL),
            ("a comp_mask bit", qp, &raw mut masked, Errno::EOPNOTSUPP),
        ] {
            // SAFETY: the pointers are NULL or live; each case is refused
            // before `ibv_cmd_create_flow`.
            let flow = unsafe { create_flow(qp, a) };
            assert!(flow.is_null(), "{what}");
            assert_eq!(last_errno(), err, "{what}");
        }
    }

    #[test]
    fn destroy_flow_refuses_null() {
        // SAFETY: NULL is refused before the command.
        let ret = unsafe { destroy_flow(ptr::null_mut()) };
        assert_eq!(ret, Errno::EINVAL.get());
    }
}
