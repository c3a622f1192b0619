//! Every `unsafe` line of the program lives here: the system calls on the
//! uverbs file and the memory the kernel shares with us through `mmap`.
//!
//! The rest of the program is safe code. It builds commands as bytes,
//! hands them to [`command`], and reaches ring memory only through
//! [`Mapping`], whose accessors are bounds-checked and volatile (the kernel
//! writes that memory concurrently, so no Rust reference to it is formed).

use crate::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// The errno of the last failed system call.
fn last_errno() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// The page size.
pub fn page_size() -> usize {
    // SAFETY: `sysconf` has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Sends one legacy uverbs command (`struct ib_uverbs_cmd_hdr`, then the
/// request) with a single `write()`.
///
/// With `resp`, the request starts with the `__aligned_u64 response` field,
/// which this function fills with the address of `resp`; `body` is the rest
/// of the request. The header's `out_words` is `resp.len() / 4`, so the
/// kernel writes only inside `resp` (the core response first, the driver's
/// right after it). Without `resp`, `body` is the whole request.
///
/// Some requests name more user memory inside `body`: the range of
/// `REG_MR`, the `RingInfo` address of `MODIFY_SRQ`. The kernel may read or
/// write there during the call. Callers name only memory held by a
/// [`Mapping`] or [`Hole`], which this program accesses only with volatile
/// operations, or addresses that are not ours at all (0, kernel addresses).
pub fn command(
    fd: BorrowedFd<'_>,
    cmd: u32,
    body: &[u8],
    resp: Option<&mut [u8]>,
) -> Result<(), Errno> {
    let resp_len = resp.as_ref().map_or(0, |r| r.len());
    let total = 8 + if resp.is_some() { 8 } else { 0 } + body.len();
    assert!(
        total.is_multiple_of(4) && resp_len.is_multiple_of(4),
        "uverbs commands are counted in 4-byte words"
    );
    let in_words = u16::try_from(total / 4).expect("command too long for in_words");
    let out_words = u16::try_from(resp_len / 4).expect("response too long for out_words");
    let mut buf = Vec::with_capacity(total);
    buf.extend_from_slice(&cmd.to_ne_bytes());
    buf.extend_from_slice(&in_words.to_ne_bytes());
    buf.extend_from_slice(&out_words.to_ne_bytes());
    if let Some(r) = resp {
        // CAST: a user address as the ABI's u64. `r` is borrowed mutably
        // from the caller for longer than this call.
        buf.extend_from_slice(&(r.as_mut_ptr() as u64).to_ne_bytes());
    }
    buf.extend_from_slice(body);
    // SAFETY: `buf` is `buf.len()` readable bytes. The kernel writes to
    // `resp`, which we borrow mutably for this call, at most `resp.len()`
    // bytes (`out_words`), and to no Rust object otherwise: other addresses
    // in `body` name mappings accessed only volatilely, or memory that is
    // not ours (see above). The kernel keeps no address after the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(last_errno());
    }
    if usize::try_from(n) != Ok(buf.len()) {
        // A legacy command either fails or consumes the whole write.
        return Err(Errno(libc::EIO));
    }
    Ok(())
}

/// `IB_USER_VERBS_CMD_FLAG_EXTENDED`: the command word of an extended
/// command.
const FLAG_EXTENDED: u32 = 0x8000_0000;

/// Sends one extended uverbs command (`struct ib_uverbs_cmd_hdr`, then
/// `struct ib_uverbs_ex_cmd_hdr`, then the request, then the driver's
/// input) with a single `write()`.
///
/// Extended commands count in 8-byte words, without the headers
/// (`verify_hdr` in `uverbs_main.c`): `in_words` is `body`'s,
/// `provider_in_words` is `driver_in`'s. With `resp`, its address is the
/// header's `response`; the core writes its response in the first
/// `core_out` bytes (`out_words`) and the driver right after them, in the
/// rest (`provider_out_words`). Without `resp`, the response address and
/// both counts are 0.
pub fn command_ex(
    fd: BorrowedFd<'_>,
    cmd: u32,
    body: &[u8],
    driver_in: &[u8],
    resp: Option<&mut [u8]>,
    core_out: usize,
) -> Result<(), Errno> {
    let resp_len = resp.as_ref().map_or(0, |r| r.len());
    assert!(
        body.len().is_multiple_of(8)
            && driver_in.len().is_multiple_of(8)
            && resp_len.is_multiple_of(8)
            && core_out.is_multiple_of(8)
            && core_out <= resp_len,
        "extended uverbs commands are counted in 8-byte words"
    );
    let words = |n: usize| u16::try_from(n / 8).expect("too long for a word count");
    let total = 8 + 16 + body.len() + driver_in.len();
    let mut buf = Vec::with_capacity(total);
    buf.extend_from_slice(&(FLAG_EXTENDED | cmd).to_ne_bytes());
    buf.extend_from_slice(&words(body.len()).to_ne_bytes());
    buf.extend_from_slice(&words(core_out).to_ne_bytes());
    // CAST: a user address as the ABI's u64 (0: no response). `r` is
    // borrowed mutably from the caller for longer than this call.
    let response = resp.map_or(0, |r| r.as_mut_ptr() as u64);
    buf.extend_from_slice(&response.to_ne_bytes());
    buf.extend_from_slice(&words(driver_in.len()).to_ne_bytes());
    buf.extend_from_slice(&words(resp_len - core_out).to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // cmd_hdr_reserved
    buf.extend_from_slice(body);
    buf.extend_from_slice(driver_in);
    // SAFETY: As in `command`: `buf` is `buf.len()` readable bytes; the
    // kernel writes at most `out_words + provider_out_words` words, that is
    // `resp.len()` bytes, at `response`, which we borrow mutably for this
    // call, and keeps no address after it.
    let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(last_errno());
    }
    if usize::try_from(n) != Ok(buf.len()) {
        return Err(Errno(libc::EIO));
    }
    Ok(())
}

