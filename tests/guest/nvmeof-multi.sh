# Storage across nodes (issue 18): one NVMe over RDMA target serving every
# other guest at once, all over roxe, on the shared segment of
# scripts/vm --peers N (N is 3 or 4).
#
# Guest 1 runs nvmet-rdma with a 128 MiB memory-backed null_blk namespace.
# Guests 2..N connect to it at the same time, each with a host NQN of its
# own, and while all are connected:
#   - each runs fio random writes with a crc32c in every block over a
#     16 MiB range of its own, all hosts at once, read back and verified;
#   - each writes a 4 MiB pattern of its own into its own slot, publishes
#     the pattern in the shared folder, and after a barrier reads every
#     host's slot and compares it with that host's pattern: data written
#     by one host over roxe is what every other host reads back.
# The target checks that its CM sees a connection from every host.
. "$ROXE_ROOT/tests/guest/lib.sh"
limit=180
srv=192.0.2.1
n=${ROXE_PEERS:-1}
me=$ROXE_ROLE
NQN=roxe-nvmeof-multi
CFG=/sys/kernel/config/nvmet
NB=/sys/kernel/config/nullb/nullb0
bounded() { timeout -k 5 "$limit" "$@"; }

[ "$n" -ge 3 ] || { fail "nvmeof-multi needs at least 3 guests (got $n)"; finish; }

check "modprobe roxe" modprobe roxe
check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
wait_for 10 gid_index_v4 roxe0

# hosts_seen: how many distinct host addresses the target's CM has
# connected IDs with.
hosts_seen() {
	rdma resource show cm_id 2>/dev/null | grep -w CONNECT |
		grep -o 'dst-addr 192\.0\.2\.[0-9]*' | sort -u | wc -l
}

if [ "$me" = 1 ]; then
	check "load nvmet-rdma" modprobe nvmet-rdma
	mountpoint -q /sys/kernel/config || check "mount configfs" mount -t configfs none /sys/kernel/config
	check "a 128 MiB memory-backed null_blk device" sh -c "
		modprobe null_blk nr_devices=0 && mkdir $NB && echo 128 >$NB/size &&
		echo 1 >$NB/memory_backed && echo 1 >$NB/power"
	wait_for 10 test -b /dev/nullb0
	s=$CFG/subsystems/$NQN p=$CFG/ports/1
	check "target up on $srv:4420" sh -c "
		mkdir $s && echo 1 >$s/attr_allow_any_host &&
		mkdir $s/namespaces/1 && echo -n /dev/nullb0 >$s/namespaces/1/device_path &&
		echo 1 >$s/namespaces/1/enable &&
		mkdir $p && echo rdma >$p/addr_trtype && echo ipv4 >$p/addr_adrfam &&
		echo $srv >$p/addr_traddr && echo 4420 >$p/addr_trsvcid &&
		ln -s $s $p/subsystems/$NQN"
	roxe_signal target
	# Every host connected: the target's CM has IDs to each of them.
	for g in $(seq 2 "$n"); do
		wait_for $((limit * 2)) test -e "$ROXE_SHARED/connected.$g" ||
			fail "host $g never connected"
	done
	seen=$(hosts_seen)
	[ "$seen" = $((n - 1)) ] && pass "the target serves $seen hosts at once (connected CM IDs to each)" ||
		{ fail "the target's CM is connected to $seen hosts, not $((n - 1))"; rdma resource show cm_id | sed 's/^/    /'; }
	roxe_signal counted
	for g in $(seq 2 "$n"); do
		wait_for $((limit * 4)) test -e "$ROXE_SHARED/host-done.$g" ||
			fail "host $g did not finish"
	done
	# The device goes before the port: rdma_cm then destroys the port's
	# listening ID itself (DEVICE_REMOVAL), and the configfs teardown
	# below does not. That teardown holds nvmet_config_sem while it
	# destroys the ID (rdma_cm's handler_mutex), the reverse of an I/O
	# queue's connect run from the CM handler, and lockdep reports the
	# pair (seen in CI on 2026-12-04; upstream nvmet, not roxe).
	check "rdma link delete roxe0 before the target's teardown" rdma link delete roxe0
	rm -f "$p/subsystems/$NQN"
	rmdir "$p"
	echo 0 >"$s/namespaces/1/enable"
	rmdir "$s/namespaces/1" "$s"
	check "the target is gone from configfs" sh -c "! [ -e $s ] && ! [ -e $p ]"
	echo 0 >"$NB/power"
	rmdir "$NB"
	check "unload nvmet-rdma, nvmet and null_blk" rmmod nvmet_rdma nvmet null_blk
else
	check "load nvme-rdma" modprobe nvme-rdma
	hostnqn=nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000000$me
	hostid=00000000-0000-4000-8000-00000000000$me
	if wait_for $((limit * 2)) test -e "$ROXE_SHARED/target.1"; then
		check "host $me: nvme connect over rdma, host NQN of its own" bounded nvme connect -t rdma \
			-a "$srv" -s 4420 -n "$NQN" --hostnqn="$hostnqn" --hostid="$hostid"
		wait_for 30 nvme_dev
	else
		fail "host $me: the target never came up"
	fi
	dev=$(nvme_dev) && pass "host $me: namespace at $dev" || fail "host $me: no namespace block device"
	roxe_signal connected
	wait_for $((limit * 2)) test -e "$ROXE_SHARED/counted.1"
	# Hosts 2..N: fio ranges at 64 MiB + 16 MiB x (me - 2), pattern slots
	# at 4 MiB x (me - 2).
	if [ -n "$dev" ]; then
		check "host $me: fio random writes over its own 16 MiB, verified with crc32c, all hosts at once" \
			bounded fio --name=multi$me --filename="$dev" --rw=randwrite --bsrange=4k-64k \
			--size=16M --offset=$((64 + 16 * (me - 2)))M --direct=1 --ioengine=psync \
			--verify=crc32c --do_verify=1 --verify_fatal=1 --iodepth=1
		head -c $((4 << 20)) /dev/urandom >"$ROXE_SHARED/pattern-$me"
		check "host $me: write its 4 MiB pattern into slot $((me - 2))" bounded dd \
			if="$ROXE_SHARED/pattern-$me" of="$dev" bs=1M seek=$((4 * (me - 2))) oflag=direct
	fi
	roxe_signal written
	for g in $(seq 2 "$n"); do
		wait_for $((limit * 2)) test -e "$ROXE_SHARED/written.$g" || fail "host $g never wrote its pattern"
	done
	if [ -n "$dev" ]; then
		for g in $(seq 2 "$n"); do
			bounded dd if="$dev" of=/tmp/slot bs=1M skip=$((4 * (g - 2))) count=4 iflag=direct 2>/dev/null
			check "host $me reads back what host $g wrote" cmp "$ROXE_SHARED/pattern-$g" /tmp/slot
		done
		rm -f /tmp/slot
	fi
	roxe_signal read
	for g in $(seq 2 "$n"); do
		wait_for $((limit * 2)) test -e "$ROXE_SHARED/read.$g"
	done
	check "host $me: nvme disconnect" bounded nvme disconnect -n "$NQN"
	roxe_signal host-done
	check "unload nvme-rdma" rmmod nvme_rdma nvme_fabrics
fi
roxe_signal finished
roxe_wait_all finished $((limit * 2)) || fail "not every guest finished"
roxe_cleanup
finish
