set -x
cd /work/main
export ROXE_CACHE=/var/cache/roxe-bench ROXE_BENCH_PROFILE=0
for m in new old; do
  ko=/tmp/cw/roxe.ko; [ $m = old ] && ko=/tmp/main.ko
  ROXE_BENCH_MODULE=$ko ROXE_BENCH_OUT=/tmp/ab/q4-$m ROXE_BENCH_DRIVERS="rxe roxe" ROXE_BENCH_QPS="1 4" ROXE_BENCH_SIZES="64K 1M" ROXE_BENCH_BW_TESTS="write_bw send_bw read_bw" ROXE_BENCH_LAT_TESTS= ROXE_BENCH_REPEATS=3 scripts/bench > /tmp/ab/q4-$m.log 2>&1
done
for m in new old; do
  ko=/tmp/cw/roxe.ko; [ $m = old ] && ko=/tmp/main.ko
  ROXE_BENCH_MODULE=$ko ROXE_BENCH_OUT=/tmp/ab/full-$m ROXE_BENCH_DRIVERS=roxe ROXE_BENCH_REPEATS=5 scripts/bench > /tmp/ab/full-$m.log 2>&1
done
echo ALLDONE
