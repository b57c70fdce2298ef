#!/usr/bin/env bash
# Speed-up of a distributed brute-force campaign: the whole space once with 1 worker (one GPU) and once with
# 2 workers (two GPUs), each in a fresh results directory and Optuna database; prints both wall times, the
# speed-up and whether the best configs match (each run's best is chosen by its confirmation step among the
# near-ties, tuner/campaign/confirmation.py), and records it with provenance in the records,
# results/records/<workload>/<gpu>/distributed/speedup-<size>_<dtype>-<timestamp>.{json,md}, with each run's rows
# (-rows-<n>-worker(s).parquet, every worker's evaluations) beside them. The replayed recording of a SIMULATE run
# comes from the store (results/store/).
#
#   benchmarks/common/distributed_speedup.sh gemm 2048x2048x2048 float32       # on a machine with 2 GPUs
#   SIMULATE=1 benchmarks/common/distributed_speedup.sh reduction seed float32  # no GPU: replays the recording
#
# Env: PYTHON (default python3), WORK (where the two runs go; default a fresh /tmp dir), SIMULATE=1,
# TUNER_REPLAY_DELAY (with SIMULATE: seconds per replayed evaluation, to stand in for a GPU's work).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 3 ] || { echo "usage: $0 WORKLOAD SIZE DTYPE" >&2; exit 2; }
WORKLOAD=$1 SIZE=$2 DTYPE=$3
PYTHON=${PYTHON:-python3}
WORK=${WORK:-$(mktemp -d /tmp/distributed-speedup.XXXXXX)}
SIM=()
[ "${SIMULATE:-0}" = 1 ] && SIM=(--simulate)
export WORKLOAD SIZE DTYPE WORK SIMULATE="${SIMULATE:-0}"
# the driver's JIT cache would hand the second run every kernel's machine code compiled by the first (a 2-worker
# run right after a 1-worker one was 4.2x faster): each run gets an empty cache of its own (run below), so it
# compiles everything, as a fresh campaign on a fresh host does with the driver's default settings
unset CUDA_CACHE_DISABLE
# nor does the first run pay for compiling Python's bytecode, which the second would find done
"$PYTHON" -m compileall -q -j 0 tuner "$("$PYTHON" -c 'import optuna, os; print(os.path.dirname(os.path.dirname(optuna.__file__)))')" \
    >/dev/null 2>&1 || true

run() {  # $1 workers -> $WORK/w$1/{result.json,status.json,seconds}
    local n=$1 root=$WORK/w$1
    rm -rf "$root"
    mkdir -p "$root"
    if [ "${SIMULATE:-0}" = 1 ]; then  # a replay reads the recording from its results directory
        "$PYTHON" - "$root" <<'EOF'
import os, shutil, sys
from pathlib import Path
from tuner.store.recording_choice import find_recording
from tuner.store import results_root
from tuner.workloads import get_workload
w = get_workload(os.environ["WORKLOAD"])
size_name, _ = w.space.resolve_size(os.environ["SIZE"], w.parse_size)
src = find_recording(results_root(), w.name, size_name, os.environ["DTYPE"])
dst = Path(sys.argv[1]) / src.relative_to(results_root())
dst.parent.mkdir(parents=True, exist_ok=True)
shutil.copy(src, dst)
EOF
    fi
    echo "== brute force of $WORKLOAD $SIZE $DTYPE with $n worker(s), results in $root"
    local t0 t1
    t0=$(date +%s.%N)
    CUDA_CACHE_PATH=$root/jit-cache TUNER_RESULTS=$root "$PYTHON" -m tuner tune "$WORKLOAD" --size "$SIZE" --dtype "$DTYPE" --strategy brute_force \
        --workers "$n" --quiet --json "${SIM[@]}" > "$root/result.json"
    t1=$(date +%s.%N)
    "$PYTHON" -c "print($t1 - $t0)" > "$root/seconds"
    echo "$t0" > "$root/started"
    local name
    name=$("$PYTHON" -c "import json,sys; from tuner.campaign.distributed import default_name; r=json.load(open(sys.argv[1])); print(default_name(r['workload'], r['size'], r['dtype'], 'brute_force', 1))" "$root/result.json")
    "$PYTHON" -m tuner status "$name" --storage "sqlite:///$root/campaigns.sqlite3" --json > "$root/status.json"
    echo "   $(cat "$root/seconds") s"
}

run 1
run 2

"$PYTHON" - <<'EOF'
import json, os, platform, subprocess
from datetime import datetime, timezone
from pathlib import Path
from benchmarks.common.report import records_dir
from tuner.measure.provenance import git_commit, software

work = Path(os.environ["WORK"])
runs = {}
for n in (1, 2):
    d = work / f"w{n}"
    runs[n] = {"seconds": float((d / "seconds").read_text()), "started": float((d / "started").read_text()),
               "result": json.loads((d / "result.json").read_text()),
               "status": json.loads((d / "status.json").read_text())}
