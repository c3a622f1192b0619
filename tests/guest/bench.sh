# The benchmark's guest side (scripts/bench runs it on two guests; see
# Documentation/bench.md). Both guests run this script and walk the same
# plan, a file scripts/bench wrote (ROXE_BENCH_PLAN), one step a line; role 1
# serves, role 2 connects, and the two meet at every step. The steps:
#
#   round R                      a label: the steps that follow are round R
#   mtu M                        set the test NIC's MTU to M (no RDMA device
#                                is on it then) and check that a full M-byte
#                                frame crosses the wire
#   tcp SECONDS                  iperf3 TCP from guest 2 to guest 1, the link
#                                reference
#   up DRV                       load DRV (rxe, siw, roxe), create its device
#                                on the test NIC, record its active MTU and
#                                check that a RoCE driver's follows the netdev
#   bw DRV TEST SIZE ITERS QPS   perftest's ib_TEST (write_bw, send_bw,
#                                read_bw; send_bw_ev and read_bw_ev are
#                                ib_send_bw and ib_read_bw with -e, asleep
#                                on CQ events), ITERS messages on each of
#                                QPS QPs
#   lat DRV TEST SIZE ITERS      perftest's ib_TEST (write_lat, send_lat,
#                                read_lat)
#   prof DRV TEST SIZE ITERS     the same run as bw (1 QP) or lat, under perf
#                                record in both guests (cpu-clock, system-wide,
#                                call graphs); the stacks are folded into
#                                ROXE_OUT/prof-DRV-TEST-SIZE.folded
#   down DRV                     delete the device and unload DRV
#
# rxe and roxe both bind UDP port 4791, so a plan has one driver up at a
# time. siw is iWARP and needs the RDMA CM, so its perftest runs use -R; rxe
# and roxe exchange QP numbers over perftest's TCP socket and name their
# RoCE v2 GID with -x, as tests/guest/traffic.sh does.
#
# Around every run each guest reads the busy jiffies of /proc/stat, summed
# over its vCPUs (the client from just before it starts until it exits, the
# server from when it listens until it exits), so the host can add up both
# guests' CPU time. Each side prints one line per step that measures:
#
#   BENCH kind=run side=client|server step=N round=R mtu=M cpus=C run=NAME
#         attempt=N driver=D test=T size=B iters=N qps=Q profile=0|1 rc=RC
#         status=ok|failed|skipped usecs=U busy=J kern=J total=J hz=HZ
#         header="..." result="..."
#   BENCH kind=device side=... step=N round=R mtu=M cpus=C driver=D
#         netdev_mtu=M active_mtu=BYTES
#   BENCH kind=profile side=... step=N driver=D test=T size=B status=...
#         samples=N file=NAME
#
# (the CPU window in microseconds and jiffies; client run lines also carry
# perftest's column header and result row, or iperf3's bytes and seconds).
# scripts/bench-report.py turns them into the results. Every run is bounded
# by ROXE_BENCH_RUN_LIMIT seconds; a run that fails fails the script, but
# the other steps still happen. A failed run of rxe or siw (the
# yardsticks) is done again, up to three attempts; roxe's only after
# perftest's clock or CM start-up races (see `measure`).
# After two timed-out attempts in a row a driver's remaining runs in this
# boot are skipped (and so reported missing).
#
# Settings (scripts/bench writes them into the script it hands the guests):
#   ROXE_BENCH_PLAN       the plan file
#   ROXE_BENCH_RUN_LIMIT  bound on each run, in seconds
#   ROXE_BENCH_PERF       (prof steps) the perf binary, ROXE_BENCH_PERF_FREQ
#                         its sampling rate in Hz, ROXE_BENCH_DEMANGLE a
#                         filter that demangles Rust names (rustfilt) and
#                         ROXE_BENCH_COLLAPSE inferno-collapse-perf
. "$ROXE_ROOT/tests/guest/lib.sh"

