"""Helpers for the guest's own pyverbs checks (srq-resize.py, rnr.py): an RC
QP connected to another QP of the same device through its own GID, a
bounded CQ poll, and the ok/FAIL lines with their count."""
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.qp import QPAttr


class Tally:
    """Prints one line per check and counts the failed ones."""

    def __init__(self):
        self.failures = 0

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures += 1


def poll(cq, timeout):
    """The next completion on `cq`, or None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
        time.sleep(0.001)
    return None


def connect(qp, dest, port, gid_index, gid, access, min_rnr_timer):
    """Moves RC `qp` through INIT and RTR to RTS towards QP number `dest`
    on the same device (PSNs 0, 1024-byte MTU, retry and RNR retry 7)."""
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=port)
    a.pkey_index = 0
    a.qp_access_flags = access
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    a = QPAttr(qp_state=e.IBV_QPS_RTR, port_num=port, path_mtu=e.IBV_MTU_1024)
    a.dest_qp_num = dest
    a.rq_psn = 0
    a.max_dest_rd_atomic = 1
    a.min_rnr_timer = min_rnr_timer
    a.ah_attr = AHAttr(port_num=port, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
              e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    a = QPAttr(qp_state=e.IBV_QPS_RTS, port_num=port)
    a.sq_psn = 0
    a.timeout = 14
    a.retry_cnt = 7
    a.rnr_retry = 7
    a.max_rd_atomic = 1
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
              e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
