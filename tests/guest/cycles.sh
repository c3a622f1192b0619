# 50 link add/delete cycles and 20 modprobe/rmmod cycles, each verified.
. "$ROXE_ROOT/tests/guest/lib.sh"
modprobe roxe || { fail "modprobe roxe"; finish; }
bad=0
for i in $(seq 1 50); do
	rdma link add roxe0 type roxe netdev "$ROXE_IF" || { bad=$((bad + 1)); continue; }
	test -e /sys/class/infiniband/roxe0/ports/1/state || bad=$((bad + 1))
	rdma link delete roxe0 || bad=$((bad + 1))
	test -e /sys/class/infiniband/roxe0 && bad=$((bad + 1))
done
[ $bad = 0 ] && pass "50 link add/delete cycles" || fail "link add/delete cycles: $bad errors"

bad=0
for i in $(seq 1 20); do
	lsmod | grep -q '^roxe ' || modprobe roxe || { bad=$((bad + 1)); continue; }
	# Every other cycle leaves a device for rmmod to tear down.
	if [ $((i % 2)) = 0 ]; then rdma link add roxe0 type roxe netdev "$ROXE_IF" || bad=$((bad + 1)); fi
	rmmod roxe || bad=$((bad + 1))
	grep -q '^roxe ' /proc/modules && bad=$((bad + 1))
	test -e /sys/class/infiniband/roxe0 && bad=$((bad + 1))
done
[ $bad = 0 ] && pass "20 modprobe/rmmod cycles" || fail "modprobe/rmmod cycles: $bad errors"
roxe_cleanup
finish