plan=${ROXE_BENCH_PLAN:?}
limit=${ROXE_BENCH_RUN_LIMIT:-150}
hz=$(getconf CLK_TCK)
cpus=$(nproc)
port=18700
server=$([ "$ROXE_ROLE" = 1 ] && echo 1 || echo 0)
side=$([ $server = 1 ] && echo server || echo client)

if ! [[ "$limit" =~ ^[0-9]+$ ]] || [ "$limit" = 0 ]; then
	fail "bench settings: ROXE_BENCH_RUN_LIMIT '$limit' is not a positive integer"
	finish
fi
if [ ! -r "$plan" ]; then
	fail "bench: the plan $plan is not readable in the guest"
	finish
fi

# nap SECONDS: sleep without forking (a read that times out on an idle
# FIFO), so the polling loops cost as little CPU as can be during a run.
mkfifo /tmp/bench-nap
exec 9<>/tmp/bench-nap
nap() { read -rt "$1" -u 9 || true; }

# The helpers that run during a measurement do not fork where they can
# help it: under TCG a fork and exec costs tens of milliseconds of the one
# vCPU that the run is using, and the waits below would add it up.

# snap VAR: set VAR to this guest's busy, kernel and total jiffies (the
# "cpu" line of /proc/stat: all vCPUs added up) and the time in
# microseconds. Busy is user + nice + system + irq + softirq + steal;
# kernel is system + irq + softirq.
snap() {
	local _c u n s i w q sq st _rest
	read -r _c u n s i w q sq st _rest </proc/stat
	printf -v "$1" '%s %s %s %s' $((u + n + s + q + sq + st)) $((s + q + sq)) \
		$((u + n + s + i + w + q + sq + st)) "${EPOCHREALTIME//[!0-9]/}"
}

# window VAR BEFORE AFTER: set VAR to the BENCH fields for the CPU window
# between two snaps.
window() {
	local b0 k0 a0 t0 b1 k1 a1 t1
	read -r b0 k0 a0 t0 <<<"$2"
	read -r b1 k1 a1 t1 <<<"$3"
	printf -v "$1" 'usecs=%s busy=%s kern=%s total=%s hz=%s' $((t1 - t0)) $((b1 - b0)) $((k1 - k0)) \
		$((a1 - a0)) "$hz"
}

# bounded COMMAND...: run COMMAND for at most $limit seconds.
bounded() { timeout -k 5 "$limit" "$@"; }

# listening PORT: a socket listens on TCP PORT (IPv4 or IPv6).
listening() {
	local hex f _sl addr _rem st _rest
	printf -v hex ':%04X' "$1"
	for f in /proc/net/tcp /proc/net/tcp6; do
		while read -r _sl addr _rem st _rest; do
			[ "$st" = 0A ] && [ "${addr%"$hex"}" != "$addr" ] && return 0
		done <"$f"
	done
	return 1
}

# Two-guest rendezvous through the shared folder, as roxe_signal and
# roxe_wait do it, polling every 50 ms.
peer=$((ROXE_ROLE % 2 + 1))
# say NAME: tell the peer we reached NAME.
say() { : >"$ROXE_SHARED/$1.$ROXE_ROLE"; }
# heard NAME: the peer reached NAME.
heard() { [ -e "$ROXE_SHARED/$1.$peer" ]; }
# await NAME SECONDS: wait until the peer reached NAME (SECONDS 0: look once).
await() {
	local end=$((SECONDS + $2))
	until heard "$1"; do
		[ $SECONDS -lt $end ] || return 1
		nap 0.05
	done
}
# meet NAME [SECONDS]: both guests reached NAME.
meet() { say "$1"; await "$1" "${2:-$((limit + 120))}"; }

