#!/usr/bin/env bash
# LocVolCalib on the GPU machine, in one go: the GPU tests, the course-large campaigns (float64, then
# float32; naive and the earlier best measured first in each, with the copy baseline), naive vs tuned on
# every dataset, all inside about 430 s.
# Usage (through the device tool): . benchmarks/device_env.sh; bash benchmarks/lvc_campaign.sh [F64 BUDGET] [F32 BUDGET]
# Finpar's datasets: TUNER_FINPAR_DATA (the tests that need them skip without; output.data checks say None).
# Results land in results/ (packed into $OUT/lvc_results.tgz); the per-dataset table as JSON in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp}
export TUNER_CACHE=${TUNER_CACHE:-/tmp/tuner-cache}
ALL=finpar-small,finpar-medium,finpar-large,finpar-small-n32,course-small,course-medium,course-large
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_locvolcalib.py || echo "GPU tests failed with $?"
timeout 170 python3 benchmarks/lvc_campaign.py --dtype float64 --budget "${1:-120s}" || echo "float64 campaign failed with $?"
timeout 65 python3 benchmarks/lvc_campaign.py --dtype float32 --budget "${2:-30s}" --first 2 || echo "float32 campaign failed with $?"
timeout 75 python3 benchmarks/lvc_validate.py --configs naive,tuned --sizes "$ALL" --dtypes float64,float32 --repeats 5 \
  --json "$OUT/lvc_datasets.json" || echo "naive/tuned have mismatches (or ran out of time)"
tar czf "$OUT/lvc_results.tgz" results/*/locvolcalib
