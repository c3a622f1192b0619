# On-demand paging (issue 16): ODP MRs on one guest, through a roxe device
# on the guest's NIC.
#
# ibv_devinfo must show the ODP capabilities (general ODP_SUPPORT, RC
# SEND, RECV, WRITE, READ and ATOMIC, UD SEND, RECV and SRQ_RECV). Then odp.py runs two RC QPs connected
# to each other through the device's own GID over memory registered with
# IBV_ACCESS_ON_DEMAND: /proc/vmstat's pin counters and VmPin stay put for a
# 64 MiB ODP MR (and move for an ordinary one); sends, RDMA writes and
# reads and atomics land while MADV_DONTNEED drops the pages under them;
# RDMA writes stay right while mprotect, MADV_DONTNEED and memory
# compaction invalidate the MRs' pages during the traffic, and after parts
# of an MR are unmapped and mapped anew; and an access to a page unmapped
# from the middle of an MR completes with an error instead of being
# retried forever. UD receives land in dropped pages, in order, bursts
# included, each datagram waiting in the QP while its page is faulted in.
# The pin counters of the whole run are printed too.
. "$ROXE_ROOT/tests/guest/lib.sh"
dev=roxe0
IB=/sys/class/infiniband/$dev

# odp_caps DEV: one line per ODP capability that ibv_devinfo -v prints, as
# "SECTION CAP" (general_odp_caps ODP_SUPPORT, rc_odp_caps SUPPORT_SEND...).
odp_caps() {
	ibv_devinfo -v -d "$1" | awk '
		/^\t[a-z]+_odp_caps:/ { s = $1; sub(/:$/, "", s); next }
		/^\t[^\t]/ { s = "" }
		s != "" && /^\t\t/ { $1 = $1; print s, $0 }'
}
pin_counters() { grep -E '^nr_foll_pin_(acquired|released) ' /proc/vmstat | tr '\n' ' '; }

check "modprobe roxe" modprobe roxe
check "rdma link add $dev on $ROXE_IF" rdma link add $dev type roxe netdev "$ROXE_IF"
wait_for 10 grep -q ': ACTIVE$' $IB/ports/1/state
wait_for 10 gid_index_v4 $dev
if gid=$(gid_index_v4 $dev); then
	pass "$dev has the RoCE v2 GID of $ROXE_LOCAL_IP (index $gid)"
else
	fail "$dev has no RoCE v2 GID for $ROXE_LOCAL_IP"
fi

odp_caps $dev >/tmp/odp-caps
echo "ODP capabilities that ibv_devinfo -v shows for $dev:"
sed 's/^/    /' /tmp/odp-caps
check "ibv_devinfo: general_odp_caps has ODP_SUPPORT" grep -qx 'general_odp_caps ODP_SUPPORT' /tmp/odp-caps
for c in SEND RECV WRITE READ ATOMIC; do
	check "ibv_devinfo: rc_odp_caps has SUPPORT_$c" grep -qx "rc_odp_caps SUPPORT_$c" /tmp/odp-caps
done
for c in SEND RECV SRQ; do
	check "ibv_devinfo: ud_odp_caps has SUPPORT_$c" grep -qx "ud_odp_caps SUPPORT_$c" /tmp/odp-caps
done

if [ -n "${gid:-}" ]; then
	echo "pin counters before odp.py: $(pin_counters)"
	check "ODP MRs: nothing pinned, data right under dropped, protected, migrated and remapped pages, holes fail" \
		timeout -k 5 600 python3 "$ROXE_ROOT/tests/guest/odp.py" $dev "$gid"
	cat /tmp/check.out
	[ -n "${ROXE_OUT:-}" ] && cp /tmp/check.out "$ROXE_OUT/odp.log"
	echo "pin counters after odp.py: $(pin_counters)"
fi

check "rdma link delete $dev" rdma link delete $dev
check "rmmod roxe" rmmod roxe
finish
