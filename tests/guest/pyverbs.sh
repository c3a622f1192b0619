# rdma-core's pyverbs suite (from python3-pyverbs) against rxe and roxe on
# the same guest and netdev, with a per-test comparison table.
#
# ROXE_PYVERBS_MODULES overrides the modules run (default: the resource
# modules of issue 3). The verdict comes from tests/pyverbs-compare: every
# test that passes on rxe must pass on roxe, unless tests/pyverbs-known.txt
# lists it with a reason.
. "$ROXE_ROOT/tests/guest/lib.sh"
modules=${ROXE_PYVERBS_MODULES:-test_device test_pd test_cq test_cq_events test_cqex test_mr test_shared_pd test_qp}
work=$(mktemp -d /tmp/pyverbs.XXXX)
cp -r /usr/share/doc/rdma-core/tests "$work/tests"
gunzip -q "$work"/tests/*.gz

check "load rxe" modprobe rdma_rxe
check "rxe0 on $ROXE_IF" rdma link add rxe0 type rxe netdev "$ROXE_IF"
check "roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
# Let the GID tables fill from the netdev's addresses.
wait_for 10 sh -c "ibv_devinfo -v -d roxe0 | grep -q '::ffff:$ROXE_LOCAL_IP'"

for dev in rxe0 roxe0; do
	names=""
	for m in $modules; do names="$names tests.$m"; done
	(cd "$work" && timeout 900 python3 tests/run_tests.py --dev "$dev" -v $names) \
		>"$ROXE_OUT/pyverbs-$dev.log" 2>&1
	echo "pyverbs on $dev: exit $? ($(grep -Ec '\.\.\. ' "$ROXE_OUT/pyverbs-$dev.log") tests)"
done
check "roxe passes every pyverbs test rxe passes, or the difference is listed" \
	python3 "$ROXE_ROOT/tests/pyverbs-compare" "$ROXE_OUT/pyverbs-rxe0.log" "$ROXE_OUT/pyverbs-roxe0.log" \
	"$ROXE_ROOT/tests/pyverbs-known.txt" "$ROXE_OUT/pyverbs-table.md"
cat "$ROXE_OUT/pyverbs-table.md"
rdma link delete rxe0
roxe_cleanup
rmmod rdma_rxe
finish
