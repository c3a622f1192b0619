# The benchmark's guest side (scripts/bench runs it on two guests; see
# Documentation/bench.md). Both guests run this script: role 1 serves, role 2
# connects. It measures, in this order:
#
#   - iperf3 TCP between the guests, the link reference;
#   - for each driver in ROXE_BENCH_DRIVERS, one at a time (rxe and roxe both
#     bind UDP port 4791, so each is loaded, measured and unloaded before the
#     next): perftest bandwidth tests at each size, then latency tests.
#
# siw is iWARP and needs the RDMA CM, so its perftest runs use -R; rxe and
# roxe exchange QP numbers over perftest's TCP socket and name their RoCE v2
# GID with -x, as tests/guest/traffic.sh does.
#
# Around every run each guest reads the busy jiffies of /proc/stat (the
# client from just before it starts until it exits, the server from when it
# listens until it exits), so the host can add up both guests' CPU time.
# Each side prints one line per run:
#
#   BENCH side=client|server run=NAME attempt=N driver=D test=T size=B
#         iters=N rc=RC status=ok|failed|skipped usecs=U busy=J kern=J
#         total=J hz=HZ header="..." result="..."
#
# (the CPU window in microseconds and jiffies; client lines also carry
# perftest's column header and result row, or iperf3's bytes and seconds).
# scripts/bench-report.py turns them into the results.
# Every run is bounded by ROXE_BENCH_RUN_LIMIT seconds; a run that fails
# fails the script, but the other runs still happen. After two timeouts in a
# row a driver's remaining runs are skipped (and so reported missing).
#
# Settings (scripts/bench sets them; these defaults are its full mode):
#   ROXE_BENCH_SIZES      message sizes in bytes for the bandwidth tests
#   ROXE_BENCH_DRIVERS    rxe siw roxe
#   ROXE_BENCH_BW_TESTS   write_bw send_bw read_bw
#   ROXE_BENCH_LAT_TESTS  write_lat send_lat read_lat
#   ROXE_BENCH_ITERS      a fixed iteration count for every bandwidth run;
#                         if unset, BYTES/size within [MIN_ITERS, MAX_ITERS]
#   ROXE_BENCH_BYTES ROXE_BENCH_MIN_ITERS ROXE_BENCH_MAX_ITERS
#   ROXE_BENCH_LAT_ITERS  iterations of each latency run (2-byte messages)
#   ROXE_BENCH_TCP_SECS   length of the iperf3 run
#   ROXE_BENCH_RUN_LIMIT  bound on each run, in seconds
. "$ROXE_ROOT/tests/guest/lib.sh"

sizes=${ROXE_BENCH_SIZES:-64 1024 4096 65536 1048576}
drivers=${ROXE_BENCH_DRIVERS:-rxe siw roxe}
bw_tests=${ROXE_BENCH_BW_TESTS-write_bw send_bw read_bw}
lat_tests=${ROXE_BENCH_LAT_TESTS-write_lat send_lat read_lat}
fixed_iters=${ROXE_BENCH_ITERS:-}
bytes=${ROXE_BENCH_BYTES:-25165824}
min_iters=${ROXE_BENCH_MIN_ITERS:-20}
max_iters=${ROXE_BENCH_MAX_ITERS:-16000}
lat_iters=${ROXE_BENCH_LAT_ITERS:-200}
lat_size=2
tcp_secs=${ROXE_BENCH_TCP_SECS:-10}
limit=${ROXE_BENCH_RUN_LIMIT:-150}
hz=$(getconf CLK_TCK)
port=18700
server=$([ "$ROXE_ROLE" = 1 ] && echo 1 || echo 0)

for v in $sizes $fixed_iters $bytes $min_iters $max_iters $lat_iters $tcp_secs $limit; do
	if ! [[ "$v" =~ ^[0-9]+$ ]] || [ "$v" = 0 ]; then
		fail "bench settings: '$v' is not a positive integer"
		finish
	fi
done

# nap SECONDS: sleep without forking (a read that times out on an idle
# FIFO), so the polling loops cost as little CPU as can be during a run.
mkfifo /tmp/bench-nap
exec 9<>/tmp/bench-nap
nap() { read -rt "$1" -u 9 || true; }

# snap: print this (one-CPU) guest's busy, kernel and total jiffies and the
# time in microseconds. Busy is user + nice + system + irq + softirq +
# steal; kernel is system + irq + softirq.
snap() {
	local _c u n s i w q sq st _rest
	read -r _c u n s i w q sq st _rest </proc/stat
	echo "$((u + n + s + q + sq + st)) $((s + q + sq)) $((u + n + s + i + w + q + sq + st)) ${EPOCHREALTIME//[!0-9]/}"
}

# window BEFORE AFTER: the BENCH fields for the CPU window between two snaps.
window() {
	local b0 k0 a0 t0 b1 k1 a1 t1
	read -r b0 k0 a0 t0 <<<"$1"
	read -r b1 k1 a1 t1 <<<"$2"
	echo "usecs=$((t1 - t0)) busy=$((b1 - b0)) kern=$((k1 - k0)) total=$((a1 - a0)) hz=$hz"
}

