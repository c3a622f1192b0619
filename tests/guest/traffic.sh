# Data moves between two guests over roxe, IPv4 RoCEv2: UD, RC, UC and SRQ
# pingpongs (rdma-core's ibv_*_pingpong), perftest's RDMA write, read and
# send bandwidth tests, then rdma-verify.py, which checks the contents of
# writes, reads, sends, writes with immediate and atomics. Both guests run
# this script: role 1 serves, role 2 connects to it. Every run is bounded by
# $limit seconds, so a hang fails its own check and the next run still
# happens.
#
# For interop runs either guest can use rxe (rdma_rxe) instead of roxe:
# ROXE_TRAFFIC_DRV1 and ROXE_TRAFFIC_DRV2 name the driver of the guest with
# role 1 and role 2, and ROXE_TRAFFIC_DRV that of both; the default is roxe.
# interop-a.sh and interop-b.sh set them and source this script. Each guest
# only names its own device, so the two need not agree on anything else.
#
# ROXE_VERIFY_SIZES, if set, replaces rdma-verify's list of sizes.
#
# Loss and disorder: ROXE_TRAFFIC_NETEM holds netem parameters ("loss 5%",
# "reorder 25% 50% delay 1ms", "duplicate 2%") that both guests put on
# ROXE_TRAFFIC_SET=perftest runs perftest's latency, atomic, multi-QP,
# bidirectional, UC and UD modes instead (perftest.sh sets it).
#
# their egress once the devices are up; ROXE_TRAFFIC_SET=lossy then runs
# only the RC transfers with verified data (lossy.sh sets both).
. "$ROXE_ROOT/tests/guest/lib.sh"
limit=60
drv_var=ROXE_TRAFFIC_DRV$ROXE_ROLE
DRV=${!drv_var:-${ROXE_TRAFFIC_DRV:-roxe}}
dev=${DRV}0
IB=/sys/class/infiniband/$dev

# listening PORT: a socket listens on TCP PORT.
listening() { ss -Hltn "sport = :$1" | grep -q .; }

# server_up PORT PID: a socket listens on TCP PORT, or process PID is gone
# (so there is no point in waiting any longer).
server_up() { listening "$1" || ! kill -0 "$2" 2>/dev/null; }

# bounded COMMAND...: run COMMAND for at most $limit seconds, and say so
# when it had to be stopped.
bounded() {
	local rc
	timeout -k 5 "$limit" "$@"
	rc=$?
	if [ $rc = 124 ] || [ $rc = 137 ]; then echo "TIMEOUT: stopped after $limit s"; fi
	return $rc
}

