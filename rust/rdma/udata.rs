// SPDX-License-Identifier: GPL-2.0

//! The driver-specific part of a verbs command (`struct ib_udata`).
//!
//! Everything here comes from user space and is untrusted: lengths are
//! checked before any copy, and input the driver does not define must be
//! absent or zero.

use crate::bindings;
use core::mem::size_of;
use kernel::error::{code::*, Result};

/// Plain data shared with user space byte for byte: in responses and in
/// ring slots.
///
/// # Safety
///
/// The type must have no padding bytes and no pointers (so copying it out
/// leaks nothing), accept any bit pattern (so reading what user space wrote
/// is sound), and have an alignment of at most 8.
pub(crate) unsafe trait Plain: Copy {
    /// The value whose bytes are all zero, which every `Plain` type has.
    fn zeroed() -> Self {
        // SAFETY: A `Plain` type accepts any bit pattern, zeros included.
        unsafe { core::mem::zeroed() }
    }
}

// SAFETY: `#[repr(C)]` structs of integer fields with no padding; the uapi
// crate pins their layout with compile-time assertions. (`CreateCqResp` is
// `RingInfo`.)
unsafe impl Plain for crate::uapi::CreateCqResp {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::CreateAhResp {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::Cqe {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::CreateQpResp {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::CreateSrqResp {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::SendWqe {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::RecvWqe {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::Sge {}
// SAFETY: As above.
unsafe impl Plain for crate::uapi::ModifySrqCmd {}
// SAFETY: As above (`u8` fields and arrays fill the gaps: no padding).
unsafe impl Plain for crate::uapi::CreateRssQpCmd {}

/// The user part of a verbs call.
///
/// # Invariants
///
/// `raw` points to a valid `ib_udata` for the duration of the verb call,
/// whose buffers are user-space addresses of the given lengths.
pub(crate) struct UData<'a> {
    raw: &'a bindings::ib_udata,
}

impl<'a> UData<'a> {
    /// Wraps the `udata` the RDMA core passed to a verb; `None` for calls
    /// from kernel consumers.
    ///
    /// # Safety
    ///
    /// `raw` must be NULL or a valid `ib_udata` that outlives `'a`.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Option<Self> {
        // SAFETY: Per the function's contract.
        unsafe { raw.as_ref() }.map(|raw| Self { raw })
    }

    /// The ucontext of the calling process.
    pub(super) fn ucontext_raw(&self) -> Option<*mut bindings::ib_ucontext> {
        let p = (self.raw as *const bindings::ib_udata).cast_mut();
        // SAFETY: A non-NULL `udata` always sits in a `uverbs_attr_bundle`.
        let ctx = unsafe { bindings::roxe_udata_ucontext(p) };
        (!ctx.is_null()).then_some(ctx)
    }

    /// Bytes of driver input.
    pub(crate) fn inlen(&self) -> usize {
        self.raw.inlen
    }

    /// Bytes of room for the driver response.
    pub(crate) fn outlen(&self) -> usize {
        self.raw.outlen
    }

    /// Fails unless every input byte is zero: the verb defines no driver
    /// input, and anything else may be a newer ABI we do not understand.
    pub(crate) fn expect_no_input(&self) -> Result {
        if self.raw.inlen == 0 {
            return Ok(());
        }
        let p = (self.raw as *const bindings::ib_udata).cast_mut();
        // SAFETY: `p` is valid by the type invariant; the helper reads the
        // user buffer with `copy_from_user` and checks its length.
        if unsafe { bindings::roxe_udata_is_cleared(p, 0, self.raw.inlen) } {
            Ok(())
        } else {
            Err(super::errno::eopnotsupp())
        }
    }

    /// Reads the driver input as a `T`. No input at all reads as
    /// `T::default()` (the caller predates the field); a shorter input is
    /// `EINVAL`, and bytes past `T` must be zero (`EOPNOTSUPP` otherwise).
    pub(crate) fn read_input<T: Plain + Default>(&self) -> Result<T> {
        let len = size_of::<T>();
        if self.raw.inlen == 0 {
            return Ok(T::default());
        }
        if self.raw.inlen < len {
            return Err(EINVAL);
        }
        let p = (self.raw as *const bindings::ib_udata).cast_mut();
        // SAFETY: As in `expect_no_input`; the range starts inside the input.
        if !unsafe { bindings::roxe_udata_is_cleared(p, len, self.raw.inlen - len) } {
            return Err(super::errno::eopnotsupp());
        }
        let mut v = T::default();
        let (dst, src) = ((&raw mut v).cast(), self.raw.inbuf);
        // SAFETY: `inbuf` is a user address with `inlen >= len` bytes; `v`
        // is `len` writable bytes and, being `Plain`, accepts any bits.
        let left = unsafe { bindings::roxe_copy_from_user(dst, src, len as _) };
        if left != 0 {
            return Err(EFAULT);
        }
        Ok(v)
    }

    /// Copies `v` to `addr`, an address in the caller's memory that the
    /// caller named in its input. `EFAULT` if the copy faults.
    pub(crate) fn write_to_user<T: Plain>(&self, addr: u64, v: &T) -> Result {
        if addr == 0 {
            return Err(EFAULT);
        }
        // CAST: a user address; `copy_to_user` checks that it is one.
        let to = addr as usize as *mut kernel::ffi::c_void;
        let (from, n) = ((v as *const T).cast(), size_of::<T>());
        // SAFETY: `copy_to_user` validates the destination range itself;
        // `v` is readable and, being `Plain`, has no padding to leak.
        let left = unsafe { bindings::roxe_copy_to_user(to, from, n as _) };
        if left != 0 {
            return Err(EFAULT);
        }
        Ok(())
    }

    /// Copies `resp` to the response buffer. Fails with `EINVAL` if user
    /// space left too little room, `EFAULT` if the copy faults.
    pub(crate) fn respond<T: Plain>(&self, resp: &T) -> Result {
        let len = size_of::<T>();
        if self.raw.outlen < len {
            return Err(EINVAL);
        }
        // SAFETY: `outbuf` is a user address with at least `len` bytes of
        // room (checked above); `resp` is `len` readable bytes and, being
        // `Response`, has no padding.
        let left = unsafe {
            bindings::roxe_copy_to_user(self.raw.outbuf, (resp as *const T).cast(), len as _)
        };
        if left != 0 {
            return Err(EFAULT);
        }
        Ok(())
    }
}
