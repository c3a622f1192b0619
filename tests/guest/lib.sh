# Helpers for guest test scripts. Source it: . "$ROXE_ROOT/tests/guest/lib.sh"
# Every check prints one line, PASS or FAIL, and failures are counted;
# call `finish` at the end to exit with the result.

ROXE_FAILS=0
ROXE_CHECKS=0

pass() { ROXE_CHECKS=$((ROXE_CHECKS + 1)); echo "PASS: $*"; }
fail() { ROXE_CHECKS=$((ROXE_CHECKS + 1)); ROXE_FAILS=$((ROXE_FAILS + 1)); echo "FAIL: $*"; }

# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
	local what=$1; shift
	if "$@" >/tmp/check.out 2>&1; then pass "$what"; else
		fail "$what (exit $?): $*"; sed 's/^/    /' /tmp/check.out | head -20
	fi
}

# check_fails DESCRIPTION COMMAND...: passes when the command fails.
check_fails() {
	local what=$1; shift
	if "$@" >/tmp/check.out 2>&1; then
		fail "$what: expected failure but succeeded: $*"; sed 's/^/    /' /tmp/check.out | head -20
	else pass "$what"; fi
}

# check_output DESCRIPTION REGEX COMMAND...: the output must match REGEX.
check_output() {
	local what=$1 re=$2; shift 2
	if "$@" >/tmp/check.out 2>&1 && grep -Eq -- "$re" /tmp/check.out; then pass "$what"; else
		fail "$what: output of '$*' does not match /$re/"; sed 's/^/    /' /tmp/check.out | head -30
	fi
}

# wait_for SECONDS COMMAND...: retry until the command succeeds.
wait_for() {
	local t=$1; shift
	local end=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.2
	done
}

# stop_job PID: stop a command started in the background as `func ARGS &`
# (the `bounded` wrappers) and wait for all of it. $! is then a subshell
# whose child is timeout and whose grandchild is the command: killing the
# subshell alone would leave both running, orphaned. timeout passes the
# TERM on to the command and exits when it has.
stop_job() {
	pkill -TERM -P "$1" 2>/dev/null
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# Two-guest rendezvous through the shared directory.
# roxe_signal NAME: tell the peer we reached NAME.
roxe_signal() { touch "$ROXE_SHARED/$1.$ROXE_ROLE"; }
# roxe_wait NAME [SECONDS]: wait until the peer reached NAME.
roxe_wait() {
	local peer=$((((ROXE_ROLE - 1) ^ 1) + 1))
	wait_for "${2:-120}" test -e "$ROXE_SHARED/$1.$peer"
}
# roxe_wait_all NAME [SECONDS]: wait until every guest reached NAME.
roxe_wait_all() {
	local g
	for g in $(seq 1 "${ROXE_PEERS:-1}"); do
		wait_for "${2:-120}" test -e "$ROXE_SHARED/$1.$g" || return 1
	done
}

# gid_index_v4 DEV [IP]: print the index of DEV's port 1 RoCE v2 GID that
# holds IP (default $ROXE_LOCAL_IP) as an IPv4-mapped address; fail if
# there is none yet (the core adds GIDs a moment after the device appears).
gid_index_v4() {
	local port=/sys/class/infiniband/$1/ports/1 a b c d want f n
	IFS=. read -r a b c d <<<"${2:-$ROXE_LOCAL_IP}"
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
	for f in "$port"/gids/*; do
		n=${f##*/}
		if [ "$(cat "$f" 2>/dev/null)" = "$want" ] &&
			[ "$(cat "$port/gid_attrs/types/$n" 2>/dev/null)" = "RoCE v2" ]; then
			echo "$n"
			return 0
		fi
	done
	return 1
}

# counters_save DEV FILE: DEV's port counters (roxe's or rxe's), as
# `rdma statistic` shows them, into FILE.
counters_save() { rdma statistic show link "$1/1" | tr ' ' '\n' >"$2"; }

# counters_moved DEV FILE: one indented line of the counters of DEV that
# moved since counters_save wrote FILE, as NAME=DELTA.
counters_moved() {
	counters_save "$1" "$2.now"
	python3 -c '
import sys
def kv(f):
    x = open(f).read().split()
    return {x[i]: int(x[i + 1]) for i in range(len(x) - 1) if x[i + 1].isdigit()}
b, a = kv(sys.argv[1]), kv(sys.argv[2])
print("    " + " ".join(f"{k}={v - b.get(k, 0)}" for k, v in a.items() if v != b.get(k, 0)))' "$2" "$2.now"
}

# nic_save FILE / nic_moved FILE: the NIC's own statistics (ethtool -S
# $ROXE_IF: virtio's queue kicks, packets, drops), saved and then printed
# as NAME=DELTA for those that moved.
nic_save() { ethtool -S "$ROXE_IF" 2>/dev/null | tr -d ' ' | tr ':' ' ' >"$1"; }
nic_moved() {
	nic_save "$1.now"
	python3 -c '
import sys
def kv(f):
    return {k: int(v) for k, v in (l.split() for l in open(f) if len(l.split()) == 2 and l.split()[1].isdigit())}
b, a = kv(sys.argv[1]), kv(sys.argv[2])
print("    nic: " + " ".join(f"{k}={v - b.get(k, 0)}" for k, v in a.items() if v != b.get(k, 0)))' "$1" "$1.now"
}

# repeat_runs RUNS DEV: the loop of the two-guest diagnostics (read-loop.sh,
# pp-loop.sh, bw-probe.sh). Run I listens on port 19000+I: role 1 runs `serve PORT I` in
# the background, and role 2 then runs `connect PORT I`, whose output is in
# /tmp/run.log and the lines it prints show the verdict. After each run both
# sides print the run's summary (`summary I`: lines from
# /tmp/run.log), DEV's counters and the NIC's statistics that moved. A file `stop` in the shared
# folder ends the loop on both sides.
repeat_runs() {
	local i port pid
	for i in $(seq 1 "$1"); do
		[ -e "$ROXE_SHARED/stop" ] && break
		port=$((19000 + i))
		counters_save "$2" /tmp/before
		nic_save /tmp/nic-before
		if [ "$ROXE_ROLE" = 1 ]; then
			serve "$port" "$i" >/tmp/run.log 2>&1 &
			pid=$!
			sleep 1
			roxe_signal "ready$i"
			wait "$pid"
			echo "run $i server: exit $?"
		else
			roxe_wait "ready$i" 120
			connect "$port" "$i"
		fi
		summary "$i" | sed 's/^/    /'
		# The counters that moved: NAME=DELTA.
		counters_moved "$2" /tmp/before
		nic_moved /tmp/nic-before
		roxe_signal "done$i"
		roxe_wait "done$i" 180
	done
}

# Remove every roxe link, then the module, whatever state a test left.
roxe_cleanup() {
	local d
	for d in $(rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1 | sort -u); do
		[ -e "/sys/class/infiniband/$d/roxe_abi_version" ] && rdma link delete "$d" 2>/dev/null
	done
	lsmod | grep -q '^roxe ' && rmmod roxe
	return 0
}

finish() {
	echo "checks: $ROXE_CHECKS, failed: $ROXE_FAILS"
	[ "$ROXE_FAILS" = 0 ]
	exit $?
}

# nvme_dev: the block device of the first NVMe namespace (nvmeof.sh and
# nvmeof-multi.sh; the guests have no other NVMe device).
nvme_dev() {
	local b
	for b in /sys/block/nvme*n1; do
		[ -e "$b" ] && { echo "/dev/${b##*/}"; return 0; }
	done
	return 1
}