one, two = runs[1]["result"], runs[2]["result"]
speedup = runs[1]["seconds"] / runs[2]["seconds"]
same_best = one["best"] is not None and two["best"] is not None and one["best"]["config"] == two["best"]["config"]
smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if os.path.exists("/usr/bin/nvidia-smi") else None
doc = {
    "what": f"brute force of {one['workload']} {one['size']} {one['dtype']}: 1 worker vs 2 workers (one GPU each)",
    "workload": one["workload"], "size": one["size"], "dtype": one["dtype"], "gpu": two["gpu"],
    "simulated": os.environ["SIMULATE"] == "1",
    "seconds_1_worker": round(runs[1]["seconds"], 2), "seconds_2_workers": round(runs[2]["seconds"], 2),
    "speedup": round(speedup, 3), "target": 1.8, "meets_target": speedup >= 1.8, "same_best": same_best,
    "runs": {f"{n}_worker{'s' if n > 1 else ''}": {
        "seconds": round(r["seconds"], 2), "evaluated": r["result"]["evaluated"], "measured": r["result"]["measured"],
        "failures": r["result"]["failures"], "best": r["result"]["best"], "confirmed": r["status"].get("confirmed"),
        # where each worker's time went: its process started this long after the run, then each stage ended
        # this long after its process started (tuner/campaign/distributed/worker.py's _Timeline)
        "per_worker": {w: {**{k: v.get(k) for k in ("done", "device", "gpu", "host", "timeline_s", "setup_s", "launched_early")},
                           "process_started_after_s": round(v["process_started"] - r["started"], 2)
                           if v.get("process_started") else None}
                       for w, v in r["status"]["workers"].items()},
    } for n, r in runs.items()},
    "provenance": {"git_commit": git_commit(), "host": platform.node(), "gpus": smi.stdout.strip().splitlines() if smi else [],
                   "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), **software()},
}
# a rehearsal on a replayed recording stays in WORK: the records hold what a GPU measured
out = work / "distributed" if doc["simulated"] else records_dir(one["workload"], two["gpu"], "distributed")
out.mkdir(parents=True, exist_ok=True)
stem = f"speedup-{one['size']}_{one['dtype']}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
(out / f"{stem}.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
# every run's rows (all workers' parts), so near-ties between the runs' bests can be looked at later
from tuner.store import read_parts
for n in (1, 2):
    base = work / f"w{n}" / ("simulated" if doc["simulated"] else "")
    for kind, folder in (("rows", "evaluations"), ("confirmations", "confirmations")):  # and each confirmation's rounds
        rows = read_parts(f"*/{one['workload']}/{folder}/*.parquet", base)
        if not rows.empty:
            rows.to_parquet(out / f"{stem}-{kind}-{n}-worker{'s' if n > 1 else ''}.parquet", index=False)
from tuner.formatting import config_text
best = lambda r: config_text(r["best"]["config"]) if r["best"] else "none"
md = [f"# Distributed brute force: {doc['what']}", "",
      f"GPU: {doc['gpu']}{' (simulated: replayed recording)' if doc['simulated'] else ''}; commit {doc['provenance']['git_commit']}; "
      f"host {doc['provenance']['host']}; {doc['provenance']['timestamp']}", "",
      "| workers | wall s | configs | best | value |", "|---|---|---|---|---|"]
for n, r in runs.items():
    b = r["result"]["best"]
    md.append(f"| {n} | {r['seconds']:.1f} | {r['result']['evaluated']} | {best(r['result'])} | "
              f"{b['value']:.4g} {b['objective']} |" if b else f"| {n} | {r['seconds']:.1f} | {r['result']['evaluated']} | none | |")
md += ["", f"Speed-up: **{speedup:.2f}x** (target 1.8x: {'met' if speedup >= 1.8 else 'NOT met'}); "
       f"best configs {'identical' if same_best else 'DIFFER'}.", ""]
for n, r in runs.items():  # the confirmation step (tuner/campaign/confirmation.py) is part of each run's wall time
    c = r["status"].get("confirmed")
    md.append(f"- {n} worker(s): " + (f"best chosen among {c['finalists']} near-ties measured again in {c['seconds']:.1f} s"
                                      if c else "no confirmation (fewer than two near-ties)"))
confirmed = {n: read_parts(f"*/{one['workload']}/confirmations/*.parquet",
                           work / f"w{n}" / ("simulated" if doc["simulated"] else "")) for n in (1, 2)}
if any(not c.empty for c in confirmed.values()):  # what each confirmation measured: the near-ties side by side
    md += ["", "The confirmations' finalists (every worker that confirmed; `change`: median against the fastest "
           "of its worker's rounds, with the 99% interval):", "",
           "| workers | worker | config | campaign value | median ms | change | tie | chosen |", "|---" * 8 + "|"]
    for n, c in confirmed.items():
        for _, f in c.iterrows():
            md.append(f"| {n} | {f.worker} | {config_text(json.loads(f.config))} | {f.campaign_value:.5g} | "
                      f"{f.median_ms:.5f} | {f.change:+.2%} [{f.ci_low:+.2%}, {f.ci_high:+.2%}] | {f.tie} | {f.chosen} |")
stages = ("loaded", "joined", "ready", "searched", "confirmed", "closed")
md += ["", "Where the time went: each worker's process started this many seconds into the run, then each stage "
       "ended this many seconds after that (`timeline_s`; the measuring process's set-up in the JSON's `setup_s`).", "",
       "| workers | worker | process start | " + " | ".join(stages) + " |", "|---" * (3 + len(stages)) + "|"]
for n, r in runs.items():
    for w, v in sorted(doc["runs"][f"{n}_worker{'s' if n > 1 else ''}"]["per_worker"].items()):
        t = v.get("timeline_s") or {}
        md.append(f"| {n} | {w} | {v['process_started_after_s']} | " + " | ".join(str(t.get(k, "")) for k in stages) + " |")
md.append("")
(out / f"{stem}.md").write_text("\n".join(md))
print("\n".join(md))
print(f"written: {out / stem}.json, .md")
EOF