# bounded COMMAND...: run COMMAND for at most $limit seconds.
bounded() { timeout -k 5 "$limit" "$@"; }

# server_up PORT PID: a socket listens on TCP PORT, or process PID is gone
# (so there is no point in waiting any longer).
server_up() { ss -Hltn "sport = :$1" | grep -q . || ! kill -0 "$2" 2>/dev/null; }

# serve NAME FIELDS COMMAND...: (role 1) run a server, signal ready-NAME
# once it listens on $port, wait for it to end, print its BENCH line and
# signal sdone-NAME; then wait for the client's cdone-NAME, so that a
# decision to skip the driver's other runs (skip-DRV) is seen in time. If
# the client is done and the server still runs 30 s later, stop it.
serve() {
	local name=$1 fields=$2 pid rc s0 s1 grace=0 log=$ROXE_OUT/$1-server.log; shift 2
	bounded "$@" >"$log" 2>&1 &
	pid=$!
	# Signal even if it never listens: the client then fails fast.
	wait_for 60 server_up "$port" "$pid" || echo "note: $name: nothing listens on port $port after 60 s"
	# The CPU window starts here: the server's own start-up is not counted
	# (the client's is, on the client's side).
	s0=$(snap)
	roxe_signal "ready-$name"
	while kill -0 "$pid" 2>/dev/null; do
		if [ -e "$ROXE_SHARED/cdone-$name.2" ]; then
			grace=$((grace + 1))
			if [ $grace -gt 100 ]; then
				echo "note: $name: the server still ran 30 s after its client ended; stopping it"
				kill "$pid" 2>/dev/null
			fi
		fi
		nap 0.3
	done
	wait "$pid"; rc=$?
	s1=$(snap)
	echo "BENCH side=server $fields rc=$rc status=$([ $rc = 0 ] && echo ok || echo failed) $(window "$s0" "$s1")"
	if [ $rc = 0 ]; then pass "$name server: $*"; else
		fail "$name server (exit $rc): $*"; tail -15 "$log" | sed 's/^/    /'
	fi
	roxe_signal "sdone-$name"
	roxe_wait "cdone-$name" $((limit + 60)) || fail "$name: the client never finished"
}

# client NAME COMMAND...: (role 2) wait for the server's ready-NAME and run
# the client. Sets $rc, $win (the CPU window) and $log. client_end NAME
# then signals cdone-NAME and waits for the server's sdone-NAME.
client() {
	local name=$1 s0 s1; shift
	log=$ROXE_OUT/$name-client.log win=
	if ! roxe_wait "ready-$name" $((limit + 60)); then
		rc=1
		echo "the server never signalled ready-$name" >"$log"
		return
	fi
	s0=$(snap)
	bounded "$@" >"$log" 2>&1
	rc=$?
	s1=$(snap)
	win=$(window "$s0" "$s1")
}
client_end() {
	roxe_signal "cdone-$1"
	roxe_wait "sdone-$1" $((limit + 60)) || fail "$1: the server never finished"
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
	echo "BENCH side=client $fields rc=$rc status=$status $win header=\"$header\" result=\"$result\""
}

# iters_for SIZE: the iteration count of a bandwidth run.
iters_for() {
	local n
	if [ -n "$fixed_iters" ]; then echo "$fixed_iters"; return; fi
	n=$((bytes / $1))
	[ $n -lt "$min_iters" ] && n=$min_iters
	[ $n -gt "$max_iters" ] && n=$max_iters
	echo $n
}

# The link reference: iperf3 TCP, role 2 sends to role 1 for $tcp_secs.
tcp() {
	local name=tcp fields="run=tcp attempt=1 driver=tcp test=tcp size=0 iters=0" got cmd
	port=$((port + 1))
	if [ $server = 1 ]; then
		serve "$name" "$fields" iperf3 -s -1 -p "$port"
		return
	fi
	cmd=(iperf3 -c "$ROXE_PEER_IP" -p "$port" -t "$tcp_secs" -J)
	client "$name" "${cmd[@]}"
	# Bytes and seconds as the receiver counted them.
	got=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["end"]["sum_received"]
print(r["bytes"], r["seconds"])' "$log" 2>/dev/null)
	report "$name" "$fields" "bytes seconds" "$got" "${cmd[@]}"
	client_end "$name"
}

