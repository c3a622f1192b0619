# Network namespaces (issue 16): roxe opens its RoCEv2 sockets in each
# namespace with the first device there and closes them with the last.
#
# Two namespaces, rxa and rxb, joined by a veth pair, each with a roxe
# device made from inside it. Data moves between them (ibv_rc_pingpong,
# perftest, the RDMA CM's rping and ib_send_bw -R), while rxe holds the
# port in the initial namespace (on 6.12, rxe's sockets exist only there).
# Then: a device deleted closes its namespace's sockets; a netdev moved to
# another namespace takes its device away and its old namespace's sockets
# with it; both namespaces deleted under traffic; rmmod.
. "$ROXE_ROOT/tests/guest/lib.sh"
limit=60
bounded() { timeout -k 5 "$limit" "$@"; }
A=192.0.2.21 B=192.0.2.22
# port_open NS: a socket listens on UDP 4791 in NS ("-" for this one).
port_open() {
	if [ "$1" = - ]; then ss -Hlun 'sport = :4791' | grep -q .; else
		ip netns exec "$1" ss -Hlun 'sport = :4791' | grep -q .; fi
}
sockets() { ip netns exec "$1" ss -Hlun 'sport = :4791' | wc -l; }

setup() {
	ip netns add rxa && ip netns add rxb &&
		ip link add va type veth peer name vb &&
		ip link set va netns rxa && ip link set vb netns rxb &&
		ip -n rxa addr add $A/24 dev va && ip -n rxb addr add $B/24 dev vb &&
		ip -n rxa link set lo up && ip -n rxb link set lo up &&
		ip -n rxa link set va up && ip -n rxb link set vb up
}
check "two namespaces joined by a veth pair" setup
check "ping from rxa to rxb" ip netns exec rxa ping -c 2 -W 5 $B
check "modprobe roxe" modprobe roxe
check_fails "no RoCEv2 socket before the first device" port_open -
# rxe takes the initial namespace's port (6.12 rxe opens it on load).
check "rdma_rxe holds UDP 4791 in the initial namespace" sh -c "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev $ROXE_IF"
check "rdma link add roxea, from inside rxa" ip netns exec rxa rdma link add roxea type roxe netdev va
check "rdma link add roxeb, from inside rxb" ip netns exec rxb rdma link add roxeb type roxe netdev vb
check "rxa has its own two sockets (IPv4, IPv6)" test "$(sockets rxa)" = 2
check "so has rxb" test "$(sockets rxb)" = 2
check_fails "roxe0 on $ROXE_IF in the initial namespace is refused: rxe has the port" \
	rdma link add roxe0 type roxe netdev "$ROXE_IF"
check_output "... and the kernel log says so" "UDP port 4791 is taken in $ROXE_IF's network namespace" dmesg
wait_for 10 gid_index_v4 roxea $A
wait_for 10 gid_index_v4 roxeb $B
ga=$(gid_index_v4 roxea $A) gb=$(gid_index_v4 roxeb $B)

# ready NS PORT|cm PID: the server in NS listens (on TCP PORT, or with an
# RDMA CM ID), or has exited.
ready() {
	! kill -0 "$3" 2>/dev/null && return 0
	if [ "$2" = cm ]; then ip netns exec "$1" rdma resource show cm_id 2>/dev/null | grep -qw LISTEN
	else ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q .; fi
}
# pair_in SNS CNS NAME PORT|cm SERVER... -- CLIENT...: SERVER in namespace
# SNS, then, once it listens, CLIENT in CNS.
pair_in() {
	local sns=$1 cns=$2 name=$3 probe=$4 pid rc; shift 4
	local server=() client=()
	while [ "$1" != "--" ]; do server+=("$1"); shift; done; shift
	client=("$@")
	bounded ip netns exec "$sns" "${server[@]}" >"$ROXE_OUT/$name-server.log" 2>&1 &
	pid=$!
	wait_for 30 ready "$sns" "$probe" $pid
	rc=0
	bounded ip netns exec "$cns" "${client[@]}" >"$ROXE_OUT/$name-client.log" 2>&1 || rc=$?
	wait $pid || rc=$((rc + 1000))
	if [ $rc = 0 ]; then pass "$name between $cns and $sns"; else
		fail "$name between $cns and $sns (exit $rc)"
		tail -n 5 "$ROXE_OUT/$name-server.log" "$ROXE_OUT/$name-client.log" | sed 's/^/    /'
		# What the devices saw (timeouts, NAKs, drops), for the log.
		for d in $(ip netns exec "$cns" rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1); do
			echo "    $d: $(ip netns exec "$cns" rdma statistic show link "$d/1" 2>/dev/null |
				grep -oE '(req|resp|rx_drop)[a-z_]* [1-9][0-9]*' | paste -sd' ')"
		done
	fi
}
pair() { pair_in rxb rxa "$@"; }
pair rc-pingpong 18515 ibv_rc_pingpong -d roxeb -g "$gb" -n 100 -- \
	ibv_rc_pingpong -d roxea -g "$ga" -n 100 $B
