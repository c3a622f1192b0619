# Open MPI over UCX over roxe across the guests of one shared segment
# (issue 18): scripts/vm --peers 4 --scenario mpi:...:tests/guest/mpi.sh.
#
# Each guest makes roxe0 (MPI_DEV=rxe runs the same over rxe0) and serves
# mpi-rsh, the shared-folder remote shell mpirun starts its daemons with.
# Guest 1 builds tests/mpi/collectives.c and runs it with one rank per
# guest: point-to-point around the ring, broadcast, allreduce and alltoall,
# every result checked, the time per call printed. The data path is UCX's
# RC and UD verbs transports on the RDMA device only: pml ucx (the job
# fails if UCX cannot start), btl self (no TCP or shared-memory BTL), and
# UCX_TLS without tcp; each guest's RDMA byte counters must have moved by
# at least what its rank sent. (mpirun's own control connections to its
# daemons are TCP, as with ssh.)
. "$ROXE_ROOT/tests/guest/lib.sh"
kind=${MPI_DEV:-roxe}
dev=${kind}0
n=${ROXE_PEERS:-1}
me=$ROXE_ROLE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# mpi_agent: run what mpi-rsh queues for this guest until told to stop.
mpi_agent() {
	local d=$ROXE_SHARED/rsh/$ROXE_LOCAL_IP f id
	mkdir -p "$d"
	while [ ! -e "$ROXE_SHARED/rsh/stop" ]; do
		for f in "$d"/*.cmd; do
			[ -e "$f" ] || continue
			id=${f%.cmd}
			mv "$f" "$id.run"
			(
				sh "$id.run" >"$id.out" 2>&1
				echo $? >"$id.rc.tmp"
				mv "$id.rc.tmp" "$id.rc"
			) &
		done
		sleep 0.2
	done
}

if [ "$kind" = roxe ]; then
	check "modprobe roxe" modprobe roxe
	check "rdma link add $dev" rdma link add $dev type roxe netdev "$ROXE_IF"
else
	check "modprobe rdma_rxe" modprobe rdma_rxe
	check "rdma link add $dev" rdma link add $dev type rxe netdev "$ROXE_IF"
fi
wait_for 10 gid_index_v4 $dev
check "$dev has its RoCE v2 GID" gid_index_v4 $dev
mpi_agent &
agent=$!
counters_save $dev /tmp/mpi-before

if [ "$me" = 1 ]; then
	check "ucx_info -d lists $dev:1 with rc_verbs and ud_verbs" sh -c \
		"ucx_info -d | grep -A2 'Transport: rc_verbs' | grep -q 'Device: $dev:1' &&
		 ucx_info -d | grep -A2 'Transport: ud_verbs' | grep -q 'Device: $dev:1'"
	check "mpicc builds collectives.c" mpicc -O2 -o "$ROXE_SHARED/collectives" \
		"$ROXE_ROOT/tests/mpi/collectives.c"
fi
roxe_signal up
roxe_wait_all up 600 || fail "not every guest came up"

# Over rxe, UCX's UD transport drops every datagram without this
# (Documentation/verbs.md, "UCX").
rxe_env=
[ "$kind" = roxe ] || rxe_env="-x UCX_UD_VERBS_ETH_DGID_CHECK=n"
if [ "$me" = 1 ]; then
	hosts=$(for g in $(seq 1 "$n"); do printf '192.0.2.%s:1,' "$g"; done)
	hosts=${hosts%,}
	t=$SECONDS
	# UCX's RC and UD verbs on the device only; no TCP or shared memory.
	# shellcheck disable=SC2086 # MPI_EXTRA: more mpirun options, for debugging
	timeout -k 10 "${MPI_LIMIT:-900}" mpirun -np "$n" --host "$hosts" ${MPI_EXTRA:-} \
		--mca plm_rsh_agent "$ROXE_ROOT/tests/guest/mpi-rsh" \
		--mca oob_tcp_if_include 192.0.2.0/24 \
		--mca pml ucx --mca btl self --mca osc ucx --mca coll ^hcoll \
		-x UCX_NET_DEVICES=$dev:1 -x UCX_TLS=rc_verbs,ud_verbs -x UCX_WARN_UNUSED_ENV_VARS=n $rxe_env \
		"$ROXE_SHARED/collectives" "${MPI_ROUNDS:-5}" >"$ROXE_OUT/mpi.log" 2>&1
	rc=$?
	# Each operation's line (and the summary); the rest is in mpi.log.
	grep -E '^(mpi:|[a-z]+ +(ok|FAILED) )' "$ROXE_OUT/mpi.log" | sed 's/^/    /'
	[ $rc = 0 ] || tail -n 20 "$ROXE_OUT/mpi.log" | sed 's/^/    /'
	if [ $rc = 0 ] && grep -q "operations, 0 failed" "$ROXE_OUT/mpi.log"; then
		pass "MPI over UCX over $dev: $n ranks, every result right ($((SECONDS - t)) s)"
	else
		fail "MPI over UCX over $dev (exit $rc)"
	fi
	touch "$ROXE_SHARED/rsh/stop"
	roxe_signal mpi-done
else
	wait_for 1200 test -e "$ROXE_SHARED/mpi-done.1" || fail "guest 1 never finished the MPI run"
fi
# Each rank sent at least 8 MiB through the device (its alltoall blocks
# alone are 3 x 20 x 512 KiB).
counters_save $dev /tmp/mpi-after
sent=$(python3 -c '
import sys
def kv(f):
    x = open(f).read().split()
    return {x[i]: int(x[i + 1]) for i in range(len(x) - 1) if x[i + 1].isdigit()}
print(kv(sys.argv[2]).get("tx_bytes", 0) - kv(sys.argv[1]).get("tx_bytes", 0))' /tmp/mpi-before /tmp/mpi-after)
if [ "$kind" = roxe ]; then
	[ "$sent" -ge $((8 << 20)) ] && pass "guest $me's MPI data went through $dev ($sent bytes sent)" ||
		fail "guest $me sent only $sent bytes through $dev"
fi
kill "$agent" 2>/dev/null
wait "$agent" 2>/dev/null
roxe_signal finished
roxe_wait_all finished 300
check "rdma link delete $dev" rdma link delete $dev
finish
