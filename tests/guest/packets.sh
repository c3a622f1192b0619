# Hostile RoCEv2 packets against roxe's receive path, in one guest.
# bad-packets.py builds whole IPv4/UDP/RoCE packets on a raw socket: a
# wrong ICRC, a QP that does not exist, unknown opcodes, a bad transport
# version, packets too short for a BTH or cut inside a header, payload
# where none belongs, a misaligned payload, IP options, and seeded random
# garbage. Each kind must be dropped and counted under its own reason in
# roxe0's port counters (ports/1/hw_counters, also `rdma statistic`), and
# no other counter may move.
#
# The packets go from and to this guest's own address, $ROXE_LOCAL_IP, UDP
# port 4791. Packets to a local address never reach $ROXE_IF: they take the
# `lo` path (a local route), and roxe's receive hook finds roxe0 from the
# destination address, the netdev that owns it, not from `lo`. So `lo` must
# be up, and nothing crosses the wire.
#
# ROXE_PACKETS_SEED (default 1) picks the garbage. scripts/vm does not pass
# the host's environment, so set it in a wrapper script that sources this
# one. The rig checks dmesg for oopses and WARNs afterwards.
#
# Then live-packets.py sends in-window packets at live RC QPs (see below).
. "$ROXE_ROOT/tests/guest/lib.sh"
IB=/sys/class/infiniband/roxe0
seed=${ROXE_PACKETS_SEED:-1}
log=$ROXE_OUT/bad-packets.log

check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
check_output "roxe0 port 1 is ACTIVE" ': ACTIVE$' cat $IB/ports/1/state
check_output "lo is up (packets to $ROXE_LOCAL_IP go through it)" '<([^>]*,)?UP[,>]' ip link show lo
check "roxe0 has port counters" test -r $IB/ports/1/hw_counters/rx_drop_icrc

# The script prints its own ok/FAIL line per kind; this check is its exit
# status. It runs in about 10 s; the bound is for a hang.
echo "bad-packets seed: $seed"
if timeout -k 5 120 python3 "$ROXE_ROOT/tests/guest/bad-packets.py" --dev roxe0 \
	--ip "$ROXE_LOCAL_IP" --seed "$seed" >"$log" 2>&1; then
	pass "bad-packets.py: $(tail -1 "$log")"
else
	fail "bad-packets.py exited $? (seed $seed): $(tail -1 "$log")"
fi
sed 's/^/    /' "$log"

# live-packets.py plays a hostile peer that knows the live QPN, PSN and
# rkeys: in-window packets at RC QPs of roxe0 that break IBTA's payload
# sizes (one at an MR that ends at 2^64, which used to overflow an address
# in the receive softirq) and duplicate READs that ask for what was never
# served. Each must be NAKed or dropped, and counted, with memory untouched.
live=$ROXE_OUT/live-packets.log
if gid=$(wait_for 10 gid_index_v4 roxe0 && gid_index_v4 roxe0) &&
	timeout -k 5 180 python3 "$ROXE_ROOT/tests/guest/live-packets.py" --dev roxe0 \
		--ip "$ROXE_LOCAL_IP" --gid-index "$gid" >"$live" 2>&1; then
	pass "live-packets.py: $(tail -1 "$live")"
else
	fail "live-packets.py exited $? (GID index ${gid:-none}): $(tail -1 "$live")"
fi
sed 's/^/    /' "$live"

# rdma statistic reads the same counters through netlink.
icrc=$(cat $IB/ports/1/hw_counters/rx_drop_icrc 2>/dev/null)
check_output "rdma statistic shows rx_drop_icrc $icrc, as sysfs does" \
	"rx_drop_icrc $icrc( |\$)" rdma statistic show link roxe0/1
check_output "the device still answers: ibv_devinfo" 'state:[[:space:]]+PORT_ACTIVE' ibv_devinfo -d roxe0
check "rdma link delete roxe0" rdma link delete roxe0
check "rmmod roxe" rmmod roxe
roxe_cleanup
finish
