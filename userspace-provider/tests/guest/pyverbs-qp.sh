# rdma-core's pyverbs QP tests (tests.test_qp) on rxe and roxe, through the
# project's comparison harness (tests/guest/pyverbs.sh):
#
#   scripts/vm userspace-provider/tests/guest/pyverbs-qp.sh
ROXE_PYVERBS_MODULES=${ROXE_PYVERBS_MODULES:-test_qp}
. "$ROXE_ROOT/tests/guest/pyverbs.sh"
