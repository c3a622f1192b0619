# NVMe over RDMA, an in-kernel RDMA consumer, between two guests: role 1
# runs the nvmet-rdma target with a null_blk namespace (memory-backed, so
# what is written can be read back), role 2 connects
# nvme-rdma with nvme-cli and moves verified data through it. The host
# registers every I/O buffer with fast registration (IB_WR_REG_MR) and the
# target answers with RDMA reads and writes; both invalidate keys after use.
#
# The same runs over rxe afterwards, for comparison: each phase prints the
# throughput of a direct 32 MiB write and read ("nvmeof <drv>: ...").
. "$ROXE_ROOT/tests/guest/lib.sh"
limit=120
srv=192.0.2.1
NQN=roxe-nvmeof-test
CFG=/sys/kernel/config/nvmet

# bounded COMMAND...: run COMMAND for at most $limit seconds.
bounded() { timeout -k 5 "$limit" "$@"; }

# A 128 MiB memory-backed null_blk device, /dev/nullb0, made through
# configfs.
NB=/sys/kernel/config/nullb/nullb0
nullb_up() {
	modprobe null_blk nr_devices=0 && mkdir "$NB" && echo 128 >"$NB/size" &&
		echo 1 >"$NB/memory_backed" && echo 1 >"$NB/power" && wait_for 10 test -b /dev/nullb0
}

target_up() {
	local s=$CFG/subsystems/$NQN p=$CFG/ports/1
	mkdir "$s" && echo 1 >"$s/attr_allow_any_host" &&
		mkdir "$s/namespaces/1" && echo -n /dev/nullb0 >"$s/namespaces/1/device_path" &&
		echo 1 >"$s/namespaces/1/enable" &&
		mkdir "$p" && echo rdma >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" &&
		echo "$srv" >"$p/addr_traddr" && echo 4420 >"$p/addr_trsvcid" &&
		ln -s "$s" "$p/subsystems/$NQN"
}

target_down() {
	local s=$CFG/subsystems/$NQN p=$CFG/ports/1
	rm -f "$p/subsystems/$NQN"
	rmdir "$p" 2>/dev/null
	[ -d "$s/namespaces/1" ] && { echo 0 >"$s/namespaces/1/enable"; rmdir "$s/namespaces/1"; }
	rmdir "$s" 2>/dev/null
	! [ -e "$s" ] && ! [ -e "$p" ]
}

# rate BYTES SECONDS_X1000: MB/s with one decimal.
rate() { awk -v b="$1" -v ms="$2" 'BEGIN { if (ms < 1) ms = 1; printf "%.1f", b / 1e6 / (ms / 1000) }'; }

host_io() {
	local drv=$1 dev t0 t1 size=$((32 << 20))
	dev=$(nvme_dev) || { fail "nvmeof $drv: no namespace block device appeared"; return; }
	pass "nvmeof $drv: namespace at $dev"
	head -c $size /dev/urandom >/tmp/nvmeof.pattern
	t0=$(date +%s%3N)
	check "nvmeof $drv: direct write of 32 MiB" bounded dd if=/tmp/nvmeof.pattern of="$dev" bs=1M oflag=direct
	t1=$(date +%s%3N)
	local wr; wr=$(rate $size $((t1 - t0)))
	t0=$(date +%s%3N)
	check "nvmeof $drv: direct read of 32 MiB" bounded dd if="$dev" of=/tmp/nvmeof.back bs=1M count=32 iflag=direct
	t1=$(date +%s%3N)
	local rd; rd=$(rate $size $((t1 - t0)))
	check "nvmeof $drv: what was read back is what was written" cmp /tmp/nvmeof.pattern /tmp/nvmeof.back
	echo "nvmeof $drv: write $wr MB/s, read $rd MB/s (dd, 1 MiB direct I/O, TCG guests)"
	# Random 4 KiB to 64 KiB writes with a checksum in every block, read
	# back and verified by fio.
	check "nvmeof $drv: fio random writes verified with crc32c" bounded fio --name=verify --filename="$dev" \
		--rw=randwrite --bsrange=4k-64k --size=16M --offset=64M --direct=1 --ioengine=psync \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --iodepth=1
	# A filesystem on top: files written, unmounted, remounted, compared.
	check "nvmeof $drv: mkfs.ext4" bounded mkfs.ext4 -q -F "$dev"
	local mnt; mnt=$(mktemp -d /tmp/nvmeof-mnt.XXXX)
	check "nvmeof $drv: mount" mount "$dev" "$mnt"
	check "nvmeof $drv: copy a file onto it" cp /tmp/nvmeof.pattern "$mnt/a"
	check "nvmeof $drv: unmount" umount "$mnt"
	check "nvmeof $drv: mount again" mount "$dev" "$mnt"
	check "nvmeof $drv: the file survived the round trip" cmp /tmp/nvmeof.pattern "$mnt/a"
	umount "$mnt" 2>/dev/null
	rmdir "$mnt"
	rm -f /tmp/nvmeof.pattern /tmp/nvmeof.back
}

