#!/usr/bin/env python3
"""Check the data that RDMA writes, reads, sends and atomics move between two hosts.

usage: rdma-verify.py --dev DEV --gid-index N [-p PORT] [--mtu 1024[,256...]]
                      [--sizes 1,7,...] [--ops write,read,send,imm,atomic,awrite]
                      [SERVER_IP]

Without SERVER_IP this is the server: it sets up its RDMA resources, then
listens on TCP PORT for one client, serves it and exits. With SERVER_IP it is
the client, and it runs the tests. Both sides print one line per test,
`ok   write 65537` or `FAIL read 8388608: client: first mismatch at byte 4097
...`, and a summary `rdma-verify: N ok, M failed`; the exit status is 0 only
if every test passed.

One RC QP per side, connected over RoCE (GID index N on both sides), and one
MR per side with local write and remote write, read and atomic access. The
client is the requester of every operation; the server is the responder
and the receiver. The TCP connection carries JSON lines: the QP, MR and GID
exchange, and for each test a "prep" (the server sets up its memory and
posts a receive) and a "check" (the server verifies what arrived) around
the client's operation. The client runs the show: the server follows its
--mtu and --ops, and needs only --sizes and --imm-size big enough for its
buffer (the client checks).

Every test derives its data from a seed made of the operation, the size and
the path MTU, so both sides can compute what must be where. Before a test
the memory that will be written is filled with the bitwise inverse of the
expected data, so every byte that does not arrive shows, and guard bytes
(a seeded pattern) cover 4 KiB before and after the message; they must be
unchanged afterwards. The server's messages start 3 bytes before a page
boundary and the client's on one, so segments cross pages differently on
the two sides.

Tests, for each path MTU given:
  write   RDMA WRITE of each size into the server's memory.
  read    RDMA READ of each size from the server's memory.
  send    SEND of each size up to --send-max into a posted receive; the
          receive completion's byte_len must be the size.
  imm     RDMA WRITE WITH IMMEDIATE of --imm-size bytes: the receive
          completion must carry the immediate and IBV_WC_RECV_RDMA_WITH_IMM.
  atomic  FETCH_AND_ADD, a COMPARE_AND_SWAP that swaps and one that does
          not (`fetch-add 8`, `cmp-swap 8`, `cmp-swap-miss 8`): the original
          value returned and the server's memory afterwards.
  awrite  ATOMIC WRITE of 8 bytes (`atomic-write 8`): the server's memory
          afterwards, and the client's source unchanged.

Every wait is bounded: a completion that does not come within --timeout
seconds fails its test, and the peer's silence fails the run. After a
failed test both sides replace their QP and CQ, so one failure does not
flush every later test. After 3 timed-out tests the client stops and counts
the tests it did not run as failed.
"""
import argparse
import hashlib
import json
import random
import socket
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

DEFAULT_SIZES = "1,7,64,1000,1024,1025,4096,65536,65537,1048576,8388608"
OPS = ["write", "read", "send", "imm", "atomic", "awrite"]
MTUS = {256: e.IBV_MTU_256, 512: e.IBV_MTU_512, 1024: e.IBV_MTU_1024,
        2048: e.IBV_MTU_2048, 4096: e.IBV_MTU_4096}

# Buffer layout, the same on both sides: [0, PAGE) guard bytes (and the
# atomics' 8 bytes at ATOMIC_OFF), the message, then GUARD guard bytes.
PAGE = 4096
GUARD = 4096
SERVER_OFF = PAGE - 3   # the server's message starts 3 bytes before a page
CLIENT_OFF = PAGE       # the client's starts on a page boundary
ATOMIC_OFF = 8          # 8-byte aligned, as atomics require
RECV_SLACK = 1024       # a receive buffer is this much longer than the send

# QP attributes (ibv_rc_pingpong uses the same timeouts).
RD_ATOMIC = 16          # reads and atomics in flight, if the device allows
TIMEOUT = 14            # local ACK timeout: 4.096 us * 2^14 = 67 ms
RETRY_CNT = 7
RNR_RETRY = 7           # 7 means retry forever
MIN_RNR_TIMER = 12      # 0.64 ms
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)

