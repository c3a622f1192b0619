# Item 4 of issue 2: a roxe device on the guest's NIC, checked from every
# angle a user would look at it.
. "$ROXE_ROOT/tests/guest/lib.sh"
IB=/sys/class/infiniband/roxe0
ip4_gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' 192 0 2 "$ROXE_ROLE")

check_fails "roxe is not loaded before the first link add" grep -q '^roxe ' /proc/modules
check "rdma link add loads roxe on demand" rdma link add roxe0 type roxe netdev "$ROXE_IF"
check "the module is loaded" grep -q '^roxe ' /proc/modules
check_output "rdma link show lists roxe0 on $ROXE_IF, ACTIVE" "roxe0/1 state ACTIVE physical_state LINK_UP netdev $ROXE_IF" rdma link show
check_output "the device's parent netdev is $ROXE_IF" "^$ROXE_IF\$" cat $IB/parent
check_output "node_type is CA" "^1: CA" cat $IB/node_type
check_output "link layer is Ethernet" "^Ethernet" cat $IB/ports/1/link_layer
check_output "ibv_devices lists roxe0 through libroxe" "roxe0" ibv_devices
check_fails "libibverbs prints no provider warning" grep -qi "warning" /tmp/check.out
check_output "ibv_devinfo: port active" "state:[[:space:]]+PORT_ACTIVE" ibv_devinfo -v -d roxe0
check_output "ibv_devinfo: Ethernet link layer" "link_layer:[[:space:]]+Ethernet" ibv_devinfo -v -d roxe0
check_output "ibv_devinfo: active MTU 1024 on a 1500-byte link" "active_mtu:[[:space:]]+1024" ibv_devinfo -v -d roxe0
check_output "ibv_devinfo: transport InfiniBand, node GUID from the MAC" "node_guid:[[:space:]]+5054:00ff:fe00:000$ROXE_ROLE" ibv_devinfo -v -d roxe0
wait_for 10 grep -q "$ip4_gid" $IB/ports/1/gids/* 2>/dev/null
check_output "ibv_devinfo shows the IPv4 RoCE v2 GID" "GID\[ *[0-9]+\]:[[:space:]]+::ffff:192.0.2.$ROXE_ROLE, RoCE v2" ibv_devinfo -v -d roxe0
check_output "ibv_devinfo shows the IPv6 link-local RoCE v2 GID" "GID\[ *[0-9]+\]:[[:space:]]+fe80::5054:ff:fe00:$ROXE_ROLE, RoCE v2" ibv_devinfo -v -d roxe0
check_output "sysfs GID types are RoCE v2" "^RoCE v2\$" cat $IB/ports/1/gid_attrs/types/0
check_output "the P_Key table holds the default P_Key" "^0xffff\$" cat $IB/ports/1/pkeys/0

# A second device on the same netdev is refused, with a message.
check_fails "a second link add on $ROXE_IF is refused" rdma link add roxe1 type roxe netdev "$ROXE_IF"
check_output "the kernel log says why" "$ROXE_IF already has roxe device roxe0" dmesg
check_fails "a link add on a missing netdev is refused" rdma link add roxe1 type roxe netdev nosuchdev0
# A name that is taken makes ib_register_device fail after the device was
# fully built: the error path must free it cleanly.
check "a veth pair for the name clash" ip link add roxeveth2 type veth peer name roxeveth3
check_fails "a second roxe0 on another netdev is refused" rdma link add roxe0 type roxe netdev roxeveth2
check "the veth can get a device under a free name" rdma link add roxe2 type roxe netdev roxeveth2
check "and lose it again" rdma link delete roxe2
ip link del roxeveth2

# The port follows the netdev.
ip link set "$ROXE_IF" down
check_output "port goes DOWN with the link" "state:[[:space:]]+PORT_DOWN" ibv_devinfo -d roxe0
ip link set "$ROXE_IF" up
wait_for 10 sh -c "ibv_devinfo -d roxe0 | grep -q PORT_ACTIVE"
check_output "port is ACTIVE again" "state:[[:space:]]+PORT_ACTIVE" ibv_devinfo -d roxe0
if ip link set "$ROXE_IF" mtu 9000 2>/dev/null; then
	check_output "active MTU follows a 9000-byte netdev MTU" "active_mtu:[[:space:]]+4096" ibv_devinfo -d roxe0
	ip link set "$ROXE_IF" mtu 1500
	check_output "and returns to 1024" "active_mtu:[[:space:]]+1024" ibv_devinfo -d roxe0
else
	fail "could not set MTU 9000 on $ROXE_IF"
fi
ip link set "$ROXE_IF" mtu 600
check_output "a 600-byte netdev MTU gives a 512-byte IB MTU" "active_mtu:[[:space:]]+512" ibv_devinfo -d roxe0
ip link set "$ROXE_IF" mtu 1500

# Resources are created through libroxe and the kernel; a QP type roxe
# does not offer (raw packet) is refused with EOPNOTSUPP, not faked.
check_output "PD, CQ and MR through libroxe" "ok pd cq mr" python3 -c '
import pyverbs.device as d, pyverbs.pd as p, pyverbs.cq as c, pyverbs.mr as m
import pyverbs.enums as e
ctx = d.Context(name="roxe0")
pd = p.PD(ctx)
cq = c.CQ(ctx, 16)
mr = m.MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
print("ok pd cq mr", cq.cqe, hex(mr.lkey))
'

# ibv_rc_pingpong creates all its resources (PD, MR, CQ, QP to RTR needs a
# peer) and waits for its peer; it must get that far without an error.
# Line-buffered: it blocks waiting for the peer right after printing.
stdbuf -oL -eL ibv_rc_pingpong -d roxe0 -g 1 >/tmp/pp.log 2>&1 &
pp=$!
wait_for 20 grep -q "local address" /tmp/pp.log
check_output "ibv_rc_pingpong gets past creating its resources" "local address: +LID 0x0000, QPN 0x[0-9a-f]+, PSN 0x[0-9a-f]+, GID ::ffff:192.0.2.$ROXE_ROLE" cat /tmp/pp.log
check_fails "ibv_rc_pingpong printed no error" grep -Eiq "couldn't|failed|error" /tmp/pp.log
kill $pp 2>/dev/null
wait $pp 2>/dev/null

# Delete works, and the netdev disappearing removes the device.
check "rdma link delete roxe0" rdma link delete roxe0
check_fails "roxe0 is gone from sysfs" test -e $IB
check "a veth pair for the unregister test" ip link add roxeveth0 type veth peer name roxeveth1
check "rdma link add on the veth" rdma link add roxev type roxe netdev roxeveth0
check "deleting the veth" ip link del roxeveth0
wait_for 10 sh -c '! test -e /sys/class/infiniband/roxev'
check_fails "the device went away with its netdev" test -e /sys/class/infiniband/roxev

# rmmod with a live device tears it down.
check "re-adding roxe0" rdma link add roxe0 type roxe netdev "$ROXE_IF"
check "rmmod roxe with roxe0 present" rmmod roxe
check_fails "roxe0 is gone after rmmod" test -e $IB
roxe_cleanup
finish
