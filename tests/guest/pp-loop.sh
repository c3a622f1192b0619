# Diagnostic, not part of `make test`: ibv_rc_pingpong again and again
# through netem, each run's verdict and the roxe counters that moved.
#   scripts/vm --peers 2 --timeout 600 tests/guest/pp-loop.sh tests/guest/pp-loop.sh
# ROXE_PP_RUNS (default 12), ROXE_PP_NETEM (default the lossy-5 set) and
# ROXE_PP_ARGS (default "-n 50 -s 65536 -m 1024 --chk") change the runs.
# scripts/vm does not pass the host's environment into the guests: set them
# in a wrapper that exports them and sources this script, as lossy-5.sh
# does for lossy.sh.
# Role 1 serves, role 2 connects. (Documentation/datapath.md, "A lost
# final ACK".)
. "$ROXE_ROOT/tests/guest/lib.sh"
runs=${ROXE_PP_RUNS:-12}
netem=${ROXE_PP_NETEM:-loss 5% duplicate 2% delay 2ms reorder 10% 50%}
read -r -a args <<<"${ROXE_PP_ARGS:--n 50 -s 65536 -m 1024 --chk}"
check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 roxe0
gidx=$(gid_index_v4 roxe0)
roxe_signal up
roxe_wait up 120 || fail "the peer never set up"
# shellcheck disable=SC2086 # netem parameters are a word list
check "netem $netem" tc qdisc add dev "$ROXE_IF" root netem $netem
dev=roxe0
pingpong() { timeout 120 ibv_rc_pingpong -d roxe0 -g "$gidx" "${args[@]}" -p "$@"; }
serve() { pingpong "$1"; }
connect() { # PORT I
	pingpong "$1" "$ROXE_PEER_IP" >/tmp/run.log 2>&1
	echo "run $2 client: exit $?"
}
summary() { grep -E "Failed|iters" /tmp/run.log; }
repeat_runs "$runs" "$dev"
tc qdisc del dev "$ROXE_IF" root
roxe_cleanup
finish
