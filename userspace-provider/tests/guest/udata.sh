# Which udata lengths roxe's verbs callbacks get from libroxe: kprobes on
# the module's create/modify/destroy/alloc callbacks print udata->inlen and
# udata->outlen (struct ib_udata: inbuf, outbuf, inlen at +16, outlen at
# +24) while qp_flush.py runs.
#
#   scripts/vm userspace-provider/tests/guest/udata.sh
. "$ROXE_ROOT/tests/guest/lib.sh"
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
check "rdma link add roxe0" rdma link add roxe0 type roxe netdev "$ROXE_IF"
ip4_gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' 192 0 2 "$ROXE_ROLE")
wait_for 10 grep -q "$ip4_gid" /sys/class/infiniband/roxe0/ports/1/gids/* 2>/dev/null

# probe NAME KIND CALLBACK REGISTER: the udata is the callback's argument in
# REGISTER (x86-64: %di, %si, %dx, %cx for arguments 1 to 4). The CQ
# callback gets the attribute bundle, whose first member is the udata.
probe() {
	local name=$1 kind=$2 cb=$3 reg=$4 sym
	# v0-mangled methods of the abstraction's generic types end in
	# "<len><name>B<backref>_", e.g. "...4rdma2qp...E9create_cbB9_".
	sym=$(awk -v k="4rdma$kind" -v c="E${#cb}${cb}B[0-9a-z]*_\$" \
		'$4 == "[roxe]" && $3 ~ /^_RNv/ && index($3, k) && $3 ~ c {print $3; exit}' /proc/kallsyms)
	if [ -z "$sym" ]; then fail "no symbol for $kind $cb"; return; fi
	echo "p:roxe_$name $sym inlen=+16($reg):u64 outlen=+24($reg):u64" >>$T/kprobe_events &&
		pass "probe $name on $sym" || fail "probe $name on $sym"
}
probe create_qp 2qp create_cb %dx
probe modify_qp 2qp modify_cb %cx
probe destroy_qp 2qp destroy_cb %si
probe create_srq 3srq create_cb %dx
probe modify_srq 3srq modify_cb %cx
probe destroy_srq 3srq destroy_cb %si
probe alloc_mw 2mw alloc_cb %si
probe create_cq 2cq create_cb %dx
probe resize_cq 2cq resize_cb %dx
probe create_ah 2ah create_cb %dx
echo 1 >$T/events/kprobes/enable
python3 "$ROXE_ROOT/userspace-provider/tests/guest/qp_flush.py" roxe0 >/tmp/qp_flush.log 2>&1
echo "qp_flush: $(tail -1 /tmp/qp_flush.log)"
echo 0 >$T/events/kprobes/enable
sed -n 's/.*\(roxe_[a-z_]*\): ([^)]*) \(inlen=[^ ]* outlen=[^ ]*\).*/\1 \2/p' $T/trace | sort | uniq -c
echo >$T/kprobe_events
check "rdma link delete roxe0" rdma link delete roxe0
roxe_cleanup
finish
