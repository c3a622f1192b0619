# traffic.sh between roxe and rxe: the guest with role 1 (the servers) uses
# roxe, the guest with role 2 (the clients) uses rxe. Both guests run this.
export ROXE_TRAFFIC_DRV1=roxe ROXE_TRAFFIC_DRV2=rxe

. "$ROXE_ROOT/tests/guest/traffic.sh"
