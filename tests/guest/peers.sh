# Two guests on one wire: the link works both ways, and each side gets a
# roxe device with GIDs for its addresses.
. "$ROXE_ROOT/tests/guest/lib.sh"
roxe_signal booted
if roxe_wait booted 120; then pass "the peer booted and signalled"; else fail "the peer never signalled"; fi
check "IPv4 ping to the peer $ROXE_PEER_IP" ping -c 3 -W 5 "$ROXE_PEER_IP"
peer_ll=fe80::5054:ff:fe00:$((ROXE_ROLE % 2 + 1))
check "IPv6 link-local ping to $peer_ll" ping -6 -c 3 -W 5 "$peer_ll%$ROXE_IF"
check "rdma link add" rdma link add roxe0 type roxe netdev "$ROXE_IF"
check_output "roxe0 is ACTIVE" "PORT_ACTIVE" ibv_devinfo -d roxe0
roxe_signal done
if roxe_wait done 120; then pass "the peer finished"; else fail "the peer did not finish"; fi
roxe_cleanup
finish