/// Takes ownership of a file descriptor number the kernel just handed us
/// in a command response (the async event fd of `GET_CONTEXT`).
pub fn adopt_fd(raw: u32) -> Result<OwnedFd, Errno> {
    let raw = i32::try_from(raw).map_err(|_| Errno(libc::EBADF))?;
    // SAFETY: `fcntl(F_GETFD)` only queries the descriptor table.
    if unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
        return Err(last_errno());
    }
    // SAFETY: The descriptor is open (checked above) and was installed by
    // the kernel for this response; nothing else in this process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Waits up to `timeout_ms` for `fd` to become readable.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> Result<bool, Errno> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid `pollfd`, and we pass a count of 1.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 {
        return Err(last_errno());
    }
    Ok(n > 0 && p.revents & libc::POLLIN != 0)
}

/// `read()` into `buf`.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: `buf` is `buf.len()` writable bytes, exclusively borrowed.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| last_errno())
}

/// How a mapping is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// `MAP_SHARED`: what the rings need.
    Shared,
    /// `MAP_PRIVATE`: the kernel must refuse it for rings.
    Private,
}

/// A memory mapping this program owns: a ring of the uverbs fd or an
/// anonymous buffer. Unmapped on drop.
///
/// # Invariants
///
/// `ptr` is the start of a live mapping of `mapped` bytes that nothing else
/// in this process unmaps; its first `len` bytes (`len <= mapped`) are
/// readable and writable. Its contents may change at any time (the kernel
/// writes ring memory), so it is only accessed with volatile or atomic
/// operations.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    mapped: usize,
}

