# Port counters through the Performance Management Agent (issue 16): the
# RDMA core's ports/1/counters files (which it reads with MADs to roxe's
# process_mad), and PerfMgt MADs over the wire from the peer's umad port.
#
# Both guests run roxe. After an RDMA write and a send transfer, each side's
# sent bytes and packets must equal the other side's received ones. Then
# role 2 queries role 1's agent over the wire (PortCountersExtended and
# PortCounters), and the answer must be role 1's own counts plus exactly the
# query packet it received; a PMA Set clears the PMA's counts but not
# hw_counters; a MAD of another class version gets an error status; and the
# RDMA CM, whose MADs pass through process_mad too, still connects.
. "$ROXE_ROOT/tests/guest/lib.sh"
limit=60
dev=roxe0
IB=/sys/class/infiniband/$dev
C=$IB/ports/1/counters
Q="python3 $ROXE_ROOT/tests/guest/pma-query.py"
bounded() { timeout -k 5 "$limit" "$@"; }

check "load ib_umad" modprobe ib_umad
check "rdma link add $dev on $ROXE_IF" rdma link add $dev type roxe netdev "$ROXE_IF"
wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
wait_for 10 gid_index_v4 $dev
gidx=$(gid_index_v4 $dev)
# The queries go over IPv6. Over IPv4 the MAD layer cannot match a reply to
# its request: it compares the request's source GID with the destination
# GID of the reply's GRH, and for RoCEv2 over IPv4 that 40-byte area holds
# the IPv4 header (rxe and RoCE hardware fill it the same way). The agent
# still answers (role 1's counters show it), but the reply is dropped.
# gid_ll DEV ROLE: the RoCE v2 GID index of ROLE's link-local address.
ll() { echo "fe80::5054:ff:fe00:$1"; }
gid_ll() {
	local port=/sys/class/infiniband/$1/ports/1 f n
	local want=fe80:0000:0000:0000:5054:00ff:fe00:000$2
	for f in "$port"/gids/*; do
		n=${f##*/}
		[ "$(cat "$f" 2>/dev/null)" = "$want" ] &&
			[ "$(cat "$port/gid_attrs/types/$n" 2>/dev/null)" = "RoCE v2" ] && { echo "$n"; return 0; }
	done
	return 1
}
wait_for 10 gid_ll $dev "$ROXE_ROLE"
gidx6=$(gid_ll $dev "$ROXE_ROLE")
peer_gid=$(ll $((ROXE_ROLE % 2 + 1)))
check "the PMA's counter files, the 64-bit set" test -r "$C/unicast_xmit_packets"
roxe_signal up
roxe_wait up 180 || fail "the peer never set up"

NAMES="port_xmit_data port_rcv_data port_xmit_packets port_rcv_packets
unicast_xmit_packets unicast_rcv_packets multicast_xmit_packets multicast_rcv_packets"
# snap FILE: this port's PMA counters from sysfs, NAME VALUE per line.
snap() { for n in $NAMES; do echo "$n $(cat "$C/$n")"; done >"$1"; }
# val FILE NAME
val() { awk -v n="$2" '$1 == n { print $2 }' "$1"; }
# delta NAME: how far NAME moved on guest ROLE between before and after.
delta() { echo $(($(val "$ROXE_SHARED/after.$2" "$1") - $(val "$ROXE_SHARED/before.$2" "$1"))); }

snap "$ROXE_SHARED/before.$ROXE_ROLE"
roxe_signal before
roxe_wait before 60 || fail "the peer took no first count"

listening() { ss -Hltn "sport = :$1" | grep -q .; }
# transfer NAME PORT PERFTEST...: role 1 serves, role 2 connects.
transfer() {
	local name=$1 port=$2; shift 2
	if [ "$ROXE_ROLE" = 1 ]; then
		bounded "$@" -p "$port" >"$ROXE_OUT/$name-server.log" 2>&1 &
		local pid=$!
		wait_for 20 listening "$port"
		roxe_signal "ready-$name"
		if wait $pid; then pass "$name server"; else fail "$name server"; tail "$ROXE_OUT/$name-server.log"; fi
	elif roxe_wait "ready-$name" 60; then
		check "$name client" bounded "$@" -p "$port" "$ROXE_PEER_IP"
	else
		fail "$name: the server never signalled"
	fi
}
transfer write-bw 18700 ib_write_bw -d $dev -x "$gidx" -n 200 -s 65536 -F
transfer send-bw 18701 ib_send_bw -d $dev -x "$gidx" -n 200 -s 4096 -F
roxe_signal transferred
roxe_wait transferred 60 || fail "the peer did not finish its transfers"
# Both sides are quiet now: no RoCE packet moves until the query below.
snap "$ROXE_SHARED/after.$ROXE_ROLE"
roxe_signal counted
roxe_wait counted 60 || fail "the peer took no second count"

me=$ROXE_ROLE peer=$((ROXE_ROLE % 2 + 1))
for pair in "port_xmit_data port_rcv_data" "port_xmit_packets port_rcv_packets"; do
	set -- $pair
	sent=$(delta "$1" $me) got=$(delta "$2" $peer)
	if [ "$sent" -gt 0 ] && [ "$sent" = "$got" ]; then
		pass "this side's $1 moved $sent, the peer's $2 the same"
	else
		fail "this side's $1 moved $sent, the peer's $2 $got"
	fi
