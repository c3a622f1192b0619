#!/usr/bin/env python3
"""Resize a shared receive queue while receives are outstanding, and check
that every receive still lands where it was posted.

usage: srq-resize.py DEV GID_INDEX

Two RC QPs on DEV are connected to each other through the device's own GID
(loopback): A sends, B receives from an SRQ. The script

  1. posts 6 receives into an SRQ of 8, each on its own slice of an MR,
     and lets 2 sends consume the first two;
  2. grows the SRQ to 64 (`ibv_modify_srq` with IBV_SRQ_MAX_WR) and checks
     `ibv_query_srq`;
  3. posts 40 more receives, which the old size could not hold;
  4. sends 44 messages with distinct payloads and checks, in order, each
     completion's wr_id and byte_len and the bytes in that receive's slice;
  5. asks for a size below the receives still outstanding (EINVAL, and the
     SRQ keeps working), and for a limit above the new size (EINVAL);
  6. shrinks the SRQ to the receives outstanding, and consumes them.

Prints one line per check and exits 1 if any failed.
"""
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

from loopback import Tally, connect, poll

SLICE = 256
SLICES = 128
EINVAL = 22

result = Tally()


def payload(n):
    """Message n: a length and bytes that differ from every other message."""
    length = 1 + (n * 37) % (SLICE - 1)
    return bytes((n * 7 + i * 13) & 0xFF for i in range(length))



def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    port = 1
    ctx = Context(name=dev)
    gid = ctx.query_gid(port, gid_index)
    pd = PD(ctx)
    send_mr = MR(pd, SLICE, e.IBV_ACCESS_LOCAL_WRITE)
    recv_mr = MR(pd, SLICE * SLICES, e.IBV_ACCESS_LOCAL_WRITE)
    scq, rcq = CQ(ctx, 256), CQ(ctx, 256)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
    cap = QPCap(max_send_wr=64, max_recv_wr=0, max_send_sge=1, max_recv_sge=1)
    qa = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=scq,
                           cap=QPCap(max_send_wr=64, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)))
    qb = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=rcq, rcq=rcq, srq=srq, cap=cap))
    connect(qa, qb.qp_num, port, gid_index, gid, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE, 1)
    connect(qb, qa.qp_num, port, gid_index, gid, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE, 1)

    posted = []  # wr_ids in the order they were posted; wr_id = slice index

    def post(n):
        for _ in range(n):
            i = len(posted)
            srq.post_recv(RecvWR(wr_id=i, num_sge=1,
                                 sg=[SGE(recv_mr.buf + (i % SLICES) * SLICE, SLICE, recv_mr.lkey)]))
            posted.append(i)

    sent = 0

    def send_and_check(count):
        """Send `count` messages; check each receive completion in order."""
        nonlocal sent
        ok = True
        for _ in range(count):
            data = payload(sent)
            send_mr.write(data, len(data), 0)
            qa.post_send(SendWR(wr_id=sent, opcode=e.IBV_WR_SEND, num_sge=1,
                                sg=[SGE(send_mr.buf, len(data), send_mr.lkey)],
                                send_flags=e.IBV_SEND_SIGNALED))
            swc = poll(scq, 10)
            rwc = poll(rcq, 10)
            if swc is None or swc.status != e.IBV_WC_SUCCESS:
                result(False, f"send {sent} completes (got {swc and swc.status})")
                return False
            if rwc is None or rwc.status != e.IBV_WC_SUCCESS:
                result(False, f"receive for send {sent} completes (got {rwc and rwc.status})")
                return False
            if rwc.wr_id != sent or rwc.byte_len != len(data):
                result(False, f"receive {sent}: wr_id {rwc.wr_id}, byte_len {rwc.byte_len}; "
                              f"want {sent}, {len(data)}")
                ok = False
            got = recv_mr.read(len(data), (sent % SLICES) * SLICE)
            if got != data:
                result(False, f"receive {sent}: the bytes in its buffer differ from the send")
                ok = False
            sent += 1
        return ok

    post(6)
    result(send_and_check(2), "2 sends land in the SRQ of 8")

    srq.modify(SrqAttr(max_wr=64), e.IBV_SRQ_MAX_WR)
    got = srq.query()
    result(got.max_wr >= 64, f"after the resize query_srq says max_wr {got.max_wr} (asked 64)")
    try:
        post(40)
        result(True, "40 more receives fit after growing (46 posted, 44 outstanding)")
    except PyverbsRDMAError as err:
        result(False, f"posting 40 more receives after growing: {err}")
        return
    result(send_and_check(44), "44 sends land in order, 4 moved by the resize and 40 posted after it")

    post(10)
    try:
        srq.modify(SrqAttr(max_wr=4), e.IBV_SRQ_MAX_WR)
        result(False, "a resize to 4 with 10 receives outstanding is refused")
    except PyverbsRDMAError as err:
        result(err.error_code == EINVAL,
               f"a resize to 4 with 10 receives outstanding is refused (errno {err.error_code})")
    try:
        srq.modify(SrqAttr(max_wr=64, srq_limit=1000), e.IBV_SRQ_LIMIT)
        result(False, "a limit of 1000 on an SRQ of 64 is refused")
    except PyverbsRDMAError as err:
        result(err.error_code == EINVAL,
               f"a limit of 1000 on an SRQ of 64 is refused (errno {err.error_code})")
    result(send_and_check(3), "the SRQ still works after the refusals")

    srq.modify(SrqAttr(max_wr=16), e.IBV_SRQ_MAX_WR)
    got = srq.query()
    result(16 <= got.max_wr < 64, f"shrinking to 16 with 7 outstanding gives max_wr {got.max_wr}")
    post(5)
    result(send_and_check(12), "the 7 moved and 5 new receives land in order after shrinking")

    for obj in (qb, qa, srq, scq, rcq, recv_mr, send_mr, pd, ctx):
        obj.close()


if __name__ == "__main__":
    main()
    print(f"srq-resize: {'ok' if result.failures == 0 else f'{result.failures} failed'}")
    sys.exit(1 if result.failures else 0)
