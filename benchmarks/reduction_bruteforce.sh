#!/usr/bin/env bash
# Brute-force campaign of the whole reduction space on the GPU machine, for each size and the given dtypes.
# Usage (through the device tool): . benchmarks/device_env.sh; bash benchmarks/reduction_bruteforce.sh float32
# Results land in results/ (Parquet parts, Kernel Tuner caches) and are packed into $OUT/results.tgz.
set -uo pipefail
for dtype in "$@"; do
  for size in seed 16M 64M large; do
    python3 -m tuner tune reduction --size "$size" --dtype "$dtype" --strategy brute_force --timeout 30 --quiet \
      || echo "campaign $size $dtype failed with $?"
  done
done
tar czf "${OUT:-/tmp}/results.tgz" results
