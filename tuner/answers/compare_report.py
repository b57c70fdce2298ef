"""The outputs of `tuner compare-strategies`: the table's rows and caption, markdown, and the convergence
plot, all from the document that tuner.answers.compare.summarize makes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuner.answers.compare_scores import INTERVAL, WITHIN
from tuner.errors import TunerError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def table_rows(doc: dict, sep: str = " ") -> tuple[list[str], list[list[str]]]:
    """Header and rows of the table; `sep` joins a figure and its spread (a newline stacks them on screen)."""
    header = ["strategy", "score"] + [f"@{c}" for c in doc["checkpoints"]]
    header += [f"evals to {100 * (1 - w):g}%" for w in WITHIN] + ["evals used"]
    rows = []
    for name, e in doc["strategies"].items():
        m = e["methodology"]
        row = [name, "n/a" if math.isnan(m["score"]) else f"{m['score']:.3f}{sep}± {m['error']:.3f}{_interval(m)}"]
        row += [
            f"{e['fraction'][str(c)]['mean']:.3f}{sep}± {e['fraction'][str(c)]['std']:.3f}" for c in doc["checkpoints"]
        ]
        for w in WITHIN:
            t = e["evaluations_to"][f"{w:g}"]
            median = f"> {doc['budget']}" if t["median"] is None else f"{t['median']:g}"
            row.append(median + (f"{sep}({t['never']}/{doc['repeats']} never)" if t["never"] else ""))
        row.append(f"{e['unique_evaluations']:.0f}")
        rows.append(row)
    return header, rows


def caption(doc: dict) -> str:
    """What was compared, and how to read the table."""
    first = next(iter(doc["strategies"].values()))["methodology"]["evaluations"]
    within = "/".join(f"{100 * w:g}%" for w in WITHIN)
    return (
        f"{title(doc)}: {doc['configs']} recorded configs, optimum {objective_text(doc, doc['optimum'])}; "
        f"{doc['repeats']} repeats{_seeds(doc)}, budget {doc['budget']} unique evaluations. @k: best found after k "
        f"unique evaluations as a fraction of the optimum (mean ± std over repeats). Evals to "
        f"{'/'.join(f'{100 * (1 - w):g}%' for w in WITHIN)}: the median over the repeats of the unique evaluations "
        f"until the best was within {within} of the optimum (a repeat that never got there counts as more than the "
        f"budget: '> {doc['budget']}' where the median one never did; (k/{doc['repeats']} never): the repeats that "
        f"never did). Evals used: the unique evaluations a run made, mean over repeats (fewer than the budget "
        f"where a strategy stopped). Score: Willemsen et al. 2024 (0 = calculated random search, "
        f"1 = optimum at once), the mean over evaluations {first[0]}-{first[1]} of the standardised curve "
        f"(± its std over those evaluations) [its {100 * INTERVAL:g}% bootstrap interval over the repeats: how "
        f"much the score owes to which repeats ran]."
    )


def title(doc: dict) -> str:
    """The recording and its GPU, as the caption and the plot both name them (no field left blank)."""
    return recording_name(doc) + (f" on {doc['gpu']}" if doc.get("gpu") else "")


def objective_text(doc: dict, value: float) -> str:
    """A value of the objective with its unit and direction: "12.87 ms, time (lower is better)", "3084 GB/s
    (higher is better)". Kernel Tuner's times (`time`, `*_time`) are in milliseconds; a rate names its unit."""
    objective = str(doc["objective"])
    direction = f"({'higher' if doc['maximize'] else 'lower'} is better)"
    if objective == "time" or objective.endswith("_time"):
        return f"{value:.4g} ms, {objective} {direction}"
    if "/" in objective:  # GB/s, GFLOP/s: the name is the unit
        return f"{value:.4g} {objective} {direction}"
    return f"{value:.4g}, {objective} {direction}"


def _seeds(doc: dict) -> str:
    """The repeats' seeds where they do not start at 0 (--first-seed)."""
    first = doc.get("first_seed", 0)
    return f" (seeds {first}..{first + doc['repeats'] - 1})" if first else ""


def _bounds(methodology: dict) -> tuple[float, float]:
    """A score's bootstrap interval; NaN in a document written before intervals were, and where it has none (one
    repeat), which a document read back from --json holds as null."""
    lo, hi = methodology.get("interval", (math.nan, math.nan))
    return (math.nan if lo is None else float(lo)), (math.nan if hi is None else float(hi))


def _interval(methodology: dict) -> str:
    lo, hi = _bounds(methodology)
    return "" if math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]"


