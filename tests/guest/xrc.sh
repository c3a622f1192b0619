# XRC (issue 17) between two guests, with rdma-core's own example program
# ibv_xsrq_pingpong: each side opens an XRC domain on a file, makes one XRC
# SRQ and, per client, an XRC receive (target) QP and an XRC send
# (initiator) QP; every message names the remote SRQ by number. Role 1
# serves, role 2 runs the clients. Three runs: one client polling, two
# clients at once into the server's one SRQ, and one client sleeping on
# completion events with its memory paged on demand (-o: needs XRC ODP
# capabilities). rxe and siw have no XRC: ibv_open_xrcd fails there.
. "$ROXE_ROOT/tests/guest/lib.sh"
check "roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 roxe0 >/dev/null
gid=$(gid_index_v4 roxe0) || fail "roxe0 has no IPv4 GID"
check_output "roxe0 reports XRC among its capabilities" "XRC" ibv_devinfo -v -d roxe0
roxe_signal up
roxe_wait up 120

# run NAME PORT CLIENTS [OPTIONS...]: one ibv_xsrq_pingpong run.
run() {
	local name=$1 port=$2 clients=$3 pid i rc=0 pids=()
	shift 3
	local pp=(timeout -k 5 120 ibv_xsrq_pingpong -d roxe0 -g "$gid" -m 1024 -n 200 -p "$port" "$@")
	if [ "$ROXE_ROLE" = 1 ]; then
		"${pp[@]}" -c "$clients" >"/tmp/xsrq-$name.log" 2>&1 &
		pid=$!
		sleep 1
		roxe_signal "ready-$name"
		wait "$pid" || rc=$?
	else
		roxe_wait "ready-$name" 120
		for i in $(seq 1 "$clients"); do
			"${pp[@]}" "$ROXE_PEER_IP" >"/tmp/xsrq-$name-$i.log" 2>&1 &
			pids+=($!)
		done
		for pid in "${pids[@]}"; do
			wait "$pid" || rc=$?
		done
	fi
	if [ "$rc" = 0 ]; then
		pass "ibv_xsrq_pingpong $name ($clients client(s), 200 messages each way per client)"
	else
		fail "ibv_xsrq_pingpong $name exited $rc"
	fi
	tail -n 4 /tmp/xsrq-"$name"*.log | sed 's/^/    /'
	roxe_signal "done-$name"
	roxe_wait "done-$name" 180
}

counters_save roxe0 /tmp/xrc-before
run poll 18520 1
run two-clients 18521 2
run events-odp 18522 1 -e -o
counters_moved roxe0 /tmp/xrc-before
check_output "no XRC packet was dropped for naming a wrong SRQ (rx_drop_xrc_srq 0)" "^0$" \
	cat /sys/class/infiniband/roxe0/ports/1/hw_counters/rx_drop_xrc_srq
check "remove roxe0" rdma link delete roxe0
roxe_cleanup
finish
