# The demo: create a roxe device on the guest's NIC and show it.
. "$ROXE_ROOT/tests/guest/lib.sh"
set -x
rdma link add roxe0 type roxe netdev "$ROXE_IF"
rdma link show
ibv_devices
ibv_devinfo -v -d roxe0
cat /sys/class/infiniband/roxe0/ports/1/gid_attrs/types/0 /sys/class/infiniband/roxe0/ports/1/gids/0
rdma link delete roxe0
rmmod roxe