ACCEPT_TIMEOUT = 120    # the server waits this long for its client
CONNECT_TIMEOUT = 30    # the client retries connecting this long
MAX_TIMEOUTS = 3        # the client stops after this many timed-out tests

# enum ibv_wc_status, in order (the libibverbs ABI).
WC_STATUS = ["IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR",
             "IBV_WC_LOC_EEC_OP_ERR", "IBV_WC_LOC_PROT_ERR",
             "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR",
             "IBV_WC_BAD_RESP_ERR", "IBV_WC_LOC_ACCESS_ERR",
             "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR",
             "IBV_WC_REM_OP_ERR", "IBV_WC_RETRY_EXC_ERR",
             "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR",
             "IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR",
             "IBV_WC_INV_EECN_ERR", "IBV_WC_INV_EEC_STATE_ERR",
             "IBV_WC_FATAL_ERR", "IBV_WC_RESP_TIMEOUT_ERR",
             "IBV_WC_GENERAL_ERR"]
WC_OPCODE = {e.IBV_WC_SEND: "IBV_WC_SEND",
             e.IBV_WC_RDMA_WRITE: "IBV_WC_RDMA_WRITE",
             e.IBV_WC_RDMA_READ: "IBV_WC_RDMA_READ",
             e.IBV_WC_COMP_SWAP: "IBV_WC_COMP_SWAP",
             e.IBV_WC_FETCH_ADD: "IBV_WC_FETCH_ADD",
             e.IBV_WC_ATOMIC_WRITE: "IBV_WC_ATOMIC_WRITE",
             e.IBV_WC_RECV: "IBV_WC_RECV",
             e.IBV_WC_RECV_RDMA_WITH_IMM: "IBV_WC_RECV_RDMA_WITH_IMM"}
INVERT = bytes(255 - i for i in range(256))


class Failure(Exception):
    """A test failed; `timeout` says whether it was a wait that ran out."""

    def __init__(self, msg, timeout=False):
        super().__init__(msg)
        self.timeout = timeout


class Fatal(Exception):
    """The run cannot go on (setup, reconnection or the TCP link failed)."""


# Data. Every pattern comes from a string seed, so both sides compute the
# same bytes (random.Random seeds from a str the same way on every run).

def pattern(seed, n):
    """n pseudo-random bytes: a message's contents."""
    return random.Random(seed).randbytes(n)


