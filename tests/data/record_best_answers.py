"""Record what `tuner best WORKLOAD --size SIZE --dtype DTYPE --gpu GPU --json` answers for every stored
(GPU, workload, size, dtype) that has at least one successful evaluation, into best_answers.json beside this
script. tests/test_best_unchanged.py checks that the code still gives the same config (and value) for each.

The recording in best_answers.json was made with the code as it was before tuner/ was split into subpackages
(commit 4c1d35e, "Review of the change: tuner check loads each workload's space once..."), checked out as a
worktree at /tmp/base, on the store committed with it (identical to results/store/ in the restructured tree):

    git -C /work/main worktree add /tmp/base HEAD
    cd /tmp/base && PYTHONPATH=/tmp/base TUNER_RESULTS=/tmp/base/results \\
        /work/main/.venv/bin/python /work/main/tests/data/record_best_answers.py \\
        --output /work/main/tests/data/best_answers.json

It runs against either code version: it imports `best` from tuner.answers.best_config (after the
restructure) or tuner.query (before). Each answer is computed by calling `best` exactly as the CLI's `_best`
does: best(workload, size, dtype, gpu=gpu, root=<--results, default None>), with `size` the stored `size`
column (the name `--size` takes) and `gpu` the stored GPU name. As a check of the enumeration it also computes
each answer with the evaluations loaded once (as `tuner export` does) and stops if the two disagree.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    from tuner.answers.best_config import best
except ImportError:
    from tuner.query import best

import tuner
from tuner import store
from tuner.workloads import all_workloads


def combinations(root=None) -> list[tuple[str, str, str, str]]:
    """Every stored (workload, size, dtype, gpu) with at least one row of status "ok", sorted."""
    out = set()
    for w in all_workloads():
        df = store.load_evaluations(w.name, root)
        if df.empty:
            continue
        ok = df[(df["status"] == "ok") & (df["workload"] == w.name)]
        for (size, dtype, gpu), _ in ok.groupby(["size", "dtype", "gpu"]):
            out.add((w.name, str(size), str(dtype), str(gpu)))
    return sorted(out)


def record(answer: dict) -> dict:
    entry = {"workload": answer["workload"], "size": answer["size"], "dtype": answer["dtype"], "gpu": answer["gpu"],
             "size_vars": answer["size_vars"], "config": answer["config"], "value": answer["value"],
             "objective": answer["objective"], "measurements": answer["measurements"],
             "fallback": answer["fallback"]}
    if answer["notes"]:
        entry["notes"] = answer["notes"]
    return entry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=None, help="results directory (default: the code's own default)")
    p.add_argument("--output", type=Path, default=Path(__file__).with_name("best_answers.json"))
    args = p.parse_args(argv)
    print(f"tuner from {tuner.__file__}; best from {best.__module__}", file=sys.stderr)

    entries = []
    loaded: dict[str, tuple] = {}
    for workload, size, dtype, gpu in combinations(args.results):
        # exactly as `tuner best WORKLOAD --size SIZE --dtype DTYPE --gpu GPU --json`
        answer = best(workload, size, dtype, gpu=gpu, root=args.results)
        # the same with the evaluations loaded once: it must agree (the test takes this path, for speed)
        if workload not in loaded:
            loaded[workload] = (store.load_evaluations(workload, args.results), store.load_baselines(workload, args.results))
        evaluations, baselines = loaded[workload]
        again = best(workload, size, dtype, gpu=gpu, root=args.results, evaluations=evaluations, baselines=baselines)
        if (again["config"], again["value"], again["fallback"]) != (answer["config"], answer["value"], answer["fallback"]):
            raise SystemExit(f"{workload} {size} {dtype} {gpu}: best() answers differently with evaluations= given")
        if (answer["gpu"], answer["size"], answer["dtype"]) != (gpu, size, dtype):
            print(f"note: {workload} {size} {dtype} {gpu} answered for {answer['gpu']} {answer['size']} "
                  f"{answer['dtype']} ({answer['fallback']})", file=sys.stderr)
        entry = record(answer)
        answered = {k: entry[k] for k in ("gpu", "size", "dtype")}
        entry.update(workload=workload, size=size, dtype=dtype, gpu=gpu)  # keyed by what was asked
        if answered != {"gpu": gpu, "size": size, "dtype": dtype}:
            entry["answered"] = answered
        entries.append(entry)

    lines = [json.dumps(e, sort_keys=True, separators=(",", ":")) for e in entries]
    args.output.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    print(f"wrote {len(entries)} answers to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
