# Diagnostic, not part of `make test`: perftest bandwidth runs between two
# roxe guests (role 1 serves, role 2 connects), each with the counters that
# moved on both sides, to see what a slow cell spends its time on.
#   scripts/vm --peers 2 --timeout 900 tests/guest/bw-probe.sh tests/guest/bw-probe.sh
. "$ROXE_ROOT/tests/guest/lib.sh"
check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 roxe0
gidx=$(gid_index_v4 roxe0)
roxe_signal up
roxe_wait up 120 || fail "the peer never set up"
i=0
for run in "ib_read_bw -s 4096 -n 2000" "ib_read_bw -s 65536 -n 200" "ib_write_bw -s 4096 -n 2000" \
	"ib_write_bw -s 1048576 -n 20" "ib_send_bw -s 4096 -n 2000"; do
	i=$((i + 1))
	read -r -a cmd <<<"$run"
	port=$((19100 + i))
	counters_save roxe0 /tmp/before
	if [ "$ROXE_ROLE" = 1 ]; then
		timeout 120 "${cmd[@]}" -d roxe0 -x "$gidx" -F -p "$port" >/tmp/bw.log 2>&1 &
		pid=$!
		sleep 1
		roxe_signal "ready$i"
		wait "$pid"
		echo "$run server: exit $?"
	else
		roxe_wait "ready$i" 120
		timeout 120 "${cmd[@]}" -d roxe0 -x "$gidx" -F -p "$port" "$ROXE_PEER_IP" >/tmp/bw.log 2>&1
		echo "$run client: exit $?"
		grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/bw.log | sed 's/^/    /'
	fi
	counters_moved roxe0 /tmp/before
	roxe_signal "done$i"
	roxe_wait "done$i" 180
done
roxe_cleanup
finish
