"""The strategy comparison over every recorded complete (brute-force) space, in one command:

    python benchmarks/common/strategy_report.py [--repeats 30] [--out SUMMARY.md]

For each space recorded in the store (results/store/): `tuner compare-strategies` at a budget of 10% of the
valid configurations (at most 100), its table and convergence plot in the records
(results/records/<workload>/<gpu>/strategies/), and one summary table (markdown,
results/records/common/<gpu>/strategies/summary.md) with each strategy's methodology score, whether the default
beats the best Kernel Tuner strategy, how often the default gets within 5% of the optimum, and what its early
stopping saved. docs/strategies.md quotes the summary table (pasted by hand)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common
from benchmarks.common.report import COMMON, header, records_dir, row  # noqa: E402
from tuner import store  # noqa: E402
from tuner.answers.compare import compare
from tuner.answers.compare_report import markdown, plot  # noqa: E402
from tuner.search.names import COMPARED_STRATEGIES  # noqa: E402
from tuner.search.strategies import DEFAULT_PATIENCE, DEFAULT_STRATEGY  # noqa: E402
from tuner.store.coverage import recordings  # noqa: E402
from tuner.workloads import all_workloads  # noqa: E402

KT_PREFIX = "kt:"


BUDGET_CAP = 100


def budget_for(configs: int, cap: int = BUDGET_CAP) -> int:
    """The comparisons' budget: 10% of a space's valid configs, at least 10, at most `cap` (0: no cap)."""
    budget = max(10, configs // 10)
    return min(cap, budget) if cap else budget


def label_filter(only: str) -> Callable[[str], bool]:
    """The reports' --only: keep a space whose label holds one of the comma-separated texts (all, if none)."""
    texts = [o for o in only.split(",") if o]
    return lambda label: not texts or any(o in label for o in texts)


def complete_recordings(root: Path):
    """(workload, size, dtype, gpu dir in the store, configs) of every recording that holds every valid config."""
    for w in all_workloads():
        for rec in recordings(root, w.name, w.space):
            if rec.complete:
                yield w.name, rec.size, rec.dtype, Path(root) / rec.gpu, rec.space_size


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--strategies", default=",".join(COMPARED_STRATEGIES))
    p.add_argument("--out", help="summary markdown (default: results/records/common/<gpu>/strategies/summary.md)")
    args = p.parse_args()
    root = store.results_root()
    strategies = [s for s in args.strategies.split(",") if s]
    lines, gpu_dir = [], None
    for workload, size, dtype, gpu_dir, configs in complete_recordings(root):
        budget = budget_for(configs)
        doc = compare(workload, size, dtype, strategies=strategies, repeats=args.repeats, budget=budget, jobs=args.jobs)
        outdir = records_dir(workload, gpu_dir.name, "strategies")
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / f"{size}_{dtype}.md").write_text(markdown(doc))
        slim = {k: v for k, v in doc.items() if k != "random_search_calculated"}  # the curves are in the plot
        slim["strategies"] = {n: {k: v for k, v in e.items() if k != "curve"} for n, e in doc["strategies"].items()}
        (outdir / f"{size}_{dtype}.json").write_text(json.dumps(slim, indent=1))
        plot(doc, outdir / f"{size}_{dtype}.png")
        scores = {n: e["methodology"]["score"] for n, e in doc["strategies"].items()}
        kts = [n for n in scores if n.startswith(KT_PREFIX)]
        best_kt = max(kts, key=scores.__getitem__) if kts else None
        d = doc["strategies"].get("default")
        within = (f"{doc['repeats'] - d['evaluations_to']['0.05']['never']}/{doc['repeats']}" if d else "")
        stop = d["stopping"][str(DEFAULT_PATIENCE)] if d else None
        used = f"{stop['evaluations']:.0f} ({stop['fraction']:.3f})" if stop else ""
        verdict = "" if not (d and best_kt) else ("yes" if scores["default"] >= scores[best_kt] else "**no**")
        lines.append([f"{workload} {size} {dtype}", str(configs), str(budget)]
                     + [f"{scores[n]:.3f}" for n in strategies] + [verdict, within, used])
        print(" | ".join(lines[-1]), flush=True)
    if gpu_dir is None:
        print("no complete recording found")
        return 1
    columns = (["space", "configs", "budget"] + strategies
              + ["default >= best kt", "default within 5% (runs)",
                 f"default with patience {DEFAULT_PATIENCE}: evals used (fraction of optimum)"])
    command = "python benchmarks/common/strategy_report.py " + " ".join(sys.argv[1:])
    text = [f"Methodology scores (Willemsen et al. 2024; 0 = random search, 1 = optimum at once), {args.repeats} "
            "repeats, budget 10% of the valid configs (at most 100). `default` is what `tuner tune --budget N` runs: "
            f"`{DEFAULT_STRATEGY}` warm-started from the best configs of the other recorded sizes, `default-cold` "
            f"the same without the warm start; without --budget it also stops after {DEFAULT_PATIENCE} evaluations "
            f"without a 0.5% gain (last column). Made by `{command.strip()}`.", "",
            header(*columns)]
    text += [row(*cells) for cells in lines]
    out = Path(args.out) if args.out else records_dir(COMMON, gpu_dir.name, "strategies") / "summary.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