done
# A 64 KiB write in 1 KiB packets: the data counted is at least the
# payload (in 4-octet words) and each packet carries its headers.
words=$(delta port_xmit_data 2) pkts=$(delta port_xmit_packets 2)
if [ "$ROXE_ROLE" = 2 ] && [ "$words" -ge $((200 * 65536 / 4)) ] && [ "$pkts" -ge $((200 * 64)) ]; then
	pass "role 2 sent $pkts packets, $words words: at least the 200 x 64 KiB written"
elif [ "$ROXE_ROLE" = 2 ]; then
	fail "role 2 sent $pkts packets, $words words: less than the 200 x 64 KiB written"
fi
unicast=$(delta unicast_xmit_packets $me) all=$(delta port_xmit_packets $me)
if [ "$unicast" = "$all" ] && [ "$(delta multicast_xmit_packets $me)" = 0 ]; then
	pass "all $all packets sent were unicast"
else
	fail "unicast_xmit_packets moved $unicast of $all"
fi

# Over the wire: role 2 asks role 1's agent.
if [ "$ROXE_ROLE" = 2 ]; then
	A=$ROXE_SHARED/after.1
	if bounded $Q $dev "$gidx6" "$peer_gid" --attr ext >"$ROXE_OUT/ext.txt" 2>&1; then
		pass "PortCountersExtended from the peer's agent over the wire"
		r() { val "$ROXE_OUT/$1" "$2"; }
		# The reply is built before it is sent: role 1 counted the query
		# (one packet: BTH, DETH, the 256-byte MAD and the ICRC, 280 bytes;
		# a retry would add one more)
		# and nothing else since its count.
		if [ "$(r ext.txt status)" = 0x0000 ] &&
			[ "$(r ext.txt port_xmit_data)" = "$(val $A port_xmit_data)" ] &&
			[ "$(r ext.txt port_xmit_packets)" = "$(val $A port_xmit_packets)" ] &&
			[ "$(r ext.txt port_rcv_packets)" = $(($(val $A port_rcv_packets) + 1)) ] &&
			[ "$(r ext.txt port_rcv_data)" = $(($(val $A port_rcv_data) + 70)) ]; then
			pass "the agent's answer is role 1's own count plus the query's 280 bytes"
		else
			fail "the agent's answer does not match role 1's count"
			sed 's/^/    sysfs: /' "$A"; sed 's/^/    MAD:   /' "$ROXE_OUT/ext.txt"
		fi
	else
		fail "PortCountersExtended from the peer's agent"; sed 's/^/    /' "$ROXE_OUT/ext.txt"
	fi
	if bounded $Q $dev "$gidx6" "$peer_gid" --attr counters >"$ROXE_OUT/pc.txt" 2>&1 &&
		[ "$(val "$ROXE_OUT/pc.txt" status)" = 0x0000 ] &&
		[ "$(val "$ROXE_OUT/pc.txt" port_xmit_data)" = $(($(val $A port_xmit_data) + 70)) ]; then
		pass "PortCounters (32-bit) agrees, one reply later"
	else
		fail "PortCounters (32-bit)"; sed 's/^/    /' "$ROXE_OUT/pc.txt"
	fi
	# PortSelect of a port that does not exist: status "invalid field".
	check_output "a query for port 2 gets status 0x001c" "status 0x001c" \
		bounded $Q $dev "$gidx6" "$peer_gid" --attr counters --port-select 2
	# Class version 2: the agent answers "bad version" (0x0004).
	check_output "class version 2 gets status 0x0004" "status 0x0004" \
		bounded $Q $dev "$gidx6" "$peer_gid" --attr counters --class-version 2
	# Set with every PortCounters select bit: role 1's PMA counts restart.
	check_output "a PMA Set on the peer clears its counters" "port_xmit_packets 0" \
		bounded $Q $dev "$gidx6" "$peer_gid" --attr counters --set-select ffff
fi
roxe_signal queried
roxe_wait queried 120 || fail "the peer did not finish its queries"
if [ "$ROXE_ROLE" = 1 ]; then
	# Since the Set: one reply sent. hw_counters never restarts.
	check_output "after the Set, sysfs counts the one reply since" "^1$" cat "$C/port_xmit_packets"
	tx=$(rdma statistic show link $dev/1 | tr ' ' '\n' | grep -A1 -x tx_packets | tail -1)
	if [ "$tx" -gt 1000 ]; then pass "hw_counters' tx_packets kept counting ($tx)"; else
		fail "hw_counters' tx_packets is $tx after the Set"; fi
fi
# The local port: the same agent through the core's sysfs and through a
# MAD that loops back to this host's own GID.
check_output "a MAD to this port's own GID is answered" "status 0x0000" \
	bounded $Q $dev "$gidx6" "$(ll $ROXE_ROLE)" --attr classportinfo

# The CM's MADs go through process_mad first; it must pass them on.
if [ "$ROXE_ROLE" = 1 ]; then
	bounded rping -s -a "$ROXE_LOCAL_IP" -C 5 -V >"$ROXE_OUT/rping.log" 2>&1 &
	pid=$!
	wait_for 20 sh -c "rdma resource show cm_id | grep -qw LISTEN"
	roxe_signal rping
	if wait $pid; then pass "rping server (RDMA CM)"; else fail "rping server"; tail "$ROXE_OUT/rping.log"; fi
elif roxe_wait rping 60; then
	check "rping client (RDMA CM)" bounded rping -c -a "$ROXE_PEER_IP" -C 5 -V
fi
roxe_signal done
roxe_wait done 120 || fail "the peer did not finish"
roxe_cleanup
finish