# serve TAG FIELDS COMMAND...: (role 1) run a server, signal ready-TAG once
# it listens on $port, wait for it to end and print its BENCH line; then
# wait for the client's cdone-TAG, so that a decision to skip the driver's
# other runs (skip-DRV) or to run again (retry-TAG) is seen in time, and
# signal sdone-TAG. If the client is done and the server still runs 30 s later,
# stop it.
serve() {
	local tag=$1 fields=$2 pid rc s0 s1 win end grace=0 log=$ROXE_OUT/$1-server.log; shift 2
	bounded "$@" >"$log" 2>&1 &
	pid=$!
	# Signal even if it never listens: the client then fails fast.
	end=$((SECONDS + 60))
	until listening "$port" || ! kill -0 "$pid" 2>/dev/null; do
		[ $SECONDS -lt $end ] || { echo "note: $tag: nothing listens on port $port after 60 s"; break; }
		nap 0.05
	done
	# The CPU window starts here: the server's own start-up is not counted
	# (the client's is, on the client's side).
	snap s0
	say "ready-$tag"
	while kill -0 "$pid" 2>/dev/null; do
		if [ -e "$ROXE_SHARED/retry-$tag.2" ]; then
			# The client gave up on this attempt: nothing will come.
			stop_job "$pid"
		elif heard "cdone-$tag"; then
			grace=$((grace + 1))
			if [ $grace -gt 300 ]; then
				echo "note: $tag: the server still ran 30 s after its client ended; stopping it"
				stop_job "$pid"
			fi
		fi
		nap 0.1
	done
	wait "$pid"; rc=$?
	snap s1
	window win "$s0" "$s1"
	echo "BENCH kind=run side=server $fields rc=$rc status=$([ $rc = 0 ] && echo ok || echo failed) $win"
	# The client's verdict first: it may ask for another attempt (see
	# `measure`), which it does before it signals cdone-TAG.
	await "cdone-$tag" $((limit + 60)) || fail "$tag: the client never finished"
	if [ $rc = 0 ]; then pass "$tag server: $*"; elif [ -e "$ROXE_SHARED/retry-$tag.2" ]; then
		# This server was left waiting for a client that gave up, and
		# stopped, or failed along with it.
		echo "note: $tag server (exit $rc): its client asked for another attempt"
	else
		fail "$tag server (exit $rc): $*"; tail -15 "$log" | sed 's/^/    /'
	fi
	say "sdone-$tag"
}

# client TAG COMMAND...: (role 2) wait for the server's ready-TAG and run
# the client. Sets $rc, $win (the CPU window) and $log. client_end TAG then
# signals cdone-TAG and waits for the server's sdone-TAG.
client() {
	local tag=$1 s0 s1; shift
	log=$ROXE_OUT/$tag-client.log win= noready=0
	if ! await "ready-$tag" $((limit + 60)); then
		rc=1 noready=1
		echo "the server never signalled ready-$tag" >"$log"
		return
	fi
	snap s0
	bounded "$@" >"$log" 2>&1
	rc=$?
	snap s1
	window win "$s0" "$s1"
}
client_end() {
	say "cdone-$1"
	await "sdone-$1" $((limit + 60)) || fail "$1: the server never finished"
}

# report NAME FIELDS HEADER RESULT COMMAND...: (role 2) judge a client run
# ($rc and a non-empty RESULT) and print its BENCH line.
report() {
	local name=$1 fields=$2 header=$3 result=$4 status=ok; shift 4
	if [ "$rc" = 0 ] && [ -n "$result" ]; then pass "$name: $result"; else
		status=failed
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then fail "$name: stopped after $limit s: $*"
		elif [ "$rc" = 0 ]; then fail "$name: no result in the output of: $*"
		else fail "$name (exit $rc): $*"; fi
		tail -15 "$log" | sed 's/^/    /'
	fi
	echo "BENCH kind=run side=client $fields rc=$rc status=$status $win header=\"$header\" result=\"$result\""
}

