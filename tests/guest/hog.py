#!/usr/bin/env python3
"""Create many verbs resources on a device and then wait, for lifetime tests.

usage: hog.py DEV COUNT READY_FILE [--no-qp]

Creates COUNT each of PDs, CQs and MRs (1 MiB each, so pages are pinned) and,
unless --no-qp, COUNT RC QPs; writes READY_FILE with the counts and sleeps
until killed. The caller kill -9s it and checks that everything was freed.
"""
import sys
import time

import pyverbs.cq as cq
import pyverbs.device as d
import pyverbs.enums as e
import pyverbs.mr as mr
import pyverbs.pd as pd
from pyverbs.qp import QP, QPCap, QPInitAttr

dev, count, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with_qp = "--no-qp" not in sys.argv
ctx = d.Context(name=dev)
keep = []
for _ in range(count):
    p = pd.PD(ctx)
    c = cq.CQ(ctx, 64)
    m = mr.MR(p, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    keep += [p, c, m]
    if with_qp:
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=2, max_recv_sge=2)
        keep.append(QP(p, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=c, rcq=c, cap=cap)))
with open(ready, "w") as f:
    f.write(f"{len(keep)} objects\n")
while True:
    time.sleep(1)