phase() {
	local drv=$1
	case $drv in
	roxe) check "rdma link add roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF" ;;
	rxe)
		check "load rdma_rxe" modprobe rdma_rxe
		check "rdma link add rxe0 on $ROXE_IF" rdma link add rxe0 type rxe netdev "$ROXE_IF"
		;;
	esac
	wait_for 10 gid_index_v4 "${drv}0"
	if [ "$ROXE_ROLE" = 1 ]; then
		check "nvmeof $drv: target up on $srv:4420" target_up
		roxe_signal "target-$drv"
		roxe_wait "host-done-$drv" $((limit * 6)) || fail "nvmeof $drv: the host did not finish"
		# The device before the port (nvmeof-multi.sh says why: a
		# lockdep report in upstream nvmet otherwise).
		check "nvmeof $drv: rdma link delete ${drv}0 before the target's teardown" rdma link delete "${drv}0"
		check "nvmeof $drv: target down" target_down
	else
		if roxe_wait "target-$drv" $((limit * 2)); then
			check "nvmeof $drv: nvme connect over rdma" bounded nvme connect -t rdma -a "$srv" -s 4420 -n "$NQN"
			wait_for 30 nvme_dev
			host_io "$drv"
			check "nvmeof $drv: nvme disconnect" bounded nvme disconnect -n "$NQN"
		else
			fail "nvmeof $drv: the target never came up"
		fi
		roxe_signal "host-done-$drv"
	fi
	roxe_signal "phase-done-$drv"
	roxe_wait "phase-done-$drv" $((limit * 6)) || fail "nvmeof $drv: the peer did not finish"
	case $drv in
	roxe) roxe_cleanup ;;
	rxe) rdma link delete rxe0 2>/dev/null; rmmod rdma_rxe ;;
	esac
}

if [ "$ROXE_ROLE" = 1 ]; then
	# nvmet pulls in configfs (a module here), which the target is set up in.
	check "load nvmet-rdma" modprobe nvmet-rdma
	mountpoint -q /sys/kernel/config || check "mount configfs" mount -t configfs none /sys/kernel/config
	check "a 128 MiB memory-backed null_blk device" nullb_up
else
	check "load nvme-rdma" modprobe nvme-rdma
fi
for drv in ${ROXE_NVMEOF_DRIVERS:-roxe rxe}; do
	phase "$drv"
done
if [ "$ROXE_ROLE" = 1 ]; then
	echo 0 >"$NB/power" 2>/dev/null; rmdir "$NB" 2>/dev/null
	check "unload nvmet-rdma, nvmet and null_blk" rmmod nvmet_rdma nvmet null_blk
else
	check "unload nvme-rdma" rmmod nvme_rdma nvme_fabrics
fi
finish