# drv_up DRV: load DRV and create its device on the test NIC; wait for the
# port and, for RoCE, the GID of our IPv4 address. Sets $dev and $conn
# (how perftest connects).
drv_up() {
	local drv=$1 mod
	dev=${drv}0
	case $drv in
	rxe) mod=rdma_rxe ;;
	siw) mod=siw ;;
	roxe) mod=roxe ;;
	*) fail "unknown driver '$drv' in ROXE_BENCH_DRIVERS: use rxe, siw or roxe"; return 1 ;;
	esac
	if ! modprobe "$mod" >/tmp/up.out 2>&1 ||
		! rdma link add "$dev" type "$drv" netdev "$ROXE_IF" >>/tmp/up.out 2>&1; then
		fail "$drv: could not load $mod and create $dev on $ROXE_IF: $(tr '\n' ' ' </tmp/up.out)"
		return 1
	fi
	if ! wait_for 20 grep -q ': ACTIVE$' "/sys/class/infiniband/$dev/ports/1/state"; then
		fail "$dev port 1 is not ACTIVE: $(cat "/sys/class/infiniband/$dev/ports/1/state")"
		return 1
	fi
	if [ "$drv" = siw ]; then
		# iWARP connects through the RDMA CM.
		conn=(-R)
	else
		wait_for 10 gid_index_v4 "$dev"
		gidx=$(gid_index_v4 "$dev") || { fail "$dev has no RoCE v2 GID for $ROXE_LOCAL_IP"; return 1; }
		conn=(-x "$gidx")
	fi
	pass "$dev is up on $ROXE_IF (perftest connects with ${conn[*]})"
}

# drv_down DRV: delete its device and unload its module.
drv_down() {
	case $1 in
	rxe) rdma link delete rxe0 2>/dev/null; check "unload rdma_rxe" rmmod rdma_rxe ;;
	siw) rdma link delete siw0 2>/dev/null; check "unload siw" rmmod siw ;;
	roxe) roxe_cleanup; check_fails "roxe is unloaded" grep -q '^roxe ' /proc/modules ;;
	esac
}

# measure DRV TEST SIZE ITERS: one perftest run on both sides. perftest
# times a run with the TSC, which it calibrates against gettimeofday when it
# starts; under TCG that sometimes fails ("Correlation coefficient r^2 <
# 0.9") and perftest then reports zeros. Such a run is done once more (the
# BENCH lines say which attempt they belong to).
measure() {
	local drv=$1 t=$2 size=$3 iters=$4 name fields cmd header result attempt tag
	name=$drv-$t-$size
	fields="driver=$drv test=$t size=$size iters=$iters"
	if [ -e "$ROXE_SHARED/skip-$drv.2" ]; then
		echo "BENCH side=$side run=$name attempt=1 $fields rc=1 status=skipped"
		return
	fi
	for attempt in 1 2; do
		tag=$name.$attempt
		port=$((port + 1))
		# -F: do not fail on the guest's missing cpufreq information.
		cmd=("ib_$t" -d "$dev" "${conn[@]}" -s "$size" -n "$iters" -F -p "$port")
		if [ $server = 1 ]; then
			serve "$tag" "run=$name attempt=$attempt $fields" "${cmd[@]}"
			[ -e "$ROXE_SHARED/retry-$tag.2" ] || return
			continue
		fi
		client "$tag" "${cmd[@]}" "$ROXE_PEER_IP"
		if [ "$attempt" = 1 ] && grep -q 'Correlation coefficient' "$log"; then
			echo "note: $name: perftest could not calibrate its clock: $(grep -m1 'Correlation coefficient' "$log"); once more"
			roxe_signal "retry-$tag"
			client_end "$tag"
			continue
		fi
		# perftest's column header, and its result row: the one under the
		# header whose first column is the message size.
		header=$(grep -m1 '#bytes' "$log" | tr -s ' \t' ' ' | tr -d '"\\')
		result=$(awk -v s="$size" 'h && $1 == s { print; exit } /#bytes/ { h = 1 }' "$log" |
			tr -s ' \t' ' ' | tr -d '"\\')
		report "$name$([ "$attempt" = 1 ] || echo " (attempt $attempt)")" "run=$name attempt=$attempt $fields" \
			"$header" "$result" "${cmd[@]}" "$ROXE_PEER_IP"
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then timeouts=$((timeouts + 1)); else timeouts=0; fi
		if [ $timeouts -ge 2 ]; then
			fail "$drv: two runs in a row timed out; skipping its other runs"
			roxe_signal "skip-$drv"
		fi
		client_end "$tag"
		return
	done
}

side=$([ $server = 1 ] && echo server || echo client)
echo "bench: role $ROXE_ROLE ($side), drivers: $drivers; sizes: $sizes; limit $limit s per run"
roxe_signal start
roxe_wait start 180 || fail "the peer never started"

tcp

for drv in $drivers; do
	timeouts=0 ok=1
	echo "== $drv"
	drv_up "$drv" || ok=0
	[ $ok = 1 ] && roxe_signal "up-$drv"
	roxe_signal "setup-$drv"
	if ! roxe_wait "setup-$drv" 300; then fail "$drv: the peer never finished setting up"; ok=0
	elif ! roxe_wait "up-$drv" 0; then fail "$drv: the peer could not set up its device"; ok=0; fi
	if [ $ok = 1 ]; then
		for t in $bw_tests; do
			for s in $sizes; do measure "$drv" "$t" "$s" "$(iters_for "$s")"; done
		done
		for t in $lat_tests; do measure "$drv" "$t" "$lat_size" "$lat_iters"; done
	fi
	# Neither side unloads while the other may still be using the device.
	roxe_signal "end-$drv"
	roxe_wait "end-$drv" $((limit + 120)) || fail "$drv: the peer never finished"
	drv_down "$drv"
done

roxe_signal "done"
roxe_wait "done" 120 || fail "the peer did not finish"
finish