# pair NAME PORT REGEX COMMAND...: one client/server run of COMMAND, with
# `-p PORT` added on both sides. The server starts first and, once it
# listens on TCP PORT, signals ready-NAME; it passes if it exits 0 (and
# --chk found no bad data, and its output matches $server_re if that is
# set). The client waits for ready-NAME, runs COMMAND against $ROXE_PEER_IP
# and passes if it exits 0 with output that matches REGEX. Each side keeps
# its output in $ROXE_OUT/NAME.log. For one run, `limit=SECONDS` and
# `server_re=REGEX` can prefix the call: bash sets them for that call only.
pair() {
	local name=$1 port=$2 re=$3 pid rc fails=$ROXE_FAILS log; shift 3
	log=$ROXE_OUT/$name.log
	if [ "$ROXE_ROLE" = 1 ]; then
		bounded "$@" -p "$port" >"$log" 2>&1 &
		pid=$!
		# Signal even if it never listens: the client then fails fast.
		wait_for 60 server_up "$port" "$pid"
		roxe_signal "ready-$name"
		wait "$pid"; rc=$?
		# For the client's own lost-final-ACK check: whether this side
		# finished every iteration and exited 0, then that it exited.
		[ $rc = 0 ] && grep -Eq -- "$re" "$log" && roxe_signal "iters-$name"
		roxe_signal "exited-$name"
		if [ $rc != 0 ] && [ -n "${last_send_may_fail:-}" ] &&
			[ "$(grep -c 'Failed status' "$log")" = 1 ] &&
			grep -q 'Failed status transport retry counter exceeded (12) for wr_id 2$' "$log" &&
			wait_for $((limit + 60)) sh -c "test -e $ROXE_SHARED/ok-$name.2 || test -e $ROXE_SHARED/failed-$name.2" &&
			test -e "$ROXE_SHARED/ok-$name.2"; then
			# ibv_rc_pingpong's client exits as soon as it has the last
			# message; if the ACK of that message is lost, the server's
			# resends meet no QP and its last send fails. The client having
			# finished every iteration proves the message arrived.
			pass "$name server: only its last send failed, after the client finished every iteration (a lost final ACK): $* -p $port"
		elif [ $rc != 0 ]; then fail "$name server (exit $rc): $* -p $port"
		elif grep -q "invalid data" "$log"; then fail "$name server: --chk found bad data: $* -p $port"
		elif [ -n "${server_re:-}" ] && ! grep -Eq -- "$server_re" "$log"; then
			fail "$name server: output does not match /$server_re/: $* -p $port"
		else pass "$name server: $* -p $port"; fi
		[ "$ROXE_FAILS" = "$fails" ] || sed 's/^/    /' "$log" | tail -20
	elif roxe_wait "ready-$name" $((limit + 60)); then
		bounded "$@" -p "$port" "$ROXE_PEER_IP" >"$log" 2>&1
		rc=$?
		if [ $rc = 0 ] && grep -Eq -- "$re" "$log"; then
			pass "$name: $* -p $port $ROXE_PEER_IP"
		elif [ -n "${last_send_may_fail:-}" ] &&
			[ "$(grep -c 'Failed status' "$log")" = 1 ] &&
			grep -q 'Failed status transport retry counter exceeded (12) for wr_id 2$' "$log" &&
			roxe_wait "exited-$name" $((limit + 60)) && roxe_wait "iters-$name" 0; then
			# The same race the other way round: the server received the
			# client's last message (it finished every iteration, so all
			# of the client's sends arrived, --chk checking each), its ACK
			# was lost, and the server's QP was gone before the client's
			# resend came.
			pass "$name: only the client's last send failed, after the server finished every iteration (a lost final ACK): $* -p $port $ROXE_PEER_IP"
		else
			fail "$name (exit $rc): output of '$* -p $port $ROXE_PEER_IP' does not match /$re/"
			sed 's/^/    /' "$log" | head -30
		fi
		if [ "$ROXE_FAILS" = "$fails" ]; then roxe_signal "ok-$name"; else roxe_signal "failed-$name"; fi
		# Show the result line; or, on a failure, the end of a long output
		# (perftest's banner alone fills the 30 lines printed above) and any
		# FAIL lines (rdma-verify's) between its first 30 lines and that.
		if [ "$ROXE_FAILS" = "$fails" ]; then
			grep -E -- "$re" "$log" | sed 's/^/    /'
		elif [ "$(wc -l <"$log")" -gt 30 ]; then
			echo "    [...]"
			sed -n '31,$p' "$log" | head -n -10 | grep -E '^FAIL' | head -20 | sed 's/^/    /'
			tail -10 "$log" | sed 's/^/    /'
		fi
	else
		fail "$name: the server never signalled ready-$name"
	fi
}

# Set up: $dev on the test NIC, port ACTIVE, and the index of the RoCE v2
# GID that holds this guest's IPv4 address (the core adds GIDs a moment
# after the device appears).
case $DRV in
roxe) check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF" ;;
rxe)
	check "load rdma_rxe" modprobe rdma_rxe
	check "rdma link add rxe0 on $ROXE_IF" rdma link add rxe0 type rxe netdev "$ROXE_IF"
	;;
