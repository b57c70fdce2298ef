#!/usr/bin/env bash
# LocVolCalib on the GPU machine, in one go: a correctness sample on the small datasets (both dtypes), a TPE
# campaign at course-large float64 (with the copy baseline), naive vs tuned on every dataset, `tuner run`.
# Usage (through the device tool): . benchmarks/device_env.sh; bash benchmarks/lvc_campaign.sh [BUDGET]
# Results land in results/ (packed into $OUT/lvc_results.tgz); the tables as JSON in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp}
export TUNER_CACHE=${TUNER_CACHE:-/tmp/tuner-cache}
ALL=finpar-small,finpar-medium,finpar-large,finpar-small-n32,course-small,course-medium,course-large
python3 benchmarks/lvc_validate.py --configs naive,sample:16 --repeats 3 --json "$OUT/lvc_sample.json" \
  || echo "the sample has mismatches"
python3 -m tuner tune locvolcalib --size course-large --dtype float64 --strategy tpe --budget "${1:-140s}" \
  --timeout 60 --quiet --json || echo "campaign failed with $?"
python3 benchmarks/lvc_validate.py --configs naive,tuned --sizes "$ALL" --dtypes float64,float32 --repeats 5 \
  --json "$OUT/lvc_datasets.json" || echo "naive/tuned have mismatches"
timeout 60 python3 -m pytest -q tests/test_gpu_locvolcalib.py -k tuner_run
tar czf "$OUT/lvc_results.tgz" results/*/locvolcalib
