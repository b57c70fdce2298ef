#!/usr/bin/env bash
# The GEMM campaigns on the GPU machine, in order of importance, each capped (SIGINT: what was measured is
# stored): the brute force of the whole space at 2048^3 float32 (cuBLAS timed in the same campaign), the
# best 2048^3 configs transferred to 4096^3 and 1024^3 followed by a short TPE campaign there (and a second
# one at 1024^3), the seeds' versions and the best configs in int32, then the seeds' 64 shapes with the best config of each block tile.
# Usage (through the device tool): . benchmarks/common/device_env.sh; bash benchmarks/gemm/campaigns.sh
# Results land in the store (results/store/) and are packed into $OUT/gemm.tgz. Rerunning resumes from the store.
set -uo pipefail
S=2048x2048x2048
step() {
  local limit=$1
  shift
  echo "== $(date +%T) $*"
  timeout -s INT "$limit" "$@" || echo "step ended with $?"
}
step "${BF_LIMIT:-330}" python3 -m tuner tune gemm --size $S --strategy brute_force --timeout 30 --quiet
step "${SQUARE_LIMIT:-110}" python3 benchmarks/gemm/transfer.py --source $S --top 6 --size 4096x4096x4096 --size 1024x1024x1024 --tpe 15
step "${TPE_LIMIT:-30}" python3 -m tuner tune gemm --size 1024x1024x1024 --strategy tpe --seed 2 --budget 25 --quiet
step "${INT_LIMIT:-30}" python3 benchmarks/gemm/transfer.py --source $S --top 4 --seeds --dtype int32 --size $S
step "${GRID_LIMIT:-110}" python3 benchmarks/gemm/transfer.py --source $S --top 3 --diverse --grid
echo "== $(date +%T) done"
tar czf "${OUT:-/tmp}/gemm.tgz" results/store/*/gemm