def guard(seed, n):
    """n guard bytes: a seeded 251-byte block, repeated (cheap to make)."""
    block = random.Random("guard " + seed).randbytes(251)
    return (block * (n // 251 + 1))[:n]


def diff(got, want):
    """(first, last) index where two equal-length byte strings differ, or None."""
    if got == want:
        return None
    n, step = len(want), 4096
    base = next(i for i in range(0, n, step) if got[i:i + step] != want[i:i + step])
    first = next(i for i in range(base, min(base + step, n)) if got[i] != want[i])
    base = next(i for i in reversed(range(0, n, step)) if got[i:i + step] != want[i:i + step])
    last = max(i for i in range(base, min(base + step, n)) if got[i] != want[i])
    return first, last


class Test:
    """One test: an operation, a message size and the path MTU it runs at."""

    def __init__(self, op, size, mtu):
        self.op, self.size, self.mtu = op, size, mtu
        self.seed = f"{op} {size} mtu {mtu}"
        self._data = None

    def __str__(self):
        return f"{self.op} {self.size}"

    @property
    def data(self):
        """The message (computed once: up to 8 MiB)."""
        if self._data is None:
            self._data = pattern(self.seed, self.size)
        return self._data

    @property
    def imm(self):
        """The immediate value of a write-with-immediate test."""
        return random.Random(self.seed).getrandbits(32)

    def atomic(self):
        """An atomic test's plan: (WR opcode, WC opcode, compare_add, swap,
        the server's value before, the server's value after)."""
        rng = random.Random(self.seed)
        orig, operand, swap = rng.getrandbits(64), rng.getrandbits(64), rng.getrandbits(64)
        cas = e.IBV_WR_ATOMIC_CMP_AND_SWP
        if self.op == "fetch-add":
            return (e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WC_FETCH_ADD,
                    operand, 0, orig, (orig + operand) % (1 << 64))
        if self.op == "cmp-swap":
            return cas, e.IBV_WC_COMP_SWAP, orig, swap, orig, swap
        if self.op == "atomic-write":
            # The 8 bytes to store come from the client's buffer.
            return e.IBV_WR_ATOMIC_WRITE, e.IBV_WC_ATOMIC_WRITE, operand, 0, orig, operand
        # cmp-swap-miss: the compare value differs from memory in bit 63
        # only, so a responder that compares 32 bits would wrongly swap.
        return cas, e.IBV_WC_COMP_SWAP, orig ^ (1 << 63), swap, orig, orig


def u64(v):
    """An atomic operand as it sits in memory (host byte order)."""
    return struct.pack("=Q", v)


class Endpoint:
    """This side's verbs objects: device, PD, MR, and a CQ and RC QP that
    can be replaced."""

    def __init__(self, dev, ib_port, gid_index, buf_len):
        self.ib_port, self.gid_index = ib_port, gid_index
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.mr = MR(self.pd, buf_len, ACCESS)
        self.gid = str(self.ctx.query_gid(ib_port, gid_index))
        if self.gid == str(GID()):
            raise Fatal(f"{dev} port {ib_port} has no GID at index {gid_index}")
        attr = self.ctx.query_device()
        self.rd_atomic_dest = min(RD_ATOMIC, attr.max_qp_rd_atom)
        self.rd_atomic_init = min(RD_ATOMIC, attr.max_qp_init_rd_atom)
        self.active_mtu = self.ctx.query_port(ib_port).active_mtu
        self.cq = self.qp = None
        self.psn = 0
        self.next_wr_id = 1
        self.new_qp()

    def close(self):
        for obj in (self.qp, self.cq, self.mr, self.pd, self.ctx):
            obj.close()

    def check_mtu(self, mtu):
        if MTUS[mtu] > self.active_mtu:
            inv = {v: k for k, v in MTUS.items()}
            raise Fatal(f"path MTU {mtu} is above the port's active MTU "
                        f"{inv.get(self.active_mtu, self.active_mtu)}")

    def new_qp(self):
        """Replace the CQ and QP (dropping their work) with new ones in INIT."""
        if self.qp is not None:
            self.qp.close()
        if self.cq is not None:
            self.cq.close()
        self.cq = CQ(self.ctx, 64)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap)
        self.qp = QP(self.pd, init)
        self.psn = random.getrandbits(24)
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=self.ib_port)
        attr.pkey_index = 0
        attr.qp_access_flags = ACCESS
        self.qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                       e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)

    def info(self):
        """What the peer needs to reach this QP and MR."""
        return {"qpn": self.qp.qp_num, "psn": self.psn, "gid": self.gid,
                "addr": self.mr.buf, "rkey": self.mr.rkey,
                "len": self.mr.length, "rd_atomic": self.rd_atomic_dest}

    def connect(self, peer, mtu):
        """INIT -> RTR -> RTS towards the peer's QP (a dict from info())."""
        self.check_mtu(mtu)
        attr = QPAttr(qp_state=e.IBV_QPS_RTR, port_num=self.ib_port, path_mtu=MTUS[mtu])
        attr.dest_qp_num = peer["qpn"]
        attr.rq_psn = peer["psn"]
        attr.max_dest_rd_atomic = self.rd_atomic_dest
        attr.min_rnr_timer = MIN_RNR_TIMER
        gr = GlobalRoute(dgid=GID(peer["gid"]), sgid_index=self.gid_index)
        attr.ah_attr = AHAttr(port_num=self.ib_port, is_global=1, gr=gr)
        self.qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
                       e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
                       e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        attr = QPAttr(qp_state=e.IBV_QPS_RTS, port_num=self.ib_port, path_mtu=MTUS[mtu])
        attr.sq_psn = self.psn
        attr.timeout = TIMEOUT
        attr.retry_cnt = RETRY_CNT
        attr.rnr_retry = RNR_RETRY
        attr.max_rd_atomic = max(1, min(self.rd_atomic_init, peer["rd_atomic"]))
        self.qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT |
                       e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                       e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)

    # Memory. fill() writes a message's surroundings and check() verifies
    # them: guard bytes in [0, off), `body` at off, guard bytes after it.

    def fill(self, t, off, body):
        region = guard(t.seed + " before", off) + body + guard(t.seed + " after", GUARD)
        self.mr.write(region, len(region), 0)

    def check(self, t, off, want):
        n = len(want)
        got = self.mr.read(off + n + GUARD, 0)
        body = got[off:off + n]
        d = diff(body, want)
        if d is not None:
            if n > 1 and body == want.translate(INVERT):
                raise Failure("no byte of the message arrived")
            first, last = d
            msg = (f"first mismatch at byte {first} (got 0x{body[first]:02x}, "
                   f"want 0x{want[first]:02x})")
            raise Failure(msg + (f", last at byte {last}" if last != first else ""))
        d = diff(got[off + n:], guard(t.seed + " after", GUARD))
        if d is not None:
            raise Failure(f"memory after the message changed, first at byte {n + d[0]}")
        d = diff(got[:off], guard(t.seed + " before", off))
        if d is not None:
            raise Failure(f"memory before the message changed, from {off - d[0]} "
                          f"to {off - d[1]} bytes before it")

    # Work requests and completions.

    def sge(self, off, length):
        return SGE(self.mr.buf + off, length, self.mr.lkey)

    def post_send(self, opcode, off, length, raddr, rkey, imm=0, atomic=None):
        """Post one signaled send-queue WR; return its wr_id."""
        wr_id, self.next_wr_id = self.next_wr_id, self.next_wr_id + 1
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[self.sge(off, length)],
                    imm_data=imm, send_flags=e.IBV_SEND_SIGNALED)
        if atomic is not None:
            wr.set_wr_atomic(rkey, raddr, atomic[0], atomic[1])
        elif opcode != e.IBV_WR_SEND:
            wr.set_wr_rdma(rkey, raddr)
        self.qp.post_send(wr)
        return wr_id

    def post_recv(self, off, length):
        wr_id, self.next_wr_id = self.next_wr_id, self.next_wr_id + 1
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[self.sge(off, length)]))
        return wr_id

    def wait(self, wr_id, opcode, timeout):
        """Poll the CQ for wr_id's completion for at most `timeout` seconds;
        return it if it succeeded with `opcode`, else raise Failure."""
        deadline = time.monotonic() + timeout
        delay = 0.0001
        while True:
            n, wcs = self.cq.poll(1)
            if n:
                break
            if time.monotonic() > deadline:
                raise Failure(f"no completion within {timeout:g} s", timeout=True)
            # Yield the (possibly only) CPU to the data path between polls.
            time.sleep(delay)
            delay = min(2 * delay, 0.01)
        wc = wcs[0]
        if wc.status != e.IBV_WC_SUCCESS:
            name = WC_STATUS[wc.status] if wc.status < len(WC_STATUS) else "unknown"
            vendor = f", vendor_err {wc.vendor_err}" if wc.vendor_err else ""
            raise Failure(f"status {wc.status} ({name}){vendor}")
        if wc.wr_id != wr_id:
            raise Failure(f"completion for wr_id {wc.wr_id}, expected {wr_id}")
        if wc.opcode != opcode:
            raise Failure(f"completion opcode {WC_OPCODE.get(wc.opcode, wc.opcode)}, "
                          f"expected {WC_OPCODE[opcode]}")
        return wc


