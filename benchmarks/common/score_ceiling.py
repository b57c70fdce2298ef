"""How high a search's methodology score can go on each complete recording (issue 26's goal is a cold mean of
0.75 at a budget of 10% of the space), by two searches no real one can match:

    nice -n 10 python benchmarks/common/score_ceiling.py

- plateau oracles: evaluations drawn at random from the configs within 1%, 2%, 3% or 5% of the optimum, from the
  first evaluation on (a search that knows where the top is, and nothing within it);
- rank oracles: the same from the best 5%, 10% or 20% of the configs (a search that knows from its first
  evaluation which fifth of the space is best; where the top is a wide plateau, as on the reductions, knowing
  the parameters' effects buys about this);
- full-knowledge models: evaluations in the order of a model's prediction for each config, the model fit to
  the other 90% of the space (10-fold cross-validated, folds shuffled): a random forest, gradient-boosted trees,
  a Gaussian process (Matern 5/2, a length scale per parameter) and a ridge regression on one-hot parameters
  and their pairs, each over the parameters' value indices, on the log of the objective.

Same spaces, budgets and score as cold_strategy_report.py (its `recordings`); written as markdown to
results/records/common/<gpu>/strategies/score_ceiling.md with the command that made it. A search that learns
from its own 10% of the space has less to go on than these models; the gap between them and `auto` is the room
a better surrogate could win, the gap between them and 1 is what the parameters alone do not explain."""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common

from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel  # noqa: E402
from sklearn.linear_model import RidgeCV  # noqa: E402
from sklearn.model_selection import KFold, cross_val_predict  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures  # noqa: E402

from benchmarks.common.cold_strategy_report import recordings  # noqa: E402
from benchmarks.common.report import COMMON, header, records_dir, row  # noqa: E402
from benchmarks.common.strategy_report import budget_for  # noqa: E402
from tuner.answers.compare_scores import best_so_far, methodology_score  # noqa: E402
from tuner.store.kt_files import read_recording  # noqa: E402

PLATEAUS = (0.01, 0.02, 0.03, 0.05)
TOP_SHARES = (0.05, 0.1, 0.2)
ORACLE_REPEATS = 200
GP_MAX = 1000  # spaces with more configs get no Gaussian process (its mean is over the others): its exact fit
# grows with the cube of the configs (GEMM 1536^3, 2384 configs: over 13 minutes for its 10 folds)
MODELS = {
    "forest": lambda d: RandomForestRegressor(200, random_state=0),
    "boosted trees": lambda d: HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=0),
    "Gaussian process": lambda d: GaussianProcessRegressor(
        ConstantKernel() * Matern(length_scale=np.ones(d), nu=2.5) + WhiteKernel(), normalize_y=True, random_state=0
    ),
    "ridge on pairs": lambda d: make_pipeline(
        OneHotEncoder(handle_unknown="ignore", sparse_output=False),
        PolynomialFeatures(2, interaction_only=True, include_bias=False),
        RidgeCV(alphas=np.logspace(-3, 3, 13)),
    ),
}


def _cell(v: float) -> str:
    return "" if np.isnan(v) else f"{v:.3f}"


def score(traces: list, budget: int, values: np.ndarray, maximize: bool) -> float:
    return methodology_score(best_so_far(traces, budget, maximize), values, maximize)["score"]


def plateau_oracle(y: np.ndarray, budget: int, maximize: bool, within: float, rng: np.random.Generator) -> float:
    """Random draws among the configs within `within` of the optimum (the optimum itself once they run out)."""
    optimum = y.max() if maximize else y.min()
    return _oracle(y[(y / optimum if maximize else optimum / y) >= 1 - within], y, budget, maximize, rng)


def rank_oracle(y: np.ndarray, budget: int, maximize: bool, share: float, rng: np.random.Generator) -> float:
    """Random draws among the best `share` of the configs (the optimum itself once they run out)."""
    best_first = np.sort(y)[::-1] if maximize else np.sort(y)
    return _oracle(best_first[: max(1, round(share * len(y)))], y, budget, maximize, rng)


def _oracle(plateau: np.ndarray, y: np.ndarray, budget: int, maximize: bool, rng: np.random.Generator) -> float:
    optimum = y.max() if maximize else y.min()
    traces = []
    for _ in range(ORACLE_REPEATS):
        drawn = list(rng.permutation(plateau)[:budget])
        traces.append(drawn + [optimum] * (budget - len(drawn)))
    return score(traces, budget, y, maximize)


def model_order(make, x: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The configs best-predicted first, each predicted by the model fit to the folds it is not in."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the GP's length-scale bounds
        predicted = cross_val_predict(make(x.shape[1]), x, target, cv=KFold(10, shuffle=True, random_state=0))
    return np.argsort(-predicted, kind="stable")


def main() -> int:
    started, rows, out_dir = time.time(), [], None
    sums: dict[str, list[float]] = {}
    rng = np.random.default_rng(0)
    for label, rec, configs, gpu_dir in recordings():
        out_dir = out_dir or gpu_dir  # beside the first GPU's records, as the cold summary
        budget = budget_for(configs)
        f = read_recording(rec.cachefile, rec.objective, "maximize" if rec.maximize else "minimize")
        ran = [(c, v) for c, v in f.configs.items() if v is not None]
        levels = [[list(vals).index(c[j]) for j, vals in enumerate(f.tune_params.values())] for c, _ in ran]
        x = np.array(levels, dtype=float) / np.maximum(np.max(levels, axis=0), 1)
        y = np.array([v for _, v in ran], dtype=float)
        target = np.log(y) if rec.maximize else -np.log(y)
        cells = {f"within {w:.0%}": plateau_oracle(y, budget, rec.maximize, w, rng) for w in PLATEAUS}
        cells |= {f"best {s:.0%}": rank_oracle(y, budget, rec.maximize, s, rng) for s in TOP_SHARES}
        for name, make in MODELS.items():
            if name == "Gaussian process" and len(y) > GP_MAX:
                cells[name] = float("nan")
                continue
            cells[name] = score([list(y[model_order(make, x, target)][:budget])], budget, np.sort(y), rec.maximize)
        for k, v in cells.items():
            sums.setdefault(k, []).append(v)
        rows.append([label, gpu_dir.name, str(configs), str(budget)] + [_cell(v) for v in cells.values()])
        print(" | ".join(rows[-1]), flush=True)
    if out_dir is None:
        print("no complete recording found")
        return 1
    names = list(sums)
    text = [
        "Ceilings of the methodology score (Willemsen et al. 2024; 0 = random search, 1 = optimum at once) at a "
        "budget of 10% of the valid configs (at least 10, at most 100): random draws among the configs within 1-5% "
        f"of the optimum or among the best 5-20% of the configs ({ORACLE_REPEATS} repeats each), and the configs in "
        f"the order a model predicts from the other 90% of the space (10-fold, shuffled; no Gaussian process past "
        f"{GP_MAX} configs). Made by `nice -n 10 python benchmarks/common/score_ceiling.py` "
        f"({time.time() - started:.0f} s on 2 shared cores).",
        "",
        header("space", "gpu", "configs", "budget", *names),
    ]
    text += [row(*cells) for cells in rows]
    text.append(row("**mean**", "", "", "", *[f"**{np.nanmean(sums[n]):.3f}**" for n in names]))
    out = records_dir(COMMON, out_dir.name, "strategies") / "score_ceiling.md"
    out.write_text("\n".join(text) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
