# Diagnostic, not part of `make test`: perftest bandwidth runs between two
# roxe guests (role 1 serves, role 2 connects), each with the counters that
# moved on both sides, to see what a slow cell spends its time on.
#   scripts/vm --peers 2 --timeout 900 tests/guest/bw-probe.sh tests/guest/bw-probe.sh
. "$ROXE_ROOT/tests/guest/lib.sh"
check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 roxe0
gidx=$(gid_index_v4 roxe0)
roxe_signal up
roxe_wait up 120 || fail "the peer never set up"
runs=("ib_read_bw -s 4096 -n 2000" "ib_read_bw -s 65536 -n 200" "ib_write_bw -s 4096 -n 2000"
	"ib_write_bw -s 1048576 -n 20" "ib_send_bw -s 4096 -n 2000" "ib_send_bw -s 65536 -n 200")
perftest() { # PORT I [SERVER]
	local cmd
	read -r -a cmd <<<"${runs[$2 - 1]}"
	timeout 120 "${cmd[@]}" -d roxe0 -x "$gidx" -F -p "$1" ${3:+"$3"}
}
serve() { perftest "$1" "$2"; }
connect() { # PORT I
	perftest "$1" "$2" "$ROXE_PEER_IP" >/tmp/run.log 2>&1
	echo "${runs[$2 - 1]} client: exit $?"
}
summary() { echo "${runs[$1 - 1]}"; grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/run.log; }
repeat_runs "${#runs[@]}" roxe0
roxe_cleanup
finish
