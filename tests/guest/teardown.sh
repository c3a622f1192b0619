# Teardown under traffic, between two guests. Role 2 runs RC transfers
# (ib_write_bw for a long time) against role 1 and, while they run:
#   1. kill -9 of the process (its QPs are destroyed with work in flight);
#   2. ip link set down on the netdev, then up;
#   3. rdma link delete of the device under the running process.
# After each, the process is stopped, the device and module come back, and
# at the end both guests must rmmod roxe with a clean kernel log.
. "$ROXE_ROOT/tests/guest/lib.sh"
IB=/sys/class/infiniband/roxe0

up() {
	lsmod | grep -q '^roxe ' || modprobe roxe
	[ -e $IB ] || rdma link add roxe0 type roxe netdev "$ROXE_IF"
	wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
	wait_for 10 gid_index_v4 roxe0
	gid_index_v4 roxe0
}

# A long RDMA write stream: 40 seconds of 64 KiB writes. The process
# itself is the background job ($!), so kill -9 reaches it.
bw=(ib_write_bw -d roxe0 -s 65536 -D 40 -F)

step=0
for what in kill link-down link-delete; do
	step=$((step + 1)); port=$((18700 + step))
	gidx=$(up)
	if [ "$ROXE_ROLE" = 1 ]; then
		"${bw[@]}" -x "$gidx" -p $port >"$ROXE_OUT/$what-server.log" 2>&1 &
		pid=$!
		wait_for 30 sh -c "ss -Hltn 'sport = :$port' | grep -q ."
		roxe_signal "ready-$what"
		roxe_wait "done-$what" 150 || fail "$what: the peer did not finish"
		# The server may wait forever for a peer that went away.
		kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
		pass "$what: server stopped"
	else
		roxe_wait "ready-$what" 90 || fail "$what: the server never signalled"
		"${bw[@]}" -x "$gidx" -p $port 192.0.2.1 >"$ROXE_OUT/$what-client.log" 2>&1 &
		pid=$!
		sleep 8
		check "ib_write_bw is running after 8 s" kill -0 $pid
		case $what in
		kill)
			check "kill -9 of ib_write_bw in mid-transfer" kill -9 $pid ;;
		link-down)
			check "ip link set down under traffic" ip link set dev "$ROXE_IF" down
			sleep 3
			check "ip link set up again" ip link set dev "$ROXE_IF" up
			sleep 2
			kill -9 $pid 2>/dev/null ;;
		link-delete)
			check "rdma link delete under traffic" rdma link delete roxe0
			check_fails "roxe0 is gone" test -e $IB
			sleep 2
			kill -9 $pid 2>/dev/null ;;
		esac
		# Whatever happened, the process ends; bounded in case it hangs.
		for _ in $(seq 60); do kill -0 $pid 2>/dev/null || break; sleep 1; done
		kill -9 $pid 2>/dev/null
		wait $pid 2>/dev/null
		roxe_signal "done-$what"
	fi
	# The address is back before the next round (link down drops routes).
	wait_for 20 ping -c 1 -W 1 "$ROXE_PEER_IP"
done
up >/dev/null
check "rdma link delete after the runs" rdma link delete roxe0
check "rmmod roxe after the runs" rmmod roxe
roxe_signal finished
roxe_wait finished 120 || fail "the peer did not finish"
roxe_cleanup
finish
