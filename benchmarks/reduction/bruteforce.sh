#!/usr/bin/env bash
# Brute-force campaign of the whole reduction space on the GPU machine, for each size and the given dtypes.
# Usage (through the device tool): . benchmarks/common/device_env.sh; bash benchmarks/reduction/bruteforce.sh float32
# Results land in the store, results/store/ (Parquet parts, Kernel Tuner caches), packed into $OUT/results.tgz.
set -uo pipefail
for dtype in "$@"; do
  for size in seed 16M 64M large; do
    python3 -m tuner tune reduction --size "$size" --dtype "$dtype" --strategy brute_force --timeout 30 --quiet \
      || echo "campaign $size $dtype failed with $?"
  done
done
tar czf "${OUT:-/tmp}/results.tgz" results/store
