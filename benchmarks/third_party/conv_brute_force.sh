#!/usr/bin/env bash
# Issue 26 ("a kernel it has never seen"): the complete brute force of Kernel Tuner's convolution example (4786
# valid configs, docs/examples/third-party-kernel.md), a recording no search design here was chosen on. Each
# config compiles in 0.6-14 s (the 17x17 filter is unrolled per output pixel), so the campaign spans several
# device commands: each is stopped by SIGINT after LIMIT seconds (its measured rows are flushed to the store),
# brings the store back, and the next command resumes from it (rows already measured are served from the store).
#
# Usage (through the device tool, from the repository root, carrying external/ and .whl/):
#   bash benchmarks/third_party/conv_brute_force.sh [LIMIT_SECONDS]      (default 500)
# It needs external/kt_convolution/convolution.cu (see the docs page) and the project folder
# external/conv-project/ (an empty tuner.toml and `tuner init conv --kernel ... --from-t1 ...`), whose results/
# holds the store of the earlier commands. Brings back under $OUT: store.tar (the project's results/), tune.json,
# tune.log, count.txt (rows stored so far), status.txt.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
. benchmarks/common/device_env.sh
limit=${1:-500}
out=${OUT:-/tmp/conv_bf_out}
proj="$repo/external/conv-project"
mkdir -p "$out"
[ -f "$proj/workloads/conv/convolution.cu" ] || { echo "missing $proj/workloads/conv: see this script's header" | tee "$out/status.txt"; exit 2; }
cores=$(nproc)
export TUNER_COMPILE_WORKERS=$((cores > 4 ? cores - 2 : 2))
cd "$proj"
echo "cores=$cores compile_workers=$TUNER_COMPILE_WORKERS limit=${limit}s" | tee "$out/status.txt"
t0=$SECONDS
timeout -s INT -k 60 "$limit" python3 -u -m tuner tune conv --strategy brute_force --quiet --json \
  > "$out/tune.json" 2> "$out/tune.log"
echo "tune rc=$? in $((SECONDS - t0))s" | tee -a "$out/status.txt"
python3 - > "$out/count.txt" 2>&1 <<'EOF'
from tuner.store.rows import load_evaluations
df = load_evaluations("conv")
print(len(df), "rows;", df["status"].value_counts().to_dict() if len(df) else {})
EOF
cat "$out/count.txt" | tee -a "$out/status.txt"
tar cf "$out/store.tar" results
