#!/bin/bash
# The figures of docs/benchmarks.md "On a 16-core machine", in one call of at most 10 minutes
# (a lent machine's per-call limit), one rank per core:
#   1. the in-job fixed cost: an empty program on 16 ranks, bare / recording / analysed;
#   2. offline analysis of 1e7 synthetic records at K = 1 and 16 (parallel-dijkstra), each
#      rank's CPU against 1/16 of one rank's and rank 0's against the ranks' mean;
#   3. PRK p2p on 16 ranks analysed in the job (48 M records), when the folder has apps/p2p.
# Prepare the folder here first (../shared/device/README.md):
#   rm -rf build; bash ../shared/device/prepare.sh .device benchmarks/init_finalize.c [PRK's p2p, one file]
# (a build/ left from older trees puts their modules in the wheel: setuptools packs all it holds)
# then run from the checkout there:  OUT=/some/dir bash benchmarks/check_16core.sh .device
# (the folder's env.sh installs its wheels and points mpi4py at its MPICH; without the argument
# the mpigraph, MPI and Python of this shell run it, as on a machine of your own).
# Each step's whole output goes to $OUT; the lines that the tables of docs/benchmarks.md hold
# are printed.
set -u
repo=$(pwd)
out=${OUT:-/tmp/check_16core}
work=${WORK:-/tmp/check_16core_work}
mkdir -p "$out" "$work"
TIMEFORMAT="wall %R s"
device=${1:-}
if [ -n "$device" ]; then
    source "$device/env.sh" || exit 1
fi
# Compiled once here, not by each of 16 ranks at its first import.
python3 -m compileall -q "$(python3 -c 'import mpigraph, os; print(os.path.dirname(mpigraph.__file__))')" \
    >/dev/null 2>&1
export XDG_CACHE_HOME=$work/cache
program=""     # built by prepare.sh: the machine has no mpicc
[ -n "$device" ] && [ -x "$device/apps/init_finalize" ] && program=$(cd "$device/apps" && pwd)/init_finalize

echo "=== 1. an empty program on 16 ranks (bench_startup, best / median of 3)"
( cd "$work" && timeout 120 python3 "$repo/benchmarks/bench_startup.py" --nprocs 16 --rounds 3 \
    ${program:+--program "$program"} ) > "$out/startup.txt" 2>&1
echo "rc $?"
grep "^| 16 \|^| ranks" "$out/startup.txt"

echo "=== 2. 1e7 synthetic records, K = 1 and 16 (bench_analysis, parallel-dijkstra)"
( cd "$work" && timeout 240 python3 "$repo/benchmarks/bench_analysis.py" --records 1e7 --nprocs 1 16 \
    --repeat 1 --algorithms parallel-dijkstra --workdir "$work/synth" ) > "$out/analysis.txt" 2>&1
echo "rc $?"
grep "^| 10,\|^| records | trace" "$out/analysis.txt" | head -3 | cut -c1-400
grep "ok:" "$out/analysis.txt" | tail -8
rm -rf "$work/synth"

if [ -n "$device" ] && [ -x "$device/apps/p2p" ]; then
    p2p=$(cd "$device/apps" && pwd)/p2p
    echo "=== 3. PRK p2p on 16 ranks, analysed in the job"
    ( cd "$work" && time timeout 150 python3 -m mpigraph run -n 16 --out "$work/p2p" --verbose \
        -- "$p2p" 200 1000 8000 ) > "$out/p2p_job.txt" 2>&1
    echo "rc $?"
    grep "^mpigraph:\|^wall\|Rate" "$out/p2p_job.txt" | cut -c1-200
    grep "^Critical path" "$work/p2p/summary.txt" | cut -c1-200
    rm -rf "$work/p2p"
fi
