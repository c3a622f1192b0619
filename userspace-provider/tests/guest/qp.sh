# libroxe QPs, SRQs and MWs in a guest (run with scripts/vm):
#
#   cargo build --release --locked --manifest-path userspace-provider/Cargo.toml
#   scripts/vm userspace-provider/tests/guest/qp.sh
#
# qp_flush.py drives RC and UD QPs, with and without an SRQ, through
# pyverbs: RESET -> INIT -> RTR -> RTS, receives and sends into the mapped
# rings, the provider's limits, then ERR, where every posted work request
# must come back as a flush completion with its wr_id. Then
# ibv_rc_pingpong must get past resource creation (CQ, QP, INIT, 500
# receives) and wait for its peer.
. "$ROXE_ROOT/tests/guest/lib.sh"
HERE=$ROXE_ROOT/userspace-provider/tests/guest

check "rdma link add roxe0" rdma link add roxe0 type roxe netdev "$ROXE_IF"
ip4_gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' 192 0 2 "$ROXE_ROLE")
wait_for 10 grep -q "$ip4_gid" /sys/class/infiniband/roxe0/ports/1/gids/* 2>/dev/null
for i in 0 1 2 3; do
	echo "GID[$i] $(cat /sys/class/infiniband/roxe0/ports/1/gids/$i 2>/dev/null)" \
		"$(cat /sys/class/infiniband/roxe0/ports/1/gid_attrs/types/$i 2>/dev/null)"
done

if python3 "$HERE/qp_flush.py" roxe0 >/tmp/qp_flush.log 2>&1; then
	pass "qp_flush.py: $(tail -1 /tmp/qp_flush.log)"
else
	fail "qp_flush.py (exit $?): $(tail -1 /tmp/qp_flush.log)"
fi
sed 's/^/    /' /tmp/qp_flush.log

# ibv_rc_pingpong as a server: it creates its resources, moves the QP to
# INIT, posts 500 receives, prints its address and waits for a peer
# (line-buffered, so that the address is in the log before the kill).
stdbuf -oL ibv_rc_pingpong -d roxe0 -g 1 >/tmp/pp.log 2>&1 &
pp=$!
wait_for 20 grep -q "local address" /tmp/pp.log
sleep 3
if kill -0 $pp 2>/dev/null; then
	pass "ibv_rc_pingpong is still running, waiting for its peer"
	kill $pp
else
	fail "ibv_rc_pingpong exited early"
fi
wait $pp 2>/dev/null
sed 's/^/    /' /tmp/pp.log
check_output "ibv_rc_pingpong got past resource creation" "local address: +LID 0x0000, QPN 0x[0-9a-f]+" cat /tmp/pp.log
check_fails "ibv_rc_pingpong printed no creation or post errors" \
	grep -Eq "Couldn't (create|post|allocate|register|get)|Failed to modify" /tmp/pp.log

check "rdma link delete roxe0" rdma link delete roxe0
roxe_cleanup
finish
