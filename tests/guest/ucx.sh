# UCX over roxe (issue 18): Debian's UCX finds roxe0 with its RC and UD
# verbs transports, and ucx_perftest runs between guests: guest 1 serves
# guest 2 (and 3 serves 4, at the same time, on a four-guest segment).
# Tag-matching bandwidth over RC (with UD for wire-up) and over UD alone,
# one-sided put bandwidth and get. ucx_perftest does not check the data it
# moves; tests/guest/mpi.sh checks every byte of its MPI operations.
#
# Over rxe (UCX_DEV=rxe) the UD transport needs
# UCX_UD_VERBS_ETH_DGID_CHECK=n (Documentation/verbs.md, "UCX").
. "$ROXE_ROOT/tests/guest/lib.sh"
kind=${UCX_DEV:-roxe}
dev=${kind}0
if [ "$kind" = roxe ]; then
	check "rdma link add $dev" rdma link add $dev type roxe netdev "$ROXE_IF"
else
	check "rdma link add $dev" rdma link add $dev type rxe netdev "$ROXE_IF"
	export UCX_UD_VERBS_ETH_DGID_CHECK=n
fi
wait_for 10 gid_index_v4 $dev
check "$dev has its RoCE v2 GID" gid_index_v4 $dev
check "ucx_info -d lists $dev:1 with rc_verbs and ud_verbs" sh -c \
	"ucx_info -d | grep -A2 'Transport: rc_verbs' | grep -q 'Device: $dev:1' &&
	 ucx_info -d | grep -A2 'Transport: ud_verbs' | grep -q 'Device: $dev:1'"
counters_save $dev /tmp/ucx-before
export UCX_NET_DEVICES=$dev:1 UCX_WARN_UNUSED_ENV_VARS=n
server=$(( (ROXE_ROLE - 1) / 2 * 2 + 1 ))
i=0
while read -r tls test size what; do
	[ -n "$tls" ] || continue
	i=$((i + 1))
	port=$((13000 + i))
	if [ "$ROXE_ROLE" = "$server" ]; then
		UCX_TLS=$tls timeout -k 5 120 ucx_perftest -p $port -t "$test" -s "$size" -n 200 \
			>"$ROXE_OUT/ucx-$i-server.log" 2>&1 &
		pid=$!
		wait_for 30 sh -c "ss -Hltn 'sport = :$port' | grep -q ."
		roxe_signal "ucx$i"
		if wait $pid; then pass "ucx_perftest $test ($what), serving guest $ROXE_PEER_IP"; else
			fail "ucx_perftest $test ($what), serving (exit $?)"
			grep -v '^ *[0-9][0-9]* \|^=*$' "$ROXE_OUT/ucx-$i-server.log" | tail -n 4 | sed 's/^/    /'
		fi
		roxe_wait "ucx$i-done" 150
	else
		roxe_wait "ucx$i" 150
		if UCX_TLS=$tls timeout -k 5 120 ucx_perftest "$ROXE_PEER_IP" -p $port -t "$test" -s "$size" -n 200 \
			>"$ROXE_OUT/ucx-$i-client.log" 2>&1; then
			pass "ucx_perftest $test ($what) to $ROXE_PEER_IP: $(grep '^Final:' "$ROXE_OUT/ucx-$i-client.log" |
				awk '{print $6 " MB/s, " $4 " us"}')"
		else
			fail "ucx_perftest $test ($what) to $ROXE_PEER_IP (exit $?)"
			grep -v '^ *[0-9][0-9]* \|^=*$' "$ROXE_OUT/ucx-$i-client.log" | tail -n 4 | sed 's/^/    /'
		fi
		roxe_signal "ucx$i-done"
	fi
done <<'EOF'
rc_verbs,ud_verbs tag_bw 65536 RC, UD for wire-up
ud_verbs tag_bw 65536 UD alone
rc_verbs,ud_verbs ucp_put_bw 65536 RC put
rc_verbs,ud_verbs ucp_get 65536 RC get
rc_verbs,ud_verbs tag_lat 8 RC latency
EOF
counters_moved $dev /tmp/ucx-before
check "rdma link delete $dev" rdma link delete $dev
finish
