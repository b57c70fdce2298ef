"""What `tuner report` shows, read from the store through the answers' own code (tuner.answers: select,
config_table, by_parameters, export_answers) and gathered into plain frames for the figures: each campaign's
best so far, the sweep tables, the tuned best against the vendor references per size, failures by class, and
the best against the ceiling measured in its own campaign (the copy bandwidth, or the fastest FLOP/s)."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tuner import store
from tuner.answers.best_config import export_answers
from tuner.answers.selection import Selection, select
from tuner.answers.tables import by_parameters, config_table, objective_column
from tuner.space import format_size
from tuner.store.schema import Degraded, collect
from tuner.workloads import Workload

CEILING_BASELINE = "copy"  # a device-to-device copy: the memory roof, measured (the other baselines are vendors')
MAX_SIZES = 12  # convergence panels: the selected size first, then the sizes with the most evaluations
MAX_HEATMAPS = 4  # parameter pairs drawn as heat maps
MAX_VALUES = 24  # a parameter with more distinct values makes an unreadable heat-map axis
MIN_CELLS = 4  # measured cells a pair of parameters needs to be drawn as a heat map
THIN = 3  # a sweep's value measured in fewer configurations than this is thin data


@dataclass
class ReportData:
    """Everything the page draws, for one workload, GPU and dtype, around one selected size."""

    selection: Selection
    gpu: str
    objective: str  # the objective's column in tables: its metric (GB/s), or time_ms
    maximize: bool
    rows: pd.DataFrame  # every evaluation of the GPU and dtype, all sizes
    convergence: pd.DataFrame  # size, campaign_id, strategy, evaluation, best
    sizes_left_out: int  # sizes with campaigns that have no convergence panel (MAX_SIZES)
    sweeps: dict[str, pd.DataFrame]  # parameter -> by_parameters' table of the selected size
    heatmaps: dict[tuple[str, str], pd.DataFrame]  # (down, across) -> grid of the best
    versus: pd.DataFrame  # size, baseline, speedup (reference time / tuned time), times
    failures: pd.DataFrame  # size, status, count (failed rows only)
    failure_messages: pd.DataFrame  # status, error, count: the commonest messages per class
    roofline: pd.DataFrame  # size, metric, achieved, ceiling, reference, fraction
    size: str = ""  # the selected size as the page names it (size_labels)
    valid_configs: int | None = None  # the space's valid configs for the dtype (None: not counted)
    no_heatmap: str = ""  # why no pair of parameters is drawn as a heat map ("" where some are)
    results_options: str = ""  # `tuner results`' options that show this page's data: --size, --dtype, --gpu
    notes: list[str] = field(default_factory=list)
    degraded: Degraded = field(default_factory=Degraded)


def gather(
    workload: str, size: str | None, dtype: str | None, gpu: str | None = None, root: Path | None = None
) -> ReportData:
    """Read the store once and derive every section's data (TunerError for an unknown workload, size or dtype,
    or a workload with nothing stored)."""
    with collect() as degraded:
        stored = store.load_evaluations(workload, root, superseded=True)
        sel = select(workload, size, dtype, gpu=gpu, root=root, evaluations=stored)  # notes older timings left out
        evaluations = store.without_superseded(stored, sel.workload.space)
        chosen_gpu = str(sel.rows["gpu"].iloc[0])
        space = sel.workload.space
        rows = evaluations[(evaluations["gpu"] == chosen_gpu) & (evaluations["dtype"] == sel.dtype)]
        objective = objective_column(space)
        label = size_labels(sel.workload)
        convergence, left_out = _convergence(rows, str(sel.rows["size_vars"].iloc[0]), space.maximize, label)
        table = config_table(sel)
        sweeps, heatmaps, no_heatmap = _sweeps(table, list(space.params), objective, space.maximize)
        baselines = store.load_baselines(workload, root)
        answers = _answers(workload, sel.dtype, chosen_gpu, rows, root, stored, baselines)
        answers.sort(key=_magnitude)
        failures, messages = _failures(rows, label)
    data = ReportData(
        selection=sel,
        gpu=chosen_gpu,
        objective=objective,
        maximize=space.maximize,
        rows=rows,
        convergence=convergence,
        sizes_left_out=left_out,
        sweeps=sweeps,
        heatmaps=heatmaps,
        versus=_versus(answers, label),
        failures=failures,
        failure_messages=messages,
        roofline=_roofline(answers, baselines, space.objective, label),
        size=label(str(sel.rows["size"].iloc[0]), str(sel.rows["size_vars"].iloc[0])),
        valid_configs=_valid_configs(sel),
        no_heatmap=no_heatmap,
        results_options=results_options(sel, chosen_gpu, gpu is not None),
        notes=list(sel.notes),
        degraded=degraded,
    )
    return data


def _answers(
    workload: str,
    dtype: str,
    gpu: str,
    rows: pd.DataFrame,
    root: Path | None,
    evaluations: pd.DataFrame,
    baselines: pd.DataFrame,
) -> list[dict]:
    """`tuner best`'s answer for each size measured on `gpu` (export_answers, of that GPU only: the answers of
    the store's other GPUs, GEMM's 71 sizes on the H200 beside its 65 on the H100, took half the time of a page
    that shows none of them). A GPU with no successful row of the dtype gets every GPU's answers filtered, as
    before: asked of that GPU alone, export_answers would fail where the page must not. Drawn from the page's
    own read of the evaluations and baselines: read again, they took 0.2 to 0.5 s of GEMM's page, and the rows
    they left out were counted twice on it."""
    measured = bool((rows["status"] == "ok").any())
    asked = gpu if measured else None
    found, _ = export_answers(workload, dtype, root, gpu=asked, evaluations=evaluations, baselines=baselines)
    return found if measured else [a for a in found if a["gpu"] == gpu]


SizeLabel = Callable[[str, str | dict], str]  # (a stored size's name, its variables or their JSON) -> its label


def size_labels(workload: Workload) -> SizeLabel:
    """How the page names a size, one notation throughout: its name in the space; else (a size given by its
    variables, stored under their `k=v` spelling) the workload's own notation where the space's named sizes
    are written in it (gemm's 1024x1024x4096 beside its named 2048x2048x2048, not m=1024,n=1024,k=4096),
    spelled as `--size` reads it back; else its stored name, or its variables."""
    named = workload.space.sizes
    template = notation(workload)

    def label(name: str, size_vars: str | dict) -> str:
        values = json.loads(size_vars) if isinstance(size_vars, str) else dict(size_vars)
        if name in named:
            return name
        if template is not None:
            with contextlib.suppress(KeyError, IndexError, ValueError):
                text = template.format(**values)
                if _parse(workload, text) == values:
                    return text
        return name or format_size(values)

    return label


def notation(workload: Workload) -> str | None:
    """The workload's size notation as a format string ("{m}x{n}x{k}" for gemm), learnt from the space's named
    sizes written in it (a name the workload's parse_size reads back as the size's own variables) and checked
    on the workload's parser: a size of distinct values written that way must read back as itself (so that a
    name like 256x256x256 tells the order no less than 256x512x1024); None where no named size is written in
    a notation, or where the named sizes do not all spell out the same way."""
    sizes = {name: values for name, values in workload.space.sizes.items() if _parse(workload, name) == values}
    template = next(filter(None, (_template(name, values) for name, values in sizes.items())), None)
    if template is None:
        return None
    probe = {var: 1009 + 10 * i for i, var in enumerate(next(iter(sizes.values())))}
    try:
        if _parse(workload, template.format(**probe)) != probe:
            return None
        if any(template.format(**values) != name for name, values in sizes.items()):
            return None
    except (KeyError, IndexError, ValueError):
        return None
    return template


def _template(name: str, values: dict) -> str | None:
    """A size's name with each number in it replaced by a variable of that value, in the order the size lists
    them ("256x512x1024" -> "{m}x{n}x{k}"), where each variable is in it once and nothing else is; else None."""
    parts = re.split(r"(\d+)", name.replace("{", "{{").replace("}", "}}"))  # the numbers at the odd places
    left = list(values.items())
    for i in range(1, len(parts), 2):
        var = next((var for var, v in left if str(v) == parts[i]), None)
        if var is None:
            return None
        left = [(k, v) for k, v in left if k != var]
        parts[i] = "{" + var + "}"
    return "".join(parts) if not left else None


def _parse(workload: Workload, text: str) -> dict | None:
    """The workload's reading of a size in its own notation, None where it reads none."""
    try:
        return workload.parse_size(text)
    except Exception:  # noqa: BLE001  (a notation it cannot read: the label falls back to the variables)
        return None


