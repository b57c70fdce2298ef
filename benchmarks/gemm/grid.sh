#!/usr/bin/env bash
# The seeds' 64 GEMM shapes on the GPU machine, in one command that ends within LIMIT seconds (default 500):
# first the GEMM GPU tests (awkward shapes, float32 and int32, the 64x64 tiles included; TEST_LIMIT=0 skips
# them), then a tuned campaign per shape not yet tuned (benchmarks/gemm/grid.py, BUDGET configs each) for
# the time left. A rerun resumes where the last one stopped. The store's GEMM folder is packed into $OUT/gemm.tgz.
# Usage (through the device tool): . benchmarks/common/device_env.sh; bash benchmarks/gemm/grid.sh
set -uo pipefail
END=$(( $(date +%s) + ${LIMIT:-500} ))
if [ "${TEST_LIMIT:-180}" != 0 ]; then
  echo "== $(date +%T) GPU tests"
  timeout "${TEST_LIMIT:-180}" python3 -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py || echo "tests ended with $?"
fi
echo "== $(date +%T) grid campaigns"
timeout -s INT $(( END - $(date +%s) )) python3 benchmarks/gemm/grid.py --budget "${BUDGET:-12}" --until $(( END - 15 )) \
  || echo "grid ended with $?"
echo "== $(date +%T) done"
tar czf "${OUT:-/tmp}/gemm.tgz" results/store/nvidia-h100-80gb-hbm3/gemm
