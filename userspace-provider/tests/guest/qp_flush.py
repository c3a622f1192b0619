#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR MIT
"""libroxe QPs, SRQs and MWs end to end, through pyverbs.

For RC and UD QPs, each with and without an SRQ: create the QP, move it
RESET -> INIT -> RTR -> RTS, post receives and sends into the mapped rings
(the sends ring the doorbell), check the provider's limits (SGE count,
inline length, full ring, posting before RTS, post_recv on a QP with an
SRQ), then move the QP to ERR and poll the CQs: every posted work request
must come back exactly once as a flush completion (status 5) with its
wr_id. Receives posted to an SRQ stay there (the IBTA does not flush an
SRQ when one of its QPs fails). Also SRQ modify/query, MW alloc/dealloc,
query_qp and the create_qp_ex checks.

Usage: qp_flush.py DEVICE. Prints one PASS/FAIL line per check and exits
non-zero if any failed.
"""

import errno
import sys

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR, MW
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr, QPInitAttrEx
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

FAILS = 0
CHECKS = 0
FLUSH = 5  # IBV_WC_WR_FLUSH_ERR
# Sends whose doorbell the kernel refused with EOPNOTSUPP (as a kernel that
# does not enable the POST_SEND write command does). libroxe has published
# them in the ring before it rings the doorbell, so they are still flushed
# on ERR; the doorbell check in main() reports the refusal.
DOORBELL_REFUSED = []
LOC_QP_OP_ERR = 2  # IBV_WC_LOC_QP_OP_ERR


def check(what, ok, detail=""):
    global FAILS, CHECKS
    CHECKS += 1
    if ok:
        print(f"PASS: {what}")
    else:
        FAILS += 1
        print(f"FAIL: {what} {detail}")


def expect_errno(what, code, fn):
    """fn() must raise a pyverbs error carrying errno `code`."""
    try:
        fn()
    except PyverbsRDMAError as ex:
        check(what, ex.error_code == code, f"(errno {ex.error_code}, wanted {code})")
        return
    except PyverbsError as ex:
        check(what, False, f"(unexpected {ex!r})")
        return
    check(what, False, "(it succeeded)")


def roce_v2_gid(ctx, dev):
    """Index and GID of a RoCE v2 IPv4-mapped GID of port 1."""
    for i in range(16):
        try:
            with open(f"/sys/class/infiniband/{dev}/ports/1/gid_attrs/types/{i}") as f:
                kind = f.read().strip()
            gid = ctx.query_gid(1, i)
        except (OSError, PyverbsError):
            continue
        if kind == "RoCE v2" and str(gid).startswith("0000:0000:0000:0000:0000:ffff:"):
            return i, gid
    raise SystemExit("no RoCE v2 IPv4 GID on port 1")


def drain(cq, expect, timeout_polls=200):
    """Polls up to `expect` completions (and a little more, to see extras)."""
    got = []
    for _ in range(timeout_polls):
        n, wcs = cq.poll(expect + 4)
        got += wcs
        if len(got) >= expect and n == 0:
            break
    return got


def to_rts(qp, qp_type, gid_index, gid):
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.pkey_index = 0
    attr.port_num = 1
    if qp_type == e.IBV_QPT_UD:
        attr.qkey = 0x11111111
    else:
        attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    qp.to_init(attr)
    if qp_type == e.IBV_QPT_RC:
        gr = GlobalRoute(dgid=gid, sgid_index=gid_index)
        attr.ah_attr = AHAttr(is_global=1, gr=gr, port_num=1)
        attr.dest_qp_num = qp.qp_num  # loopback to itself
        attr.path_mtu = e.IBV_MTU_1024
        attr.rq_psn = 0
        attr.max_dest_rd_atomic = 1
        attr.min_rnr_timer = 12
    qp.to_rtr(attr)
    attr.sq_psn = 0
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    attr.max_rd_atomic = 1
    qp.to_rts(attr)