*) fail "unknown driver '$DRV' (from $drv_var or ROXE_TRAFFIC_DRV): use roxe or rxe" ;;
esac
wait_for 10 grep -q ': ACTIVE$' "$IB/ports/1/state"
check_output "$dev port 1 is ACTIVE" ': ACTIVE$' cat "$IB/ports/1/state"
wait_for 10 gid_index_v4 "$dev"
gidx=$(gid_index_v4 "$dev")
if [ -n "$gidx" ]; then pass "the RoCE v2 GID for $ROXE_LOCAL_IP is index $gidx"; else
	fail "$dev has no RoCE v2 GID for $ROXE_LOCAL_IP"
	grep -H . "$IB"/ports/1/gids/* "$IB"/ports/1/gid_attrs/types/* 2>/dev/null | sed 's/^/    /' | head -20
fi

# Both sides must be set up before a test starts. "up" comes before
# "setup", so once the peer's "setup" is there its "up" is too, or never.
[ -n "$gidx" ] && roxe_signal up
roxe_signal setup
ok=0
if ! roxe_wait setup 180; then fail "the peer never finished setting up"
elif ! roxe_wait up 0; then fail "the peer could not set up its device"
else pass "the peer has its device set up"; ok=1; fi
[ -n "$gidx" ] || ok=0

# Client output that shows a run completed: the pingpongs' iteration count,
# and perftest's results line (#bytes #iterations BW-peak BW-average ...).
pp='^100 iters in '
bw='^ *65536[[:space:]]+200[[:space:]]+[0-9.]+[[:space:]]+[0-9.]+'
if [ $ok = 1 ] && [ -n "${ROXE_TRAFFIC_NETEM:-}" ]; then
	# shellcheck disable=SC2086 # netem parameters are a word list
	check "netem $ROXE_TRAFFIC_NETEM on $ROXE_IF" tc qdisc add dev "$ROXE_IF" root netem $ROXE_TRAFFIC_NETEM
fi
vre='^rdma-verify: [0-9]+ ok, 0 failed$'
if [ $ok = 1 ] && [ "${ROXE_TRAFFIC_SET:-full}" = lossy ]; then
	# RC both ways through the lossy link: the pingpong checks the data the
	# server receives, rdma-verify that of writes (client to server), reads
	# (server to client) and sends, each byte for byte.
	counters_save "$dev" /tmp/lossy-counters
	# roxe's congestion window (`rdma -dd res`, cwnd_packets) while the
	# transfers run: every loss halves it, to no less than 8 packets.
	if [ "$DRV" = roxe ]; then
		while :; do
			rdma -dd res show qp link "$dev/1" 2>/dev/null | grep -o 'cwnd_packets [0-9]*'
			sleep 0.2
		done >/tmp/cwnd-samples &
		cwnd_pid=$!
	fi
	limit=240 last_send_may_fail=1 pair rc-64k 18516 '^50 iters in ' ibv_rc_pingpong -d "$dev" -g "$gidx" -n 50 -s 65536 -m 1024 --chk
	limit=600 server_re=$vre pair verify 18523 "$vre" \
		python3 "$ROXE_ROOT/tests/guest/rdma-verify.py" --dev "$dev" --gid-index "$gidx" \
		--mtu 1024 --ops write,read,send --sizes 1,4096,65537,1048576 --timeout 120
	if [ -n "${cwnd_pid:-}" ]; then
		kill "$cwnd_pid" 2>/dev/null
		wait "$cwnd_pid" 2>/dev/null
		cw=$(awk '{print $2}' /tmp/cwnd-samples | sort -n | uniq | tr '\n' ' ')
		lo=$(awk '{print $2}' /tmp/cwnd-samples | sort -n | head -1)
		# A window below the full 64 shows a loss acted on; none below 8.
		# The client's (role 2) is checked: it drives rdma-verify's writes
		# and reads of up to 1 MiB; the server's is shown.
		if [ "$ROXE_ROLE" != 2 ]; then
			echo "    cwnd_packets seen: ${cw:-none}"
		elif [ -n "$lo" ] && [ "$lo" -lt 64 ] && [ "$lo" -ge 8 ]; then
			pass "the congestion window shrank on losses (cwnd_packets seen: $cw)"
		else
			fail "the congestion window never shrank, or fell below 8 (cwnd_packets seen: ${cw:-none})"
		fi
	fi
	tc -s qdisc show dev "$ROXE_IF" | sed 's/^/    /'
	# What the engines counted, to read a failure by.
	echo "    $dev counters that moved:"
	counters_moved "$dev" /tmp/lossy-counters
elif [ $ok = 1 ] && [ "${ROXE_TRAFFIC_SET:-full}" = perftest ]; then
	# perftest's other tools and modes: latency of each operation, atomics,
	# several QPs, both directions at once, UC and UD. The
	# result line starts with the message size and the iteration count.
	res='^ *(2|8|1024|65536)[[:space:]]+[0-9]+[[:space:]]+[0-9.]+'
	pt=(-d "$dev" -x "$gidx" -F)
	pair send-lat 18600 "$res" ib_send_lat "${pt[@]}" -n 200 -s 2
	pair write-lat 18601 "$res" ib_write_lat "${pt[@]}" -n 200 -s 2
	pair read-lat 18602 "$res" ib_read_lat "${pt[@]}" -n 200 -s 2
	pair atomic-lat 18603 "$res" ib_atomic_lat "${pt[@]}" -n 200
	pair atomic-bw-faa 18604 "$res" ib_atomic_bw "${pt[@]}" -n 200 -A FETCH_AND_ADD
	pair atomic-bw-cas 18605 "$res" ib_atomic_bw "${pt[@]}" -n 200 -A CMP_AND_SWAP
	pair write-bw-4qp 18606 "$res" ib_write_bw "${pt[@]}" -n 100 -s 65536 -q 4
	# Reads on four QPs at once: their response bursts together are more
	# than the virtio receive ring holds unless the device's read credits
	# hold them back (Documentation/datapath.md).
	pair read-bw-4qp 18607 "$res" ib_read_bw "${pt[@]}" -n 100 -s 65536 -q 4
	pair send-bw-bidir 18608 "$res" ib_send_bw "${pt[@]}" -n 100 -s 65536 -b
	pair write-bw-bidir 18609 "$res" ib_write_bw "${pt[@]}" -n 100 -s 65536 -b
	pair write-bw-uc 18610 "$res" ib_write_bw "${pt[@]}" -n 100 -s 65536 -c UC
	pair send-bw-ud 18611 "$res" ib_send_bw "${pt[@]}" -n 200 -s 1024 -c UD
	# (The RDMA CM modes, -R, are in cm.sh: no TCP socket shows when their
	# server is ready.)
elif [ $ok = 1 ]; then
	pair ud 18515 "$pp" ibv_ud_pingpong -d "$dev" -g "$gidx" -n 100 -s 1024
	# RC with the same options on both sides: 4 and 64 KiB messages are
	# segmented at the 1024-byte path MTU; --chk has the server check the data.
	pair rc-4k 18516 "$pp" ibv_rc_pingpong -d "$dev" -g "$gidx" -n 100 -s 4096 -m 1024 --chk
	pair rc-64k 18517 "$pp" ibv_rc_pingpong -d "$dev" -g "$gidx" -n 100 -s 65536 -m 1024 --chk
	pair uc 18518 "$pp" ibv_uc_pingpong -d "$dev" -g "$gidx" -n 100 -s 1024
	# Four RC QPs whose receives all come from one SRQ.
	pair srq 18519 "$pp" ibv_srq_pingpong -d "$dev" -g "$gidx" -n 100 -q 4
	# perftest: RDMA write, RDMA read and send bandwidth, 200 x 64 KiB.
	# -F: do not fail on the guest's missing cpufreq information.
	pair write-bw 18520 "$bw" ib_write_bw -d "$dev" -x "$gidx" -n 200 -s 65536 -F
	pair read-bw 18521 "$bw" ib_read_bw -d "$dev" -x "$gidx" -n 200 -s 65536 -F
	pair send-bw 18522 "$bw" ib_send_bw -d "$dev" -x "$gidx" -n 200 -s 65536 -F
	# The contents of RDMA writes and reads of 1 B to 8 MiB, sends to 1 MiB,
	# a write with immediate, the atomics and Atomic Write, at path MTUs
	# 1024 and 256: 74 tests, each checked byte for byte with the memory
	# around it. Both sides must report no failure. It moves about 40 MiB;
	# give it 480 s. The client picks the operations: rxe's provider only
	# posts Atomic Write through ibv_wr_atomic_write, so an rxe client
	# leaves it out (an rxe server still answers roxe's).
	verify_ops=
	[ "$DRV" = rxe ] && verify_ops="--ops write,read,send,imm,atomic"
	limit=480 server_re=$vre pair verify 18523 "$vre" \
		python3 "$ROXE_ROOT/tests/guest/rdma-verify.py" --dev "$dev" --gid-index "$gidx" --mtu 1024,256 \
		${ROXE_VERIFY_SIZES:+--sizes "$ROXE_VERIFY_SIZES"} $verify_ops
fi

if [ $ok = 1 ] && [ "$DRV" = roxe ]; then
	# The receive path counts what it delivered (and what it dropped).
	check_output "rdma statistic counts delivered packets" 'rx_delivered [1-9]' \
		rdma statistic show link "$dev/1"
fi

roxe_signal "done"
if roxe_wait "done" $((limit + 60)); then pass "the peer finished"; else fail "the peer did not finish"; fi
# Nothing arrives that was not sent: what this side's device delivered is
# at most what the peer's sent (roxe: rx_delivered and tx_packets; rxe:
# rcvd_pkts and sent_pkts), and it sent something. Both sides are done,
# so neither count moves any more. Not with netem duplicating packets: a
# duplicated ACK is delivered twice.
if [ $ok = 1 ] && [[ "${ROXE_TRAFFIC_NETEM:-}" == *duplicate* ]]; then
	echo "    not checked: received against sent (netem duplicates packets)"
elif [ $ok = 1 ]; then
	counters_save "$dev" "$ROXE_SHARED/counters.$ROXE_ROLE"
	# Signalled only once the file is whole.
	roxe_signal stat
	if roxe_wait stat 60; then
		python3 -c '
import sys
def kv(f):
    x = open(f).read().split()
    return {x[i]: int(x[i + 1]) for i in range(len(x) - 1) if x[i + 1].isdigit()}
me, peer = kv(sys.argv[1]), kv(sys.argv[2])
got = me.get("rx_delivered", me.get("rcvd_pkts"))
sent = peer.get("tx_packets", peer.get("sent_pkts"))
err = peer.get("tx_err", peer.get("send_err"))
ok = got is not None and sent is not None and 0 < got <= sent
print("ok" if ok else "bad", f"received {got}, peer sent {sent}, peer send errors {err}")' \
			"$ROXE_SHARED/counters.$ROXE_ROLE" "$ROXE_SHARED/counters.$((ROXE_ROLE % 2 + 1))" >/tmp/sent.out 2>&1
		if grep -q '^ok ' /tmp/sent.out; then
			pass "$dev received no more packets than the peer sent: $(cat /tmp/sent.out)"
		else
			fail "$dev received more packets than the peer sent, or none: $(cat /tmp/sent.out)"
		fi
	else
		fail "the peer did not save its counters"
	fi
fi
if [ "$DRV" = rxe ]; then
	check "remove rxe0" rdma link delete rxe0
	check "unload rdma_rxe" rmmod rdma_rxe
fi
roxe_cleanup
finish
