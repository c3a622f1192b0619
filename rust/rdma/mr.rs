// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`). Unlike PDs and CQs, MRs are allocated
//! by the driver: here as a `KBox<Mr<T>>` whose first field is the C struct.

use super::device::{Device, Driver};
use super::pd::Pd;
use super::udata::UData;
use crate::bindings;
use core::mem::MaybeUninit;
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::error::{Error, Result};
use kernel::ffi::c_int;
use kernel::macros::vtable;
use kernel::types::Opaque;

/// The verbs of an MR, implemented by the driver's per-MR state.
#[vtable]
pub(crate) trait MrOps<T: Driver>: Send + Sync + Sized {
    /// An MR covering all memory, for kernel consumers.
    fn get_dma(_pd: &Pd<T>, _access: u32) -> Result<(Self, MrInfo)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Registers user memory.
    fn reg_user(pd: &Pd<T>, args: &UserMrArgs, udata: Option<&UData<'_>>)
        -> Result<(Self, MrInfo)>;

    /// Registers `args.length` bytes of a dma-buf another driver exported
    /// (`ibv_reg_dmabuf_mr`).
    fn reg_dmabuf(_pd: &Pd<T>, _args: &DmaBufMrArgs) -> Result<(Self, MrInfo)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Re-registers an MR. `Ok(None)` means changed in place; `Ok(Some)`
    /// is a replacement MR (the core then deregisters the old one).
    fn rereg_user(
        _mr: &Mr<T>,
        _what: Rereg,
        _args: &UserMrArgs,
        _pd: &Pd<T>,
        _udata: Option<&UData<'_>>,
    ) -> Result<Option<(Self, MrInfo)>> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Allocates a fast-registration MR (`IB_MR_TYPE_MEM_REG`) for up to
    /// `max_num_sg` pages. With it come the three `map_*` below
    /// (`ib_map_mr_sg`), which a driver that has it must have too.
    fn alloc(_pd: &Pd<T>, _max_num_sg: u32) -> Result<(Self, MrInfo)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// `ib_map_mr_sg` begins, for pages of `page_size` bytes.
    fn map_begin(_mr: &Mr<T>, _page_size: u32) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The next page (its DMA address) of an `ib_map_mr_sg`.
    fn map_page(_mr: &Mr<T>, _addr: u64) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// `ib_map_mr_sg` mapped a range starting at `iova`.
    fn map_end(_mr: &Mr<T>, _iova: u64) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Deregisters an MR; on success its state is dropped.
    fn dereg(mr: &Mr<T>) -> Result;

    /// `ibv_advise_mr`: `advice` for the ranges `sges` of PD `pd`'s MRs.
    /// With `flush`, done before returning; otherwise it may run later.
    fn advise(_pd: &Pd<T>, _advice: Advice, _flush: bool, _sges: &[AdviseSge]) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// What `ibv_advise_mr` advises (`enum ib_uverbs_advise_mr_advice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Advice {
    /// Fault the pages in for reading.
    Prefetch,
    /// Fault the pages in for writing.
    PrefetchWrite,
    /// Map the pages that are present, faulting none.
    PrefetchNoFault,
}

/// One range of an `ibv_advise_mr` (`struct ib_sge`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdviseSge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// The most ranges one `ibv_advise_mr` may name; the core takes any number.
pub(crate) const MAX_ADVISE_SGE: usize = 32;

/// The keys and extent the RDMA core records for an MR.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrInfo {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) iova: u64,
    pub(crate) length: u64,
}

/// Arguments of `reg_user_mr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserMrArgs {
    /// User virtual address of the buffer.
    pub(crate) start: u64,
    /// Length in bytes.
    pub(crate) length: u64,
    /// The address remote peers use for the buffer's first byte.
    pub(crate) iova: u64,
    /// `IB_ACCESS_*`.
    pub(crate) access: u32,
}

/// Arguments of `reg_user_mr_dmabuf`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DmaBufMrArgs {
    /// The caller's file descriptor of the dma-buf.
    pub(crate) fd: i32,
    /// Offset of the registration's first byte in the buffer.
    pub(crate) offset: u64,
    /// Length in bytes.
    pub(crate) length: u64,
    /// The address remote peers use for the registration's first byte.
    pub(crate) iova: u64,
    /// `IB_ACCESS_*`.
    pub(crate) access: u32,
}

/// What `ibv_rereg_mr` changes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rereg {
    /// New address range (`IB_MR_REREG_TRANS`).
    pub(crate) translation: bool,
    /// New PD (`IB_MR_REREG_PD`).
    pub(crate) pd: bool,
    /// New access rights (`IB_MR_REREG_ACCESS`).
    pub(crate) access: bool,
}

/// A memory region of driver `T`.
///
/// # Invariants
///
/// `ib` is the `ib_mr` the core knows; `data` is initialised while the
/// `KBox` lives.
#[repr(C)]
pub(crate) struct Mr<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    data: T::Mr,
}

