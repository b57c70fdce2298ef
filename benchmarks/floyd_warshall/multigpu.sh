#!/usr/bin/env bash
# Floyd-Warshall on two GPUs (the seed's split of phase 3 by rows, a peer copy of the pivot row block each
# round), on a machine with at least two GPUs, through the device tool:
#   . benchmarks/common/device_env.sh; bash benchmarks/floyd_warshall/multigpu.sh [N]
# 1. verifies G = 2 against the numpy reference on small awkward graphs (tests/test_floyd_warshall_gpu.py),
# 2. times G = 1 and G = 2 at n = N (default 20000; a graph with 6N edges) for the seed's configuration and
#    the best stored for 11k on the H100, each with SPLIT 90/100/110 on two GPUs: every time verified
#    against the scipy reference and stored under results/store/<gpu>/floyd-warshall/ like any campaign,
# 3. prints the speed-ups and packs the store's floyd-warshall folders into $OUT/fw_multigpu.tgz.
set -uo pipefail
trap 'tar czf "${OUT:-/tmp}/fw_multigpu.tgz" results/store/*/floyd-warshall' EXIT  # results come back even on a timeout
N=${1:-20000}
nvidia-smi -L
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "needs two GPUs"; exit 2; }
python3 -m pytest -q -k "two_gpus" tests/test_floyd_warshall_gpu.py 2>&1 | tail -5

SEED='{"BLOCK":64,"block_size_x":32,"block_size_y":32,"VEC":0,"DPX":0,"PAD":0,"K_UNROLL":64,"LOOKAHEAD":0,"SPLIT":100,"KCHUNK":0,"MIN_BLOCKS":0}'
TUNED=$(python3 -m tuner best floyd-warshall --size 11k --gpu "NVIDIA H100 80GB HBM3" --json \
        | python3 -c "import json,sys; print(json.dumps({**json.loads(sys.argv[1]), **json.load(sys.stdin)['config']}))" "$SEED")
# (a config stored before a parameter existed lacks it: the seed's value, the kernel's default, fills it in)
with_split() { python3 -c "import json,sys; c=json.loads(sys.argv[1]); c['SPLIT']=int(sys.argv[2]); print(json.dumps(c))" "$1" "$2"; }
python3 benchmarks/floyd_warshall/campaign.py "n=$N,gpus=1" 2 "$SEED" "$TUNED"
python3 benchmarks/floyd_warshall/campaign.py "n=$N,gpus=2" 6 \
  "$SEED" "$TUNED" "$(with_split "$SEED" 90)" "$(with_split "$SEED" 110)" "$(with_split "$TUNED" 90)" "$(with_split "$TUNED" 110)"

python3 - "$N" "$SEED" "$TUNED" <<'PY'
import json, sys
from tuner.store import canonical_config, load_evaluations
n, seed, tuned = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
df = load_evaluations("floyd-warshall")
df = df[df.status == "ok"]
size = df.size_vars.map(json.loads)
def ms(config, gpus):
    rows = df[(size.map(lambda s: (s["n"], s["gpus"])) == (n, gpus)) & (df.config == canonical_config(config))]
    return rows.time_ms.median() if len(rows) else float("nan")
for name, c in (("seed", seed), ("tuned", tuned)):
    one = ms(c, 1)
    two = min(ms({**c, "SPLIT": s}, 2) for s in (90, 100, 110))
    print(f"n={n} {name}: 1 GPU {one:.1f} ms ({n**3 / one / 1e9:.2f} T/s), 2 GPUs {two:.1f} ms "
          f"({n**3 / two / 1e9:.2f} T/s): speed-up {one / two:.2f}x")
PY