pair write-bw 18515 ib_write_bw -d roxeb -x "$gb" -n 200 -s 65536 -F -- \
	ib_write_bw -d roxea -x "$ga" -n 200 -s 65536 -F $B
pair rping cm rping -s -a $B -C 10 -V -- rping -c -a $B -C 10 -V
pair send-bw-cm cm ib_send_bw -d roxeb -R -n 200 -F -- ib_send_bw -d roxea -R -n 200 -F $B

# The last device of a namespace closes its sockets; a new one opens them.
check "rdma link delete roxeb" ip netns exec rxb rdma link delete roxeb
check "rxb's sockets closed with its last device" test "$(sockets rxb)" = 0
check "rxa's stay" test "$(sockets rxa)" = 2
check "roxeb again" ip netns exec rxb rdma link add roxeb type roxe netdev vb
check "rxb's sockets open again" test "$(sockets rxb)" = 2

# A netdev moved out of its namespace takes its device along, and the
# namespace's sockets close with it.
check "move va (roxea's netdev) from rxa to the initial namespace" ip -n rxa link set va netns 1
gone() { ! rdma link show 2>/dev/null | grep -q "^link roxea/"; }
if wait_for 20 gone; then pass "roxea went with its netdev"; else fail "roxea is still there"; fi
check "rxa's sockets closed" test "$(sockets rxa)" = 0
check "va back into rxa" sh -c "ip link set va netns rxa && ip -n rxa addr add $A/24 dev va && ip -n rxa link set va up"
check "roxea again" ip netns exec rxa rdma link add roxea type roxe netdev va
wait_for 10 gid_index_v4 roxea $A
ga=$(gid_index_v4 roxea $A)
pair write-bw-again 18515 ib_write_bw -d roxeb -x "$gb" -n 100 -s 65536 -F -- \
	ib_write_bw -d roxea -x "$ga" -n 100 -s 65536 -F $B

# Both namespaces deleted under traffic: the veth goes, so do both devices.
ip netns exec rxb ib_write_bw -d roxeb -x "$gb" -D 30 -s 65536 -F >"$ROXE_OUT/teardown-server.log" 2>&1 &
srv=$!
wait_for 30 ready rxb 18515 $srv
ip netns exec rxa ib_write_bw -d roxea -x "$ga" -D 30 -s 65536 -F $B >"$ROXE_OUT/teardown-client.log" 2>&1 &
cli=$!
sleep 5
# `ip netns del` drops the names; the namespaces live on while the programs
# in them run. Killing the programs then ends both at once: the kernel
# tears the namespaces down (the veth, then the devices) while the same
# processes' QPs are being destroyed.
check "delete both namespaces under traffic" sh -c "ip netns del rxa && ip netns del rxb"
sleep 2
kill -9 $cli $srv 2>/dev/null
wait $cli $srv 2>/dev/null
nodev() { ! rdma link show 2>/dev/null | grep -Eq "^link roxe(a|b)/"; }
if wait_for 30 nodev; then pass "both roxe devices went with their namespaces"; else
	fail "roxe devices left:"; rdma link show | sed 's/^/    /'; fi
