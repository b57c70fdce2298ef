#!/usr/bin/env bash
# The Floyd-Warshall measurements on one GPU, through the device tool:
#   . benchmarks/common/device_env.sh; bash benchmarks/floyd_warshall/tune.sh [STAGE ...]
# Stages (default: all, in this order):
#   tests     the GPU tests on awkward graphs (every config family against numpy)
#   sweep     benchmarks/floyd_warshall/sweep.py at 11k: ~60 configs built in parallel, each checked exactly; not stored,
#             it picks what the campaign measures ($OUT/sweep_11k.json)
#   minblocks the sweep's 14 best again with every phase-3 MIN_BLOCKS that fits ($OUT/sweep_minblocks_11k.json)
#   campaign  a recorded campaign at 11k: the seed's configuration and the sweep's best FW_TOP (default 8),
#             then FW_MORE (default 0) TPE evaluations
#   small     the brute force of the reduced space (floyd-warshall-small, 5k) for the strategy comparison;
#             it resumes from the store, so a second run completes a cut-off one
#   sizes     the seed's configuration and the best stored at 11k, at 20k and 5k
# Every stored time is verified exactly against the reference. Each stage has a time limit (FW_<STAGE>_S),
# so the store's floyd-warshall folders are packed into $OUT/fw_tune.tgz before the device tool's own limit.
# The sweeps ($OUT/sweep_*.json) and this script's log are kept as records, by hand:
# results/records/floyd-warshall/<gpu>/sweeps/ and .../logs/ (fw_tune_<commit>.log).
set -uo pipefail
OUT=${OUT:-/tmp}
STAGES=${*:-tests sweep minblocks campaign small sizes}
SEED='{"BLOCK":64,"block_size_x":32,"block_size_y":32,"VEC":0,"DPX":0,"PAD":0,"K_UNROLL":64,"LOOKAHEAD":0,"SPLIT":100,"KCHUNK":0,"MIN_BLOCKS":0,"PRIORITY":0}'
best() {  # a config stored before a parameter existed lacks it: the seed's value (the kernel's default) fills it in
  python3 -m tuner best floyd-warshall --size "$1" --json \
    | python3 -c "import json,sys; print(json.dumps({**json.loads(sys.argv[1]), **json.load(sys.stdin)['config']}))" "$SEED"; }
stage() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 2000 > "$OUT/clocks.csv" &
SMI=$!
trap 'kill $SMI 2>/dev/null; tar czf "$OUT/fw_tune.tgz" results/store/*/floyd-warshall*' EXIT  # what was measured comes back

if stage tests; then
  timeout "${FW_TESTS_S:-100}" python3 -m pytest -q -x -k "awkward or campaign_path" tests/test_floyd_warshall_gpu.py 2>&1 | tail -5
fi
if stage sweep; then
  timeout "${FW_SWEEP_S:-200}" python3 benchmarks/floyd_warshall/sweep.py 11000 --repeats 2 --out "$OUT/sweep_11k.json" --top 12 \
    --budget-s "$(( ${FW_SWEEP_S:-200} - 15 ))"
fi
if stage minblocks; then
  timeout "${FW_MINBLOCKS_S:-160}" python3 benchmarks/floyd_warshall/sweep.py 11000 --repeats 2 --from "$OUT/sweep_11k.json" \
    --from-top 14 --vary MIN_BLOCKS=0,2,3,4,5,6,8 --out "$OUT/sweep_minblocks_11k.json" --budget-s "$(( ${FW_MINBLOCKS_S:-160} - 15 ))"
fi
if stage campaign; then
  TOP=$(python3 - "${FW_TOP:-8}" "$OUT"/sweep_*11k.json <<'PY'
import json, sys
rows = [r for f in sys.argv[2:] for r in json.load(open(f))["rows"] if r.get("exact")]
best = {}
for r in sorted(rows, key=lambda r: r["ms"]):
    best.setdefault(json.dumps({"MIN_BLOCKS": 0, **r["config"]}, sort_keys=True), r)
for key in list(best)[: int(sys.argv[1])]:
    print(key)
PY
)
  mapfile -t FIRST <<< "$TOP"
  timeout "${FW_CAMPAIGN_S:-120}" python3 benchmarks/floyd_warshall/campaign.py 11k "$(( ${#FIRST[@]} + 1 + ${FW_MORE:-0} ))" "$SEED" "${FIRST[@]}"
fi
if stage small; then
  timeout "${FW_SMALL_S:-100}" python3 -m tuner tune floyd-warshall-small --size 5k --strategy brute_force --timeout 60 --quiet
  python3 -c "
from tuner.store import load_evaluations
df = load_evaluations('floyd-warshall-small'); print(df.config.nunique(), 'configs of floyd-warshall-small recorded,', (df.status == 'ok').sum(), 'rows ok')"
fi
if stage sizes; then
  BEST=$(best 11k)
  echo "best at 11k: $BEST"
  timeout "${FW_20K_S:-100}" python3 benchmarks/floyd_warshall/campaign.py 20k 2 "$SEED" "$BEST"
  timeout "${FW_5K_S:-40}" python3 benchmarks/floyd_warshall/campaign.py 5k 2 "$SEED" "$BEST"
fi
python3 benchmarks/floyd_warshall/report.py