def _convergence(rows: pd.DataFrame, selected: str, maximize: bool, label: SizeLabel) -> tuple[pd.DataFrame, int]:
    """Per campaign, the best objective found after each evaluation (in the order they were stored; a failure
    counts as an evaluation and keeps the best so far)."""
    counts = rows.groupby("size_vars").size()
    order = sorted(counts.index, key=lambda s: (s != selected, -counts[s], s))
    out = []
    for size_vars in order[:MAX_SIZES]:
        at_size = rows[rows["size_vars"] == size_vars]
        for campaign, group in at_size.groupby("campaign_id", sort=True):
            values = group.sort_values("timestamp", kind="stable")["objective_value"].astype(float)
            best = values.cummax() if maximize else values.cummin()
            out.append(
                pd.DataFrame(
                    {
                        "size": label(str(group["size"].iloc[0]), str(size_vars)),
                        "campaign_id": campaign,
                        "strategy": str(group["strategy"].iloc[0]) if "strategy" in group else "",
                        "evaluation": np.arange(1, len(values) + 1),
                        "best": best.ffill().to_numpy(),
                    }
                )
            )
    columns = ["size", "campaign_id", "strategy", "evaluation", "best"]
    frame = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)
    return frame, max(0, len(order) - MAX_SIZES)