check "rdma link delete rxe0" rdma link delete rxe0
check "rmmod rdma_rxe" rmmod rdma_rxe
check "rmmod roxe" rmmod roxe

# The core's exclusive mode: a device is seen only in its own namespace,
# and `rdma dev set ... netns` moves it (the core requires the
# disassociate_ucontext verb for that). The mode can change only while no
# namespace but the initial one exists, so wait for rxa and rxb to be gone.
if wait_for 60 rdma system set netns exclusive; then pass "rdma system set netns exclusive"; else
	fail "rdma system set netns exclusive: $(rdma system set netns exclusive 2>&1)"; fi
C=192.0.2.31 D=192.0.2.32
check "namespaces rxc and rxd over a veth pair" sh -c "
	ip netns add rxc && ip netns add rxd && ip link add vc type veth peer name vd &&
	ip link set vc netns rxc && ip link set vd netns rxd &&
	ip -n rxc addr add $C/24 dev vc && ip -n rxd addr add $D/24 dev vd &&
	ip -n rxc link set lo up && ip -n rxd link set lo up &&
	ip -n rxc link set vc up && ip -n rxd link set vd up"
check "rdma link add roxec (netdev in rxc)" ip netns exec rxc rdma link add roxec type roxe netdev vc
check "rdma link add roxed (netdev in rxd)" ip netns exec rxd rdma link add roxed type roxe netdev vd
check "rdma dev set roxec netns rxc" rdma dev set roxec netns rxc
check "rdma dev set roxed netns rxd" rdma dev set roxed netns rxd
check_output "rxc sees roxec" "roxec" ip netns exec rxc rdma dev
check_fails "rxc does not see roxed" sh -c "ip netns exec rxc rdma dev | grep -q roxed"
check_fails "the initial namespace sees neither" sh -c "rdma dev | grep -Eq 'roxe(c|d)'"
wait_for 10 ip netns exec rxc sh -c "grep -q ffff:c000:021f /sys/class/infiniband/roxec/ports/1/gids/*"
gc=$(ip netns exec rxc sh -c 'for f in /sys/class/infiniband/roxec/ports/1/gids/*; do grep -q "ffff:c000:021f$" $f && echo ${f##*/} && break; done')
gd=$(ip netns exec rxd sh -c 'for f in /sys/class/infiniband/roxed/ports/1/gids/*; do grep -q "ffff:c000:0220$" $f && echo ${f##*/} && break; done')
pair_in rxd rxc x-rc-pingpong 18515 ibv_rc_pingpong -d roxed -g "$gd" -n 100 -- \
	ibv_rc_pingpong -d roxec -g "$gc" -n 100 $D
pair_in rxd rxc x-rping cm rping -s -a $D -C 10 -V -- rping -c -a $D -C 10 -V
# A device with a process on it moves back: the core disassociates the
# process first.
# (A pingpong server holds the device while it waits for its client.)
ip netns exec rxc ibv_rc_pingpong -d roxec -g "$gc" -p 18600 >"$ROXE_OUT/x-held.log" 2>&1 &
held=$!
wait_for 30 ip netns exec rxc sh -c "ss -Hltn 'sport = :18600' | grep -q ."
check "a name for the initial namespace" ip netns attach rxinit 1
# Only rxc sees roxec, so the move is asked for from there.
check "rdma dev set roxec netns rxinit, from rxc, with a process holding it" \
	ip netns exec rxc rdma dev set roxec netns rxinit
check_output "roxec is back in the initial namespace" "roxec" rdma dev
check "the process lives on" kill -0 $held
kill -9 $held 2>/dev/null
wait $held 2>/dev/null
ip netns del rxinit
check "delete rxc and rxd" sh -c "ip netns del rxc && ip netns del rxd"
nodev2() { ! rdma link show 2>/dev/null | grep -Eq "^link roxe(c|d)/"; }
if wait_for 30 nodev2; then pass "both devices went with their netdevs"; else
	fail "roxe devices left:"; rdma link show | sed 's/^/    /'; fi
check "rmmod roxe" rmmod roxe
if wait_for 60 rdma system set netns shared; then pass "rdma system set netns shared"; else
	fail "rdma system set netns shared"; fi
finish
