# dma-buf MRs over buffers that move (one guest): the exporter is the
# test module tests/kmod/roxe_dmabuf_mover.ko (built by `make module`),
# whose buffers move on request once no importer pins them or holds a
# kernel mapping of them after move_notify. dmabuf-move.c registers one
# with ibv_reg_dmabuf_mr on roxe0 and moves it between and during RDMA
# WRITEs, READs and a SEND over two RC QPs looped back through roxe0's own
# GID: roxe must drop its mapping in move_notify and map the buffer again
# when the data path next needs it, with the bytes where the exporter put
# them. A roxe that pins the buffer fails ("roxe pinned the buffer: no
# re-validation"). Then every buffer must be gone once the MR is
# deregistered and the descriptors closed: the module unloads.
. "$ROXE_ROOT/tests/guest/lib.sh"
MOVER=$ROXE_ROOT/tests/kmod/roxe_dmabuf_mover.ko
IB=/sys/class/infiniband/roxe0
bin=$(mktemp -d /tmp/dmabuf-move.XXXX)/dmabuf-move

check "roxe_dmabuf_mover.ko is built" test -f "$MOVER"
check "build dmabuf-move" cc -O2 -Wall -o "$bin" "$ROXE_ROOT/tests/guest/dmabuf-move.c" \
	-libverbs -lpthread
check "insmod roxe_dmabuf_mover" insmod "$MOVER"
check "/dev/roxe_mover appears" wait_for 10 test -c /dev/roxe_mover
check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
wait_for 10 gid_index_v4 roxe0
if gid=$(gid_index_v4 roxe0); then
	check "dma-buf MR over a moving buffer: not pinned, mapped again after each move (after late copies too), data right; device memory pinned or refused" \
		timeout -k 5 300 "$bin" roxe0 "$gid"
	cat /tmp/check.out
	[ -n "${ROXE_OUT:-}" ] && cp /tmp/check.out "$ROXE_OUT/dmabuf-move.log"
else
	fail "roxe0 has no RoCE v2 GID for $ROXE_LOCAL_IP"
fi

# Before roxe goes: its deregistered MR must hold no buffer (each holds a
# reference to the module that exported it).
check "rmmod roxe_dmabuf_mover (no buffer left)" wait_for 10 rmmod roxe_dmabuf_mover
check "rdma link delete roxe0" rdma link delete roxe0
check "rmmod roxe" rmmod roxe
roxe_cleanup
lsmod | grep -q '^roxe_dmabuf_mover ' && rmmod roxe_dmabuf_mover
finish