# step_mtu M: the test NIC's MTU, on both guests, then one frame of M bytes
# (unfragmented) from guest 2 to guest 1.
step_mtu() {
	local m=$1
	if ! [[ "$m" =~ ^[0-9]+$ ]] || ! ip link set "$ROXE_IF" mtu "$m" >/tmp/mtu.out 2>&1; then
		fail "could not set the MTU of $ROXE_IF to $m: $(tr '\n' ' ' </tmp/mtu.out)"
		mtu_ok=0
	else
		mtu_ok=1
	fi
	mtu=$m
	meet "mtu-$n" 60 || { fail "mtu $m: the peer never set its MTU"; mtu_ok=0; }
	if [ $server = 0 ] && [ $mtu_ok = 1 ]; then
		# 20 bytes of IPv4 header and 8 of ICMP.
		check "a $m-byte frame crosses the wire" ping -c 2 -i 0.2 -W 5 -M "do" -s $((m - 28)) "$ROXE_PEER_IP"
		grep -q ' 0% packet loss' /tmp/check.out || mtu_ok=0
	fi
	[ $mtu_ok = 1 ] || say "mtu-bad-$n"
	meet "mtu-done-$n" 60 || fail "mtu $m: the peer never finished"
	# Nothing is measured at an MTU that either guest could not set or
	# that the wire does not carry.
	await "mtu-bad-$n" 0 && mtu_ok=0
	[ $mtu_ok = 1 ] || echo "note: mtu $m: no runs until the next mtu step"
}

# step_tcp SECONDS: iperf3, role 2 sends to role 1.
step_tcp() {
	local fields got cmd tag=s$n
	fields="$at run=tcp-$n attempt=1 driver=tcp test=tcp size=0 iters=0 qps=1 profile=0"
	port=$((port + 1))
	if [ $server = 1 ]; then
		serve "$tag" "$fields" iperf3 -s -1 -p "$port"
		return
	fi
	cmd=(iperf3 -c "$ROXE_PEER_IP" -p "$port" -t "$1" -J)
	client "$tag" "${cmd[@]}"
	# Bytes and seconds as the receiver counted them.
	got=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["end"]["sum_received"]
print(r["bytes"], r["seconds"])' "$log" 2>/dev/null)
	report "tcp (mtu $mtu)" "$fields" "bytes seconds" "$got" "${cmd[@]}"
	client_end "$tag"
}

# roce_mtu NETDEV_MTU: the active MTU a RoCE device should have on a netdev
# of that MTU, as the kernel's iboe_get_mtu() works it out (the largest IB
# MTU that fits with the GRH, UDP, BTH, the largest extended header and the
# ICRC: 96 bytes).
roce_mtu() {
	local room=$(($1 - 96)) m
	for m in 4096 2048 1024 512 256; do
		[ $room -ge $m ] && { echo $m; return; }
	done
	echo 0
}