def scenario(ctx, pd, mr, gid_index, gid, qp_type, with_srq):
    name = ("RC" if qp_type == e.IBV_QPT_RC else "UD") + (" with SRQ" if with_srq else "")
    scq = CQ(ctx, 32)
    rcq = CQ(ctx, 32)
    srq = None
    if with_srq:
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=2)))
    cap = QPCap(max_send_wr=8, max_recv_wr=4, max_send_sge=2, max_recv_sge=2,
                max_inline_data=32)
    init = QPInitAttr(qp_type=qp_type, scq=scq, rcq=rcq, srq=srq, cap=cap, sq_sig_all=1)
    qp = QP(pd, init)
    _, got = qp.query(e.IBV_QP_CAP)
    c = got.cap
    print(f"  {name}: qpn {qp.qp_num:#x}, granted send_wr {c.max_send_wr} recv_wr "
          f"{c.max_recv_wr} send_sge {c.max_send_sge} recv_sge {c.max_recv_sge} "
          f"inline {c.max_inline_data}")
    check(f"{name}: granted at least what was asked",
          c.max_send_wr >= 8 and c.max_send_sge >= 2 and c.max_inline_data >= 32 and
          (with_srq or (c.max_recv_wr >= 4 and c.max_recv_sge >= 2)))

    sge = SGE(mr.buf, 64, mr.lkey)
    ah = None
    if qp_type == e.IBV_QPT_UD:
        gr = GlobalRoute(dgid=gid, sgid_index=gid_index)
        ah = AH(pd, attr=AHAttr(is_global=1, gr=gr, port_num=1))

    def send(wr_id, opcode=e.IBV_WR_SEND, sges=None, flags=e.IBV_SEND_SIGNALED):
        sges = sges or [sge]
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(sges), sg=sges, send_flags=flags)
        if ah is not None:
            wr.set_wr_ud(ah, qp.qp_num, 0x11111111)
        elif opcode in (e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_WRITE_WITH_IMM):
            wr.set_wr_rdma(mr.rkey, mr.buf)
        try:
            qp.post_send(wr)
        except PyverbsRDMAError as ex:
            if ex.error_code != errno.EOPNOTSUPP:
                raise
            DOORBELL_REFUSED.append((name, wr_id))

    # In RESET, nothing may be posted.
    expect_errno(f"{name}: post_send in RESET is refused", errno.EINVAL, lambda: send(99))
    recv_wr_ids = []
    if not with_srq:
        expect_errno(f"{name}: post_recv in RESET is refused", errno.EINVAL,
                     lambda: qp.post_recv(RecvWR(wr_id=98, num_sge=1, sg=[sge])))

    to_rts(qp, qp_type, gid_index, gid)
    attr, _ = qp.query(e.IBV_QP_STATE)
    check(f"{name}: RESET -> INIT -> RTR -> RTS", attr.qp_state == e.IBV_QPS_RTS,
          f"(state {attr.qp_state})")

    # Receives.
    if with_srq:
        expect_errno(f"{name}: post_recv on a QP with an SRQ is refused", errno.EINVAL,
                     lambda: qp.post_recv(RecvWR(wr_id=97, num_sge=1, sg=[sge])))
        sa = srq.query()
        many = [sge] * (sa.max_sge + 1)
        expect_errno(f"{name}: an SRQ receive with more SGEs than granted is refused",
                     errno.EINVAL,
                     lambda: srq.post_recv(RecvWR(wr_id=94, num_sge=len(many), sg=many)))
        for i in range(sa.max_wr):
            srq.post_recv(RecvWR(wr_id=0x500 + i, num_sge=1, sg=[sge]))
        expect_errno(f"{name}: an SRQ receive into a full ring is refused", errno.ENOMEM,
                     lambda: srq.post_recv(RecvWR(wr_id=93, num_sge=1, sg=[sge])))
    else:
        many = [sge] * (c.max_recv_sge + 1)
        expect_errno(f"{name}: a receive with more SGEs than granted is refused",
                     errno.EINVAL,
                     lambda: qp.post_recv(RecvWR(wr_id=96, num_sge=len(many), sg=many)))
        for i in range(c.max_recv_wr):
            qp.post_recv(RecvWR(wr_id=0x100 + i, num_sge=2, sg=[sge, sge]))
            recv_wr_ids.append(0x100 + i)
        expect_errno(f"{name}: a receive into a full ring is refused", errno.ENOMEM,
                     lambda: qp.post_recv(RecvWR(wr_id=95, num_sge=1, sg=[sge])))

    # Sends: plain, two SGEs, inline, with immediate, and RDMA Write on RC.
    send_wr_ids = [0x200, 0x201, 0x202, 0x203]
    send(0x200)
    send(0x201, sges=[sge, sge])
    small = SGE(mr.buf, c.max_inline_data, mr.lkey)
    send(0x202, sges=[small], flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)
    send(0x203, opcode=e.IBV_WR_SEND_WITH_IMM)
    if qp_type == e.IBV_QPT_RC:
        send(0x204, opcode=e.IBV_WR_RDMA_WRITE)
        send_wr_ids.append(0x204)
    big = SGE(mr.buf, c.max_inline_data + 1, mr.lkey)
    expect_errno(f"{name}: inline data beyond max_inline_data is refused", errno.EINVAL,
                 lambda: send(0x2ff, sges=[big], flags=e.IBV_SEND_INLINE))
    many = [sge] * (c.max_send_sge + 1)
    expect_errno(f"{name}: a send with more SGEs than granted is refused", errno.EINVAL,
                 lambda: send(0x2fe, sges=many))

    n, _ = scq.poll(8)
    m, _ = rcq.poll(8)
    check(f"{name}: nothing completes before ERR (no data path yet)", n == 0 and m == 0,
          f"({n} send, {m} receive completions)")

    # ERR flushes everything.
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    attr, _ = qp.query(e.IBV_QP_STATE)
    check(f"{name}: query_qp says ERR", attr.qp_state == e.IBV_QPS_ERR)
    swc = drain(scq, len(send_wr_ids))
    rwc = drain(rcq, len(recv_wr_ids))
    print(f"  {name}: send CQ {[(hex(w.wr_id), w.status, w.opcode) for w in swc]}")
    print(f"  {name}: recv CQ {[(hex(w.wr_id), w.status, w.opcode) for w in rwc]}")
    check(f"{name}: every send comes back flushed, in order, once ({len(send_wr_ids)})",
          [w.wr_id for w in swc] == send_wr_ids and all(w.status == FLUSH for w in swc)
          and all(w.qp_num == qp.qp_num for w in swc))
    want_ops = {0x204: e.IBV_WC_RDMA_WRITE}
    check(f"{name}: flushed sends report their opcode",
          all(w.opcode == want_ops.get(w.wr_id, e.IBV_WC_SEND) for w in swc))
    if with_srq:
        # The IBTA leaves an SRQ's receives alone when one of its QPs fails.
        check(f"{name}: the SRQ's receives are not flushed", rwc == [])
    else:
        check(f"{name}: every receive comes back flushed, in order, once "
              f"({len(recv_wr_ids)})",
              [w.wr_id for w in rwc] == recv_wr_ids and all(w.status == FLUSH for w in rwc)
              and all(w.opcode == e.IBV_WC_RECV for w in rwc))

    # In ERR a send is accepted and flushed at once by the doorbell.
    refused = len(DOORBELL_REFUSED)
    send(0x300)
    late = drain(scq, 1)
    if len(DOORBELL_REFUSED) > refused:
        print(f"SKIP: {name}: a send posted in ERR is flushed by the doorbell "
              f"(the kernel refused the doorbell; {len(late)} completions)")
        # It stays in the ring; the move to RESET below discards it.
    else:
        check(f"{name}: a send posted in ERR is flushed by the doorbell",
              [(w.wr_id, w.status) for w in late] == [(0x300, FLUSH)],
              f"({[(hex(w.wr_id), w.status) for w in late]})")

    if with_srq:
        srq.modify(SrqAttr(srq_limit=2), e.IBV_SRQ_LIMIT)
        a = srq.query()
        check(f"{name}: SRQ modify/query (limit 2, max_wr {a.max_wr}, max_sge {a.max_sge})",
              a.srq_limit == 2 and a.max_wr >= 8 and a.max_sge >= 2)
        expect_errno(f"{name}: SRQ resize is refused by the kernel", errno.EOPNOTSUPP,
                     lambda: srq.modify(SrqAttr(max_wr=64), e.IBV_SRQ_MAX_WR))

    # Back to RESET and to RTS again: the rings go on from where they were.
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
    to_rts(qp, qp_type, gid_index, gid)
    send(0x400)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    again = drain(scq, 1)
    check(f"{name}: after RESET and RTS again, a send is flushed on ERR",
          [(w.wr_id, w.status) for w in again] == [(0x400, FLUSH)],
          f"({[(hex(w.wr_id), w.status) for w in again]})")

    qp.close()
    if ah is not None:
        ah.close()
    if srq is not None:
        srq.close()
    scq.close()
    rcq.close()


