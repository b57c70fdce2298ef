#!/usr/bin/env bash
# Issue 8's figures on a GPU in one command: a fresh baseline of the eight reduction kernels (6 sessions,
# spread over the run), the time of one full `tuner check`, A/A checks for AA_S seconds (a fresh worker per
# check, as `tuner check` does), and A/B checks with planted slowdowns on the 2^28 kernels.
#   bash benchmarks/check_figures.sh            # AA_S=300 AB_REPEATS=10 by default
# Records go to results/<gpu>/reduction/check/figures/ (the baseline itself to check/baseline.parquet).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
AA_S=${AA_S:-300}
AB_REPEATS=${AB_REPEATS:-10}
gpu_dir=$("$PYTHON" -c "from tuner.provenance import gpu_info, gpu_slug; print(gpu_slug(gpu_info()['gpu']))")
figs=results/$gpu_dir/reduction/check/figures
mkdir -p "$figs"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
t0=$(date +%s.%N); "$PYTHON" -m tuner baseline reduction --sessions 6; t1=$(date +%s.%N)
echo "baseline: $("$PYTHON" -c "print(round($t1 - $t0, 1))") s"
t0=$(date +%s.%N); "$PYTHON" -m tuner check reduction --markdown "$figs/check-$stamp.md" || true; t1=$(date +%s.%N)
echo "full check of the eight kernels: $("$PYTHON" -c "print(round($t1 - $t0, 1))") s" | tee "$figs/check-$stamp.time"
"$PYTHON" benchmarks/check_figures.py aa --seconds "$AA_S" --out "$figs/aa-6-sessions-$stamp.jsonl"
"$PYTHON" benchmarks/check_figures.py ab --plant large:float32:finish=0 --plant large:int32:finish=0 \
    --repeats "$AB_REPEATS" --out "$figs/ab-6-sessions-$stamp.jsonl"
"$PYTHON" - "$figs" "$stamp" <<'PY'
import json, sys
figs, stamp = sys.argv[1:]
for mode in ("aa", "ab"):
    rows = [json.loads(line) for line in open(f"{figs}/{mode}-6-sessions-{stamp}.jsonl")]
    flagged = sum(r["verdict"] == "regression" for r in rows)
    print(f"{mode}: {len(rows)} kernel checks, {flagged} flagged ({flagged / max(1, len(rows)):.1%})")
PY
