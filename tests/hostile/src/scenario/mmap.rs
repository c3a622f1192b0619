//! mmap abuse: offsets that were never handed out, the right offset with
//! the wrong length, private mappings, offsets of another context, mmap
//! after destroy and after a resize; rings unmapped and mapped again while
//! the kernel keeps producing; mappings that outlive their objects.

use super::*;
use crate::errno::{EFAULT, EINVAL};
use crate::sys::{page_size, Share};

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let page = page_size();
    match Verbs::open(&c.opts.dev) {
        Ok(raw) => c.r.errno(
            "mmap on a device file without a ucontext",
            raw.mmap(0, page, Share::Shared),
            EINVAL,
        ),
        Err(e) => {
            c.r.check(false, format!("open of the device failed with {e}"))
        }
    };

    let fx = Fx::new(c.opts)?;
    let (cq, ring) = fx.cq(256)?;
    let (off, len) = (cq.ring.mmap_offset, cq.ring.mmap_size as usize);
    let pg = page as u64;
    c.r.check(
        len > 2 * page,
        format!("a 256-entry CQ ring spans {} pages", len / page),
    );
    let v = &fx.v;
    c.r.errno(
        "mmap of an offset never handed out",
        v.mmap(off + 1024 * pg, page, Share::Shared),
        EINVAL,
    );
    c.r.errno(
        "mmap of an offset at 2^40",
        v.mmap(1 << 40, page, Share::Shared),
        EINVAL,
    );
    c.r.errno(
        "mmap of the CQ ring from its second page",
        v.mmap(off + pg, len - page, Share::Shared),
        EINVAL,
    );
    c.r.errno(
        "mmap of the CQ ring one page too long",
        v.mmap(off, len + page, Share::Shared),
        EINVAL,
    );
    c.r.errno(
        "mmap of the CQ ring one page too short",
        v.mmap(off, len - page, Share::Shared),
        EINVAL,
    );
    c.r.errno(
        "mmap of the CQ ring's first page only",
        v.mmap(off, page, Share::Shared),
        EINVAL,
    );
    c.r.errno(
        "a private mmap of the CQ ring",
        v.mmap(off, len, Share::Private),
        EINVAL,
    );
    match Verbs::open_with_context(&c.opts.dev) {
        Ok(other) => c.r.errno(
            "mmap of the CQ ring through another ucontext",
            other.mmap(off, len, Share::Shared),
            EINVAL,
        ),
        Err(e) => {
            c.r.check(false, format!("a second ucontext failed with {e}"))
        }
    };

    // Two mappings of one ring see the same memory.
    if let Some(mut m2) = c.r.ok(
        "a second shared mmap of the CQ ring",
        v.mmap(off, len, Share::Shared),
    ) {
        let probe = c.rng.bytes(64);
        ring.0.mapping().write(len - 64, &probe);
        let mut back = vec![0u8; 64];
        m2.read(len - 64, &mut back);
        c.r.check(back == probe, "both mappings show the same bytes");
        c.r.errno(
            "mremap growing the ring mapping",
            m2.try_grow(len + page),
            EFAULT,
        );
        c.r.ok("munmap of the second mapping", m2.unmap());
    }

    // Unmap while the kernel produces, map again, and find the completions.
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &cq, &cq), state::INIT)?;
    post_recv(&q.rq, 0x1);
    post_recv(&q.rq, 0x2);
    c.r.ok(
        "munmap of the CQ ring while a QP uses the CQ",
        ring.0.unmap(),
    );
    c.r.ok(
        "MODIFY_QP to ERR with the CQ ring unmapped",
        fx.modify(&q, state::ERR),
    );
    let ring = CqRing(
        crate::ring::Ring::map(v, off, len as u64, cq.ring.num_slots, cq.ring.slot_size)
            .step("mmap of the CQ ring again")?,
    );
    let got = ring.collect(2, WAIT);
    expect_cqes(
        c.r,
        "the completions made while unmapped are in the new mapping",
        &got,
        &[(0x1, wc::WR_FLUSH_ERR), (0x2, wc::WR_FLUSH_ERR)],
        q.qp.qpn,
    );
    let sq_info = q.qp.rings.sq;
    let QpRings { qp, ty, sq, rq } = q;
    c.r.ok("munmap of the SQ", sq.unmap());
    let sq = crate::ring::Ring::map(
        v,
        sq_info.mmap_offset,
        sq_info.mmap_size,
        sq_info.num_slots,
        sq_info.slot_size,
    )
    .step("mmap of the SQ again")?;
    let q = QpRings { qp, ty, sq, rq };
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));

    // Three completions through a remapped SQ stay pending for the resize.
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &cq, &cq), state::INIT)?;
    let sq_info = q.qp.rings.sq;
    let QpRings { qp, ty, sq, rq } = q;
    c.r.ok("munmap of a fresh QP's SQ", sq.unmap());
    let sq = crate::ring::Ring::map(
        v,
        sq_info.mmap_offset,
        sq_info.mmap_size,
        sq_info.num_slots,
        sq_info.slot_size,
    )
    .step("mmap of the SQ again")?;
    let q = QpRings { qp, ty, sq, rq };
    for i in 0..3 {
        post_send(&q.sq, &send(0x10 + i));
    }
    c.r.ok(
        "MODIFY_QP to ERR flushes the sends posted through the remapped SQ",
        fx.modify(&q, state::ERR),
    );
    c.r.eq("the three sends are flushed into the CQ", ring.pending(), 3);

    // Resize: the completions move, the old offset dies, the old mapping lives.
    c.r.errno(
        "RESIZE_CQ to fewer slots than pending completions",
        v.resize_cq(cq.handle, 2),
        EINVAL,
    );
    let cons = ring.0.consumer();
    ring.0.set_consumer(cons.wrapping_add(0x4000_0000));
    c.r.errno(
        "RESIZE_CQ with an impossible consumer index",
        v.resize_cq(cq.handle, 512),
        EINVAL,
    );
    ring.0.set_consumer(cons);
    let (new_cqe, new) = v.resize_cq(cq.handle, 512).step("RESIZE_CQ to 512")?;
    c.r.check(
        new_cqe >= 512 && new.mmap_offset != off,
        format!("RESIZE_CQ gives {new_cqe} entries at a new offset"),
    );
    c.r.errno(
        "mmap of the pre-resize offset",
        v.mmap(off, len, Share::Shared),
        EINVAL,
    );
    let old = ring;
    let ring = CqRing(
        crate::ring::Ring::map(
            v,
            new.mmap_offset,
            new.mmap_size,
            new.num_slots,
            new.slot_size,
        )
        .step("mmap of the resized ring")?,
    );
    let got = ring.collect(3, WAIT);
    expect_cqes(
        c.r,
        "the pending completions moved to the resized ring",
        &got,
        &[
            (0x10, wc::WR_FLUSH_ERR),
            (0x11, wc::WR_FLUSH_ERR),
            (0x12, wc::WR_FLUSH_ERR),
        ],
        q.qp.qpn,
    );
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));
    old.0.overwrite(&c.rng.bytes(old.0.mapping().len()));
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &cq, &cq), state::INIT)?;
    post_recv(&q.rq, 0x20);
    c.r.ok(
        "MODIFY_QP to ERR after garbage in the abandoned ring",
        fx.modify(&q, state::ERR),
    );
    let got = ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "completions go to the resized ring only",
        &got,
        &[(0x20, wc::WR_FLUSH_ERR)],
        q.qp.qpn,
    );
    c.r.ok("munmap of the abandoned ring", old.0.unmap());

    // Mappings that outlive their objects.
    let (sq_off, sq_len) = (q.qp.rings.sq.mmap_offset, q.qp.rings.sq.mmap_size as usize);
    let QpRings { qp, sq, rq, .. } = q;
    c.r.ok(
        "DESTROY_QP with its rings still mapped",
        v.destroy_qp(qp.handle),
    );
    let junk = c.rng.bytes(sq.mapping().len());
    sq.overwrite(&junk);
    c.r.check(
        sq.snapshot() == junk,
        "the SQ of a destroyed QP is still ordinary memory",
    );
    c.r.errno(
        "mmap of a destroyed QP's SQ",
        v.mmap(sq_off, sq_len, Share::Shared),
        EINVAL,
    );
    c.r.ok("munmap of the destroyed QP's SQ", sq.unmap());
    c.r.ok("munmap of the destroyed QP's RQ", rq.unmap());
    c.r.ok(
        "DESTROY_CQ with its ring still mapped",
        v.destroy_cq(cq.handle),
    );
    let snap = ring.0.snapshot();
    ring.0.overwrite(&c.rng.bytes(snap.len()));
    ring.0.overwrite(&snap);
    c.r.check(
        ring.0.snapshot() == snap,
        "the ring of a destroyed CQ is still ordinary memory",
    );
    c.r.errno(
        "mmap of a destroyed CQ's ring",
        v.mmap(new.mmap_offset, new.mmap_size as usize, Share::Shared),
        EINVAL,
    );
    c.r.ok("munmap of the destroyed CQ's ring", ring.0.unmap());
    c.r.ok("DEALLOC_PD", v.dealloc_pd(fx.pd));
    Ok(())
}
