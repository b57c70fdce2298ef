"""The cold strategy comparison (issue 26): every strategy without a warm start, over every recorded complete
(brute-force) space, at a budget of 10% of its valid configurations:

    nice -n 10 python benchmarks/common/cold_strategy_report.py [--repeats 10] [--first-seed 0] [--jobs 1]
        [--strategies auto,tpe,...] [--cap 100] [--only TEXT,...] [--out FILE]
        [--save-traces FILE.json.gz] [--load-traces FILE.json.gz ...]

The spaces: every complete recording in the store (strategy_report.complete_recordings), and every complete
recording the store's ranking has set aside, kept as a Kernel Tuner cache under
results/records/<workload>/<gpu>/recordings/ (export_recording.py; replayed over the configs it holds, as
`tuner compare-strategies --recording` does). For each space: the methodology score (Willemsen et al.,
tuner.answers.compare_scores) of each strategy, whether the cold `auto` strategy reaches the best Kernel Tuner
strategy's score, and the mean over the spaces; written as markdown (default
results/records/common/<gpu>/strategies/cold_summary.md) with the command that made it, and `auto`'s 90%
bootstrap interval over the repeats per space and for the mean. One process unless --jobs: the comparison
functions are called directly, so nothing here depends on a cold/warm switch of `tuner compare-strategies`.

--save-traces keeps every replay's objective values; --load-traces reuses those of the spaces a file holds for the
same strategies, seeds and budget, so a report too long for one command (the uncapped budget at 40 repeats) is
made in parts, on different machines, and scored whole."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common

from benchmarks.common.report import COMMON, RECORDS, header, records_dir, row  # noqa: E402
from benchmarks.common.strategy_report import (  # noqa: E402
    BUDGET_CAP,
    KT_PREFIX,
    budget_for,
    complete_recordings,
    label_filter,
)
from tuner import store  # noqa: E402
from tuner.answers.compare import (  # noqa: E402
    Recording,
    load_file_recording,
    load_recording,
    space_size,
    summarize,
    traces_of_spaces,
)
from tuner.answers.compare_scores import INTERVAL, best_so_far, interval, score_resamples  # noqa: E402

STRATEGIES = ("auto", "tpe", "random", "kt:genetic_algorithm", "kt:dual_annealing", "kt:greedy_ils", "kt:random_sample")
CANDIDATE = "auto"


def recordings(keep: Callable[[str], bool] = lambda label: True) -> Iterator[tuple[str, Recording, int, Path]]:
    """(label, recording, configs, gpu folder) of each space compared whose label `keep` keeps: the store's
    complete recordings, then the files set aside under results/records/*/*/recordings/."""
    for workload, size, dtype, gpu_dir, configs in complete_recordings(store.results_root()):
        label = f"{workload} {size} {dtype}"
        if keep(label):
            yield label, load_recording(workload, size, dtype, gpu_dir.name), configs, gpu_dir
    for path in sorted(RECORDS.glob("*/*/recordings/*.cache.json*")):
        name = path.name.split(".cache.json")[0].replace("_", " ").replace("-", " timed ", 1)
        label = f"{path.parts[-4]} {name} (file)"
        if keep(label):
            rec = load_file_recording(path)
            yield label, rec, space_size(rec), path.parent.parent


def load_traces(paths: list[str], strategies: list[str], seeds: range) -> dict[tuple[str, int], dict[str, list]]:
    """{(label, budget): {strategy: traces}} from files --save-traces wrote, for these strategies and seeds."""
    found: dict[tuple[str, int], dict[str, list]] = {}
    for path in paths:
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
        if list(doc["seeds"]) != [seeds[0], len(seeds)]:
            raise SystemExit(f"{path}: traces of seeds {doc['seeds']}, not [{seeds[0]}, {len(seeds)}] (first, repeats)")
        for space in doc["spaces"]:
            if set(strategies) <= set(space["traces"]):
                found[(space["label"], space["budget"])] = {s: space["traces"][s] for s in strategies}
    return found


def save_traces(path: str, seeds: range, spaces: list[tuple[str, int, dict[str, list]]]) -> None:
    with gzip.open(path, "wt") as f:
        json.dump({"seeds": [seeds[0], len(seeds)],
                   "spaces": [{"label": label, "budget": budget, "traces": traces}
                              for label, budget, traces in spaces]}, f)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=0,
                   help="seed of the first repeat: a design chosen on seeds 0..9 is checked on seeds 10.. (held out)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (the traces do not depend on it)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--cap", type=int, default=BUDGET_CAP,
                   help=f"most evaluations a run (default {BUDGET_CAP}; 0: none, 10%% of every space)")
    p.add_argument("--only", default="", help="comma-separated parts of the spaces' labels to keep")
    p.add_argument("--out", help="markdown (default: results/records/common/<gpu>/strategies/cold_summary.md)")
    p.add_argument("--save-traces", metavar="FILE", help="write every replay's values (.json.gz) for --load-traces")
    p.add_argument("--load-traces", metavar="FILE", nargs="+", default=[],
                   help="reuse the replays these files hold for the same strategies, seeds and budget")
    args = p.parse_args()
    strategies = [s for s in args.strategies.split(",") if s]
    rows, candidate_scores, resamples, started = [], [], [], time.time()
    spaces = [(label, rec, configs, budget_for(configs, args.cap), gpu_dir)
              for label, rec, configs, gpu_dir in recordings(label_filter(args.only))]
    if not spaces:
        print("no complete recording found")
        return 1
    out_dir = spaces[0][4]  # the summary goes beside the first GPU's records
    seeds = range(args.first_seed, args.first_seed + args.repeats)
    print(f"{len(spaces)} spaces, {len(strategies)} strategies, {args.repeats} repeats, {args.jobs} processes", flush=True)
    known = load_traces(args.load_traces, strategies, seeds)
    todo = [(rec, budget) for label, rec, _, budget, _ in spaces if (label, budget) not in known]
    print(f"{len(spaces) - len(todo)} spaces' replays loaded, {len(todo)} to run", flush=True)
    ran = iter(traces_of_spaces(todo, strategies, seeds, args.jobs))
    every = [known[(label, budget)] if (label, budget) in known else next(ran) for label, _, _, budget, _ in spaces]
    if args.save_traces:
        save_traces(args.save_traces, seeds, [(s[0], s[3], t) for s, t in zip(spaces, every, strict=True)])
    for (label, rec, configs, budget, gpu_dir), traces in zip(spaces, every, strict=True):
        doc = summarize(rec, traces, budget, args.first_seed)
        scores = {n: e["methodology"]["score"] for n, e in doc["strategies"].items()}
        kts = [n for n in scores if n.startswith(KT_PREFIX)]
        best_kt = max(kts, key=scores.__getitem__) if kts else None
        verdict = "" if best_kt is None or CANDIDATE not in scores else (
            "yes" if scores[CANDIDATE] >= scores[best_kt] else "**no**")
        rows.append([label, gpu_dir.name, str(configs), str(budget)]
                    + [f"{scores[n]:.3f}" for n in strategies] + [best_kt or "", verdict])
        for name in (CANDIDATE, best_kt):  # each one's 90% interval: whether the repeats decide the verdict
            bounds = doc["strategies"][name]["methodology"]["interval"] if name in scores else None
            rows[-1].append("{:.2f} - {:.2f}".format(*bounds) if bounds else "")
        if CANDIDATE in scores:
            candidate_scores.append(scores[CANDIDATE])
            # the resamples themselves, for the mean's interval below (the document keeps only their interval)
            bsf = best_so_far(traces[CANDIDATE], budget, rec.maximize)
            resamples.append(score_resamples(bsf, rec.values, rec.maximize))
        print(" | ".join(rows[-1]), flush=True)
    mean = sum(candidate_scores) / len(candidate_scores) if candidate_scores else float("nan")
    # the mean's interval: resample i of every space averaged (each space's repeats resampled on their own)
    mean_lo, mean_hi = interval(np.mean(resamples, axis=0)) if resamples else (float("nan"), float("nan"))
    command = "python benchmarks/common/cold_strategy_report.py " + " ".join(sys.argv[1:])
    text = [
        f"Cold methodology scores (Willemsen et al. 2024; 0 = random search, 1 = optimum at once): no warm start, "
        f"{args.repeats} repeats (seeds {args.first_seed}..{args.first_seed + args.repeats - 1}), budget 10% of the "
        f"valid configs (at least 10{f', at most {args.cap}' if args.cap else ''}). `{CANDIDATE}` mean over the spaces: {mean:.3f} "
        f"({100 * INTERVAL:g}% bootstrap interval over the repeats {mean_lo:.3f} - {mean_hi:.3f}; each space's, and "
        f"the best Kernel Tuner strategy's, in the last columns). Made by `{command.strip()}` "
        f"({time.time() - started:.0f} s, {args.jobs} process(es) on a machine of {os.cpu_count()} cores).",
        "",
        header("space", "gpu", "configs", "budget", *strategies, "best kt", f"{CANDIDATE} >= best kt",
               f"{CANDIDATE} {100 * INTERVAL:g}% interval", f"best kt {100 * INTERVAL:g}% interval"),
    ]
    text += [row(*cells) for cells in rows]
    out = Path(args.out) if args.out else records_dir(COMMON, out_dir.name, "strategies") / "cold_summary.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