# step_up DRV: load DRV and create its device on the test NIC; wait for the
# port and, for RoCE, the GID of our IPv4 address. Sets $dev, $conn (how
# perftest connects) and $up (1 if both guests have the device).
step_up() {
	local drv=$1 mod active want
	dev=${drv}0 up=0
	case $drv in
	rxe) mod=rdma_rxe ;;
	siw) mod=siw ;;
	roxe) mod=roxe ;;
	esac
	echo "== $drv (round $round, mtu $mtu)"
	if ! modprobe "$mod" >/tmp/up.out 2>&1 ||
		! rdma link add "$dev" type "$drv" netdev "$ROXE_IF" >>/tmp/up.out 2>&1; then
		fail "$drv: could not load $mod and create $dev on $ROXE_IF: $(tr '\n' ' ' </tmp/up.out)"
	elif ! wait_for 20 grep -q ': ACTIVE$' "/sys/class/infiniband/$dev/ports/1/state"; then
		fail "$dev port 1 is not ACTIVE: $(cat "/sys/class/infiniband/$dev/ports/1/state")"
	else
		up=1
		if [ "$drv" = siw ]; then
			# iWARP connects through the RDMA CM.
			conn=(-R)
		else
			wait_for 10 gid_index_v4 "$dev"
			gidx=$(gid_index_v4 "$dev") || { fail "$dev has no RoCE v2 GID for $ROXE_LOCAL_IP"; up=0; }
			conn=(-x "$gidx")
		fi
	fi
	if [ $up = 1 ]; then
		active=$(ibv_devinfo -d "$dev" 2>/dev/null | awk '$1 == "active_mtu:" { print $2; exit }')
		echo "BENCH kind=device side=$side $at driver=$drv netdev_mtu=$(cat "/sys/class/net/$ROXE_IF/mtu") active_mtu=${active:-unknown}"
		want=$(roce_mtu "$mtu")
		if [ "$drv" != siw ] && [ "$active" != "$want" ]; then
			fail "$dev: active MTU ${active:-unknown}, not $want, on a netdev of MTU $mtu"
			up=0
		fi
	fi
	[ $up = 1 ] && pass "$dev is up on $ROXE_IF, active MTU ${active:-?} (perftest connects with ${conn[*]})"
	[ $up = 1 ] && say "up-$n"
	if ! meet "setup-$n" 300; then fail "$drv: the peer never finished setting up"; up=0
	elif ! await "up-$n" 0; then fail "$drv: the peer could not set up its device"; up=0; fi
	[ $up = 1 ] && [ $mtu_ok = 1 ] || up=0
}

# step_down DRV: delete its device and unload its module, once the peer is
# done with it too.
step_down() {
	meet "end-$n" || fail "$1: the peer never finished"
	case $1 in
	rxe) rdma link delete rxe0 2>/dev/null; check "unload rdma_rxe" rmmod rdma_rxe ;;
	siw) rdma link delete siw0 2>/dev/null; check "unload siw" rmmod siw ;;
	roxe) roxe_cleanup; check_fails "roxe is unloaded" grep -q '^roxe ' /proc/modules ;;
	esac
	up=0
}

