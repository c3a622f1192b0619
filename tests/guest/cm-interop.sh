# cm.sh between rxe and roxe: the guest with role 1 (the CM servers, and
# the first multicast receiver) uses rxe, the guest with role 2 uses roxe.
# Both guests run this.
export ROXE_CM_DRV1=rxe ROXE_CM_DRV2=roxe
. "$ROXE_ROOT/tests/guest/cm.sh"
