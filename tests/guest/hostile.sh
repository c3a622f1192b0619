# Hostile user space against roxe: tests/hostile/ (roxe-hostile) speaks the
# uverbs write() commands directly, maps the rings and attacks them. Build it
# on the host first:
#   cargo build --release --locked --manifest-path tests/hostile/Cargo.toml
# ROXE_HOSTILE_SEED (default 1) and ROXE_HOSTILE_ARGS (default: all) choose
# the run; the seed makes it repeatable. scripts/vm does not pass the host's
# environment, so set them in a wrapper script that sources this one.
# The rig checks dmesg for oopses, WARNs and leaks afterwards.
. "$ROXE_ROOT/tests/guest/lib.sh"
HOSTILE=$ROXE_ROOT/tests/hostile/target/release/roxe-hostile
seed=${ROXE_HOSTILE_SEED:-1}

check "roxe-hostile is built" test -x "$HOSTILE"
check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 test -e /sys/class/infiniband/roxe0/ports/1/gids/0

uverbs=""
for d in /sys/class/infiniband_verbs/uverbs*; do
	[ "$(cat "$d/ibdev" 2>/dev/null)" = roxe0 ] && uverbs=/dev/infiniband/$(basename "$d")
done
check "roxe0 has a uverbs device ($uverbs)" test -c "$uverbs"

# The program prints its own PASS/FAIL lines; this check is its exit status.
echo "roxe-hostile seed: $seed"
if timeout 300 "$HOSTILE" --dev "$uverbs" --seed "$seed" ${ROXE_HOSTILE_ARGS:-all} >"$ROXE_OUT/hostile.log" 2>&1; then
	pass "roxe-hostile: $(tail -1 "$ROXE_OUT/hostile.log")"
else
	fail "roxe-hostile exited $? (seed $seed): $(tail -1 "$ROXE_OUT/hostile.log")"
fi
sed 's/^/    /' "$ROXE_OUT/hostile.log"

check "the device is still usable: ibv_devinfo" ibv_devinfo -d roxe0

# Issue 13, finding 8: a kernel consumer whose completion handler polls its
# CQ, re-arms it and posts to the same QP (tests/kmod/roxe_polltest.c, built
# by `make module`). Its load fails unless 300 loopback round trips went
# through. A driver that runs the handler under its own locks deadlocks
# here (the guest hangs and the rig's timeout fails the run) or lockdep
# reports it.
POLLTEST=$ROXE_ROOT/tests/kmod/roxe_polltest.ko
check "roxe_polltest.ko is built" test -f "$POLLTEST"
check "a completion handler that polls and posts from inside: roxe_polltest" \
	timeout 120 insmod "$POLLTEST" dev=roxe0 rounds=300
polltest_passed() { dmesg | grep "roxe_polltest: PASS 300 round trips"; }
check "roxe_polltest reported its round trips" polltest_passed
check "rmmod roxe_polltest" rmmod roxe_polltest
check "rdma link delete roxe0" rdma link delete roxe0

# roxe logs "still accounted" when a device goes with a budget or the GSI
# slot still taken: a leak (the qp-fault scenario fails QP creations after
# their QP number was taken).
no_leak() { ! dmesg | grep "still accounted"; }
check "roxe0 went with nothing still accounted" no_leak

# The GSI QP (QP1) fails the same way: the MAD layer creates it when the
# device is added, so make that creation fail; the device comes up without
# MADs, and must go again with the GSI slot given back.
knob=/sys/module/roxe/parameters/fail_qp_table
check "the fail_qp_table knob exists" test -w $knob
echo 1 >$knob
check "rdma link add roxe0 with QP1's creation failing" rdma link add roxe0 type roxe netdev "$ROXE_IF"
knob_fired() { [ "$(cat $knob)" = 0 ]; }
check "QP1's creation took the injected failure" knob_fired
echo 0 >$knob
check "rdma link delete roxe0 (no QP1)" rdma link delete roxe0
check "roxe0 without QP1 went with nothing still accounted" no_leak

check "rmmod roxe" rmmod roxe
roxe_cleanup
finish
