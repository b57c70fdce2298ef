#!/usr/bin/env bash
# The Floyd-Warshall campaigns on one GPU, through the device tool:
#   . benchmarks/device_env.sh; bash benchmarks/fw_tune.sh
# GPU tests on awkward graphs, then TPE campaigns (each starting with the seed's configuration and a few
# hand-picked ones) at 11k, 5k and 1k, and the seed's config and the 11k best at 20k. Every time is verified
# exactly against the reference. Results land in results/<gpu>/floyd-warshall/, packed into $OUT/fw_tune.tgz.
set -uo pipefail
trap 'tar czf "${OUT:-/tmp}/fw_tune.tgz" results/*/floyd-warshall' EXIT  # what was measured comes back, even on a timeout
SEED='{"BLOCK":64,"block_size_x":32,"block_size_y":32,"VEC":0,"DPX":0,"PAD":0,"K_UNROLL":64,"LOOKAHEAD":0,"SPLIT":100}'
S16='{"BLOCK":64,"block_size_x":16,"block_size_y":16,"VEC":0,"DPX":0,"PAD":0,"K_UNROLL":64,"LOOKAHEAD":0,"SPLIT":100}'
B128='{"BLOCK":128,"block_size_x":16,"block_size_y":16,"VEC":1,"DPX":0,"PAD":4,"K_UNROLL":4,"LOOKAHEAD":1,"SPLIT":100}'
B128W='{"BLOCK":128,"block_size_x":32,"block_size_y":16,"VEC":1,"DPX":1,"PAD":4,"K_UNROLL":4,"LOOKAHEAD":1,"SPLIT":100}'
B96='{"BLOCK":96,"block_size_x":16,"block_size_y":16,"VEC":0,"DPX":0,"PAD":0,"K_UNROLL":16,"LOOKAHEAD":1,"SPLIT":100}'
B64V='{"BLOCK":64,"block_size_x":16,"block_size_y":8,"VEC":1,"DPX":0,"PAD":4,"K_UNROLL":16,"LOOKAHEAD":1,"SPLIT":100}'
best() { python3 -m tuner best floyd-warshall --size "$1" --json | python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)['config']))"; }

timeout 60 python3 -m pytest -q -x -k awkward tests/test_floyd_warshall_gpu.py 2>&1 | tail -5
timeout "${FW_11K_S:-215}" python3 benchmarks/fw_campaign.py 11k "${FW_11K_BUDGET:-190s}" "$SEED" "$S16" "$B128" "$B128W" "$B96" "$B64V"
BEST=$(best 11k)
echo "best at 11k: $BEST"
timeout 50 python3 benchmarks/fw_campaign.py 5k 35s "$SEED" "$BEST"
timeout 30 python3 benchmarks/fw_campaign.py 1k 20s "$SEED" "$BEST"
timeout 100 python3 benchmarks/fw_campaign.py 20k 2 "$SEED" "$BEST"
python3 benchmarks/fw_report.py