def _sweeps(
    table: pd.DataFrame, params: list[str], objective: str, maximize: bool
) -> tuple[dict[str, pd.DataFrame], dict[tuple[str, str], pd.DataFrame], str]:
    """The sweep tables of `tuner results --by`: per parameter that took several values, the best per value;
    the grids of the best over the pairs whose cells differ most (those say most about the space); and, where
    no pair qualifies, why not."""
    ok = table[table["status"] == "ok"]
    varied = [p for p in params if ok[p].nunique() > 1]
    sweeps = {p: by_parameters(table, [p], objective, maximize) for p in varied}
    ranked = []
    narrow = [p for p in varied if ok[p].nunique() <= MAX_VALUES]
    most = 0  # the most measured cells of any pair
    for i, down in enumerate(narrow):
        for across in narrow[i + 1 :]:
            grid = by_parameters(table, [down, across], objective, maximize)
            cells = grid.to_numpy(dtype=float)
            filled = cells[np.isfinite(cells)]
            most = max(most, len(filled))
            if len(filled) >= MIN_CELLS:
                spread = (filled.max() - filled.min()) / max(abs(filled).max(), 1e-300)
                ranked.append((-spread, i, down, across, grid))
    ranked.sort(key=lambda r: (r[0], r[1]))
    heatmaps = {(down, across): grid for _, _, down, across, grid in ranked[:MAX_HEATMAPS]}
    if heatmaps or not varied:
        why = ""
    elif len(narrow) < 2:
        why = (
            f"No heat map: fewer than two parameters took between 2 and {MAX_VALUES} values in the successful "
            "measurements of this size."
        )
    else:
        why = (
            f"No heat map: no pair of parameters has {MIN_CELLS} measured cells (pairs of values with a successful "
            f"configuration; the most any pair has is {most}), too few to show how two parameters interact."
        )
    return sweeps, heatmaps, why


def _valid_configs(sel: Selection) -> int | None:
    """The space's valid configs for the selection's dtype, as `tuner list` and `tuner results` count them (kept
    in the user's cache: a large space takes seconds to count once); None where they cannot be counted."""
    from tuner.store.coverage import space_size

    space = sel.workload.space
    try:
        return int(space_size(space, sel.dtype))
    except Exception:  # noqa: BLE001  (the page is drawn without the count rather than not at all)
        return None


def results_options(sel: Selection, gpu: str, gpu_given: bool) -> str:
    """The options of `tuner results` (and `tuner best`) that answer from this selection's size, dtype and GPU,
    those that are not the defaults: the size where it is not the space's default (the nearest measured, where
    that was taken), spelled as the page names it; the dtype where it is not the space's first; the GPU where
    one was named or this machine's is not the one answered from."""
    space, workload = sel.workload.space, sel.workload
    options = []
    size_vars = json.loads(str(sel.rows["size_vars"].iloc[0]))
    _, default_vars = space.resolve_size(None, workload.parse_size)
    if size_vars != default_vars:
        name = size_labels(workload)(str(sel.rows["size"].iloc[0]), size_vars)  # in the page's notation
        options += [
            "--size",
            name if name in space.sizes or _parse(workload, name) == size_vars else format_size(size_vars),
        ]
    if sel.dtype != space.resolve_dtype(None):
        options += ["--dtype", sel.dtype]
    if gpu_given or "other-gpu" in sel.fallback:
        options += ["--gpu", store.gpu_slug(gpu)]
    return " ".join(shlex.quote(o) for o in options)


