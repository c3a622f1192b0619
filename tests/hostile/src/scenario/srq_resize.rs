//! SRQ resize: `MODIFY_SRQ` with `IB_SRQ_MAX_WR`, whose driver input
//! (`ModifySrqCmd`) names a user address where the kernel writes the new
//! ring's `RingInfo`. Bad addresses, bad driver input, an impossible
//! producer index and more receives than the new size holds are refused
//! and leave the SRQ working as it was. A resize over random-garbage
//! receives copies them byte for byte to the front of the new ring, and
//! garbage in the old mapping afterwards reaches nothing.

use super::*;
use crate::abi;
use crate::errno::{EBUSY, EFAULT, EINVAL, EOPNOTSUPP};
use crate::sys::{page_size, Hole, Mapping, Share};
use crate::uverbs::{srq_mask, Srq};
use roxe_uapi::{ModifySrqCmd, RingInfo, RING_HEADER_SIZE};

/// An address in the kernel's direct map: never a user address.
const KERNEL_ADDR: u64 = 0xffff_8880_0000_0000;
/// roxe's largest SRQ (`MAX_SRQ_WR`).
const MAX_SRQ_WR: u32 = 1 << 20;

/// The driver input of a resize that wants the `RingInfo` at `addr`.
fn cmd(addr: u64) -> Vec<u8> {
    abi::modify_srq_cmd(&ModifySrqCmd {
        ring_info_addr: addr,
    })
}

/// The page where the kernel writes `RingInfo`s.
struct InfoPage(Mapping);

impl InfoPage {
    fn addr(&self) -> u64 {
        self.0.addr()
    }

    fn clear(&self) {
        self.0.write(0, &[0; size_of::<RingInfo>()]);
    }

    /// What the kernel wrote (all zero if nothing).
    fn get(&self) -> RingInfo {
        let mut b = [0u8; size_of::<RingInfo>()];
        self.0.read(0, &mut b);
        abi::ring_info(&b)
    }
}

/// Resizes `srq` to `max_wr`; the new ring's `RingInfo`.
fn resize(fx: &Fx, srq: &Srq, max_wr: u32, info: &InfoPage) -> Result<RingInfo, Errno> {
    info.clear();
    fx.v.modify_srq(srq.handle, srq_mask::MAX_WR, max_wr, 0, &cmd(info.addr()))?;
    Ok(info.get())
}

/// Maps the ring `i` describes.
fn map(fx: &Fx, i: &RingInfo) -> Result<Ring, Errno> {
    Ring::map(&fx.v, i.mmap_offset, i.mmap_size, i.num_slots, i.slot_size)
}

/// Checks the SRQ's size with `QUERY_SRQ`.
fn expect_max_wr(fx: &Fx, r: &mut Report, what: impl Display, srq: &Srq, want: u32) {
    match fx.v.query_srq(srq.handle) {
        Ok(a) => {
            r.eq(format!("{what}: QUERY_SRQ max_wr"), a.max_wr, want);
        }
        Err(e) => r.fail(format!("{what}: QUERY_SRQ failed with {e}")),
    }
}

/// `""` if `v` is empty, else `": V verb"`: the end of a check's text.
fn unless_empty<T: std::fmt::Debug>(v: &[T], verb: &str) -> String {
    if v.is_empty() {
        String::new()
    } else {
        format!(": {v:?} {verb}")
    }
}

/// Indices in `0..old.len()` whose slot in `ring` differs from `old`.
fn differing(ring: &Ring, old: &[Vec<u8>]) -> Vec<u32> {
    (0u32..)
        .zip(old)
        .filter(|(i, o)| ring.read_slot(*i) != **o)
        .map(|(i, _)| i)
        .collect()
}

