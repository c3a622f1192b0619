# traffic.sh between rxe and roxe: the guest with role 1 (the servers) uses
# rxe, the guest with role 2 (the clients) uses roxe. Both guests run this.
export ROXE_TRAFFIC_DRV1=rxe ROXE_TRAFFIC_DRV2=roxe
. "$ROXE_ROOT/tests/guest/traffic.sh"
