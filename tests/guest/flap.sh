# A link that goes down for 10 s under RC traffic and comes back: the QPs
# must carry on once it is back, when their retries outlast the gap.
# Role 1 serves perftest and takes its own link down 5 s into each run;
# role 2 is the client. QP timeout 21 (8.6 s a try, 7 retries: about a
# minute). ib_read_bw, ib_write_bw and ib_send_bw, 2000 messages of
# 64 KiB each (30 to 90 s under TCG without the gap); the run must still be
# going when the link comes back, or the check fails.
. "$ROXE_ROOT/tests/guest/lib.sh"
dev=roxe0
srv=192.0.2.1
check "modprobe roxe" modprobe roxe
check "rdma link add $dev" rdma link add $dev type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 $dev
gid=$(gid_index_v4 $dev)
roxe_signal up
roxe_wait up 120 || fail "the peer never came up"
port=18700
for t in ${FLAP_TESTS:-ib_read_bw ib_write_bw ib_send_bw}; do
	port=$((port + 1))
	counters_save $dev /tmp/flap-before
	if [ "$ROXE_ROLE" = 1 ]; then
		timeout -k 5 200 $t -d $dev -x "$gid" -u 21 -n 2000 -s 65536 -F -p $port >"$ROXE_OUT/$t-server.log" 2>&1 &
		pid=$!
		wait_for 30 sh -c "ss -Hltn 'sport = :$port' | grep -q ."
		roxe_signal "ready-$t"
		sleep 5
		if [ "${FLAP_SECS:-10}" != 0 ]; then
			ip link set "$ROXE_IF" down
			echo "link down at $(date +%T)"
			sleep "${FLAP_SECS:-10}"
			ip link set "$ROXE_IF" up
			echo "link up at $(date +%T)"
			wait_for 30 grep -q ': ACTIVE$' /sys/class/infiniband/$dev/ports/1/state
			kill -0 $pid 2>/dev/null || { fail "$t ended before the link came back: the gap proved nothing"; }
		fi
		wait $pid; rc=$?
	else
		roxe_wait "ready-$t" 120
		rc=0
		timeout -k 5 200 $t -d $dev -x "$gid" -u 21 -n 2000 -s 65536 -F -p $port $srv >"$ROXE_OUT/$t-client.log" 2>&1 || rc=$?
	fi
	# perftest swaps its results over TCP after the transfer. Twice in CI
	# (2026-12-04 and -05) that exchange broke after a complete transfer:
	# the client printed all 2000 iterations, then "Couldn't read remote
	# address"; the server "Couldn't read reports". Not understood yet
	# (README). Such a run counts, and says so, only if the client's log
	# has its 2000 iterations and neither side's log has an RDMA error.
	log=$ROXE_OUT/$t-$([ "$ROXE_ROLE" = 1 ] && echo server || echo client).log
	[ "$ROXE_ROLE" = 2 ] && grep -Eq '^ *65536 +2000 ' "$log" && roxe_signal "complete-$t"
	roxe_signal "over-$t"
	ctl_only=no
	if [ $rc != 0 ] && grep -Eq "Couldn't read (remote address|reports)" "$log" &&
		! grep -Eqi 'wc status|completion with error|failed to post|retry exceeded' "$log" &&
		roxe_wait "over-$t" 60 && [ -e "$ROXE_SHARED/complete-$t.2" ]; then
		ctl_only=yes
	fi
	if [ $rc = 0 ]; then pass "$t across a 10 s link loss"
	elif [ $ctl_only = yes ]; then
		pass "$t across a 10 s link loss: all 2000 transfers done; perftest's TCP result exchange afterwards failed (exit $rc, not understood, see README)"
		tail -n 4 "$log" | sed 's/^/    /'
	else
		fail "$t across a 10 s link loss (exit $rc)"
		tail -n 8 "$ROXE_OUT/$t-"*.log | sed 's/^/    /'
	fi
	counters_moved $dev /tmp/flap-before
	roxe_signal "done-$t"
	roxe_wait "done-$t" 300
done
roxe_cleanup
finish
