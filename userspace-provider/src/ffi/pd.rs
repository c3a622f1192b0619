// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Protection domains and memory regions: thin wrappers around the
//! libibverbs commands, with no driver data in either direction.
//!
//! A PD is libibverbs' `ibv_pd` at the start of a [`RoxePd`], which also
//! says whether it is a parent domain; MRs are libibverbs' own `verbs_mr`.
//! Every PD and MR that reaches these ops was made here, by allocation,
//! registration or import (`ibv_import_pd`, `ibv_import_mr` into a context
//! `ibv_import_device` made over another's command fd: the kernel objects
//! are shared, and unimporting frees only this side's copy);
//! `alloc_null_mr`, `reg_dm_mr` and friends stay libibverbs' `EOPNOTSUPP`
//! dummies. A dma-buf MR (`reg_dmabuf_mr`) is an ordinary MR to libroxe:
//! the kernel maps the buffer.
//!
//! A parent domain (`ibv_alloc_parent_domain`) carries its protection
//! domain's kernel handle, so every command that names it (QP, SRQ, MR, MW,
//! AH) reaches the kernel as that PD. roxe's rings are memory the kernel
//! allocates and maps, so the application's allocators, which other
//! providers use for their queue buffers, have nothing to allocate here and
//! are not called. There are no thread domains (`alloc_td` stays the
//! dummy), so a parent domain is refused one. A PD is busy while parent
//! domains stand for it; a parent domain itself is not counted against the
//! objects created through it (their `pd` points at it), so, as the verbs
//! say of any PD, it must outlive them.

use core::ffi::{c_int, c_void};
use core::mem::size_of_val;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, Ordering};

use super::{
    cmd_result, drop_box, errno_ret, ibv_cmd_alloc_pd, ibv_cmd_dealloc_pd, ibv_cmd_dereg_mr,
    ibv_cmd_query_mr, ibv_cmd_reg_dmabuf_mr, ibv_cmd_reg_mr, ibv_cmd_rereg_mr, set_errno, try_box,
};
use crate::abi::{ibv, uverbs, verbs};
use crate::errno::Errno;

/// A PD or a parent domain: what [`alloc_pd`] and [`alloc_parent_domain`]
/// return a pointer to the start of.
#[repr(C)]
struct RoxePd {
    /// libibverbs' part; first, so a `*mut ibv::Pd` of roxe's is a
    /// `*mut RoxePd`.
    pd: ibv::Pd,
    /// For a parent domain, its protection domain; NULL for a PD.
    protection: *mut RoxePd,
    /// For a PD, the parent domains standing for it: it cannot be
    /// deallocated while they exist.
    parents: AtomicU32,
}

