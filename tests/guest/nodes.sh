# Many nodes (issue 18), the first step: N guests (scripts/vm --peers N,
# up to 4) on one shared L2 segment (the "hub" wire: a multicast group on
# the host's loopback), each with a roxe device on its NIC.
#
# Every guest reaches every other (ping, and RDMA CM address resolution
# through roxe's GIDs). Then RC traffic around the ring: guest I serves
# ibv_rc_pingpong and is the client of guest I+1, all at once. Then incast:
# every other guest writes 64 KiB messages to guest 1 at the same time
# (ib_write_bw, one port per sender), and each side's byte counters agree
# with what was sent. Then unload.
. "$ROXE_ROOT/tests/guest/lib.sh"
dev=roxe0
n=${ROXE_PEERS:-1}
me=$ROXE_ROLE
limit=120
bounded() { timeout -k 5 "$limit" "$@"; }
ip_of() { echo "192.0.2.$1"; }
next=$((me % n + 1))

check "modprobe roxe" modprobe roxe
check "rdma link add $dev on $ROXE_IF" rdma link add $dev type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 $dev
gid=$(gid_index_v4 $dev) || gid=
[ -n "$gid" ] && pass "$dev has the RoCE v2 GID of $ROXE_LOCAL_IP" || fail "$dev has no RoCE v2 GID"
roxe_signal up
if roxe_wait_all up 300; then pass "all $n guests are up"; else fail "not every guest came up"; fi

for g in $(seq 1 "$n"); do
	[ "$g" = "$me" ] && continue
	check "ping guest $g over the shared segment" ping -c 2 -W 10 "$(ip_of "$g")"
done
check_output "no address is claimed twice on the segment (ARP sees each guest once)" \
	"^$((n - 1))\$" sh -c "ip neigh show dev $ROXE_IF | grep -c lladdr"

# The ring: serve guest me-1, connect to guest me+1.
if [ "$n" -ge 2 ]; then
	counters_save $dev /tmp/ring-before
	bounded ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -p 18515 >"$ROXE_OUT/ring-server.log" 2>&1 &
	srv=$!
	# Listening (or gone) before the others are told: with four guests on
	# two cores its start can take seconds.
	wait_for 60 sh -c "ss -Hltn 'sport = :18515' | grep -q . || ! kill -0 $srv"
	roxe_signal ring-listening
	roxe_wait_all ring-listening 120
	rc=0
	bounded ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -p 18515 "$(ip_of "$next")" \
		>"$ROXE_OUT/ring-client.log" 2>&1 || rc=$?
	wait $srv || rc=$((rc + 1000))
	if [ $rc = 0 ]; then pass "ring: ibv_rc_pingpong to guest $next while serving guest $(((me + n - 2) % n + 1))"; else
		fail "ring: ibv_rc_pingpong (exit $rc)"
		tail -n 5 "$ROXE_OUT/ring-server.log" "$ROXE_OUT/ring-client.log" | sed 's/^/    /'
	fi
	counters_moved $dev /tmp/ring-before
	roxe_signal ring-done
	roxe_wait_all ring-done 300
fi

# Incast: guests 2..n each write to guest 1 on a port of their own.
if [ "$n" -ge 3 ]; then
	iters=100 size=65536
	counters_save $dev /tmp/incast-before
	if [ "$me" = 1 ]; then
		pids=()
		for g in $(seq 2 "$n"); do
			bounded ib_write_bw -d $dev -x "$gid" -n $iters -s $size -F -p $((18600 + g)) \
				>"$ROXE_OUT/incast-server-$g.log" 2>&1 &
			pids+=($!)
		done
		for g in $(seq 2 "$n"); do
			wait_for 60 sh -c "ss -Hltn 'sport = :$((18600 + g))' | grep -q ."
		done
		roxe_signal incast-listening
		rc=0
		for p in "${pids[@]}"; do wait "$p" || rc=$((rc + 1)); done
		if [ $rc = 0 ]; then pass "incast: $((n - 1)) writers at once into guest 1"; else
			fail "incast: $rc of the $((n - 1)) servers failed"
			tail -3 "$ROXE_OUT"/incast-server-*.log | sed 's/^/    /'
		fi
	else
		wait_for 120 test -e "$ROXE_SHARED/incast-listening.1"
		if bounded ib_write_bw -d $dev -x "$gid" -n $iters -s $size -F -p $((18600 + me)) "$(ip_of 1)" \
			>"$ROXE_OUT/incast-client.log" 2>&1; then
			pass "incast: $iters writes of $size bytes into guest 1, beside the other writers"
		else
			fail "incast: ib_write_bw into guest 1"
			tail -5 "$ROXE_OUT/incast-client.log" | sed 's/^/    /'
		fi
	fi
	counters_moved $dev /tmp/incast-before
	# Guest 1 received at least every writer's payload; each writer sent
	# at least its own.
	counters_save $dev /tmp/incast-after
	moved() { # COUNTER: how much it moved since /tmp/incast-before
		python3 -c '
import sys
def kv(f):
    x = open(f).read().split()
    return {x[i]: int(x[i + 1]) for i in range(len(x) - 1) if x[i + 1].isdigit()}
print(kv(sys.argv[2]).get(sys.argv[3], 0) - kv(sys.argv[1]).get(sys.argv[3], 0))' \
			/tmp/incast-before /tmp/incast-after "$1"
	}
	if [ "$me" = 1 ]; then
		want=$(((n - 1) * iters * size)) got=$(moved rx_bytes)
		[ "$got" -ge "$want" ] && pass "incast: guest 1 received $got bytes (at least $want)" ||
			fail "incast: guest 1 received $got bytes, fewer than the $want written"
	else
		want=$((iters * size)) got=$(moved tx_bytes)
		[ "$got" -ge "$want" ] && pass "incast: guest $me sent $got bytes (at least $want)" ||
			fail "incast: guest $me sent $got bytes, fewer than the $want written"
	fi
	roxe_signal incast-done
	roxe_wait_all incast-done 300
fi

check "rdma link delete $dev" rdma link delete $dev
check "rmmod roxe" rmmod roxe
finish
