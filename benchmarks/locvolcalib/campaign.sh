#!/usr/bin/env bash
# LocVolCalib on the GPU machine, in one go: the course-large float64 campaign (naive, the earlier best and a
# spread of warp configs first, with the copy baseline), optionally float32, naive vs tuned on every dataset,
# the GPU tests (TESTS: a pytest -k filter), and Nsight Compute's view of the tuned x- and y-kernels.
# Usage (through the device tool): . benchmarks/common/device_env.sh; bash benchmarks/locvolcalib/campaign.sh [F64 BUDGET] [F32 BUDGET]
# (F64_TIMEOUT, TESTS_TIMEOUT: the float64 campaign's and the GPU tests' limits in seconds, 150 and 200)
# Finpar's datasets: TUNER_FINPAR_DATA (the tests that need them skip without; output.data checks say None).
# Results land in the store, results/store/ (packed into $OUT/lvc_results.tgz); the per-dataset table as JSON in
# $OUT, kept with the log as records (results/records/locvolcalib/<gpu>/runs/), by hand.
set -uo pipefail
OUT=${OUT:-/tmp}
export TUNER_CACHE=${TUNER_CACHE:-/tmp/tuner-cache}
ALL=finpar-small,finpar-medium,finpar-large,finpar-small-n32,course-small,course-medium,course-large
timeout "${F64_TIMEOUT:-150}" python3 benchmarks/locvolcalib/campaign.py --dtype float64 --budget "${1:-100s}" || echo "float64 campaign failed with $?"
if [ -n "${2:-}" ]; then
  timeout 70 python3 benchmarks/locvolcalib/campaign.py --dtype float32 --budget "$2" --first 2 || echo "float32 campaign failed with $?"
fi
timeout 60 python3 benchmarks/locvolcalib/validate.py --configs naive,tuned --sizes "$ALL" --dtypes float64,float32 --repeats 5 \
  --json "$OUT/lvc_datasets.json" || echo "naive/tuned have mismatches (or ran out of time)"
tar czf "$OUT/lvc_results.tgz" results/store/*/locvolcalib
# 14 configs of course-medium in each dtype and 5 of partial groups and row limits: 140 s was not enough (run 6)
timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest -q -p no:cacheprovider tests/test_gpu_locvolcalib.py -k "${TESTS:-.}" || echo "GPU tests: exit $?"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$NCU" ]; then
  echo "128 256 256 128" > /tmp/course-large.data
  timeout 45 "$NCU" --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis -k regex:warp_kernel -c 2 \
    python3 -m tuner run locvolcalib /tmp/course-large.data --variant course -o /tmp/prices.data > "$OUT/ncu.txt" 2>&1 \
    || echo "ncu: exit $?"
  tail -c 6000 "$OUT/ncu.txt"
fi