def _versus(answers: list[dict], label: SizeLabel) -> pd.DataFrame:
    """Per size, the tuned best (`tuner best`'s answer) against each vendor reference: the reference's time over
    the tuned time (above 1: the tuned config is faster), both medians of the same measuring process."""
    out = [
        {
            "size": label(str(a["size"]), a["size_vars"]),
            "size_vars": json.dumps(a["size_vars"], sort_keys=True),
            "baseline": name,
            "tuned_ms": a["time_ms"],
            "baseline_ms": ref["time_ms"],
            "speedup": ref["time_ms"] / a["time_ms"],
        }
        for a in answers
        for name, ref in a["baselines"].items()
        if name != CEILING_BASELINE and a["time_ms"] > 0
    ]
    return pd.DataFrame(out, columns=["size", "size_vars", "baseline", "tuned_ms", "baseline_ms", "speedup"])


def _magnitude(answer: dict) -> tuple[float, str]:
    """A size's place on a plot's axis: the product of its variables (small to large), then its name."""
    values = [v for v in answer["size_vars"].values() if isinstance(v, (int, float)) and v > 0]
    return float(np.sum(np.log(values))) if values else 0.0, str(answer["size"])


def _failures(rows: pd.DataFrame, label: SizeLabel) -> tuple[pd.DataFrame, pd.DataFrame]:
    failed = rows[rows["status"] != "ok"]
    if failed.empty:
        return pd.DataFrame(columns=["size", "status", "count"]), pd.DataFrame(columns=["status", "error", "count"])
    labels = [label(str(n), str(v)) for n, v in zip(failed["size"], failed["size_vars"])]
    by_size = failed.assign(size=labels).groupby(["size", "status"]).size().rename("count").reset_index()
    # a message's last line says what went wrong (the lines above it are the compiler's or the trace's)
    last = failed["error"].fillna("").astype(str).map(lambda e: (e.strip().splitlines() or [""])[-1][:160])
    messages = failed.assign(error=last).groupby(["status", "error"]).size().rename("count").reset_index()
    messages = messages.sort_values(["status", "count"], ascending=[True, False]).groupby("status").head(3)
    return by_size, messages.reset_index(drop=True)


def _roofline(answers: list[dict], baselines: pd.DataFrame, objective: str, label: SizeLabel) -> pd.DataFrame:
    """Per size, the tuned best against a ceiling measured in the best's own campaign: its GB/s against the
    copy bandwidth where that campaign timed a copy; where the objective is a FLOP/s, against the fastest FLOP/s
    any reference reached there (e.g. cuBLAS: the fastest measured, not a data-sheet peak). Nothing else."""
    out = []
    columns = ["size", "metric", "achieved", "ceiling", "reference", "fraction"]
    if baselines.empty or "campaign_id" not in baselines:
        return pd.DataFrame(columns=columns)
    for a in answers:
        campaign = a["provenance"].get("campaign_id")
        mine = baselines[
            (baselines["campaign_id"] == campaign)
            & (baselines["gpu"] == a["gpu"])
            & (baselines["size_vars"] == json.dumps(a["size_vars"], sort_keys=True))
            & (baselines["dtype"] == a["dtype"])
        ]
        refs = {str(r["baseline"]): json.loads(r["metrics"]) for _, r in mine.sort_values("timestamp").iterrows()}
        copy = refs.get(CEILING_BASELINE, {})
        size = label(str(a["size"]), a["size_vars"])
        for metric, achieved in a["metrics"].items():
            if metric == "GB/s" and copy.get(metric):
                out.append((size, metric, achieved, copy[metric], f"{CEILING_BASELINE} (same campaign)"))
            elif metric == objective and "FLOP/s" in metric:
                peaks = {name: m[metric] for name, m in refs.items() if m.get(metric)}
                if peaks:
                    name = max(peaks, key=lambda k: peaks[k])
                    out.append((size, metric, achieved, peaks[name], f"{name} (same campaign)"))
    frame = pd.DataFrame(out, columns=columns[:-1])
    return frame.assign(fraction=frame["achieved"] / frame["ceiling"]) if len(frame) else pd.DataFrame(columns=columns)
