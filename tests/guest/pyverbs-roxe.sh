# pyverbs on roxe alone; tests/vm-tests runs this and pyverbs-rxe.sh in two
# guests at once and compares their logs on the host.
PYVERBS_DRIVERS=roxe
. "$ROXE_ROOT/tests/guest/pyverbs.sh"
