//! Access upgrades of MRs and windows over pages pinned read-only
//! (issue 13, finding 1).
//!
//! An MR registered without any right that writes (`LOCAL_WRITE`,
//! `REMOTE_WRITE`, `REMOTE_ATOMIC`, `MW_BIND`) has its pages pinned without
//! `FOLL_WRITE`: they may be a read-only mapping of a file the caller
//! cannot write. `REREG_MR` changing only the access rights must not make
//! such an MR writable (`EACCES`, as the RDMA core's `ib_umem_check_rereg`
//! has drivers answer), and neither may a memory window bound over it.
//!
//! Here a 0444 file is mapped read-only and registered with `REMOTE_READ`.
//! The upgrade to write rights and to `MW_BIND` must fail; an RDMA WRITE to
//! the MR must fail with a remote access error, a type 1 window bound with
//! `REMOTE_WRITE` over it must fail to bind, and the file must keep its
//! bytes. Upgrades that need no new pin still work: a rights change without
//! write rights, write rights on an MR pinned writable, and a new
//! translation with write rights (which pins again).

use super::*;
use crate::abi;
use crate::errno::EACCES;
use crate::sys::{page_size, Mapping};
use crate::uverbs::{rereg, Mr};
use roxe_proto::access;
use roxe_uapi::{Sge, BIND_TYPE1};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// `IBV_WR_BIND_MW`.
const BIND_MW: u32 = 8;
/// `IBV_WC_MW_BIND_ERR`.
const MW_BIND_ERR: u32 = 6;
/// The bytes the file holds.
const FILL: u8 = 0x5a;
/// The bytes an RDMA WRITE carries.
const LEN: u32 = 64;

/// A file of `len` bytes of [`FILL`], mode 0444, mapped read-only and
/// shared; removed and unmapped on drop.
struct RoFile {
    path: PathBuf,
    ptr: *mut libc::c_void,
    len: usize,
}

impl RoFile {
    fn new(len: usize) -> Result<RoFile, Fail> {
        let path = std::env::temp_dir().join(format!("roxe-hostile-ro-{}", std::process::id()));
        let io = |what: &str, e: std::io::Error| Fail(format!("{what} {}: {e}", path.display()));
        std::fs::write(&path, vec![FILL; len]).map_err(|e| io("writing", e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444))
            .map_err(|e| io("chmod 0444", e))?;
        let f = std::fs::File::open(&path).map_err(|e| io("opening read-only", e))?;
        // SAFETY: A fresh read-only mapping at an address the kernel picks;
        // it overlaps nothing of ours and is only read through the file.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            let _ = std::fs::remove_file(&path);
            return Err(io("mmap PROT_READ of", e));
        }
        Ok(RoFile { path, ptr, len })
    }

    fn addr(&self) -> u64 {
        // CAST: an address as the ABI's u64.
        self.ptr as u64
    }

    /// Whether the file still holds only [`FILL`].
    fn intact(&self) -> Result<bool, Fail> {
        let b = std::fs::read(&self.path)
            .map_err(|e| Fail(format!("reading {}: {e}", self.path.display())))?;
        Ok(b.len() == self.len && b.iter().all(|&x| x == FILL))
    }
}

