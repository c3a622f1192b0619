#!/usr/bin/env python3
"""Receiver Not Ready: sends that arrive before their receive is posted.

usage: rnr.py DEV GID_INDEX

Two RC QPs on DEV are connected to each other through the device's own GID
(loopback), with rnr_retry 7 (retry forever) and a short min_rnr_timer. A
sends to B before B has posted the receive; B posts it 300 ms later. The
responder must answer with RNR NAKs, and the requester must resend after
each wait until the receive is there. Cases, each checked for both
completions' status, the receive's byte_len (and immediate), and the bytes:

  send-1     a one-packet SEND (the only WQE in the send queue);
  send-64k   a 64-packet SEND;
  send-400k  a 400-packet SEND (more than the 256 packets one doorbell
             sends at once, so the rest is pending when the NAK comes);
  wimm-64k   a 64-packet RDMA WRITE WITH IMMEDIATE (the receive is taken
             at its last packet, after the first 63 were written);
  wimm-1     a one-packet RDMA WRITE WITH IMMEDIATE (its resend after the
             RNR NAK starts the message again; the responder once kept the
             first attempt's write in progress and refused the resend).

Prints one line per check and exits 1 if any failed.
"""
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

from loopback import Tally, connect, poll

MTU = 1024
BUF = 512 * 1024
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
result = Tally()



def pattern(seed, n):
    return bytes((seed * 31 + i * 7 + (i >> 8)) & 0xFF for i in range(n))


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    port = 1
    ctx = Context(name=dev)
    gid = ctx.query_gid(port, gid_index)
    pd = PD(ctx)
    smr = MR(pd, BUF, ACCESS)
    rmr = MR(pd, BUF, ACCESS)
    scq, rcq = CQ(ctx, 16), CQ(ctx, 16)
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    qa = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=scq, cap=cap))
    qb = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=rcq, rcq=rcq, cap=cap))
    connect(qa, qb.qp_num, port, gid_index, gid, ACCESS, 12)
    connect(qb, qa.qp_num, port, gid_index, gid, ACCESS, 12)

    cases = [("send-1", e.IBV_WR_SEND, 100), ("send-64k", e.IBV_WR_SEND, 64 * MTU),
             ("send-400k", e.IBV_WR_SEND, 400 * MTU), ("wimm-64k", e.IBV_WR_RDMA_WRITE_WITH_IMM, 64 * MTU),
             ("wimm-1", e.IBV_WR_RDMA_WRITE_WITH_IMM, 100)]
    for seed, (name, opcode, size) in enumerate(cases, 1):
        data = pattern(seed, size)
        smr.write(data, size, 0)
        rmr.write(bytes(size), size, 0)
        imm = 0x1234_5600 + seed
        wr = SendWR(wr_id=seed, opcode=opcode, num_sge=1, sg=[SGE(smr.buf, size, smr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED, imm_data=imm)
        if opcode == e.IBV_WR_RDMA_WRITE_WITH_IMM:
            wr.set_wr_rdma(rmr.rkey, rmr.buf)
        qa.post_send(wr)
        # The receive comes late: the first attempts meet RNR NAKs.
        time.sleep(0.3)
        recv_len = size if opcode == e.IBV_WR_SEND else 0
        qb.post_recv(RecvWR(wr_id=100 + seed, num_sge=1, sg=[SGE(rmr.buf, max(recv_len, 1), rmr.lkey)]))
        swc, rwc = poll(scq, 30), poll(rcq, 30)
        ok = swc is not None and swc.status == e.IBV_WC_SUCCESS and swc.wr_id == seed
        result(ok, f"{name}: the sender's completion succeeds (got {swc and swc.status})")
        ok = rwc is not None and rwc.status == e.IBV_WC_SUCCESS and rwc.wr_id == 100 + seed
        result(ok, f"{name}: the late receive completes (got {rwc and rwc.status})")
        if rwc is None or rwc.status != e.IBV_WC_SUCCESS:
            break
        result(rwc.byte_len == size, f"{name}: byte_len {rwc.byte_len}, want {size}")
        if opcode == e.IBV_WR_RDMA_WRITE_WITH_IMM:
            result(rwc.wc_flags & e.IBV_WC_WITH_IMM and rwc.imm_data == imm,
                   f"{name}: the immediate arrives ({rwc.imm_data:#x})")
        result(rmr.read(size, 0) == data, f"{name}: every byte arrived")

    for obj in (qb, qa, scq, rcq, rmr, smr, pd, ctx):
        obj.close()


if __name__ == "__main__":
    main()
    print(f"rnr: {'ok' if result.failures == 0 else f'{result.failures} failed'}")
    sys.exit(1 if result.failures else 0)