/// `verbs_context_ops.alloc_pd`.
///
/// Returns NULL with `errno` set on failure. libibverbs' `ibv_alloc_pd` sets
/// `pd->context` again afterwards.
///
/// # Safety
///
/// `context` is an open roxe context.
pub(super) unsafe extern "C" fn alloc_pd(context: *mut ibv::Context) -> *mut ibv::Pd {
    let Some(rpd) = try_box(RoxePd {
        pd: ibv::Pd::ZERO,
        protection: ptr::null_mut(),
        parents: AtomicU32::new(0),
    }) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    let pd: *mut ibv::Pd = rpd.as_ptr().cast();
    let mut cmd = ibv::AllocPd::default();
    let mut resp = uverbs::AllocPdResp::default();
    // SAFETY: `context` is open per the contract; `pd` is a live `ibv_pd`
    // (the first field of a `#[repr(C)]` `RoxePd`); `cmd` and `resp` are
    // writable for exactly the sizes passed, which are the core sizes, so
    // there is no driver data either way.
    let ret = unsafe {
        ibv_cmd_alloc_pd(
            context,
            pd,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `rpd` came from `try_box` and was never published.
        unsafe { drop_box(rpd) };
        set_errno(err);
        return ptr::null_mut();
    }
    pd
}

/// `verbs_context_ops.alloc_parent_domain`.
///
/// Returns NULL with `errno` set on failure: `EINVAL` without a PD of this
/// context, with a thread domain or with unknown `comp_mask` bits. The
/// allocators and `pd_context` are accepted and not used (see the module
/// comment).
///
/// # Safety
///
/// `context` is an open roxe context; `attr` is NULL or points to a
/// readable `ibv_parent_domain_init_attr` whose `pd` is NULL or a live PD
/// of a roxe context.
pub(super) unsafe extern "C" fn alloc_parent_domain(
    context: *mut ibv::Context,
    attr: *mut ibv::ParentDomainInitAttr,
) -> *mut ibv::Pd {
    // SAFETY: NULL or readable per the contract.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    let known = ibv::PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | ibv::PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    if !a.td.is_null() || a.comp_mask & !known != 0 {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `a.pd` is NULL or a live roxe PD per the contract.
    if !unsafe { is_pd_of(a.pd, context) } {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    let protection: *mut RoxePd = a.pd.cast();
    // SAFETY: A PD of this context is one of roxe's, so the start of a
    // live `RoxePd`.
    let prot = unsafe { &*protection };
    // A parent domain of a parent domain is refused.
    if !prot.protection.is_null() {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    // Counted first, so a `dealloc_pd` racing with this call sees the PD
    // busy rather than freeing it under the new parent domain.
    prot.parents.fetch_add(1, Ordering::AcqRel);
    let parent = RoxePd {
        pd: ibv::Pd {
            context,
            handle: prot.pd.handle,
        },
        protection,
        parents: AtomicU32::new(0),
    };
    let Some(rpd) = try_box(parent) else {
        prot.parents.fetch_sub(1, Ordering::AcqRel);
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    rpd.as_ptr().cast()
}

/// Whether `pd` is a PD (or parent domain) of `context`, read through its
/// `ibv_pd` part only, which every provider's PD starts with.
///
/// # Safety
///
/// `pd` is NULL or points to a live `ibv_pd`.
unsafe fn is_pd_of(pd: *mut ibv::Pd, context: *mut ibv::Context) -> bool {
    // SAFETY: NULL or a live `ibv_pd` per the contract.
    unsafe { pd.as_ref() }.is_some_and(|p| p.context == context)
}

/// `verbs_context_ops.dealloc_pd`: returns 0 or a positive errno, which
/// `ibv_dealloc_pd` returns unchanged. On failure the PD stays valid. A PD
/// with parent domains is busy (`EBUSY`); a parent domain is only freed.
///
/// # Safety
///
/// `pd` was returned by [`alloc_pd`] or [`alloc_parent_domain`] and is not
/// deallocated yet; the caller does not use it after a successful call.
pub(super) unsafe extern "C" fn dealloc_pd(pd: *mut ibv::Pd) -> c_int {
    let Some(rpd) = NonNull::new(pd.cast::<RoxePd>()) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: `pd` is the start of a live `RoxePd` per the contract.
    let (protection, parents) = unsafe {
        (
            rpd.as_ref().protection,
            rpd.as_ref().parents.load(Ordering::Acquire),
        )
    };
    if !protection.is_null() {
        // SAFETY: A PD outlives its parent domains (it is busy until they
        // are gone), so `protection` is live.
        unsafe { (*protection).parents.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: `rpd` came from `try_box` in `alloc_parent_domain`; the
        // caller no longer uses it.
        unsafe { drop_box(rpd) };
        return 0;
    }
    if parents != 0 {
        return Errno::EBUSY.get();
    }
    // SAFETY: `pd` is a live PD of an open context per the contract.
    let ret = unsafe { ibv_cmd_dealloc_pd(pd) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: `rpd` came from `try_box` in `alloc_pd`; the kernel object is
    // gone and the caller no longer uses it.
    unsafe { drop_box(rpd) };
    0
}

/// Whether `pd` is a parent domain of `context`.
///
/// # Safety
///
/// `pd` is NULL or a live PD, of any provider.
pub(super) unsafe fn is_parent_domain(pd: *mut ibv::Pd, context: *mut ibv::Context) -> bool {
    // SAFETY: NULL or a live PD per the contract; a PD of `context` is one
    // of roxe's, so the start of a `RoxePd`, and only then are the fields
    // past the `ibv_pd` read.
    unsafe { is_pd_of(pd, context) && !(*pd.cast::<RoxePd>()).protection.is_null() }
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

/// `verbs_context_ops.reg_dmabuf_mr`.
///
/// Returns NULL with `errno` set on failure. `ibv_cmd_reg_dmabuf_mr` fills
/// in the handle, keys, type and extent; the kernel takes the buffer from
/// `fd` and checks the range and rights against it.
///
/// # Safety
///
/// `pd` is a live PD from [`alloc_pd`]; the other arguments are passed on to
/// the kernel, which checks them.
pub(super) unsafe extern "C" fn reg_dmabuf_mr(
    pd: *mut ibv::Pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv::Mr {
    let Some(vmr) = try_box(verbs::Mr::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `pd` is live per the contract and `vmr` is a live `verbs_mr`;
    // no driver command buffer is passed.
    let ret = unsafe {
        ibv_cmd_reg_dmabuf_mr(
            pd,
            offset,
            length,
            iova,
            fd,
            access,
            vmr.as_ptr(),
            ptr::null_mut(),
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

/// `verbs_context_ops.import_pd`: the PD with kernel handle `pd_handle` of
/// the context whose command fd `context` was imported over. The kernel
/// checks the handle where it is used (every command that names the PD);
/// the import itself asks nothing of it. Returns NULL with `errno` set on
/// failure.
///
/// # Safety
///
/// `context` is an open roxe context.
pub(super) unsafe extern "C" fn import_pd(
    context: *mut ibv::Context,
    pd_handle: u32,
) -> *mut ibv::Pd {
    let Some(rpd) = try_box(RoxePd {
        pd: ibv::Pd {
            context,
            handle: pd_handle,
        },
        protection: ptr::null_mut(),
        parents: AtomicU32::new(0),
    }) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    rpd.as_ptr().cast()
}

/// `verbs_context_ops.unimport_pd`: forgets an imported PD; the kernel's
/// stays with the context that made it.
///
/// # Safety
///
/// `pd` came from [`import_pd`] and is no longer used.
pub(super) unsafe extern "C" fn unimport_pd(pd: *mut ibv::Pd) {
    if let Some(rpd) = NonNull::new(pd.cast::<RoxePd>()) {
        // SAFETY: `rpd` came from `try_box` in `import_pd`; the caller no
        // longer uses it.
        unsafe { drop_box(rpd) };
    }
}

/// `verbs_context_ops.import_mr`: the MR with kernel handle `mr_handle`,
/// filled in (keys, length) by the kernel. Returns NULL with `errno` set on
/// failure.
///
/// # Safety
///
/// `pd` is a live PD of an open roxe context.
pub(super) unsafe extern "C" fn import_mr(pd: *mut ibv::Pd, mr_handle: u32) -> *mut ibv::Mr {
    let Some(vmr) = try_box(verbs::Mr::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `pd` is live per the contract; `vmr` is a live `verbs_mr`.
    let ret = unsafe { ibv_cmd_query_mr(pd, vmr.as_ptr(), mr_handle) };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `vmr` came from `try_box` and was never published.
        unsafe { drop_box(vmr) };
        set_errno(err);
        return ptr::null_mut();
    }
    // SAFETY: `vmr` is live; `ibv_mr` is its first field.
    unsafe { &raw mut (*vmr.as_ptr()).ibv_mr }
}

/// `verbs_context_ops.unimport_mr`: forgets an imported MR; the kernel's
/// stays with the context that registered it.
///
/// # Safety
///
/// `mr` came from [`import_mr`] and is no longer used.
pub(super) unsafe extern "C" fn unimport_mr(mr: *mut ibv::Mr) {
    if let Some(vmr) = NonNull::new(mr.cast::<verbs::Mr>()) {
        // SAFETY: `ibv_mr` is the first field of the `verbs_mr` that
        // `try_box` made in `import_mr`; the caller no longer uses it.
        unsafe { drop_box(vmr) };
    }
}