def bad_wqe(ctx, pd, mr, gid_index, gid):
    """The doorbell's own check: an RDMA Write on a UD QP passes libroxe (it
    leaves opcodes to the kernel) and the kernel fails it and the QP."""
    cq = CQ(ctx, 16)
    init = QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4),
                      sq_sig_all=1)
    qp = QP(pd, init)
    to_rts(qp, e.IBV_QPT_UD, gid_index, gid)
    ah = AH(pd, attr=AHAttr(is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index),
                            port_num=1))
    sge = SGE(mr.buf, 8, mr.lkey)
    for wr_id, opcode in ((0x600, e.IBV_WR_SEND), (0x601, e.IBV_WR_RDMA_WRITE),
                          (0x602, e.IBV_WR_SEND)):
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge])
        wr.set_wr_ud(ah, qp.qp_num, 0x11111111)
        qp.post_send(wr)
    got = [(w.wr_id, w.status) for w in drain(cq, 3)]
    attr, _ = qp.query(e.IBV_QP_STATE)
    check("a WQE the kernel refuses completes with LOC_QP_OP_ERR in posting order, the "
          "QP enters ERR and the rest is flushed",
          got == [(0x600, FLUSH), (0x601, LOC_QP_OP_ERR), (0x602, FLUSH)]
          and attr.qp_state == e.IBV_QPS_ERR,
          f"({[(hex(i), st) for i, st in got]}, state {attr.qp_state})")
    qp.close()
    ah.close()
    cq.close()


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "roxe0"
    ctx = d.Context(name=dev)
    pd = PD(ctx)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    gid_index, gid = roce_v2_gid(ctx, dev)
    print(f"  using GID[{gid_index}] {gid}")

    for qp_type in (e.IBV_QPT_RC, e.IBV_QPT_UD):
        for with_srq in (False, True):
            try:
                scenario(ctx, pd, mr, gid_index, gid, qp_type, with_srq)
            except PyverbsError as ex:
                check(f"type {qp_type} srq {with_srq}: scenario ran", False, repr(ex))
    check("the send doorbell (POST_SEND with no work requests) reaches the kernel",
          not DOORBELL_REFUSED,
          f"(refused with EOPNOTSUPP for {len(DOORBELL_REFUSED)} sends, first "
          f"{DOORBELL_REFUSED[:1]}: the RDMA core refuses the POST_SEND write "
          f"unless roxe's ib_device.uverbs_cmd_mask has IB_USER_VERBS_CMD_POST_SEND)")
    try:
        bad_wqe(ctx, pd, mr, gid_index, gid)
    except PyverbsError as ex:
        check("a WQE the kernel refuses: scenario ran", False, repr(ex))

    # Not libroxe's own code, but the same kernel mask decides it.
    cq = CQ(ctx, 8)
    try:
        cq.req_notify()
        check("req_notify_cq reaches the kernel", True)
    except PyverbsRDMAError as ex:
        check("req_notify_cq reaches the kernel", False,
              f"(errno {ex.error_code}; the mask lacks IB_USER_VERBS_CMD_REQ_NOTIFY_CQ)")
    cq.close()

    # create_qp_ex: creation flags set to 0 are fine; the ibv_wr_* interface
    # is not offered.
    cq = CQ(ctx, 8)
    cap = QPCap(max_send_wr=4, max_recv_wr=4)
    ok = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap, pd=pd,
                      comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_CREATE_FLAGS)
    try:
        QP(ctx, ok).close()
        check("create_qp_ex with zero creation flags", True)
    except PyverbsError as ex:
        check("create_qp_ex with zero creation flags", False, repr(ex))
    wr_api = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap, pd=pd,
                          comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                          send_ops_flags=e.IBV_QP_EX_WITH_SEND)
    expect_errno("create_qp_ex with the ibv_wr_* interface is refused", errno.EOPNOTSUPP,
                 lambda: QP(ctx, wr_api))
    cq.close()

    # Memory windows.
    for t in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2):
        try:
            mw = MW(pd, t)
            rkey = mw.rkey
            mw.close()
            check(f"alloc_mw/dealloc_mw type {t} (rkey {rkey:#x})", True)
        except PyverbsError as ex:
            check(f"alloc_mw/dealloc_mw type {t}", False, repr(ex))

    mr.close()
    pd.close()
    ctx.close()
    print(f"qp_flush: {CHECKS} checks, {FAILS} failed")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