# perftest_row LOG SIZE: set $header to perftest's column header and
# $result to its result row (the one under the header whose first column
# is the message size), blanks squeezed, quotes and backslashes dropped.
perftest_row() {
	local words
	header='' result=''
	while read -ra words; do
		if [ -z "$header" ]; then
			[[ " ${words[*]} " == *" #bytes "* ]] && header="${words[*]}"
		elif [ "${words[0]:-}" = "$2" ]; then
			result="${words[*]}"
			break
		fi
	done <"$1"
	header=${header//[\"\\]/} result=${result//[\"\\]/}
}

# measure DRV TEST SIZE ITERS QPS PROFILE: one perftest run on both sides.
# perftest times a run with the TSC, which it calibrates against
# gettimeofday when it starts; under TCG that sometimes fails ("Correlation
# coefficient r^2 < 0.9") and perftest then reports zeros. Such a run is
# done again, up to three attempts in all (the BENCH lines say which
# attempt they belong to).
measure() {
	local drv=$1 t=$2 size=$3 iters=$4 qps=$5 prof=$6 name fields cmd header result attempt tag q=()
	name=$drv-$t-$size$([ "$qps" = 1 ] || echo "-q$qps")$([ "$prof" = 0 ] || echo "-prof")
	fields="driver=$drv test=$t size=$size iters=$iters qps=$qps profile=$prof"
	if [ "$up" != 1 ] || [ -e "$ROXE_SHARED/skip-$drv.2" ]; then
		echo "BENCH kind=run side=$side $at run=$name attempt=1 $fields rc=1 status=skipped"
		return
	fi
	[ "$qps" = 1 ] || q=(-q "$qps")
	for attempt in 1 2 3; do
		tag=s$n.$attempt
		port=$((port + 1))
		# -F: do not fail on the guest's missing cpufreq information.
		# TEST_ev: perftest sleeps on CQ events (-e) instead of polling.
		cmd=("ib_${t%_ev}" -d "$dev" "${conn[@]}" -s "$size" -n "$iters" "${q[@]}" -F -p "$port")
		[ "$t" = "${t%_ev}" ] || cmd+=(-e)
		if [ $server = 1 ]; then
			serve "$tag" "$at run=$name attempt=$attempt $fields" "${cmd[@]}"
			[ -e "$ROXE_SHARED/retry-$tag.2" ] || return
			continue
		fi
		client "$tag" "${cmd[@]}" "$ROXE_PEER_IP"
		if [ "$attempt" != 3 ] && grep -q 'Correlation coefficient' "$log"; then
			echo "note: $name: perftest could not calibrate its clock: $(grep -m1 'Correlation coefficient' "$log"); once more"
			say "retry-$tag"
			client_end "$tag"
			continue
		fi
		# With -R the client can reach the server's host before its CM
		# listens: IB CM reject reason 8 (no listener for the service ID),
		# or "Connection refused" from iWARP's TCP (siw). perftest 4.5 then
		# crashes (exit 139); its newer clients retry. So does this, up to
		# twice.
		if [ "$attempt" != 3 ] && [ "$rc" != 0 ] &&
			grep -Eq 'RDMA_CM_EVENT_REJECTED; error: 8\.|ERRNO: Connection refused' "$log"; then
			echo "note: $name: the server's CM did not listen yet ($(grep -Em1 'REJECTED|refused' "$log")); once more"
			say "retry-$tag"
			client_end "$tag"
			continue
		fi
		perftest_row "$log" "$size"
		# rxe and siw are the yardsticks, not what is tested: under TCG
		# siw's ib_read_bw sometimes stalls until the limit and ends in
		# flushed completions (seen in CI and here). A failed run of theirs
		# is done again, up to twice, and says so; a failed roxe run fails.
		# Not when the guests are out of step (no ready), and not after two
		# timed-out attempts in a row: each costs the whole limit.
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then timeouts=$((timeouts + 1)); else timeouts=0; fi
		if [ "$drv" != roxe ] && [ "$attempt" != 3 ] && [ "$noready" = 0 ] &&
			{ [ "$rc" != 0 ] || [ -z "$result" ]; } && [ $timeouts -lt 2 ]; then
			echo "note: $name (exit $rc) failed; once more, as for any run of a driver other than roxe:"
			tail -8 "$log" | sed 's/^/    /'
			say "retry-$tag"
			client_end "$tag"
			continue
		fi
		report "r$round $name$([ "$attempt" = 1 ] || echo " (attempt $attempt)")" \
			"$at run=$name attempt=$attempt $fields" "$header" "$result" "${cmd[@]}" "$ROXE_PEER_IP"
		if [ $timeouts -ge 2 ]; then
			fail "$drv: two attempts in a row timed out; skipping its other runs"
			say "skip-$drv"
		fi
		client_end "$tag"
		return
	done
}

# step_prof DRV TEST SIZE ITERS: measure under perf record in both guests,
# then fold the stacks (perf script, Rust names demangled) while the
# driver's symbols are still loaded.
step_prof() {
	local drv=$1 t=$2 size=$3 iters=$4 data=/tmp/prof-$n.data file pid rc status=ok samples=0
	file=prof-$drv-$t-$size.folded
	if [ "$up" != 1 ] || [ -z "${ROXE_BENCH_PERF:-}" ]; then
		[ -n "${ROXE_BENCH_PERF:-}" ] || fail "prof $drv $t $size: no perf binary (ROXE_BENCH_PERF)"
		echo "BENCH kind=profile side=$side $at driver=$drv test=$t size=$size status=skipped samples=0 file=$file"
		measure "$drv" "$t" "$size" "$iters" 1 1
		return
	fi
	sysctl -qw kernel.perf_event_paranoid=-1 kernel.kptr_restrict=0 2>/dev/null
	# -N: no build-id cache (the guest's home is the host's, read-only).
	"$ROXE_BENCH_PERF" record -a -g -e cpu-clock -F "${ROXE_BENCH_PERF_FREQ:-499}" -N -o "$data" \
		>"$ROXE_OUT/prof-$n-record.log" 2>&1 &
	pid=$!
	wait_for 30 test -s "$data" || echo "note: prof $drv $t $size: perf wrote nothing in 30 s"
	meet "perf-$n" 60 || fail "prof $drv $t $size: the peer never started perf"
	measure "$drv" "$t" "$size" "$iters" 1 1
	kill -INT "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
	# perf record ends by raising the SIGINT it handled once its data is
	# written: 130 is its normal end here.
	if [ $rc != 0 ] && [ $rc != 130 ]; then
		status=failed
		fail "prof $drv $t $size: perf record failed (exit $rc): $(tail -3 "$ROXE_OUT/prof-$n-record.log" | tr '\n' ' ')"
	elif ! "$ROXE_BENCH_PERF" script -i "$data" 2>"$ROXE_OUT/prof-$n-script.log" |
		${ROXE_BENCH_DEMANGLE:-cat} | "$ROXE_BENCH_COLLAPSE" --all >"$ROXE_OUT/$file"; then
		status=failed
		fail "prof $drv $t $size: perf script or inferno-collapse-perf failed: $(tail -3 "$ROXE_OUT/prof-$n-script.log" | tr '\n' ' ')"
	else
		# perf record's own count; the folded stacks are weighted by
		# cpu-clock's period in nanoseconds.
		samples=$(sed -n 's/.*(\([0-9]*\) samples).*/\1/p' "$ROXE_OUT/prof-$n-record.log" | tail -1)
		if [ -s "$ROXE_OUT/$file" ]; then pass "prof $drv $t $size: ${samples:-?} samples, folded into $file"
		else status=failed; fail "prof $drv $t $size: no stacks came out of perf script"; fi
	fi
	rm -f "$data"
	echo "BENCH kind=profile side=$side $at driver=$drv test=$t size=$size status=$status samples=${samples:-0} file=$file"
}

echo "bench: role $ROXE_ROLE ($side), $cpus vCPUs, plan $plan, limit $limit s per run"
meet start 180 || fail "the peer never started"

n=0 round=0 mtu=$(cat "/sys/class/net/$ROXE_IF/mtu") mtu_ok=1 up=0 timeouts=0 dev="" conn=()
# The plan comes in on descriptor 3, so that nothing a step runs can
# read it.
while read -r op a1 a2 a3 a4 a5 _ <&3; do
	n=$((n + 1))
	t0=${EPOCHREALTIME/./}
	# The fields every BENCH line of this step carries.
	at="step=$n round=$round mtu=$mtu cpus=$cpus"
	case "$op" in
	''|'#'*) ;;
	round) round=$a1; echo "== round $round" ;;
	mtu) step_mtu "$a1" ;;
	tcp) step_tcp "$a1" ;;
	up) timeouts=0; step_up "$a1" ;;
	down) step_down "$a1" ;;
	bw) measure "$a1" "$a2" "$a3" "$a4" "$a5" 0 ;;
	lat) measure "$a1" "$a2" "$a3" "$a4" 1 0 ;;
	prof) step_prof "$a1" "$a2" "$a3" "$a4" ;;
	*) fail "plan line $n: unknown step '$op'" ;;
	esac
	# Where the time goes: every step's length, in the log.
	[ "$op" = round ] || printf 'time: step %d (%s %s %s %s): %d ms\n' "$n" "$op" "$a1" "$a2" "$a3" \
		$(((${EPOCHREALTIME/./} - t0) / 1000))
done 3<"$plan"

meet "done" 120 || fail "the peer did not finish"
finish
