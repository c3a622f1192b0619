# Issue 17: a QP slows down on CNPs. packets.sh's veth pair and hostile
# peer with only live-packets.py's `pacing` part: the peer sends one RC QP
# a stream of CNPs from a forked process while the QP does a 16-packet
# RDMA WRITE, which must spread out over at least 30 ms and five times the
# time the same WRITE takes from a QP without CNPs; then the same for a UD
# QP's datagrams to one destination, with those to another unpaced
# (`ud_pacing`). A guest of its own in
# the foreground queue: the stream must not starve, or DCQCN's recovery
# gives the rate back between its CNPs.
ROXE_LIVE_ONLY="pacing ud_pacing"
. "$ROXE_ROOT/tests/guest/packets.sh"