class Channel:
    """JSON lines over TCP; every receive has a time limit."""

    def __init__(self, sock, timeout):
        self.sock, self.timeout, self.buf = sock, timeout, b""
        sock.settimeout(timeout)

    def send(self, **msg):
        try:
            self.sock.sendall(json.dumps(msg).encode() + b"\n")
        except OSError as x:
            raise Fatal(f"lost the peer: {x}") from x

    def recv(self):
        while b"\n" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout as x:
                raise Fatal(f"the peer sent nothing for {self.timeout} s") from x
            except OSError as x:
                raise Fatal(f"lost the peer: {x}") from x
            if not chunk:
                raise Fatal("the peer closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, **msg):
        self.send(**msg)
        return self.recv()


class Tally:
    """Counts results and prints them, the same lines on both sides."""

    def __init__(self):
        self.ok = self.failed = 0

    def result(self, test, err):
        if err is None:
            self.ok += 1
            print(f"ok   {test}")
        else:
            self.failed += 1
            print(f"FAIL {test}: {err}")

    def summary(self):
        print(f"rdma-verify: {self.ok} ok, {self.failed} failed")
        return 0 if self.failed == 0 else 1


def verdict(client_err, server_err):
    errs = [f"client: {client_err}" if client_err else None,
            f"server: {server_err}" if server_err else None]
    errs = [x for x in errs if x]
    return "; ".join(errs) if errs else None


def attempt(fn, *args):
    """Run one side's part of a test: (error message or None, timed out)."""
    try:
        fn(*args)
        return None, False
    except Failure as f:
        return str(f), f.timeout
    except PyverbsError as x:
        return f"{type(x).__name__}: {x}", False


# The server's part of each test: prep before the client's operation,
# check after it. Both raise Failure.

class Server:
    def __init__(self, ep, chan, timeout):
        self.ep, self.chan, self.timeout = ep, chan, timeout
        self.tally = Tally()
        self.test = None      # the test between its prep and its check
        self.recv_wr = None   # the receive its prep posted
        self.prep_err = None  # why its prep failed
        self.peer = None
        self.mtu = None

    def prep(self, t):
        ep = self.ep
        if t.op in ("write", "send", "imm"):
            ep.fill(t, SERVER_OFF, t.data.translate(INVERT))
        elif t.op == "read":
            ep.fill(t, SERVER_OFF, t.data)
        else:
            ep.fill(t, ATOMIC_OFF, u64(t.atomic()[4]))
        if t.op == "send":
            self.recv_wr = ep.post_recv(SERVER_OFF, t.size + RECV_SLACK)
        elif t.op == "imm":
            # A write with immediate consumes a receive but puts no data in
            # its buffer: point that at the guard bytes, which check() covers.
            self.recv_wr = ep.post_recv(0, 64)

    def check(self, t):
        ep = self.ep
        if t.op in ("send", "imm"):
            opcode = e.IBV_WC_RECV if t.op == "send" else e.IBV_WC_RECV_RDMA_WITH_IMM
            wc = ep.wait(self.recv_wr, opcode, self.timeout)
            if wc.byte_len != t.size:
                raise Failure(f"receive completion byte_len {wc.byte_len}, expected {t.size}")
            if t.op == "imm":
                if not wc.wc_flags & e.IBV_WC_WITH_IMM:
                    raise Failure("receive completion without IBV_WC_WITH_IMM")
                if socket.ntohl(wc.imm_data) != t.imm:
                    raise Failure(f"immediate 0x{socket.ntohl(wc.imm_data):08x}, "
                                  f"expected 0x{t.imm:08x}")
        if t.op in ("write", "read", "send", "imm"):
            # After a read the server's memory must be as prep left it.
            ep.check(t, SERVER_OFF, t.data)
        else:
            ep.check(t, ATOMIC_OFF, u64(t.atomic()[5]))

    def serve(self):
        """Answer the client's requests until it says goodbye."""
        while True:
            msg = self.chan.recv()
            cmd = msg.get("cmd")
            if cmd == "hello":
                err = None
                want = hashlib.sha256(pattern("pattern check", 4096)).hexdigest()
                if msg["pattern"] != want:
                    err = "the two sides' Python generates different patterns"
                else:
                    self.peer = msg
                    err = self.reconnect(msg, new_qp=False)
                self.chan.send(error=err, **self.ep.info())
                if err:
                    raise Fatal(err)
            elif cmd == "reconnect":
                self.peer.update(qpn=msg["qpn"], psn=msg["psn"])
                err = self.reconnect(msg, new_qp=True)
                self.chan.send(error=err, **self.ep.info())
                if err:
                    raise Fatal(err)
            elif cmd == "prep":
                self.test = Test(msg["op"], msg["size"], msg["mtu"])
                self.recv_wr = None
                self.prep_err, _ = attempt(self.prep, self.test)
                self.chan.send(error=self.prep_err)
            elif cmd == "check":
                t = self.test
                if t is None or (t.op, t.size, t.mtu) != (msg["op"], msg["size"], msg["mtu"]):
                    raise Fatal(f"protocol: check of {msg['op']} {msg['size']} without its prep")
                # If either side's part failed there is nothing to check.
                if msg["error"]:
                    err, timed_out = None, False
                elif self.prep_err:
                    err, timed_out = f"setup: {self.prep_err}", False
                else:
                    err, timed_out = attempt(self.check, t)
                self.tally.result(t, verdict(msg["error"], err))
                self.chan.send(error=err, timeout=timed_out)
                self.test = None
            elif cmd == "bye":
                if msg["not_run"]:
                    print(f"rdma-verify: the client stopped; {msg['not_run']} tests not run")
                    self.tally.failed += msg["not_run"]
                self.chan.send(error=None)
                return
            else:
                raise Fatal(f"protocol: unknown request {cmd!r}")

    def reconnect(self, msg, new_qp):
        """Connect (a new QP, if asked) to the client's QP; an error or None."""
        mtu = msg["mtu"]
        try:
            if new_qp:
                self.ep.new_qp()
            self.ep.connect(self.peer, mtu)
        except (Fatal, PyverbsError) as x:
            return f"cannot connect: {x}"
        print(f"-- path MTU {mtu}" if mtu != self.mtu else "-- reconnected")
        self.mtu = mtu
        return None


class Client:
    def __init__(self, ep, chan, args):
        self.ep, self.chan, self.args = ep, chan, args
        self.tally = Tally()
        self.peer = None
        self.mtu = None

    # The client's part of each test. Raises Failure.
    def run(self, t):
        ep, peer, tmo = self.ep, self.peer, self.args.timeout
        raddr, rkey = peer["addr"] + SERVER_OFF, peer["rkey"]
        if t.op == "read":
            ep.fill(t, CLIENT_OFF, t.data.translate(INVERT))
            wr = ep.post_send(e.IBV_WR_RDMA_READ, CLIENT_OFF, t.size, raddr, rkey)
            ep.wait(wr, e.IBV_WC_RDMA_READ, tmo)
            ep.check(t, CLIENT_OFF, t.data)
        elif t.op in ("write", "send", "imm"):
            ep.mr.write(t.data, t.size, CLIENT_OFF)
            if t.op == "write":
                wr = ep.post_send(e.IBV_WR_RDMA_WRITE, CLIENT_OFF, t.size, raddr, rkey)
                ep.wait(wr, e.IBV_WC_RDMA_WRITE, tmo)
            elif t.op == "send":
                wr = ep.post_send(e.IBV_WR_SEND, CLIENT_OFF, t.size, 0, 0)
                ep.wait(wr, e.IBV_WC_SEND, tmo)
            else:
                # imm_data is big-endian in the WR, as in rdma-core's tests.
                wr = ep.post_send(e.IBV_WR_RDMA_WRITE_WITH_IMM, CLIENT_OFF, t.size,
                                  raddr, rkey, imm=socket.htonl(t.imm))
                ep.wait(wr, e.IBV_WC_RDMA_WRITE, tmo)
        elif t.op == "atomic-write":
            wr_op, wc_op, value, _, _, _ = t.atomic()
            ep.fill(t, ATOMIC_OFF, u64(value))
            wr = ep.post_send(wr_op, ATOMIC_OFF, 8, peer["addr"] + ATOMIC_OFF, rkey)
            ep.wait(wr, wc_op, tmo)
            # The source is only read.
            ep.check(t, ATOMIC_OFF, u64(value))
        else:
            wr_op, wc_op, compare_add, swap, before, _ = t.atomic()
            # The original value lands in our 8 bytes at ATOMIC_OFF; fill
            # them with something else first.
            ep.fill(t, ATOMIC_OFF, u64(before ^ ((1 << 64) - 1)))
            wr = ep.post_send(wr_op, ATOMIC_OFF, 8, peer["addr"] + ATOMIC_OFF, rkey,
                              atomic=(compare_add, swap))
            ep.wait(wr, wc_op, tmo)
            ep.check(t, ATOMIC_OFF, u64(before))

    def plan(self):
        """Every test, in order: (mtu, op, size)."""
        a = self.args
        tests = []
        for mtu in a.mtu:
            for op in a.ops:
                if op in ("write", "read"):
                    tests += [(mtu, op, s) for s in a.sizes]
                elif op == "send":
                    tests += [(mtu, op, s) for s in a.sizes if s <= a.send_max]
                elif op == "imm":
                    tests.append((mtu, op, a.imm_size))
                elif op == "awrite":
                    tests.append((mtu, "atomic-write", 8))
                else:
                    tests += [(mtu, name, 8) for name in ("fetch-add", "cmp-swap", "cmp-swap-miss")]
        return tests

    def connect(self, mtu, hello):
        """Hello (first time) or reconnect with a new QP: both sides end in RTS."""
        if hello:
            msg = dict(cmd="hello", mtu=mtu, **self.ep.info(),
                       pattern=hashlib.sha256(pattern("pattern check", 4096)).hexdigest())
        else:
            try:
                self.ep.new_qp()
            except PyverbsError as x:
                raise Fatal(f"cannot replace the QP: {x}") from x
            msg = dict(cmd="reconnect", mtu=mtu, qpn=self.ep.qp.qp_num, psn=self.ep.psn)
        r = self.chan.call(**msg)
        if r["error"]:
            raise Fatal(f"server: {r['error']}")
        if hello:
            self.peer = r
            need = SERVER_OFF + max(self.args.sizes + [self.args.imm_size]) + GUARD
            if r["len"] < need:
                raise Fatal(f"the server's buffer has {r['len']} bytes, the tests need "
                            f"{need}: give the server the same --sizes")
        else:
            self.peer.update(qpn=r["qpn"], psn=r["psn"])
        try:
            self.ep.connect(self.peer, mtu)
        except PyverbsError as x:
            raise Fatal(f"cannot connect: {x}") from x
        print(f"-- path MTU {mtu}" if hello or mtu != self.mtu else "-- reconnected")
        self.mtu = mtu

    def main(self):
        tests = self.plan()
        if not tests:
            print("rdma-verify: no tests: every send size is above --send-max")
            return self.tally.summary()
        done = 0
        timeouts = 0
        try:
            self.connect(tests[0][0], hello=True)
            reconnect = False
            for mtu, op, size in tests:
                if timeouts >= MAX_TIMEOUTS:
                    break
                if reconnect or mtu != self.mtu:
                    self.connect(mtu, hello=False)
                t = Test(op, size, mtu)
                r = self.chan.call(cmd="prep", op=op, size=size, mtu=mtu)
                # If the server could not prepare, its check says why.
                err, timed_out = (None, False) if r["error"] else attempt(self.run, t)
                r = self.chan.call(cmd="check", op=op, size=size, mtu=mtu, error=err)
                self.tally.result(t, verdict(err, r["error"]))
                done += 1
                timeouts += timed_out or r["timeout"]
                # A failed test may leave the QP in error or work pending:
                # start the next one on fresh QPs.
                reconnect = bool(err or r["error"])
            not_run = len(tests) - done
            if not_run:
                print(f"rdma-verify: stopping after {timeouts} timeouts; {not_run} tests not run")
                self.tally.failed += not_run
            self.chan.call(cmd="bye", not_run=not_run)
        except Fatal as x:
            not_run = len(tests) - done
            print(f"rdma-verify: stopped: {x}; {not_run} tests not run")
            self.tally.failed += not_run
        return self.tally.summary()


def size_list(text):
    """Sizes in bytes, comma-separated; K and M suffixes mean KiB and MiB."""
    sizes = []
    for s in text.split(","):
        s = s.strip()
        mult = {"K": 1 << 10, "M": 1 << 20}.get(s[-1:].upper(), 1)
        n = int(s[:-1] if mult > 1 else s) * mult
        if not 1 <= n < 1 << 31:
            raise argparse.ArgumentTypeError(f"size {s} is not in 1 B .. 2 GiB - 1")
        sizes.append(n)
    return sizes


def one_size(text):
    return size_list(text)[0]


def mtu_list(text):
    mtus = [int(m) for m in text.split(",")]
    bad = [m for m in mtus if m not in MTUS]
    if bad:
        raise argparse.ArgumentTypeError(f"MTU {bad[0]} is not one of {sorted(MTUS)}")
    return mtus


def op_list(text):
    ops = text.split(",")
    bad = [o for o in ops if o not in OPS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown op {bad[0]} (ops: {','.join(OPS)})")
    return ops


def main():
    sys.stdout.reconfigure(line_buffering=True)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dev", required=True, help="RDMA device, e.g. roxe0")
    p.add_argument("--gid-index", type=int, required=True, help="the RoCE v2 GID to use")
    p.add_argument("--ib-port", type=int, default=1, help="device port (default 1)")
    p.add_argument("-p", "--port", type=int, default=18523, help="TCP port (default 18523)")
    p.add_argument("--mtu", type=mtu_list, default=[1024],
                   help="path MTUs to run every test at, comma-separated (default 1024)")
    p.add_argument("--sizes", type=size_list, default=size_list(DEFAULT_SIZES),
                   help=f"message sizes (default {DEFAULT_SIZES})")
    p.add_argument("--send-max", type=one_size, default=1 << 20,
                   help="sends run only the sizes up to this (default 1M)")
    p.add_argument("--imm-size", type=int, default=4096,
                   help="size of the write-with-immediate test (default 4096)")
    p.add_argument("--ops", type=op_list, default=OPS,
                   help="tests to run (default write,read,send,imm,atomic)")
    p.add_argument("--timeout", type=float, default=30,
                   help="seconds to wait for one completion (default 30)")
    p.add_argument("server", nargs="?", help="the server's IP address (client mode)")
    args = p.parse_args()
    # The peer may spend a whole completion wait and a check of 8 MiB
    # before it answers.
    link_timeout = 2 * args.timeout + 60
    buf_len = PAGE + max(args.sizes + [args.imm_size]) + GUARD

    tally = Tally()
    try:
        ep = Endpoint(args.dev, args.ib_port, args.gid_index, buf_len)
    except (PyverbsError, Fatal) as x:
        tally.result("setup", f"{args.dev}: {x}")
        return tally.summary()
    try:
        if args.server is None:
            # Listen only now that the QP and MR exist: a client that can
            # connect finds the server ready.
            with socket.create_server(("", args.port)) as listener:
                listener.settimeout(ACCEPT_TIMEOUT)
                print(f"rdma-verify: server on {args.dev} GID {ep.gid}, TCP port {args.port}")
                try:
                    conn, addr = listener.accept()
                except socket.timeout:
                    tally.result("setup", f"no client within {ACCEPT_TIMEOUT} s")
                    return tally.summary()
            print(f"rdma-verify: client {addr[0]}")
            server = Server(ep, Channel(conn, link_timeout), args.timeout)
            try:
                server.serve()
            except Fatal as x:
                print(f"rdma-verify: stopped: {x}")
                server.tally.failed += 1
            finally:
                conn.close()
            return server.tally.summary()

        for mtu in args.mtu:
            ep.check_mtu(mtu)
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            try:
                conn = socket.create_connection((args.server, args.port), timeout=5)
                break
            except OSError as x:
                if time.monotonic() > deadline:
                    raise Fatal(f"cannot connect to {args.server} port {args.port}: {x}") from x
                time.sleep(0.5)
        print(f"rdma-verify: client on {args.dev} GID {ep.gid}, server {args.server}")
        try:
            return Client(ep, Channel(conn, link_timeout), args).main()
        finally:
            conn.close()
    except Fatal as x:
        tally.result("setup", str(x))
        return tally.summary()
    finally:
        ep.close()


if __name__ == "__main__":
    sys.exit(main())
