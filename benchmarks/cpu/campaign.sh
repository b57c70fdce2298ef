#!/usr/bin/env bash
# The CPU workloads' campaigns on the GPU machine's host (16 cores), in one command of about 4-5 minutes:
# gemm-cpu int32 1024^3 and 2048^3, float32 2048^3, floyd-warshall-cpu n = 5000, each with its baselines
# (naive OpenMP; numpy's BLAS for float32) timed in the same process (benchmarks/cpu/campaign.py).
# Usage (through the device tool): . benchmarks/common/device_env.sh; bash benchmarks/cpu/campaign.sh [SCALE]
# SCALE multiplies every campaign's search budget (default 1: 150 s of search in all).
# Out: $OUT/cpu_summary.json (best, baselines, speed-ups) and $OUT/cpu_store.tgz (results/store/<cpu>/).
set -uo pipefail
OUT=${OUT:-/tmp}
export TUNER_CACHE=${TUNER_CACHE:-/tmp/tuner-cache}
g++ --version | head -1
timeout 540 python3 benchmarks/cpu/campaign.py --scale "${1:-1}" --json "$OUT/cpu_summary.json" \
  || echo "campaigns: exit $?"
CPU_DIR=$(python3 -c "from tuner.measure.provenance import cpu_info; from tuner.store import gpu_slug; print(gpu_slug(cpu_info()['gpu']))")
[ -d "results/store/$CPU_DIR" ] && tar czf "$OUT/cpu_store.tgz" "results/store/$CPU_DIR" && echo "store: results/store/$CPU_DIR"