impl Mapping {
    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, share, fd, offset)`.
    pub fn map(
        fd: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        share: Share,
    ) -> Result<Mapping, Errno> {
        let flags = match share {
            Share::Shared => libc::MAP_SHARED,
            Share::Private => libc::MAP_PRIVATE,
        };
        let off = libc::off_t::try_from(offset).map_err(|_| Errno(libc::EOVERFLOW))?;
        // SAFETY: A fresh mapping at an address the kernel picks: it
        // overlaps nothing of ours.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd.as_raw_fd(),
                off,
            )
        };
        Self::from_mmap(p, len)
    }

    /// An anonymous, private, zeroed read-write buffer (memory to register).
    pub fn anon(len: usize) -> Result<Mapping, Errno> {
        // SAFETY: As in `map`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        Self::from_mmap(p, len)
    }

    fn from_mmap(p: *mut libc::c_void, len: usize) -> Result<Mapping, Errno> {
        if p == libc::MAP_FAILED {
            return Err(last_errno());
        }
        // INVARIANT: `mmap` succeeded, so `p` starts `len` mapped bytes.
        NonNull::new(p.cast::<u8>())
            .map(|ptr| Mapping {
                ptr,
                len,
                mapped: len,
            })
            .ok_or(Errno(libc::EFAULT))
    }

    /// The user address of the first byte.
    pub fn addr(&self) -> u64 {
        // CAST: an address as the ABI's u64.
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    fn check(&self, off: usize, n: usize) {
        assert!(
            off.checked_add(n).is_some_and(|end| end <= self.len),
            "access {off}+{n} outside a {}-byte mapping",
            self.len
        );
    }

    fn index(&self, off: usize) -> &AtomicU32 {
        self.check(off, 4);
        assert!(off.is_multiple_of(4), "unaligned ring index at {off}");
        // SAFETY: In bounds and 4-aligned (checked above; mappings are
        // page-aligned). The memory stays mapped while `self` lives, and is
        // only ever accessed atomically here.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast::<u32>()) }
    }

    /// Loads a ring index with acquire ordering.
    pub fn load_acquire(&self, off: usize) -> u32 {
        self.index(off).load(Ordering::Acquire)
    }

    /// Stores a ring index with release ordering.
    pub fn store_release(&self, off: usize, v: u32) {
        self.index(off).store(v, Ordering::Release)
    }

    /// Copies `buf.len()` bytes out of the mapping, starting at `off`.
    pub fn read(&self, off: usize, buf: &mut [u8]) {
        self.check(off, buf.len());
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: In bounds (checked above) of a live mapping; any byte
            // value is a valid `u8`.
            *b = unsafe { self.ptr.as_ptr().add(off + i).read_volatile() };
        }
    }

    /// Copies `data` into the mapping, starting at `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        self.check(off, data.len());
        for (i, b) in data.iter().enumerate() {
            // SAFETY: In bounds (checked above) of a live, writable mapping.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(*b) };
        }
    }

    /// Tries to grow the mapping in place with `mremap` (no
    /// `MREMAP_MAYMOVE`). On success the new pages are never accessed (the
    /// accessors stay within the old length), only unmapped with the rest.
    pub fn try_grow(&mut self, new_len: usize) -> Result<(), Errno> {
        // SAFETY: Without MREMAP_MAYMOVE the mapping keeps its address, so
        // `ptr` stays valid; on success it is `new_len` bytes long, which we
        // record so that drop unmaps all of it.
        let p = unsafe { libc::mremap(self.ptr.as_ptr().cast(), self.mapped, new_len, 0) };
        if p == libc::MAP_FAILED {
            return Err(last_errno());
        }
        self.mapped = new_len;
        Ok(())
    }

    /// Unmaps now and reports the result.
    pub fn unmap(self) -> Result<(), Errno> {
        let (ptr, len) = (self.ptr, self.mapped);
        std::mem::forget(self);
        // SAFETY: By the type invariant we own this range; `self` is gone,
        // so nothing can access it afterwards.
        if unsafe { libc::munmap(ptr.as_ptr().cast(), len) } != 0 {
            return Err(last_errno());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own this range, and nothing can
        // access it after drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
    }
}

/// Three pages for `REG_MR` attacks: a read-write page, then a page that is
/// certainly not mapped, then a `PROT_NONE` page. The reservation around
/// the hole keeps later mappings of ours from landing in it.
///
/// # Invariants
///
/// `base..base + 3 * page` was mapped by us: its first page read-write,
/// its middle page since unmapped, its last page `PROT_NONE`. This program
/// never reads or writes any of it (only the kernel may, through `REG_MR`
/// or `MODIFY_SRQ`).
pub struct Hole {
    base: usize,
    page: usize,
}

impl Hole {
    /// Maps three pages, unmaps the middle one and seals the last.
    pub fn new() -> Result<Hole, Errno> {
        let page = page_size();
        // SAFETY: A fresh mapping at an address the kernel picks.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                3 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_errno());
        }
        // CAST: the address as an integer; we never dereference it.
        let base = p as usize;
        // SAFETY: Both ranges are part of the mapping we just made, which
        // nothing else knows about.
        let ok = unsafe {
            libc::munmap((base + page) as *mut libc::c_void, page) == 0
                && libc::mprotect(
                    (base + 2 * page) as *mut libc::c_void,
                    page,
                    libc::PROT_NONE,
                ) == 0
        };
        if !ok {
            let e = last_errno();
            // SAFETY: Our own mapping, never accessed.
            unsafe { libc::munmap(p, 3 * page) };
            return Err(e);
        }
        // INVARIANT: mapped as documented.
        Ok(Hole { base, page })
    }

    /// The start of the read-write page just below the hole.
    pub fn mapped_addr(&self) -> u64 {
        self.base as u64
    }

    /// The start of the unmapped page.
    pub fn addr(&self) -> u64 {
        (self.base + self.page) as u64
    }

    /// The start of the inaccessible (`PROT_NONE`) page above the hole.
    pub fn prot_none_addr(&self) -> u64 {
        (self.base + 2 * self.page) as u64
    }

    /// The size of one page.
    pub fn page(&self) -> usize {
        self.page
    }
}

impl Drop for Hole {
    fn drop(&mut self) {
        // SAFETY: Our own mapping (unmapping its hole again is harmless),
        // which nothing accesses.
        unsafe { libc::munmap(self.base as *mut libc::c_void, 3 * self.page) };
    }
}
