# dma-buf memory regions (issue 17) between two guests: vgem exports the
# buffers, dmabuf-rdma.c registers them with ibv_reg_dmabuf_mr on roxe0 and
# moves data through them (role 2 the requester, role 1 the responder),
# after local checks of what must be refused. (rxe and siw have no dma-buf
# MRs: the verb fails with EOPNOTSUPP there.)
. "$ROXE_ROOT/tests/guest/lib.sh"
bin=$(mktemp -d /tmp/dmabuf.XXXX)/dmabuf-rdma
check "load vgem" modprobe vgem
check "build dmabuf-rdma" cc -O2 -Wall -o "$bin" "$ROXE_ROOT/tests/guest/dmabuf-rdma.c" -libverbs
check "roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 roxe0 >/dev/null
gid=$(gid_index_v4 roxe0) || fail "roxe0 has no IPv4 GID"
roxe_signal up
roxe_wait up 120
if [ "$ROXE_ROLE" = 1 ]; then
	check "dma-buf MRs: local checks, then the responder's side of the traffic" \
		timeout 120 "$bin" roxe0 "$gid"
else
	check "dma-buf MRs: local checks, then write, read, send, atomic and a write past the end" \
		timeout 120 "$bin" roxe0 "$gid" "$ROXE_PEER_IP"
fi
cat /tmp/check.out
roxe_signal done
roxe_wait done 180
check "remove roxe0" rdma link delete roxe0
check "unload vgem" rmmod vgem
roxe_cleanup
finish
