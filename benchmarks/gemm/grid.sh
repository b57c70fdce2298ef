#!/usr/bin/env bash
# The GEMM campaigns after split-K and the small tiles (issue 24) on the GPU machine, in one command that ends
# within LIMIT seconds (default 510), in order of importance: the split-K GPU tests (every split with both
# reductions, the tiles below 64x64, awkward shapes, float32 and int32; TEST_LIMIT=0 skips them; TESTS=all
# runs the whole GEMM GPU file), then 1024^3, 2048^3 and 4096^3 (SQUARE_BUDGET configs each), then the seeds'
# 64 shapes (BUDGET configs each) for the time left; each campaign times cuBLAS and verifies every config
# (benchmarks/gemm/grid.py). A rerun resumes where the last one stopped (a shape is done once the store holds
# its budget of configs measured with the current kernel). The store's GEMM folder is packed into $OUT/gemm.tgz.
# Usage (through the device tool): . benchmarks/common/device_env.sh; bash benchmarks/gemm/grid.sh
set -uo pipefail
END=$(( $(date +%s) + ${LIMIT:-510} ))
if [ "${TEST_LIMIT:-75}" != 0 ]; then
  echo "== $(date +%T) GPU tests"
  select=(-k "split"); [ "${TESTS:-split}" = all ] && select=()
  timeout "${TEST_LIMIT:-75}" python3 -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py "${select[@]}" || echo "tests ended with $?"
fi
echo "== $(date +%T) 1024^3, 2048^3, 4096^3"
timeout -s INT $(( END - $(date +%s) )) python3 benchmarks/gemm/grid.py --budget "${SQUARE_BUDGET:-24}" \
  --size 1024x1024x1024 --size 2048x2048x2048 --size 4096x4096x4096 --until $(( END - 15 )) || echo "squares ended with $?"
echo "== $(date +%T) grid campaigns"
timeout -s INT $(( END - $(date +%s) )) python3 benchmarks/gemm/grid.py --budget "${BUDGET:-12}" --until $(( END - 15 )) \
  || echo "grid ended with $?"
echo "== $(date +%T) done"
tar czf "${OUT:-/tmp}/gemm.tgz" results/store/"${GPU_SLUG:-nvidia-h100-80gb-hbm3}"/gemm