fn err_ptr<P>(e: Error) -> *mut P {
    // CAST: `ERR_PTR`: a small negative errno stored in a pointer.
    e.to_errno() as isize as *mut P
}

impl<T: Driver> Mr<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Mr {
        &self.data
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: The core sets `device` after creation; the device
        // outlives its MRs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// Runs `make`, the driver's half of a registration, with the MR's
    /// memory already allocated: once the driver has made the MR (its key
    /// live in the driver's tables), nothing here can fail any more, so no
    /// live key is ever left without an MR the core can deregister.
    fn publish(make: impl FnOnce() -> Result<(T::Mr, MrInfo)>) -> Result<*mut bindings::ib_mr> {
        let slot = KBox::<Self>::new_uninit(GFP_KERNEL)?;
        let (data, info) = make()?;
        Ok(Self::place(slot, data, info))
    }

    /// Fills `slot` with the driver's MR and the keys and extent the core
    /// reads; cannot fail.
    fn place(slot: KBox<MaybeUninit<Self>>, data: T::Mr, info: MrInfo) -> *mut bindings::ib_mr {
        let raw = KBox::into_raw(slot.write(Mr::<T> {
            ib: Opaque::uninit(),
            data,
        }));
        // SAFETY: `raw` is a fresh allocation; the core fills `device`,
        // `pd`, `type` and the rest after we return, but expects zeroed
        // memory with the keys and extent set.
        unsafe {
            let ib = (*raw).ib.get();
            core::ptr::write_bytes(ib, 0, 1);
            (*ib).lkey = info.lkey;
            (*ib).rkey = info.rkey;
            (*ib).iova = info.iova;
            (*ib).length = info.length;
            (*ib).page_size = kernel::page::PAGE_SIZE as u32;
        }
        raw.cast()
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `get_dma` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn get_dma_cb(
        pd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The core passes a live PD of this device.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        match Self::publish(|| <T::Mr as MrOps<T>>::get_dma(pd, access as u32)) {
            Ok(p) => p,
            Err(e) => err_ptr(e),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `reg_user` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn reg_user_cb(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The core passes a live PD of this device.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        // SAFETY: The core passes NULL or the call's valid udata.
        let udata = unsafe { UData::from_raw(udata) };
        let args = UserMrArgs {
            start,
            length,
            iova,
            access: access as u32,
        };
        match Self::publish(|| <T::Mr as MrOps<T>>::reg_user(pd, &args, udata.as_ref())) {
            Ok(p) => p,
            Err(e) => err_ptr(e),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `reg_user_mr_dmabuf` verb: every pointer is valid for the call and the PD
    /// belongs to this driver; `fd` is a descriptor of the calling process.
    pub(super) unsafe extern "C" fn reg_dmabuf_cb(
        pd: *mut bindings::ib_pd,
        offset: u64,
        length: u64,
        iova: u64,
        fd: c_int,
        access: c_int,
        _attrs: *mut bindings::uverbs_attr_bundle,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The core passes a live PD of this device.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        let args = DmaBufMrArgs {
            fd,
            offset,
            length,
            iova,
            access: access as u32,
        };
        match Self::publish(|| <T::Mr as MrOps<T>>::reg_dmabuf(pd, &args)) {
            Ok(p) => p,
            Err(e) => err_ptr(e),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `advise_mr` verb: every pointer is valid for the call, `sg_list` holds
    /// `num_sge` entries, and the PD belongs to this driver.
    pub(super) unsafe extern "C" fn advise_cb(
        pd: *mut bindings::ib_pd,
        advice: bindings::ib_uverbs_advise_mr_advice,
        flags: u32,
        sg_list: *mut bindings::ib_sge,
        num_sge: u32,
        _attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        // SAFETY: The core passes a live PD of this device.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        let advice = match advice {
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => {
                Advice::Prefetch
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => {
                Advice::PrefetchWrite
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => {
                Advice::PrefetchNoFault
            }
            _ => return super::errno::eopnotsupp().to_errno(),
        };
        let flush = flags & bindings::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0;
        let n = num_sge as usize;
        if n > MAX_ADVISE_SGE {
            return kernel::error::code::EINVAL.to_errno();
        }
        let mut sges = [AdviseSge {
            addr: 0,
            length: 0,
            lkey: 0,
        }; MAX_ADVISE_SGE];
        for (i, out) in sges.iter_mut().enumerate().take(n) {
            // SAFETY: `sg_list` holds `num_sge` entries and `i` is below it.
            let s = unsafe { &*sg_list.add(i) };
            *out = AdviseSge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
        }
        match <T::Mr as MrOps<T>>::advise(pd, advice, flush, &sges[..n]) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `rereg_user` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn rereg_user_cb(
        mr: *mut bindings::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let flags = flags as u32;
        if flags & !bindings::ib_mr_rereg_flags_IB_MR_REREG_SUPPORTED != 0 {
            return err_ptr(kernel::error::code::EINVAL);
        }
        let what = Rereg {
            translation: flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0,
            pd: flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_PD != 0,
            access: flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0,
        };
        // SAFETY: `mr` came from `publish`; the core holds it.
        let this = unsafe { &*mr.cast::<Self>() };
        // SAFETY: The core passes the MR's own PD when the PD is unchanged,
        // else the new one; both are live PDs of this device.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        // SAFETY: NULL or the call's valid udata.
        let udata = unsafe { UData::from_raw(udata) };
        let args = UserMrArgs {
            start,
            length,
            iova,
            access: access as u32,
        };
        // A new translation makes a new MR: its memory is taken first (as
        // in `publish`), and goes unused when the change is in place.
        let slot = match KBox::<Self>::new_uninit(GFP_KERNEL) {
            Ok(s) => s,
            Err(e) => return err_ptr(e.into()),
        };
        match <T::Mr as MrOps<T>>::rereg_user(this, what, &args, pd, udata.as_ref()) {
            // Changed in place; the core updates `pd`, `iova` and `length`.
            Ok(None) => core::ptr::null_mut(),
            Ok(Some((d, i))) => Self::place(slot, d, i),
            Err(e) => err_ptr(e),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `alloc` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn alloc_cb(
        pd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return err_ptr(kernel::error::code::EINVAL);
        }
        // SAFETY: The core passes a live PD of this device.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        match Self::publish(|| <T::Mr as MrOps<T>>::alloc(pd, max_num_sg)) {
            Ok(p) => p,
            Err(e) => err_ptr(e),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `set_page` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn set_page_cb(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: `ib_sg_to_pages` passes the MR `map_mr_sg_cb` gave it.
        let this = unsafe { &*mr.cast::<Self>() };
        match <T::Mr as MrOps<T>>::map_page(this, addr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `map_mr_sg` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn map_mr_sg_cb(
        mr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut kernel::ffi::c_uint,
    ) -> c_int {
        // SAFETY: `mr` came from `alloc_cb`; `ib_map_mr_sg` set its
        // `page_size` before calling.
        let (this, page_size) = unsafe { (&*mr.cast::<Self>(), (*mr).page_size) };
        if let Err(e) = <T::Mr as MrOps<T>>::map_begin(this, page_size) {
            return e.to_errno();
        }
        // SAFETY: The core's arguments are passed on unchanged; the
        // callback only touches the driver's page list.
        let n = unsafe {
            bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(Self::set_page_cb))
        };
        // SAFETY: `ib_sg_to_pages` set `iova` to the first mapped byte.
        <T::Mr as MrOps<T>>::map_end(this, unsafe { (*mr).iova });
        n
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `dereg` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn dereg_cb(
        mr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        let this = mr.cast::<Self>();
        // SAFETY: `mr` came from `publish` and is live until dereg
        // succeeds; the core does not call it again after success. (The
        // driver refuses while memory windows are bound to the MR.)
        let r = <T::Mr as MrOps<T>>::dereg(unsafe { &*this });
        if let Err(e) = r {
            return e.to_errno();
        }
        // SAFETY: As above; nothing uses the MR from now on.
        drop(unsafe { KBox::from_raw(this) });
        0
    }
}

/// Memory of kernel consumers, named by kernel virtual address: what DMA
/// MRs (`get_dma_mr`) reach. roxe registers no DMA device, so the core
/// gives kernel consumers virtual addresses for their buffers.
///
/// Only kernel PDs have DMA MRs (user space cannot ask for one), and the
/// data path only uses an MR for QPs of its own PD, so only kernel
/// consumers' work requests, or peers a kernel consumer gave an unsafe
/// global rkey, name such addresses. Both are trusted as the core trusts
/// them; an address outside the kernel's memory fails (`EFAULT`) rather
/// than faulting.
pub(crate) struct KernelMemory;

impl KernelMemory {
    /// Copies `dst.len()` bytes from kernel address `va`.
    pub(crate) fn read(va: u64, dst: &mut [u8]) -> Result {
        // SAFETY: `dst` is valid for its length; the helper checks the
        // source without faulting.
        let rc = unsafe { bindings::roxe_kernel_read(dst.as_mut_ptr().cast(), va, dst.len()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(kernel::error::code::EFAULT)
        }
    }

    /// Copies `src` to kernel address `va`.
    pub(crate) fn write(va: u64, src: &[u8]) -> Result {
        // SAFETY: `src` is valid for its length; the helper checks the
        // destination without faulting.
        let rc = unsafe { bindings::roxe_kernel_write(va, src.as_ptr().cast(), src.len()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(kernel::error::code::EFAULT)
        }
    }
}
