# A hostile peer on the wire, between two guests (issue 13). Both guests
# run roxe on their test NIC and carry RDMA traffic to each other:
# rdma-verify.py both ways at once (writes, reads, sends, writes with
# immediate, atomics, Atomic Write), again and again. Role 2 also runs
# fuzz.py: it watches its NIC on a packet socket, learns role 1's live QP
# numbers, PSNs, MSNs, path MTU and the R_Keys and addresses in the RETHs
# and AtomicETHs, and for $secs seconds sends role 1 in-window packets of
# every RC opcode with right ICRCs and mutated lengths, keys, addresses,
# MSNs and pad counts, wrong-transport packets, a spoofed source address
# (192.0.2.77) and another destination address of role 1 (192.0.2.101,
# which role 1 adds to its NIC), and random garbage. It prints its seed
# and, per kind, how many packets it sent and how many were in-window.
#
# The traffic may fail while that goes on (QPs go to error). What must
# hold: role 1's drop counters grow (it prints every counter's delta over
# the run), and afterwards rdma-verify.py moves data between the two
# guests and checks it byte for byte, then `rdma link delete roxe0` and
# `rmmod roxe` succeed on both, and the rig finds both kernel logs clean.
#
# ROXE_FUZZ_SEED picks the fuzzer's seed (default: from the clock; it is
# printed, with the command that replays it); ROXE_FUZZ_SECONDS the
# length (default 60). scripts/vm does not pass the host's environment:
# set them in a wrapper script that sources this one. If role 1 does not
# report a clean kernel log, role 2 keeps every packet it sent as
# $ROXE_OUT/fuzz.pcap.
. "$ROXE_ROOT/tests/guest/lib.sh"
IB=/sys/class/infiniband/roxe0
secs=${ROXE_FUZZ_SECONDS:-60}
rate=${ROXE_FUZZ_RATE:-800}
seed=${ROXE_FUZZ_SEED:-$(($(date +%s%N) / 1000 % 1000000007))}
alt=192.0.2.101
spoof=192.0.2.77
# Each traffic run is bounded; the loops restart them until the fuzzing ends.
run_limit=240

t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }

# Counters as NAME VALUE lines.
counters() {
	local f
	for f in $IB/ports/1/hw_counters/*; do
		[ "${f##*/}" = lifespan ] || echo "${f##*/} $(cat "$f")"
	done | sort
}

check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
[ "$ROXE_ROLE" = 1 ] && check "a second address, $alt, on $ROXE_IF" ip addr add $alt/24 dev "$ROXE_IF"
wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
check_output "roxe0 port 1 is ACTIVE" ': ACTIVE$' cat $IB/ports/1/state
wait_for 10 gid_index_v4 roxe0
gidx=$(gid_index_v4 roxe0)
if [ -n "$gidx" ]; then pass "the RoCE v2 GID for $ROXE_LOCAL_IP is index $gidx"; else
	fail "roxe0 has no RoCE v2 GID for $ROXE_LOCAL_IP"
fi
[ -n "$gidx" ] && roxe_signal up
roxe_signal setup
ok=0
if ! roxe_wait setup 120; then fail "the peer never finished setting up"
elif ! roxe_wait up 0; then fail "the peer could not set up its device"
else pass "the peer has its device set up"; ok=1; fi
[ -n "$gidx" ] || ok=0

