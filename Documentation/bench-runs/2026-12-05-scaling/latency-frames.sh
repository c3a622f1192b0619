. "$ROXE_ROOT/tests/guest/lib.sh"
pk() { ip -s -j link show "$ROXE_IF" | python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["stats64"]; print(s["tx"]["packets"], s["rx"]["packets"])'; }
for drv in roxe siw rxe; do
	case $drv in roxe) modprobe roxe; rdma link add dev0 type roxe netdev "$ROXE_IF";;
	siw) modprobe siw; rdma link add dev0 type siw netdev "$ROXE_IF";;
	rxe) modprobe rdma_rxe; rdma link add dev0 type rxe netdev "$ROXE_IF";; esac
	sleep 2
	conn=(-x "$(gid_index_v4 dev0)"); [ $drv = siw ] && conn=(-R)
	for t in ib_write_lat ib_send_lat; do
		roxe_signal "go-$drv-$t"; roxe_wait "go-$drv-$t" 120
		read -r tx0 rx0 < <(pk)
		if [ "$ROXE_ROLE" = 1 ]; then timeout 120 $t -d dev0 "${conn[@]}" -F -s 2 -n 2000 -p 19111 > /tmp/l.log 2>&1; else sleep 2; timeout 120 $t -d dev0 "${conn[@]}" -F -s 2 -n 2000 -p 19111 "$ROXE_PEER_IP" > /tmp/l.log 2>&1; fi
		rc=$?
		read -r tx1 rx1 < <(pk)
		echo "$drv $t rc=$rc eth tx=$((tx1-tx0)) rx=$((rx1-rx0)) :: $(grep -E '^ *2 +2000' /tmp/l.log)"
		roxe_signal "end-$drv-$t"; roxe_wait "end-$drv-$t" 120
	done
	rdma link delete dev0
	case $drv in roxe) rmmod roxe;; siw) rmmod siw;; rxe) rmmod rdma_rxe;; esac
done
finish
