# Raw packet QPs and flow steering (issue 17), in one guest: roxe0 on one
# end of a veth pair, the far host in network namespace $NS on the other
# (as packets.sh sets it up). tests/guest/raw-qp.py sends whole frames
# from raw QPs and steers frames to them with flows, byte for byte, and
# checks what must be refused. rxe and siw have no raw packet QPs.
. "$ROXE_ROOT/tests/guest/lib.sh"
IB=/sys/class/infiniband/roxe0
NS=roxe-raw DEV_IP=192.0.2.129 PEER_IP=192.0.2.130

ip netns del $NS 2>/dev/null
check "veth pair roxe-v0 / roxe-v1 (in netns $NS)" \
	sh -c "ip netns add $NS && ip link add roxe-v0 type veth peer name roxe-v1 netns $NS &&
		ip addr add $DEV_IP/25 dev roxe-v0 && ip link set roxe-v0 up &&
		ip -n $NS addr add $PEER_IP/25 dev roxe-v1 && ip -n $NS link set roxe-v1 up &&
		ip -n $NS link set lo up"
check "rdma link add roxe0 on roxe-v0" rdma link add roxe0 type roxe netdev roxe-v0
wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
check "the peer answers ping across the veth" ping -c 1 -W 5 $PEER_IP
log=$ROXE_OUT/raw-qp.log
if timeout -k 5 240 python3 "$ROXE_ROOT/tests/guest/raw-qp.py" --dev roxe0 --ifname roxe-v0 \
	--ip $DEV_IP --netns $NS --peer-if roxe-v1 --peer-ip $PEER_IP >"$log" 2>&1; then
	pass "raw-qp.py: $(tail -1 "$log")"
else
	fail "raw-qp.py exited $?: $(tail -1 "$log")"
fi
sed 's/^/    /' "$log"
check "rdma link delete roxe0" rdma link delete roxe0
check "rmmod roxe" rmmod roxe
check "delete netns $NS (and the veth pair)" ip netns del $NS
roxe_cleanup
finish