# The traffic: rdma-verify.py both ways at once, role 2 the client
# (requester) of one pair and role 1 of the other, so each guest's QPs are
# requesters and responders: RDMA writes, reads, sends, writes with
# immediate, atomics and Atomic Write, each of several sizes at path MTUs
# 1024, 512 and 256 (so First, Middle and Last packets), one RC QP per side
# that is replaced after every failed test. (rdma-verify rather than
# perftest: one process keeps making QPs for a minute, where perftest
# would start again after every QP the fuzzer breaks, and a process start
# costs seconds in these guests.) Each pair runs again and again until
# $ROXE_OUT/stop exists; its tests fail while the fuzzer hits its QPs
# (that is allowed here). Each run's exit status goes to NAME.runs, its
# output to NAME.log, and the current run's PID to NAME.pid.
traffic=(fwd rev)
vsizes=1,7,64,1000,1024,1025,4096,65537
# Six rounds at three path MTUs: about 170 tests, more than the minute
# (a new run's start, pyverbs' import, takes 15 s or more beside the
# fuzzer, and leaves the fuzzer without live QPs meanwhile).
vmtus=1024,512,256,1024,512,256
# loop NAME PORT SERVER_ROLE
loop() {
	local name=$1 port=$2 pid rc peer=; shift 2
	[ "$ROXE_ROLE" = "$1" ] || peer=$ROXE_PEER_IP
	: >"$ROXE_OUT/$name.runs"
	while [ ! -e "$ROXE_OUT/stop" ]; do
		# shellcheck disable=SC2086 # no peer: the server
		timeout -k 3 $run_limit python3 "$ROXE_ROOT/tests/guest/rdma-verify.py" --dev roxe0 \
			--gid-index "$gidx" --sizes $vsizes --mtu $vmtus --timeout 5 -p "$port" $peer \
			>>"$ROXE_OUT/$name.log" 2>&1 &
		pid=$!
		echo $pid >"$ROXE_OUT/$name.pid"
		wait $pid; rc=$?
		echo $rc >>"$ROXE_OUT/$name.runs"
		# A client gives its server time to listen again.
		[ -n "$peer" ] && sleep 2
	done
}
start_traffic() {
	rm -f "$ROXE_OUT/stop"
	loop fwd 18820 1 &
	loop rev 18821 2 &
}
stop_traffic() {
	local n p c
	touch "$ROXE_OUT/stop"
	for n in "${traffic[@]}"; do
		[ -f "$ROXE_OUT/$n.pid" ] || continue
		p=$(cat "$ROXE_OUT/$n.pid")
		# A run stuck in the kernel is worth a look.
		for c in $(pgrep -P "$p"); do
			if [ "$(awk '{print $3}' /proc/"$c"/stat 2>/dev/null)" = D ]; then
				echo "    traffic $n: pid $c is in D state, wchan $(cat /proc/"$c"/wchan)"
				sed 's/^/        /' /proc/"$c"/stack
			fi
		done
		kill "$p" 2>/dev/null
	done
	wait
	for n in "${traffic[@]}"; do
		echo "    traffic $n: $(wc -l <"$ROXE_OUT/$n.runs") runs (exit statuses: $(sort -n "$ROXE_OUT/$n.runs" |
			uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')); tests: $(grep -c '^ok ' "$ROXE_OUT/$n.log") ok, $(grep -c '^FAIL ' "$ROXE_OUT/$n.log") failed"
	done
}

if [ $ok = 1 ] && [ "$ROXE_ROLE" = 1 ]; then
	counters >"$ROXE_OUT/counters.before"
	start_traffic
	stamp "traffic started"
	roxe_signal serving
	# The fuzzer runs $secs s after traffic starts; allow for a slow start.
	if roxe_wait fuzzed $((secs + 200)); then pass "the peer's fuzzer ran"; else
		fail "the peer's fuzzer did not finish within $((secs + 200)) s"
	fi
	stamp "the fuzzer is done"
	stop_traffic
	stamp "traffic stopped"
	sleep 1
	counters >"$ROXE_OUT/counters.after"
	echo "roxe0 counters over the fuzzing (before -> after, delta):"
	join "$ROXE_OUT/counters.before" "$ROXE_OUT/counters.after" |
		awk '$3 != $2 { printf "    %-34s %10d -> %10d  %+d\n", $1, $2, $3, $3 - $2 }'
	drops=$(join "$ROXE_OUT/counters.before" "$ROXE_OUT/counters.after" |
		awk '$1 ~ /^rx_drop_/ { d += $3 - $2 } END { print d + 0 }')
	icrc=$(join "$ROXE_OUT/counters.before" "$ROXE_OUT/counters.after" |
		awk '$1 == "rx_drop_icrc" { print $3 - $2 }')
	sed 's/^/    /' "$ROXE_SHARED/fuzz-summary" 2>/dev/null | tail -1
	if [ "$drops" -gt 0 ]; then pass "roxe0 dropped and counted $drops packets (rx_drop_*)"; else
		fail "roxe0's rx_drop_* counters did not move"
	fi
	if [ "${icrc:-0}" -gt 0 ]; then pass "rx_drop_icrc +$icrc (bad ICRCs and garbage)"; else
		fail "rx_drop_icrc did not move"
	fi
	check_output "roxe0 port 1 is still ACTIVE" ': ACTIVE$' cat $IB/ports/1/state
	# The kernel log so far (the rig judges it again at the end); role 2
	# keeps its packets unless this says clean.
	dmesg >"$ROXE_OUT/dmesg-after-fuzz.txt"
	"$ROXE_ROOT/scripts/check-dmesg" guest1 "$ROXE_OUT/dmesg-after-fuzz.txt" && roxe_signal clean
