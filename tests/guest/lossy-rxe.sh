# 1% loss between rxe (role 1, the servers) and roxe (role 2).
export ROXE_LOSSY_RXE=1
. "$ROXE_ROOT/tests/guest/lossy.sh"
