# RDMA FLUSH from roxe to rxe: the guest with role 1 runs rxe and
# flush-peer.py (the responder's QPs and MRs, and the check of its memory
# and QP states); the guest with role 2 runs roxe and roxe-hostile's
# flush-peer scenario (the requester). Both guests run this. They exchange
# files in $ROXE_SHARED/flush. Build roxe-hostile on the host first (make
# hostile); the rig checks both guests' dmesg afterwards.
#
# The other direction, rxe requesting, needs ibv_wr_flush, which
# libibverbs 44 does not have; see README.
. "$ROXE_ROOT/tests/guest/lib.sh"
HOSTILE=$ROXE_ROOT/tests/hostile/target/release/roxe-hostile
dir=$ROXE_SHARED/flush
mkdir -p "$dir"

if [ "$ROXE_ROLE" = 1 ]; then
	dev=rxe0
	check "load rdma_rxe" modprobe rdma_rxe
	check "rdma link add rxe0 on $ROXE_IF" rdma link add rxe0 type rxe netdev "$ROXE_IF"
else
	dev=roxe0
	check "roxe-hostile is built" test -x "$HOSTILE"
	check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
fi
wait_for 10 gid_index_v4 "$dev"
gidx=$(gid_index_v4 "$dev")
if [ -n "$gidx" ]; then pass "the RoCE v2 GID for $ROXE_LOCAL_IP is index $gidx"; else
	fail "$dev has no RoCE v2 GID for $ROXE_LOCAL_IP"
fi

if [ -z "$gidx" ]; then
	# The peer waits for files that will not come; its own timeouts end it.
	:
elif [ "$ROXE_ROLE" = 1 ]; then
	if timeout 400 python3 "$ROXE_ROOT/tests/guest/flush-peer.py" --dev rxe0 --gid-index "$gidx" \
		--dir "$dir" >"$ROXE_OUT/flush-peer.log" 2>&1; then
		pass "flush-peer.py: $(tail -1 "$ROXE_OUT/flush-peer.log")"
	else
		fail "flush-peer.py exited $?: $(tail -1 "$ROXE_OUT/flush-peer.log")"
	fi
	sed 's/^/    /' "$ROXE_OUT/flush-peer.log"
else
	uverbs=""
	for d in /sys/class/infiniband_verbs/uverbs*; do
		[ "$(cat "$d/ibdev" 2>/dev/null)" = roxe0 ] && uverbs=/dev/infiniband/$(basename "$d")
	done
	check "roxe0 has a uverbs device ($uverbs)" test -c "$uverbs"
	if timeout 400 "$HOSTILE" --dev "$uverbs" --gid-index "$gidx" --peer-dir "$dir" flush-peer \
		>"$ROXE_OUT/flush-roxe.log" 2>&1; then
		pass "roxe-hostile flush-peer: $(tail -1 "$ROXE_OUT/flush-roxe.log")"
	else
		fail "roxe-hostile flush-peer exited $?: $(tail -1 "$ROXE_OUT/flush-roxe.log")"
	fi
	sed 's/^/    /' "$ROXE_OUT/flush-roxe.log"
	# rxe (Linux 6.12) drops a FLUSH with the standard ICRC and wants one of
	# its own; roxe switches after a timeout (Documentation/datapath.md).
	n=$(cat /sys/class/infiniband/roxe0/ports/1/hw_counters/tx_flush_icrc_rxe 2>/dev/null)
	if [ "${n:-0}" -gt 0 ]; then pass "roxe sent $n FLUSH packets with rxe's ICRC"; else
		fail "roxe sent no FLUSH with rxe's ICRC (tx_flush_icrc_rxe: ${n:-missing})"
	fi
fi

# Neither side tears down while the other may still use its QPs.
roxe_signal done
if roxe_wait done 420; then pass "the peer finished"; else fail "the peer did not finish"; fi
if [ "$ROXE_ROLE" = 1 ]; then
	check "remove rxe0" rdma link delete rxe0
	check "unload rdma_rxe" rmmod rdma_rxe
else
	check "rdma link delete roxe0" rdma link delete roxe0
	check "rmmod roxe" rmmod roxe
fi
roxe_cleanup
finish
