#!/usr/bin/env python3
"""The responder's half of the FLUSH interop test (flush-interop.sh).

usage: flush-peer.py --dev DEV --gid-index N --dir DIR

It runs on the guest with the peer device (rxe), opposite roxe-hostile's
`flush-peer` scenario, which posts the flushes (libibverbs 44 has no
ibv_wr_flush). Files in DIR carry the exchange, as that scenario's module
comment describes: this side writes peer.info, waits for roxe.info,
connects its QPs, writes peer.ready and waits for roxe.done. Then it checks
its own side: the bytes the first case wrote are in its MR, and each QP is
in RTS after a case that succeeded and in ERR after one that failed (the
state roxe.done names). One line per check, PASS or FAIL; the exit status
is 0 only if all passed.

The flush access bits are not in libibverbs 44's headers nor in pyverbs'
enums; the raw values pass through both to the kernel.
"""
import argparse
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

FLUSH_GLOBAL = 1 << 8
FLUSH_PERSISTENT = 1 << 9
# IB_DEVICE_FLUSH_GLOBAL in device_cap_flags_ex.
CAP_FLUSH_GLOBAL = 1 << 38
LW, RW, RR = (e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE,
              e.IBV_ACCESS_REMOTE_READ)
REMOTE = LW | RW | RR
# The access flags of this side's QP for each case of the scenario (the
# names match tests/hostile/src/scenario/flush_peer.rs).
CASES = {
    "write-flush": REMOTE | FLUSH_GLOBAL,
    "whole-mr": REMOTE | FLUSH_GLOBAL,
    "flush-only": FLUSH_GLOBAL,
    "mr-no-right": REMOTE | FLUSH_GLOBAL,
    "mr-no-right-whole": REMOTE | FLUSH_GLOBAL,
    "past-end": REMOTE | FLUSH_GLOBAL,
    "bad-rkey": REMOTE | FLUSH_GLOBAL,
    "qp-no-right": REMOTE,
    "persistent-qp": REMOTE | FLUSH_GLOBAL,
    "persistent-mr": REMOTE | FLUSH_GLOBAL | FLUSH_PERSISTENT,
    "huge-len": REMOTE | FLUSH_GLOBAL,
    "lead-past-end": REMOTE | FLUSH_GLOBAL,
}
MR_LEN = 8192
SQ_PSN = 0x789
STATES = {e.IBV_QPS_RTS: "RTS", e.IBV_QPS_ERR: "ERR", e.IBV_QPS_RTR: "RTR",
          e.IBV_QPS_INIT: "INIT", e.IBV_QPS_SQE: "SQE"}

failed = 0


def check(ok, what):
    global failed
    print(("PASS: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failed += 1


def put(d, name, text):
    tmp = os.path.join(d, "." + name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(d, name))


def wait(d, name, seconds=180):
    path = os.path.join(d, name)
    end = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > end:
            raise SystemExit(f"FAIL: {path} did not appear within {seconds} s")
        time.sleep(0.1)
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w:
                out[w[0]] = w[1:]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev", required=True)
    ap.add_argument("--gid-index", type=int, required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()

    ctx = Context(name=a.dev)
    caps = ctx.query_device_ex().device_cap_flags_ex
    check(caps & CAP_FLUSH_GLOBAL != 0,
          f"{a.dev} advertises IB_DEVICE_FLUSH_GLOBAL (device_cap_flags_ex {caps:#x})")
    pd = PD(ctx)
    mrs = {"f": MR(pd, MR_LEN, REMOTE | FLUSH_GLOBAL),
           "p": MR(pd, MR_LEN, REMOTE),
           "o": MR(pd, MR_LEN, LW | FLUSH_GLOBAL)}
    # Without persistent memory behind it, an MR cannot promise persistence.
    try:
        MR(pd, MR_LEN, REMOTE | FLUSH_PERSISTENT).close()
        check(False, "REG_MR with FLUSH_PERSISTENT over ordinary memory is refused")
    except PyverbsRDMAError as err:
        check(True, f"REG_MR with FLUSH_PERSISTENT over ordinary memory is refused ({err.error_code})")
    mrs["f"].write(bytes(MR_LEN), MR_LEN, 0)
    gid = str(ctx.query_gid(1, a.gid_index))

    cq = CQ(ctx, 64)
    qps = {}
    info = [f"gid {gid}"]
    for k, mr in mrs.items():
        info.append(f"mr.{k} {mr.buf} {MR_LEN} {mr.rkey}")
    for name, flags in CASES.items():
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        attr.pkey_index = 0
        attr.qp_access_flags = flags
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                  e.IBV_QP_ACCESS_FLAGS)
        qps[name] = qp
        info.append(f"qp.{name} {qp.qp_num} {SQ_PSN}")
    put(a.dir, "peer.info", "\n".join(info) + "\n")

    roxe = wait(a.dir, "roxe.info")
    for name, qp in qps.items():
        rqpn, rpsn = (int(x) for x in roxe[f"qp.{name}"])
        attr = QPAttr(qp_state=e.IBV_QPS_RTR, port_num=1, path_mtu=e.IBV_MTU_1024)
        attr.dest_qp_num = rqpn
        attr.rq_psn = rpsn
        # rxe's responder takes a read/atomic resource for every flush, so
        # a QP that takes flushes needs at least one.
        attr.max_dest_rd_atomic = 1
        attr.min_rnr_timer = 12
        gr = GlobalRoute(dgid=GID(roxe["gid"][0]), sgid_index=a.gid_index)
        attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
                  e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
                  e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        attr = QPAttr(qp_state=e.IBV_QPS_RTS)
        attr.sq_psn = SQ_PSN
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.max_rd_atomic = 1
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
                  e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
    put(a.dir, "peer.ready", "ready\n")

    done = wait(a.dir, "roxe.done", 300)
    off, want = int(done["bytes"][0]), bytes.fromhex(done["bytes"][1])
    got = mrs["f"].read(len(want), off)
    check(got == want, f"write-flush: the {len(want)} bytes roxe wrote are at offset {off} of the MR")
    for name, qp in qps.items():
        want_state = done.get(f"state.{name}", ["?"])[0]
        attr, _ = qp.query(e.IBV_QP_STATE)
        got_state = STATES.get(attr.qp_state, str(attr.qp_state))
        check(got_state == want_state, f"{name}: this side's QP is in {got_state}, expected {want_state}")
    for obj in list(qps.values()) + [cq] + list(mrs.values()) + [pd, ctx]:
        obj.close()
    print(f"flush-peer: {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PyverbsError as err:
        print(f"FAIL: {err}", flush=True)
        sys.exit(1)
