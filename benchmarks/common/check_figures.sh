#!/usr/bin/env bash
# Issue 8's figures on a GPU, in phases (run them in one device command, or split over two):
#   baseline  a fresh baseline (6 sessions each, spread over the run) of BASELINE_WORKLOADS: the eight reduction
#             kernels, GEMM 2048^3, three SpMV matrices, Floyd-Warshall 11k, LocVolCalib course-large float64
#   check     the time of one full `tuner check` of all of them (the issue's "under 5 minutes")
#   aa        A/A checks for AA_S seconds over every baselined kernel (a fresh worker per check, as `tuner
#             check` does)
#   ab        A/B checks with planted slowdowns on the 2^28 reduction kernels, AB_REPEATS each
#   bash benchmarks/common/check_figures.sh baseline check aa ab
# The baselines go to the store (results/store/<gpu>/<workload>/check/baseline.parquet, what `tuner check`
# reads); the figures' records to results/records/common/<gpu>/check/.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
AA_S=${AA_S:-300}
AB_REPEATS=${AB_REPEATS:-10}
# the baseline phase's workloads (a 6-session baseline of the 8 reduction kernels alone takes ~7 minutes)
BASELINE_WORKLOADS=${BASELINE_WORKLOADS:-reduction gemm spmv floyd-warshall locvolcalib}
phases=${*:-baseline check aa ab}
gpu_dir=$("$PYTHON" -c "from tuner.measure.provenance import gpu_info; from tuner.store import gpu_slug; print(gpu_slug(gpu_info()['gpu']))")
figs=results/records/common/$gpu_dir/check
mkdir -p "$figs"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
secs() { "$PYTHON" -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$@"; }

for phase in $phases; do
  case $phase in
  baseline)
    t0=$(date +%s.%N)
    # one command per workload: --size names differ between workloads
    for w in $BASELINE_WORKLOADS; do
      case $w in
      reduction) "$PYTHON" -m tuner baseline reduction --sessions 6 ;;
      gemm) "$PYTHON" -m tuner baseline gemm --size 2048x2048x2048 --dtype float32 --sessions 6 ;;
      spmv) "$PYTHON" -m tuner baseline spmv --size uniform-1M-8 --size powerlaw-2M-16 --size laplace2d-4M \
          --dtype float32 --sessions 6 ;;
      floyd-warshall) "$PYTHON" -m tuner baseline floyd-warshall --size 11k --sessions 6 ;;
      locvolcalib) "$PYTHON" -m tuner baseline locvolcalib --size course-large --dtype float64 --sessions 6 ;;
      *) echo "no baseline recipe for $w" >&2; exit 2 ;;
      esac
    done
    echo "baseline of all workloads: $(secs "$t0" "$(date +%s.%N)") s" | tee "$figs/baseline-$stamp.time" ;;
  check)
    t0=$(date +%s.%N)
    # nothing changed since the baseline: each kernel's verdict is an A/A check too (counted below)
    "$PYTHON" -m tuner check --markdown "$figs/check-$stamp.md" --junit "$figs/check-$stamp.xml" --json \
        > "$figs/check-$stamp.json" || true
    echo "full check of all workloads: $(secs "$t0" "$(date +%s.%N)") s" | tee "$figs/check-$stamp.time" ;;
  aa)
    "$PYTHON" benchmarks/common/check_figures.py aa --seconds "$AA_S" --out "$figs/aa-6-sessions-$stamp.jsonl" ;;
  ab)
    "$PYTHON" benchmarks/common/check_figures.py ab --plant large:float32:finish=0 --plant large:int32:finish=0 \
        --repeats "$AB_REPEATS" --out "$figs/ab-6-sessions-$stamp.jsonl" ;;
  *) echo "unknown phase $phase (baseline, check, aa, ab)" >&2; exit 2 ;;
  esac
done
"$PYTHON" - "$figs" <<'PY'
import glob, json, sys
for mode in ("aa", "ab"):
    rows = [json.loads(line) for f in sorted(glob.glob(f"{sys.argv[1]}/{mode}-6-sessions-*.jsonl")) for line in open(f)]
    flagged = sum(r["verdict"] == "regression" for r in rows)
    print(f"{mode} (all runs so far): {len(rows)} kernel checks, {flagged} flagged ({flagged / max(1, len(rows)):.1%})")
checks = [c for f in sorted(glob.glob(f"{sys.argv[1]}/check-*.json")) for c in json.load(open(f))["checks"]]
flagged = sum(c["verdict"] == "regression" for c in checks)
print(f"full checks with --json (nothing changed since their baselines): {len(checks)} kernel checks, {flagged} flagged")
PY