elif [ $ok = 1 ]; then
	# The fuzzer starts first: it listens until it sees a live QP of the
	# peer, then fuzzes for $secs s.
	echo "fuzz seed: $seed (replay: ROXE_FUZZ_SEED=$seed)"
	timeout -k 5 $((secs + 150)) python3 "$ROXE_ROOT/tests/guest/fuzz.py" --if "$ROXE_IF" \
		--ip "$ROXE_LOCAL_IP" --peer "$ROXE_PEER_IP" --seconds "$secs" --seed "$seed" \
		--rate "$rate" --warmup 90 --spoof $spoof --alt-dst $alt --pcap /tmp/fuzz.pcap \
		--summary "$ROXE_SHARED/fuzz-summary" >"$ROXE_OUT/fuzz.log" 2>&1 &
	fuzzer=$!
	roxe_wait serving 60 || fail "the peer never started its servers"
	start_traffic
	stamp "traffic started"
	if wait $fuzzer; then
		pass "fuzz.py ran $secs s (seed $seed): $(tail -1 "$ROXE_OUT/fuzz.log")"
	else
		fail "fuzz.py exited $? (seed $seed)"
	fi
	sed 's/^/    /' "$ROXE_OUT/fuzz.log"
	roxe_signal fuzzed
	stamp "the fuzzer is done"
	stop_traffic
	stamp "traffic stopped"
fi

# A fresh verified transfer over the same devices: writes, reads, sends,
# write with immediate, atomics and Atomic Write, each checked byte for
# byte with the memory around it.
vre='^rdma-verify: [0-9]+ ok, 0 failed$'
verify=(python3 "$ROXE_ROOT/tests/guest/rdma-verify.py" --dev roxe0 --gid-index "$gidx"
	--sizes 1,4096,65537 --timeout 30 -p 18810)
if [ $ok = 1 ] && [ "$ROXE_ROLE" = 1 ]; then
	timeout -k 5 240 "${verify[@]}" >"$ROXE_OUT/verify.log" 2>&1 &
	pid=$!
	wait_for 60 sh -c "ss -Hltn 'sport = :18810' | grep -q . || ! kill -0 $pid"
	roxe_signal verify-ready
	wait $pid; rc=$?
	if [ $rc = 0 ] && grep -Eq "$vre" "$ROXE_OUT/verify.log"; then
		pass "after the fuzzing, rdma-verify server: $(tail -1 "$ROXE_OUT/verify.log")"
	else
		fail "after the fuzzing, rdma-verify server exited $rc: $(tail -1 "$ROXE_OUT/verify.log")"
		grep '^FAIL' "$ROXE_OUT/verify.log" | head -20 | sed 's/^/    /'
	fi
elif [ $ok = 1 ]; then
	if roxe_wait verify-ready 90; then
		check_output "after the fuzzing, rdma-verify moves checked data" "$vre" \
			timeout -k 5 240 "${verify[@]}" "$ROXE_PEER_IP"
		tail -1 /tmp/check.out | sed 's/^/    /'
	else
		fail "the peer's rdma-verify server never got ready"
	fi
fi

stamp "verified transfer done"
[ "$ROXE_ROLE" = 1 ] && ip addr del $alt/24 dev "$ROXE_IF" 2>/dev/null
check "rdma link delete roxe0" rdma link delete roxe0
check "rmmod roxe" rmmod roxe
stamp "roxe removed"
roxe_signal finished
if roxe_wait finished 120; then pass "the peer finished"; else fail "the peer did not finish"; fi
if [ "$ROXE_ROLE" = 2 ] && [ -f /tmp/fuzz.pcap ]; then
	if roxe_wait clean 0; then rm -f /tmp/fuzz.pcap; else
		cp /tmp/fuzz.pcap "$ROXE_OUT/fuzz.pcap"
		echo "the peer did not report a clean kernel log: the packets sent are in $ROXE_OUT/fuzz.pcap (seed $seed)"
	fi
fi
roxe_cleanup
finish
