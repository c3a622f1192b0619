# pyverbs on rxe alone; tests/vm-tests runs this and pyverbs-roxe.sh in two
# guests at once and compares their logs on the host.
PYVERBS_DRIVERS=rxe
. "$ROXE_ROOT/tests/guest/pyverbs.sh"