def markdown(doc: dict) -> str:
    header, rows = table_rows(doc)
    lines = [caption(doc), "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def check_plot_path(path: str) -> None:
    """Before the replays: --plot names a format matplotlib writes (by its suffix: without one, matplotlib
    would write another file, PATH.png)."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats:
        said = f"'.{suffix}' is not an image format matplotlib writes" if suffix else "no suffix to name its format"
        raise TunerError(f"--plot {path}: {said}; give one of {', '.join('.' + f for f in formats)}")


def identical_groups(doc: dict) -> list[list[str]]:
    """The strategies in groups whose curves (mean and band) are the same to the last bit, in the document's
    order: drawn as one line, since the later one would hide the earlier (default and default-cold on a
    recording from a file, which has nothing to warm-start from)."""
    groups: list[list[str]] = []
    for name, e in doc["strategies"].items():
        curve = e["curve"]
        for group in groups:
            if doc["strategies"][group[0]]["curve"] == curve:
                group.append(name)
                break
        else:
            groups.append([name])
    return groups


LOG_MANTISSAS = ((1, 1.5, 2, 3, 5, 7), (1, 2, 3, 5), (1, 2, 5), (1, 3), (1,))  # the densest first
LOG_MARGIN = 1.15  # a log axis with margins shows this much more than its data each side
END_GAP = 1.3  # a round tick closer than this factor below an end tick would run into its label


def log_ticks(lo: float, hi: float, most: int = 8, end: bool = False, whole: bool = False) -> list[float]:
    """Round ticks on a log axis from lo to hi: 1, 2, 5, 10, 20 ... or denser where the span is short (1, 2, 3,
    5, 10 ...) or sparser where it is long (1, 3, 10, 30 ..., then decades), the densest of those that gives at
    most `most` ticks; `whole`: whole numbers only (a count of evaluations: never 1.5). Without `end`, ticks on
    the axis' margins too (LOG_MARGIN beyond lo and hi); with it, the axis ends at hi (an evaluation budget) and
    hi itself is the last tick, so that "evaluations needed" reads off the axis up to its end, the round ticks
    stopping short of it (END_GAP) so that no two labels meet. The report's axes (evaluations, times) and
    compare-strategies' evaluations axis alike."""
    first, last = math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1
    low, high = (lo, hi / END_GAP) if end else (lo / LOG_MARGIN, hi * LOG_MARGIN)
    ticks: list[float] = []
    for mantissas in LOG_MANTISSAS:
        # m / 10^-e, not m * 10^e, below 1: 0.3, not 0.30000000000000004
        ticks = [m * 10.0**e if e >= 0 else m / 10.0**-e for e in range(first, last + 1) for m in mantissas]
        ticks = [t for t in ticks if low <= t <= high and (t.is_integer() or not whole)]
        ticks += [float(hi)] if end else []
        if len(ticks) <= most:
            break
    return ticks


def plot(doc: dict, path: Path) -> None:
    """plot_figure, written to `path` (its format by the suffix)."""
    fig = plot_figure(doc)
    fig.savefig(path, dpi=120)


def plot_figure(doc: dict) -> Figure:
    """Each strategy's mean fraction of the optimum against unique evaluations, with its 10th-90th percentile
    band; strategies whose curves are identical drawn once, named together; the legend beside the axes; the
    evaluations on a log axis ticked at round numbers (log_ticks: 1, 2, 5, 10 ... at the default budget) and at
    the budget."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    fig = Figure(figsize=(11, 5.5), layout="constrained")  # no pyplot: nothing global to close
    ax = fig.subplots()
    x = np.arange(1, doc["budget"] + 1)
    for group in identical_groups(doc):
        e = doc["strategies"][group[0]]
        label = group[0] if len(group) == 1 else f"{' = '.join(group)} (identical runs)"
        (line,) = ax.plot(x, e["curve"]["mean"], label=label, linewidth=1.5)
        ax.fill_between(x, e["curve"]["p10"], e["curve"]["p90"], color=line.get_color(), alpha=0.1, linewidth=0)
    ax.plot(x, doc["random_search_calculated"], "k--", linewidth=1, label="random search (calculated)")
    ax.set_xlabel("unique evaluations")
    ax.set_ylabel(
        "fraction of the optimum (" + ("best found / optimum)" if doc["maximize"] else "optimum / best found)")
    )
    ax.set_title(
        f"{title(doc)}: optimum {objective_text(doc, doc['optimum'])}\n"
        f"mean of {doc['repeats']} repeats, band: their 10th-90th percentile",
        fontsize=10,
    )
    # the differences that matter are within a few percent of the optimum, after the first few evaluations
    k = min(10, doc["budget"])
    low = min(e["curve"]["p10"][k - 1] for e in doc["strategies"].values())
    ax.set_ylim(max(0.0, math.floor((low - 0.01) * 20) / 20), 1.005)
    if doc["budget"] > 1:
        ax.set_xscale("log")
        ax.set_xlim(1, doc["budget"])
        ax.xaxis.set_major_locator(FixedLocator(log_ticks(1, doc["budget"], end=True, whole=True)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)  # beside the axes: over no curve
    return fig


# ---- several recordings: the default cold and warm, side by side -------------------------------------


def _score(doc: dict, name: str) -> float:
    e = doc["strategies"].get(name)
    return float("nan") if e is None else e["methodology"]["score"]


def _interval_of(doc: dict, name: str) -> tuple[float, float]:
    e = doc["strategies"].get(name)
    return _bounds(e["methodology"]) if e else (math.nan, math.nan)


def _best_kt(doc: dict) -> tuple[str, float] | None:
    kt = {n: _score(doc, n) for n in doc["strategies"] if n.startswith("kt:") and not math.isnan(_score(doc, n))}
    return max(kt.items(), key=lambda item: item[1]) if kt else None


def recording_name(doc: dict) -> str:
    """A recording as a row, the caption and the plot name it: the workload's size and dtype, or the file's name
    (with the kernel's where the file names one)."""
    if doc["size"]:
        return f"{doc['workload']} {doc['size']} {doc['dtype']}"
    name = Path(doc["recording"]).name
    return name if doc["workload"] in ("", name) else f"{name} (kernel {doc['workload']})"


def _compared(docs: list[dict]) -> list[str]:
    """Every strategy compared over the recordings, the default cold and warm first."""
    from tuner.answers.compare import COLD, WARM

    return [COLD, WARM, *dict.fromkeys(n for d in docs for n in d["strategies"] if n not in (COLD, WARM))]


def summary_rows(docs: list[dict]) -> tuple[list[str], list[list[str]]]:
    """One row per recording: the default with its warm start off and on, then every other strategy's score."""
    from tuner.answers.compare import COLD, WARM

    others = _compared(docs)[2:]
    header = ["recording", "configs", "budget", "cold", "warm", *others, "best kt"]
    rows = []
    for d in docs:
        scores = [_score(d, n) for n in (COLD, WARM, *others)]
        best = _best_kt(d)
        rows.append(
            [recording_name(d), str(d["configs"]), str(d["budget"])]
            + ["n/a" if math.isnan(s) else f"{s:.3f}" for s in scores]
            + [f"{best[0][3:]} {best[1]:.3f}" if best else "n/a"]
        )
    return header, rows


def summary_markdown(docs: list[dict]) -> str:
    header, rows = summary_rows(docs)
    lines = [
        "Methodology scores (Willemsen et al. 2024; 0 = calculated random search, 1 = optimum at once). cold: the "
        "default strategy with its warm start off; warm: with it (from the store's other sizes, dtypes and GPUs; "
        "a recording from a file has none, so there both run alike).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def plot_scores(docs: list[dict], path: Path) -> list[str]:
    """Grouped bars per recording, one for each strategy compared (the default cold and warm first), each with
    its bootstrap interval over the repeats; returns the legend's labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tuner.answers.compare import COLD, WARM

    labels = {COLD: "default, cold", WARM: "default, warm"}
    strategies = [n for n in _compared(docs) if any(n in d["strategies"] for d in docs)]
    names = [recording_name(d) for d in docs]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.3 * len(docs) * len(strategies) + 3) + 2, 4.5), layout="constrained")
    x = np.arange(len(docs))
    width = 0.8 / len(strategies)
    for i, name in enumerate(strategies):
        values = np.array([_score(d, name) for d in docs])
        # whiskers: the score's bootstrap interval over the repeats (none where a document has no interval)
        lo, hi = np.array([_interval_of(d, name) for d in docs]).T
        whiskers = np.nan_to_num(np.maximum(0.0, [values - lo, hi - values]))
        offset = (i - (len(strategies) - 1) / 2) * width
        ax.bar(x + offset, np.nan_to_num(values), width, yerr=whiskers, capsize=2, label=labels.get(name, name))
    ax.axhline(0, color="k", linewidth=0.8)
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("methodology score")
    ax.set_title("Each strategy's score per recording (the default with its warm start off and on)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=7, ncol=max(1, len(strategies) // 12))  # over no bar
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [labels.get(name, name) for name in strategies]
