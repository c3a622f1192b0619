# Diagnostic, not part of `make test`: rdma-verify's 1 MiB READ from an rxe
# server (role 1) to a roxe client (role 2) through 1% loss, again and
# again, with a header capture of each run on the client. Stops at the
# first failure and keeps that run's capture in the output folder.
#   scripts/vm --peers 2 --keep --timeout 1800 tests/guest/read-loop.sh tests/guest/read-loop.sh
. "$ROXE_ROOT/tests/guest/lib.sh"
runs=${ROXE_RL_RUNS:-150}
if [ "$ROXE_ROLE" = 1 ]; then
	dev=rxe0
	check "load rdma_rxe" modprobe rdma_rxe
	check "rdma link add rxe0" rdma link add rxe0 type rxe netdev "$ROXE_IF"
else
	dev=roxe0
	check "rdma link add roxe0" rdma link add roxe0 type roxe netdev "$ROXE_IF"
fi
wait_for 10 gid_index_v4 "$dev"
gidx=$(gid_index_v4 "$dev")
roxe_signal up
roxe_wait up 120 || fail "the peer never set up"
check "netem loss 1%" tc qdisc add dev "$ROXE_IF" root netem loss 1%
verify=(python3 "$ROXE_ROOT/tests/guest/rdma-verify.py" --dev "$dev" --gid-index "$gidx" --mtu 1024 --ops read --sizes 1048576 --timeout 60)
serve() { "${verify[@]}" -p "$1"; }
connect() { # PORT I: with a header capture, kept if the run fails
	local rc tpid
	tcpdump -i "$ROXE_IF" -s 90 -w /tmp/run.pcap udp port 4791 2>/dev/null &
	tpid=$!
	sleep 0.5
	"${verify[@]}" -p "$1" "$ROXE_PEER_IP" >/tmp/run.log 2>&1
	rc=$?
	sleep 0.5
	kill "$tpid"; wait "$tpid"
	echo "run $2 client: exit $rc"
	if [ "$rc" != 0 ]; then
		cp /tmp/run.pcap "$ROXE_OUT/fail$2.pcap"
		touch "$ROXE_SHARED/stop"
	fi
}
summary() { grep -E "FAIL|ok " /tmp/run.log; }
repeat_runs "$runs" "$dev"
tc qdisc del dev "$ROXE_IF" root
[ "$ROXE_ROLE" = 1 ] && { rdma link delete rxe0; rmmod rdma_rxe; } || roxe_cleanup
finish
