#!/usr/bin/env bash
# Issue 26 ("a kernel it has never seen"): the complete brute force of Kernel Tuner's convolution example (4786
# valid configs, docs/examples/third-party-kernel.md), a recording no search design here was chosen on. A config
# compiles in up to 34 s (8.4 s on average with 30 compilers at once on the H200 host's 32 cores: the 17x17
# filter is unrolled per output pixel), about 30 minutes for them all, so the campaign spans several
# device commands: each is stopped by SIGINT after LIMIT seconds (its measured rows are flushed to the store)
# and brings the store's new part back; the parts are committed under results/records/conv/<gpu>/brute_force/,
# and the next command resumes from them (rows already measured are served from the store, not measured again).
#
# Usage (through the device tool, from the repository root, carrying external/ and .whl/):
#   bash benchmarks/third_party/conv_brute_force.sh [LIMIT_SECONDS]      (default 500)
# It needs external/kt_convolution/convolution.cu (see the docs page); it makes the project folder
# external/conv-project/ (an empty tuner.toml, `tuner init conv --kernel ... --from-t1 ...`) and seeds its store
# with the committed parts of this GPU. Brings back under $OUT: evaluations/ (the store's parts), tune.json,
# tune.log, count.txt (rows stored so far), status.txt.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
. benchmarks/common/device_env.sh
limit=${1:-500}
out=${OUT:-/tmp/conv_bf_out}
proj="$repo/external/conv-project"
mkdir -p "$out/evaluations"
kernel="$repo/external/kt_convolution/convolution.cu"
[ -f "$kernel" ] || { echo "missing $kernel: see docs/examples/third-party-kernel.md" | tee "$out/status.txt"; exit 2; }
if [ ! -f "$proj/workloads/conv/space.yaml" ]; then
  mkdir -p "$proj" && : > "$proj/tuner.toml"
  (cd "$proj" && python3 -m tuner init conv --kernel "$kernel" --from-t1 "$repo/benchmarks/third_party/convolution.t1.json") \
    || { echo "tuner init failed" | tee "$out/status.txt"; exit 2; }
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
gpu=$(python3 -c "import sys; from tuner.store.paths import gpu_slug; print(gpu_slug(sys.argv[1]))" "$gpu_name")
committed="$repo/results/records/conv/$gpu/brute_force/evaluations"
store="$proj/results/$gpu/conv/evaluations"
mkdir -p "$store"
# The committed parts, less the rows measured before 439c5fc that read a launch the driver refused as a wrong
# answer (Kernel Tuner's unchecked cuLaunchKernel: tuner/measure/cubin_backend.py): those configs are measured
# again. The committed parts keep them as they were recorded.
python3 - "$committed" "$store" <<'PY'
import sys
from pathlib import Path
import pandas as pd
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
for part in sorted(src.glob("*.parquet")) if src.is_dir() else []:
    if (dst / part.name).exists():
        continue
    rows = pd.read_parquet(part)
    stale = (rows.status == "wrong_answer") & rows.git_commit.str.startswith("7d2a046")
    rows[~stale].to_parquet(dst / part.name, index=False)
    print(f"seeded {part.name}: {len(rows) - stale.sum()} rows, {stale.sum()} to measure again")
PY
cores=$(nproc)
export TUNER_COMPILE_WORKERS=$((cores > 4 ? cores - 2 : 2))
cd "$proj"
echo "gpu=$gpu cores=$cores compile_workers=$TUNER_COMPILE_WORKERS limit=${limit}s" | tee "$out/status.txt"
t0=$SECONDS
timeout -s INT -k 60 "$limit" python3 -u -m tuner tune conv --strategy brute_force --quiet --json \
  > "$out/tune.json" 2> "$out/tune.log"
echo "tune rc=$? in $((SECONDS - t0))s" | tee -a "$out/status.txt"
python3 - > "$out/count.txt" 2>&1 <<'PY'
from tuner.store.rows import load_evaluations
df = load_evaluations("conv")
print(len(df), "rows;", df["status"].value_counts().to_dict() if len(df) else {})
PY
cat "$out/count.txt" | tee -a "$out/status.txt"
for part in "$store"/*.parquet; do
  [ -f "$committed/$(basename "$part")" ] || cp "$part" "$out/evaluations/"
done