impl Drop for RoFile {
    fn drop(&mut self) {
        // SAFETY: Our own mapping, of `len` bytes, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A signaled RDMA WRITE of `LEN` bytes from `src` (lkey) to `dst` (rkey).
fn write_slot(wr_id: u64, src: u64, lkey: u32, dst: u64, rkey: u32) -> Vec<u8> {
    let wqe = SendWqe {
        opcode: wr::RDMA_WRITE,
        num_sge: 1,
        rkey,
        remote_addr: dst,
        ..send(wr_id)
    };
    [
        abi::send_wqe(&wqe),
        abi::sge(&Sge {
            addr: src,
            length: LEN,
            lkey,
        }),
    ]
    .concat()
}

/// A signaled type 1 bind (as `ibv_bind_mw` posts it) of `len` bytes at
/// `addr` of the MR `lkey` names, granting `rights`.
pub(super) fn bind_slot(
    wr_id: u64,
    mw_rkey: u32,
    lkey: u32,
    addr: u64,
    len: u64,
    rights: u32,
) -> Vec<u8> {
    let wqe = SendWqe {
        opcode: BIND_MW,
        rkey: mw_rkey,
        imm_data: lkey,
        remote_addr: addr,
        compare_add: len,
        swap: u64::from(rights) | BIND_TYPE1,
        ..send(wr_id)
    };
    abi::send_wqe(&wqe)
}

/// Posts `slot` on the requester of a fresh pair of RC QPs and returns its
/// completion's status, or `None` if none came.
pub(super) fn one_wqe(
    fx: &Fx,
    cq: &Cq,
    ring: &CqRing,
    slot: &[u8],
) -> Result<Option<(u64, u32)>, Fail> {
    let (q, responder) = fx.pair(QpSpec::new(QpType::Rc, cq, cq))?;
    post_raw(&q.sq, slot);
    fx.v.doorbell(q.qp.handle).step("the doorbell")?;
    let got = ring.collect(1, WAIT);
    // Whatever else came (the responder's own errors) is not checked here.
    let _ = ring.settle();
    fx.destroy_qp(q).step("DESTROY_QP")?;
    fx.destroy_qp(responder)
        .step("DESTROY_QP of the responder")?;
    Ok(got.first().map(|c| (c.wr_id, c.status)))
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (cq, ring) = fx.cq(64)?;
    let page = page_size();
    let file = RoFile::new(2 * page)?;
    let (faddr, flen) = (file.addr(), file.len as u64);

    // A writable buffer: the source of the writes, and the controls.
    let buf = Mapping::anon(2 * page).step("a buffer to register")?;
    buf.write(0, &[0xa5; LEN as usize]);
    let rw = access::LOCAL_WRITE | access::REMOTE_WRITE;
    let src: Mr =
        fx.v.reg_mr(
            fx.pd,
            buf.addr(),
            buf.len() as u64,
            buf.addr(),
            access::LOCAL_WRITE,
            &[],
        )
        .step("REG_MR of a buffer with LOCAL_WRITE")?;

    let ro =
        fx.v.reg_mr(fx.pd, faddr, flen, faddr, access::REMOTE_READ, &[]);
    let Some(ro) = c.r.ok(
        "REG_MR of a read-only mapping of a 0444 file with REMOTE_READ",
        ro,
    ) else {
        return Ok(());
    };
    // The last attempt asks for every right the checks below need, so that
    // without the fix they would find the MR writable and bindable.
    for (what, rights) in [
        ("LOCAL_WRITE", access::LOCAL_WRITE),
        ("MW_BIND", access::MW_BIND),
        (
            "LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ",
            rw | access::REMOTE_READ,
        ),
        (
            "LOCAL_WRITE | REMOTE_WRITE | MW_BIND | REMOTE_READ",
            rw | access::MW_BIND | access::REMOTE_READ,
        ),
    ] {
        let r = fx.v.rereg_mr(ro.handle, rereg::ACCESS, 0, 0, 0, 0, rights);
        c.r.errno(
            format!("REREG_MR of the read-only pin to {what}"),
            r,
            EACCES,
        );
    }

    // What an upgrade would have allowed: a write into the file's pages,
    // and a window with write rights over them.
    let got = one_wqe(
        &fx,
        &cq,
        &ring,
        &write_slot(0x51, buf.addr(), src.lkey, faddr, ro.rkey),
    )?;
    c.r.eq(
        "an RDMA WRITE to the read-only MR fails with a remote access error",
        got,
        Some((0x51, wc::REM_ACCESS_ERR)),
    );
    match fx.v.alloc_mw(fx.pd, 1) {
        Ok(mw) => {
            let slot = bind_slot(0x52, mw.rkey, ro.lkey, faddr, flen, access::REMOTE_WRITE);
            let got = one_wqe(&fx, &cq, &ring, &slot)?;
            c.r.eq(
                "a type 1 window bound with REMOTE_WRITE over the read-only MR fails to bind",
                got,
                Some((0x52, MW_BIND_ERR)),
            );
            c.r.ok("DEALLOC_MW", fx.v.dealloc_mw(mw.handle));
        }
        Err(e) => c.r.fail(format!("ALLOC_MW of type 1: {e}")),
    }
    c.r.check(file.intact()?, "the 0444 file still holds its bytes");
    let r =
        fx.v.rereg_mr(ro.handle, rereg::ACCESS, 0, 0, 0, 0, access::REMOTE_READ);
    c.r.ok(
        "REREG_MR of the read-only pin to REMOTE_READ (no write right: no new pin needed)",
        r,
    );

    // Controls. An MR pinned writable takes write rights in place.
    let wmr = fx.v.reg_mr(
        fx.pd,
        buf.addr() + page as u64,
        page as u64,
        buf.addr() + page as u64,
        access::LOCAL_WRITE,
        &[],
    );
    if let Some(wmr) =
        c.r.ok("REG_MR of a buffer with LOCAL_WRITE (pinned writable)", wmr)
    {
        let r = fx.v.rereg_mr(wmr.handle, rereg::ACCESS, 0, 0, 0, 0, rw);
        c.r.ok(
            "REREG_MR of the writable pin to LOCAL_WRITE | REMOTE_WRITE",
            r,
        );
        let dst = buf.addr() + page as u64;
        let got = one_wqe(
            &fx,
            &cq,
            &ring,
            &write_slot(0x53, buf.addr(), src.lkey, dst, wmr.rkey),
        )?;
        c.r.eq(
            "an RDMA WRITE to it then succeeds",
            got,
            Some((0x53, wc::SUCCESS)),
        );
        let mut landed = vec![0u8; LEN as usize];
        buf.read(page, &mut landed);
        c.r.check(
            landed == vec![0xa5; LEN as usize],
            "the written bytes landed",
        );
        c.r.ok("DEREG_MR of the writable MR", fx.v.dereg_mr(wmr.handle));
    }
    // A new translation pins again, so it may add write rights.
    let (b, blen) = (buf.addr() + page as u64, page as u64);
    let r =
        fx.v.rereg_mr(ro.handle, rereg::TRANS | rereg::ACCESS, b, blen, b, 0, rw);
    if let Some((_, rkey)) = c.r.ok(
        "REREG_MR of the read-only MR to a writable buffer with write rights (a new pin)",
        r,
    ) {
        let got = one_wqe(
            &fx,
            &cq,
            &ring,
            &write_slot(0x54, buf.addr(), src.lkey, b, rkey),
        )?;
        c.r.eq(
            "an RDMA WRITE through its new rkey succeeds",
            got,
            Some((0x54, wc::SUCCESS)),
        );
    }
    c.r.check(
        file.intact()?,
        "the 0444 file still holds its bytes at the end",
    );
    c.r.ok("DEREG_MR of the re-registered MR", fx.v.dereg_mr(ro.handle));
    c.r.ok("DEREG_MR of the source buffer", fx.v.dereg_mr(src.handle));
    fx.destroy_cq(cq, ring).step("DESTROY_CQ")?;
    Ok(())
}
