# rdma-core's pyverbs suite (from python3-pyverbs) against rxe or roxe or
# both on one guest and netdev, with a per-test comparison table when both
# ran here.
#
# PYVERBS_DRIVERS (set by pyverbs-rxe.sh and pyverbs-roxe.sh, which make
# test runs in two guests at once) picks the drivers; default "rxe roxe".
# ROXE_PYVERBS_MODULES overrides the modules run (default: every module of
# the suite). The verdict comes from tests/pyverbs-compare: every
# test that passes on rxe must pass on roxe, unless tests/pyverbs-known.txt
# lists it with a reason. When the drivers ran in two guests, tests/vm-tests
# runs the comparison on the host over the two logs.
. "$ROXE_ROOT/tests/guest/lib.sh"
work=$(mktemp -d /tmp/pyverbs.XXXX)
cp -r /usr/share/doc/rdma-core/tests "$work/tests"
gunzip -q "$work"/tests/*.gz
# Every module of the suite: the vendor ones (mlx5, EFA) skip themselves.
modules=${ROXE_PYVERBS_MODULES:-$(cd "$work/tests" && ls test_*.py | sed 's/\.py$//' | tr '\n' ' ')}

# rxe and roxe take turns: both want UDP port 4791 for their data paths,
# so only one of them is loaded at a time.
# The whole suite runs in one python3 process first, as rdma-core runs it:
# under TCG each start of python3 with pyverbs costs about 5 s, and the
# suite has 44 modules. If that process is killed (its time limit, or
# a crash), its output is dropped and the suite runs again module by
# module: each module in one process with a time limit, and if a module
# hits its limit (a test waits for a completion event that never comes),
# its tests run again one process each, with a limit per test, so one
# stuck test does not hide the others.
run_suite() {
	local dev=$1
	local log=$ROXE_OUT/pyverbs-$dev.log m id rc out names=()
	: >"$log"
	# Let the GID table fill from the netdev's addresses.
	wait_for 10 sh -c "ibv_devinfo -v -d $dev | grep -q '::ffff:$ROXE_LOCAL_IP'"
	out=$(mktemp)
	for m in $modules; do names+=("tests.$m"); done
	(cd "$work" && timeout -k 5 1200 python3 tests/run_tests.py --dev "$dev" -v "${names[@]}") >"$out" 2>&1
	rc=$?
	if [ $rc -lt 124 ]; then
		cat "$out" >>"$log"
		rm -f "$out"
		echo "pyverbs on $dev: $(grep -Ec '\.\.\. ' "$log") results (one process)"
		return
	fi
	echo "pyverbs on $dev: the one-process run ended with status $rc; running module by module"
	for m in $modules; do
		(cd "$work" && timeout -k 5 300 python3 tests/run_tests.py --dev "$dev" -v "tests.$m") >"$out" 2>&1
		rc=$?
		if [ $rc != 124 ] && [ $rc != 137 ]; then
			cat "$out" >>"$log"
			continue
		fi
		echo "pyverbs on $dev: tests.$m hit its time limit; running its tests one by one"
		for id in $(cd "$work" && python3 tests/run_tests.py --dev "$dev" --list-tests 2>/dev/null |
			grep -E "^tests\.$m\."); do
			(cd "$work" && timeout -k 5 30 python3 tests/run_tests.py --dev "$dev" -v "$id") >>"$log" 2>&1
			rc=$?
			{ [ $rc = 124 ] || [ $rc = 137 ]; } && echo "${id##*.} ($id) ... TIMEOUT" >>"$log"
		done
	done
	rm -f "$out"
	echo "pyverbs on $dev: $(grep -Ec '\.\.\. ' "$log") results"
}
# Our own pyverbs checks, on both drivers: the suite never resizes an SRQ
# (srq-resize.py does, with receives outstanding), and never sends before
# the receive is posted (rnr.py does).
srq_resize() {
	local gid
	gid=$(gid_index_v4 "$1") || { fail "$1 has no IPv4 GID"; return; }
	check "SRQ resize with outstanding receives on $1" python3 "$ROXE_ROOT/tests/guest/srq-resize.py" "$1" "$gid"
	cat /tmp/check.out
	check "RNR: sends and writes with immediate before the receive, on $1" \
		timeout 300 python3 "$ROXE_ROOT/tests/guest/rnr.py" "$1" "$gid"
	cat /tmp/check.out
}
# A few 2 MiB huge pages, so the suite's huge-page tests run rather than
# skip (test_parent_domain's test_huge_page_traffic; ODP ones skip later).
echo 8 >/proc/sys/vm/nr_hugepages
check "8 huge pages of 2 MiB" grep -q '^HugePages_Total: *8$' /proc/meminfo
# dma-buf MRs (issue 17): Debian's pyverbs has rdma-core's allocator stub,
# so its dma-buf tests would all skip. The suite runs over a copy of the
# pyverbs package whose dmabuf module is roxe's vgem-backed stand-in, with
# the same object layout (tests/guest/pyverbs-dmabuf/dmabuf.pyx says why
# and how). Both drivers run with it; rxe has no dma-buf MRs and skips.
build_dmabuf() {
	local src=$ROXE_ROOT/tests/guest/pyverbs-dmabuf out=$work/overlay/pyverbs ext
	ext=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))') &&
		cp -r /usr/lib/python3/dist-packages/pyverbs "$work/overlay/" &&
		cython3 -3 -o "$work/dmabuf.c" "$src/dmabuf.pyx" &&
		cc -shared -fPIC -O2 -Wall $(python3-config --includes) -I"$src" \
			"$work/dmabuf.c" -o "$out/dmabuf$ext" &&
		PYTHONPATH=$work/overlay python3 -c 'import pyverbs.mr, pyverbs.dmabuf as d, sys; sys.exit(not d.__file__.startswith(sys.argv[1]))' "$work/overlay"
}
mkdir -p "$work/overlay"
check "load vgem" modprobe vgem
check "build pyverbs.dmabuf over vgem" build_dmabuf
export PYTHONPATH=$work/overlay
drivers=${PYVERBS_DRIVERS:-rxe roxe}
if [[ " $drivers " == *" rxe "* ]]; then
	check "load rxe" modprobe rdma_rxe
	check "rxe0 on $ROXE_IF" rdma link add rxe0 type rxe netdev "$ROXE_IF"
	run_suite rxe0
	srq_resize rxe0
	check "remove rxe0" rdma link delete rxe0
	check "unload rxe" rmmod rdma_rxe
fi
if [[ " $drivers " == *" roxe "* ]]; then
	check "roxe0 on $ROXE_IF" rdma link add roxe0 type roxe netdev "$ROXE_IF"
	run_suite roxe0
	srq_resize roxe0
fi
if [[ " $drivers " == *" rxe "* ]] && [[ " $drivers " == *" roxe "* ]]; then
	check "roxe passes every pyverbs test rxe passes, or the difference is listed" \
		python3 "$ROXE_ROOT/tests/pyverbs-compare" "$ROXE_OUT/pyverbs-rxe0.log" "$ROXE_OUT/pyverbs-roxe0.log" \
		"$ROXE_ROOT/tests/pyverbs-known.txt" "$ROXE_OUT/pyverbs-table.md"
	cat "$ROXE_OUT/pyverbs-table.md"
fi
rmmod vgem 2>/dev/null
roxe_cleanup
finish
