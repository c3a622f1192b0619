# Network namespaces across guests (issue 16): role 1 moves its NIC into a
# namespace and makes its roxe device from inside it; role 2 stays in the
# initial namespace. rping, ib_write_bw and ib_send_bw -R (RDMA CM) run
# between them, role 1 serving from its namespace. Then role 1 deletes
# the namespace under traffic (the NIC comes home, its device goes) and
# both unload roxe; role 1 puts its NIC back as the rig had it.
. "$ROXE_ROOT/tests/guest/lib.sh"
limit=60
bounded() { timeout -k 5 "$limit" "$@"; }
dev=roxe0
if [ "$ROXE_ROLE" = 1 ]; then
	X=(ip netns exec rxp)
	check "$ROXE_IF into namespace rxp, with its address" sh -c "
		ip netns add rxp && ip link set $ROXE_IF netns rxp &&
		ip -n rxp addr add $ROXE_LOCAL_IP/24 dev $ROXE_IF &&
		ip -n rxp link set lo up && ip -n rxp link set $ROXE_IF up"
else
	X=()
fi
check "rdma link add $dev${X:+ from inside rxp}" "${X[@]}" rdma link add $dev type roxe netdev "$ROXE_IF"
wait_for 20 gid_index_v4 $dev
gidx=$(gid_index_v4 $dev)
if [ "$ROXE_ROLE" = 1 ]; then
	check "rxp has the RoCEv2 sockets, the initial namespace none" sh -c \
		"ip netns exec rxp ss -Hlun 'sport = :4791' | grep -q . && ! ss -Hlun 'sport = :4791' | grep -q ."
fi
roxe_signal up
roxe_wait up 180 || fail "the peer never set up"

# ready PORT|cm PID: the server (in role 1's namespace) listens, or exited.
ready() {
	! kill -0 "$2" 2>/dev/null && return 0
	if [ "$1" = cm ]; then "${X[@]}" rdma resource show cm_id 2>/dev/null | grep -qw LISTEN
	else "${X[@]}" ss -Hltn "sport = :$1" | grep -q .; fi
}
# run_pair NAME PORT|cm SERVER... -- CLIENT...
run_pair() {
	local name=$1 probe=$2 pid; shift 2
	local server=() client=()
	while [ "$1" != "--" ]; do server+=("$1"); shift; done; shift
	client=("$@")
	if [ "$ROXE_ROLE" = 1 ]; then
		bounded "${X[@]}" "${server[@]}" >"$ROXE_OUT/$name-server.log" 2>&1 &
		pid=$!
		wait_for 30 ready "$probe" $pid
		roxe_signal "ready-$name"
		if wait $pid; then pass "$name server, in rxp"; else
			fail "$name server, in rxp"; tail -5 "$ROXE_OUT/$name-server.log" | sed 's/^/    /'; fi
	elif roxe_wait "ready-$name" 90; then
		check "$name client, to the peer's namespace" bounded "${client[@]}"
	else
		fail "$name: the server never signalled"
	fi
}
srv=192.0.2.1
run_pair rping cm rping -s -a $srv -C 10 -V -- rping -c -a $srv -C 10 -V
run_pair write-bw 18520 ib_write_bw -d $dev -x "$gidx" -n 200 -s 65536 -F -p 18520 -- \
	ib_write_bw -d $dev -x "$gidx" -n 200 -s 65536 -F -p 18520 $srv
run_pair send-bw-cm cm ib_send_bw -d $dev -R -n 200 -F -p 18521 -- \
	ib_send_bw -d $dev -R -n 200 -F -p 18521 $srv

# Under traffic: role 2 writes for 20 s while role 1 deletes its
# namespace (the server killed with it).
if [ "$ROXE_ROLE" = 1 ]; then
	"${X[@]}" ib_write_bw -d $dev -x "$gidx" -D 20 -s 65536 -F -p 18522 >"$ROXE_OUT/teardown-server.log" 2>&1 &
	pid=$!
	wait_for 30 ready 18522 $pid
	roxe_signal ready-teardown
	sleep 5
	check "delete namespace rxp under traffic" ip netns del rxp
	sleep 1
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	gone() { ! rdma link show 2>/dev/null | grep -q "^link $dev/"; }
	if wait_for 30 gone; then pass "$dev went with the namespace"; else fail "$dev is still there"; fi
	check "$ROXE_IF is back in the initial namespace" ip link show "$ROXE_IF"
	check "$ROXE_IF as the rig had it" sh -c "ip addr add $ROXE_LOCAL_IP/24 dev $ROXE_IF && ip link set $ROXE_IF up"
elif roxe_wait ready-teardown 90; then
	# Its peer vanishes mid-transfer: the client may fail; it must end.
	bounded ib_write_bw -d $dev -x "$gidx" -D 20 -s 65536 -F -p 18522 $srv >"$ROXE_OUT/teardown-client.log" 2>&1
	pass "the client ended when its peer's namespace went (exit $?)"
else
	fail "the server never signalled for the teardown"
fi
roxe_signal done
roxe_wait done 120 || fail "the peer did not finish"
roxe_cleanup
finish