/// Checks a `RingInfo` the kernel wrote for a resize to `asked` slots of
/// `slot_size` bytes, at an offset none of `old` has.
fn check_info(r: &mut Report, what: &str, i: &RingInfo, asked: u32, slot_size: usize, old: &[u64]) {
    r.check(
        i.num_slots >= asked && i.num_slots.is_power_of_two(),
        format!(
            "{what}: RingInfo num_slots {} is a power of two >= {asked}",
            i.num_slots
        ),
    );
    r.eq(
        format!("{what}: RingInfo slot_size unchanged"),
        i.slot_size as usize,
        slot_size,
    );
    let need = u64::from(i.num_slots) * u64::from(i.slot_size) + RING_HEADER_SIZE as u64;
    let page = page_size() as u64;
    r.check(
        i.mmap_size >= need && i.mmap_size.is_multiple_of(page),
        format!("{what}: RingInfo mmap_size {:#x} holds the header and the slots ({need:#x}) in whole pages", i.mmap_size),
    );
    r.check(
        !old.contains(&i.mmap_offset),
        format!(
            "{what}: RingInfo mmap_offset {:#x} is new (not {})",
            i.mmap_offset,
            old.iter()
                .map(|o| format!("{o:#x}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let v = &fx.v;
    let (scq, scq_ring) = fx.cq(16)?;
    let (rcq, rcq_ring) = fx.cq(16)?;
    let srq = v
        .create_srq(fx.pd, 16, 1, fx.handle(0x5e), &[])
        .step("CREATE_SRQ max_wr=16")?;
    let a_info = srq.ring.rq;
    c.r.check(
        srq.max_wr >= 16 && srq.max_sge >= 1 && a_info.num_slots == srq.max_wr,
        format!(
            "CREATE_SRQ grants max_wr {} and max_sge {} in a ring of {} slots",
            srq.max_wr, srq.max_sge, a_info.num_slots
        ),
    );
    let a = map(&fx, &a_info).step("mmap of the SRQ ring")?;
    let info = InfoPage(Mapping::anon(page_size()).step("a page for RingInfo")?);
    let hole = Hole::new().step("an unmapped hole")?;

    // 1. Resizes refused for their RingInfo address or driver input change
    // nothing: the ring keeps its bytes, the original RingInfo still maps
    // it, and a receive posted before them is consumed by a SEND.
    post_recv(&a, 0x5a1);
    let before = a.snapshot();
    for (what, addr, want) in [
        ("ring_info_addr 0", 0, EINVAL),
        ("an unmapped user address (0x10)", 0x10, EFAULT),
        ("a kernel address", KERNEL_ADDR, EFAULT),
        ("an unmapped page", hole.addr(), EFAULT),
        ("a PROT_NONE page", hole.prot_none_addr(), EFAULT),
        (
            "a RingInfo that runs into an unmapped page",
            hole.addr() - 8,
            EFAULT,
        ),
    ] {
        c.r.errno(
            format!("resize with {what}"),
            v.modify_srq(srq.handle, srq_mask::MAX_WR, 64, 0, &cmd(addr)),
            want,
        );
    }
    let good = cmd(info.addr());
    let mut long = good.clone();
    long.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
    let mut written = Vec::new();
    let over = a_info.num_slots + 1;
    for (what, mask, max_wr, limit, input, want) in [
        (
            "no driver input (no address)",
            srq_mask::MAX_WR,
            64,
            0,
            Vec::new(),
            EINVAL,
        ),
        (
            "4 bytes of driver input",
            srq_mask::MAX_WR,
            64,
            0,
            good[..4].to_vec(),
            EINVAL,
        ),
        (
            "non-zero driver input past ModifySrqCmd",
            srq_mask::MAX_WR,
            64,
            0,
            long,
            EOPNOTSUPP,
        ),
        ("max_wr 0", srq_mask::MAX_WR, 0, 0, good.clone(), EINVAL),
        (
            "max_wr 2^20 + 1",
            srq_mask::MAX_WR,
            MAX_SRQ_WR + 1,
            0,
            good.clone(),
            EINVAL,
        ),
        (
            "an unknown attr_mask bit",
            srq_mask::MAX_WR | 1 << 2,
            64,
            0,
            good.clone(),
            EINVAL,
        ),
        (
            "no resize but a limit above max_wr",
            srq_mask::LIMIT,
            0,
            over,
            good.clone(),
            EINVAL,
        ),
    ] {
        info.clear();
        c.r.errno(
            format!("MODIFY_SRQ with {what}"),
            v.modify_srq(srq.handle, mask, max_wr, limit, &input),
            want,
        );
        if info.get() != RingInfo::default() {
            written.push(what);
        }
    }
    c.r.check(
        written.is_empty(),
        format!(
            "modifications refused for their input write no RingInfo{}",
            unless_empty(&written, "did")
        ),
    );
    c.r.check(
        a.snapshot() == before,
        "the refused modifications leave the SRQ ring's bytes alone",
    );
    expect_max_wr(
        &fx,
        c.r,
        "after the refused modifications",
        &srq,
        a_info.num_slots,
    );
    match map(&fx, &a_info) {
        Ok(second) => {
            c.r.check(
                second.snapshot() == before,
                "the original RingInfo still maps the same ring",
            );
            c.r.ok("munmap of that second mapping", second.unmap());
        }
        Err(e) => {
            c.r.fail(format!("the original RingInfo no longer maps: {e}"))
        }
    }
    let qp = v
        .create_qp(&QpArgs {
            qp_type: QpType::Rc,
            pd: fx.pd,
            send_cq: scq.handle,
            recv_cq: rcq.handle,
            max_send_wr: 4,
            max_recv_wr: 0,
            max_send_sge: 1,
            max_recv_sge: 0,
            max_inline_data: 0,
            user_handle: fx.handle(0x99),
            srq: Some(srq.handle),
            driver_in: Vec::new(),
        })
        .step("CREATE_QP on the SRQ")?;
    c.r.eq(
        "a QP on the SRQ gets no RQ ring of its own",
        qp.rings.rq,
        RingInfo::default(),
    );
    let sq = map(&fx, &qp.rings.sq).step("mmap of the SQ")?;
    // Connected to itself, the QP's responder must expect the PSN its
    // requester starts from.
    let rts = fx.attrs(&qp, QpType::Rc, state::RTS);
    let rtr = Modify {
        rq_psn: rts.sq_psn,
        ..fx.attrs(&qp, QpType::Rc, state::RTR)
    };
    for (s, m) in [
        (state::INIT, fx.attrs(&qp, QpType::Rc, state::INIT)),
        (state::RTR, rtr),
        (state::RTS, rts),
    ] {
        v.modify_qp(qp.handle, &m)
            .step(format!("MODIFY_QP to {}", state::name(s)))?;
    }
    post_send(&sq, &send(0x5e1));
    c.r.ok("doorbell for a loopback SEND", v.doorbell(qp.handle));
    let sent = scq_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "the SEND completes",
        &sent,
        &[(0x5e1, wc::SUCCESS)],
        qp.qpn,
    );
    let got = rcq_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "the SRQ receive posted before the refused modifications takes the SEND",
        &got,
        &[(0x5a1, wc::SUCCESS)],
        qp.qpn,
    );
    c.r.check(
        !got.is_empty() && got.iter().all(|x| x.opcode == wc::OP_RECV),
        "as IBV_WC_RECV",
    );
    c.r.eq("the SRQ consumer index moved past it", a.consumer(), 1);
    c.r.errno(
        "DESTROY_SRQ while a QP uses it",
        v.destroy_srq(srq.handle),
        EBUSY,
    );
    drop(sq);
    c.r.ok("DESTROY_QP", v.destroy_qp(qp.handle));

    // 2. The producer index is the user's: one more than num_slots ahead
    // of the kernel's consumer, or behind it, is refused; so is a new size
    // below what is outstanding. The ring each refused resize already
    // announced is gone. Restored, the producer allows the resize.
    let (cons, prod, n) = (a.consumer(), a.producer(), a.num_slots());
    let mut announced = Vec::new();
    for (what, p) in [
        ("consumer + num_slots + 1", cons.wrapping_add(n + 1)),
        ("consumer - 1", cons.wrapping_sub(1)),
        ("consumer + 2^31", cons.wrapping_add(1 << 31)),
    ] {
        a.set_producer(p);
        c.r.errno(
            format!("resize with the SRQ producer at {what}"),
            resize(&fx, &srq, 64, &info),
            EINVAL,
        );
        announced.push(info.get());
    }
    a.set_producer(cons.wrapping_add(n));
    c.r.errno(
        format!("resize to {} slots with {n} receives outstanding", n / 2),
        resize(&fx, &srq, n / 2, &info),
        EINVAL,
    );
    announced.push(info.get());
    announced.retain(|i| *i != RingInfo::default());
    if announced.is_empty() {
        c.r.info("the refused resizes wrote no RingInfo");
    } else {
        let mappable: Vec<String> = announced
            .iter()
            .filter(|i| {
                v.mmap(i.mmap_offset, i.mmap_size as usize, Share::Shared)
                    .is_ok()
            })
            .map(|i| format!("{:#x}", i.mmap_offset))
            .collect();
        let n_ann = announced.len();
        c.r.check(
            mappable.is_empty(),
            format!(
                "the {n_ann} rings the refused resizes announced cannot be mapped{}",
                unless_empty(&mappable, "can")
            ),
        );
    }
    c.r.eq(
        "the refused resizes leave the kernel's consumer index",
        a.consumer(),
        cons,
    );
    expect_max_wr(&fx, c.r, "after the refused producers", &srq, n);
    a.set_producer(prod);
    let Some(b_info) = c.r.ok(
        "resize to 64 once the producer is valid again",
        resize(&fx, &srq, 64, &info),
    ) else {
        return Err(Fail("no resized SRQ to go on with".into()));
    };
    check_info(
        c.r,
        "resize to 64",
        &b_info,
        64,
        a.slot_size(),
        &[a_info.mmap_offset],
    );
    let b = map(&fx, &b_info).step("mmap of the resized SRQ ring")?;
    c.r.eq(
        "the resized ring's header: (producer, consumer)",
        (b.producer(), b.consumer()),
        (prod.wrapping_sub(cons), 0),
    );
    expect_max_wr(&fx, c.r, "after the resize", &srq, b_info.num_slots);
    c.r.errno(
        "mmap of the pre-resize SRQ offset",
        v.mmap(a_info.mmap_offset, a_info.mmap_size as usize, Share::Shared),
        EINVAL,
    );
    c.r.ok("munmap of the pre-resize SRQ ring", a.unmap());

    // 3. k random-garbage receives (the header's consumer field, which
    // belongs to the kernel, garbled too) move to slots 0..k of the new
    // ring, byte for byte, with producer k and consumer 0.
    let nb = b.num_slots();
    let k = 1 + c.rng.below(nb);
    let ask = nb + 1 + c.rng.below(3 * nb);
    let kcons = b.consumer();
    b.overwrite(&c.rng.bytes(b.mapping().len()));
    b.set_producer(kcons.wrapping_add(k));
    let old: Vec<Vec<u8>> = (0..k).map(|i| b.read_slot(kcons.wrapping_add(i))).collect();
    let what = format!("resize to {ask} with {k} garbage receives outstanding");
    let Some(c_info) = c.r.ok(&what, resize(&fx, &srq, ask, &info)) else {
        return Err(Fail("no resized SRQ to go on with".into()));
    };
    check_info(
        c.r,
        &what,
        &c_info,
        ask,
        b.slot_size(),
        &[a_info.mmap_offset, b_info.mmap_offset],
    );
    let Some(cr) =
        c.r.ok("mmap of the ring the RingInfo describes", map(&fx, &c_info))
    else {
        return Err(Fail("the new ring cannot be mapped".into()));
    };
    c.r.eq(
        "the new ring's header: (producer, consumer)",
        (cr.producer(), cr.consumer()),
        (k, 0),
    );
    let bad = differing(&cr, &old);
    c.r.check(
        bad.is_empty(),
        format!(
            "the {k} receives are copied to slots 0..{k} byte for byte{}",
            unless_empty(&bad, "differ")
        ),
    );
    expect_max_wr(&fx, c.r, "after the garbage resize", &srq, c_info.num_slots);

    // 4. The old mapping is plain memory now: garbage there changes nothing
    // in the new ring, and a further resize copies the new ring's slots.
    let c_before = cr.snapshot();
    b.overwrite(&c.rng.bytes(b.mapping().len()));
    c.r.check(
        cr.snapshot() == c_before,
        "random bytes over the whole old mapping leave the new ring alone",
    );
    let ask2 = c_info.num_slots * 2;
    let what = format!("a further resize to {ask2}");
    let d =
        c.r.ok(&what, resize(&fx, &srq, ask2, &info))
            .and_then(|d_info| {
                let old_offsets = [a_info.mmap_offset, b_info.mmap_offset, c_info.mmap_offset];
                check_info(c.r, &what, &d_info, ask2, cr.slot_size(), &old_offsets);
                c.r.ok("mmap of the third ring", map(&fx, &d_info))
            });
    if let Some(d) = &d {
        c.r.eq(
            "the third ring's header: (producer, consumer)",
            (d.producer(), d.consumer()),
            (k, 0),
        );
        let bad = differing(d, &old);
        c.r.check(
            bad.is_empty(),
            format!(
                "it took the new ring's {k} receives, not the old mapping's garbage{}",
                unless_empty(&bad, "differ")
            ),
        );
    }
    c.r.ok("DESTROY_SRQ", v.destroy_srq(srq.handle));
    if let Some(d) = d {
        c.r.ok("munmap of the third ring", d.unmap());
    }
    c.r.ok("munmap of the old ring", b.unmap());
    c.r.ok("munmap of the new ring", cr.unmap());
    c.r.ok("DESTROY_CQ send", fx.destroy_cq(scq, scq_ring));
    c.r.ok("DESTROY_CQ recv", fx.destroy_cq(rcq, rcq_ring));
    c.r.ok("DEALLOC_PD", v.dealloc_pd(fx.pd));
    Ok(())
}
