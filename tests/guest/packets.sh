# Hostile RoCEv2 packets against roxe's receive path, in one guest.
# bad-packets.py builds whole IPv4/UDP/RoCE packets on a raw socket: a
# wrong ICRC, a QP that does not exist, unknown opcodes, a bad transport
# version, packets too short for a BTH or cut inside a header, payload
# where none belongs, a misaligned payload, IP options, and seeded random
# garbage. Each kind must be dropped and counted under its own reason in
# roxe0's port counters (ports/1/hw_counters, also `rdma statistic`), and
# no other counter may move.
#
# roxe takes nothing that arrives on `lo` (any local process can send
# there), so the hostile peer lives across a wire: a veth pair, roxe-v0 here
# with $DEV_IP under roxe0, and roxe-v1 in network namespace $NS with
# $PEER_IP, MTU 9000 (bad-packets.py sends up to 1,528 bytes). The scripts
# open their raw and packet sockets in $NS, so their packets arrive on
# roxe-v0 as from another host, and what roxe sends back arrives on roxe-v1. The /25 keeps the pair off the test NIC's /24; nothing
# crosses the test NIC.
#
# ROXE_PACKETS_SEED (default 1) picks the garbage. ROXE_LIVE_ONLY names
# the parts of live-packets.py to run (separated by spaces), and
# bad-packets.py is then left out (pacing.sh); unset, every part runs but
# `pacing` and `ud_pacing`, which need a
# guest that is not starved of CPU (the VM tests run this one in the
# background lane). scripts/vm does not pass
# the host's environment, so set it in a wrapper script that sources this
# one. The rig checks dmesg for oopses and WARNs afterwards.
#
# Then live-packets.py sends in-window packets at live RC QPs (see below).
. "$ROXE_ROOT/tests/guest/lib.sh"
IB=/sys/class/infiniband/roxe0
seed=${ROXE_PACKETS_SEED:-1}
log=$ROXE_OUT/bad-packets.log
NS=roxe-peer DEV_IP=192.0.2.129 PEER_IP=192.0.2.130

ip netns del $NS 2>/dev/null
check "veth pair roxe-v0 / roxe-v1 (in netns $NS)" \
	sh -c "ip netns add $NS && ip link add roxe-v0 mtu 9000 type veth peer name roxe-v1 mtu 9000 netns $NS &&
		ip addr add $DEV_IP/25 dev roxe-v0 && ip link set roxe-v0 up &&
		ip -n $NS addr add $PEER_IP/25 dev roxe-v1 && ip -n $NS link set roxe-v1 up &&
		ip -n $NS link set lo up"
check "rdma link add roxe0 on roxe-v0" rdma link add roxe0 type roxe netdev roxe-v0
wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
check_output "roxe0 port 1 is ACTIVE" ': ACTIVE$' cat $IB/ports/1/state
check "the peer answers ping across the veth" ping -c 1 -W 5 $PEER_IP
check "roxe0 has port counters" test -r $IB/ports/1/hw_counters/rx_drop_address

# The script prints its own ok/FAIL line per kind; this check is its exit
# status. It runs in about 10 s; the bound is for a hang.
echo "bad-packets seed: $seed"
if [ -n "${ROXE_LIVE_ONLY:-}" ]; then
	echo "bad-packets.py: left out (ROXE_LIVE_ONLY=$ROXE_LIVE_ONLY)" >"$log"
elif timeout -k 5 120 python3 "$ROXE_ROOT/tests/guest/bad-packets.py" --dev roxe0 \
	--ip $DEV_IP --from $PEER_IP --netns $NS --seed "$seed" >"$log" 2>&1; then
	pass "bad-packets.py: $(tail -1 "$log")"
else
	fail "bad-packets.py exited $? (seed $seed): $(tail -1 "$log")"
fi
sed 's/^/    /' "$log"

# live-packets.py plays a hostile peer that knows the live QPN, PSN and
# rkeys: in-window packets at RC QPs of roxe0 that break IBTA's payload
# sizes (one at an MR that ends at 2^64, which used to overflow an address
# in the receive softirq) and duplicate READs that ask for what was never
# served, packets from the wrong address, and an ACK an unprivileged process
# sends through `lo`. Each must be NAKed or dropped, and counted, with
# memory untouched.
live=$ROXE_OUT/live-packets.log
if gid=$(wait_for 10 gid_index_v4 roxe0 $DEV_IP && gid_index_v4 roxe0 $DEV_IP) &&
	timeout -k 5 240 python3 "$ROXE_ROOT/tests/guest/live-packets.py" --dev roxe0 \
		--ip $DEV_IP --gid-index "$gid" --peer $PEER_IP --netns $NS --peer-if roxe-v1 \
		$(if [ -n "${ROXE_LIVE_ONLY:-}" ]; then printf -- '--only %s ' $ROXE_LIVE_ONLY
		else echo --skip pacing --skip ud_pacing; fi) \
		>"$live" 2>&1; then
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
check "delete netns $NS (and the veth pair)" ip netns del $NS
roxe_cleanup
finish
