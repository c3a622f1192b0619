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
check "rdma link delete roxe0" rdma link delete roxe0
check "rmmod roxe" rmmod roxe
roxe_cleanup
finish
