"""The Python API, for notebooks and scripts: the same campaigns and answers as the CLI (which is a thin
layer over these), returning plain dicts and pandas DataFrames."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd


def tune(
    workload: str,
    *,
    size: str | None = None,
    dtype: str | None = None,
    strategy: str | None = None,
    budget: int | str | None = None,
    simulate: bool = False,
    results: str | Path | None = None,
    quiet: bool = True,
    **options: Any,
) -> dict:
    """Run a campaign (or replay one with `simulate=True`) and return its outcome: the best config, its value,
    how many configs were evaluated and measured, failures by class. `budget`: evaluations (150) or a
    duration ("10m"); `options`: any other field of tuner.campaign.request.CampaignRequest (backend, device,
    seed, timeout, patience, storage, warm_start, ...); TunerError for one it does not take, a budget below 1, or a
    `results` that is there and not a folder."""
    from dataclasses import fields

    from tuner.answers.best_config import best as best_answer
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest, parse_budget
    from tuner.errors import TunerError
    from tuner.store import checked_results_folder

    # the request's fields that are not parameters of tune() (the budget's two are set from `budget`)
    own = ("workload", "size", "dtype", "strategy", "max_evals", "time_limit", "simulate", "results", "quiet")
    known = sorted(f.name for f in fields(CampaignRequest) if f.name not in own)
    unknown = sorted(set(options) - set(known))
    if unknown:
        shown = [o for o in known if o != "measure_target"]  # a test hook
        raise TunerError(
            f"tune() has no option {', '.join(unknown)}; besides workload, size, dtype, strategy, budget, simulate, "
            f"results and quiet it takes {', '.join(shown)}"
        )
    _check_text(size=size, dtype=dtype, strategy=strategy, **_of(options, "gpu", "storage", "backend"))
    _check_kinds(options, whole=("device", "seed", "patience"), number=("timeout",))
    max_evals, time_limit = parse_budget(None if budget is None else str(budget))
    if strategy is not None:
        options["strategy"] = strategy
    req = CampaignRequest(
        workload=workload,
        size=size,
        dtype=dtype,
        max_evals=max_evals,
        time_limit=time_limit,
        simulate=simulate,
        results=checked_results_folder(results, "results", may_create=True),
        quiet=quiet,
        **options,
    )
    return asdict(run_campaign(req, stored_best=best_answer))  # a replay's closing notes compare with best()


def best(
    workload: str,
    size: str | None = None,
    dtype: str | None = None,
    gpu: str | None = None,
    *,
    results: str | Path | None = None,
) -> dict:
    """The best stored config for a GPU (default: this machine's), size and dtype, as `tuner best --json`
    answers: config, objective value, time and metrics (the median of the config's measurements), baselines,
    provenance, the kernel source the answer was measured with (`kernel_source`), and the fallback taken
    (nearest size, another GPU) with notes saying so. The rows it answers from: those of the kernel source as it
    is now where there are any at that GPU, size and dtype, and only configs the space holds now
    (docs/concepts.md, Answers). TunerError for a workload, size or dtype the workload does not have, a size
    whose every config failed, or a `results` that is not a folder."""
    from tuner.answers.best_config import best as best_answer
    from tuner.store import checked_results_folder

    _check_text(size=size, dtype=dtype, gpu=gpu)
    return best_answer(workload, size, dtype, gpu=gpu, root=checked_results_folder(results, "results"))


def results(
    workload: str,
    *,
    size: str | None = None,
    dtype: str | None = None,
    gpu: str | None = None,
    results: str | Path | None = None,
) -> pd.DataFrame:
    """The stored evaluations of `workload` as the answers read them, one row per measurement (config, status,
    times, objective, metrics, provenance), narrowed to a size, dtype and GPU where given: configs recorded
    before a parameter with a default existed carry it (spelled as `best` spells them), and where a GPU, size
    and dtype has times taken under the current timing protocol, those taken under an older one are left out,
    with a warning saying how many (the note `tuner results` gives: tuner.answers.selection.protocol_note).
    Rows of every kernel source and every config stored are kept (`kernel_hash` says which source; `best`
    answers from the current one's where it has some). `load_store` keeps every row. The GPU as `best` takes
    it: its stored name, its folder's (`nvidia-h200`) or a word of it (`h200`). TunerError for a workload,
    size or dtype the workload does not have, a GPU it has nothing stored on, or a `results` that is not a
    folder. The columns: docs/store.md (an empty store: an empty frame with the columns every row has)."""
    import warnings

    from tuner.answers.selection import protocol_note, stored_evaluations, without_older_protocols
    from tuner.store import checked_results_folder
    from tuner.store.gpu_choice import required_gpu
    from tuner.workloads import get_workload

    _check_text(size=size, dtype=dtype, gpu=gpu)
    w = get_workload(workload)  # an unknown workload, size or dtype is an error, not an empty table
    sizes = w.space.resolve_size(size, w.parse_size) if size is not None else None
    dtype = w.space.resolve_dtype(dtype) if dtype is not None else None
    df, left = without_older_protocols(
        stored_evaluations(workload, checked_results_folder(results, "results")), w.space
    )
    stored: list[str] = [] if df.empty else [str(g) for g in df["gpu"].unique()]
    named = required_gpu(stored, gpu, workload) if gpu is not None else None
    if df.empty:  # nothing stored: still the schema's columns, so that df["objective_value"] is an empty column
        return _with_schema(df)

    def narrowed(rows: pd.DataFrame) -> pd.DataFrame:
        if sizes is not None:
            rows = rows[(rows["size"] == sizes[0]) | (rows["size_vars"] == json.dumps(sizes[1], sort_keys=True))]
        if dtype is not None:
            rows = rows[rows["dtype"] == dtype]
        if named is not None:
            rows = rows[rows["gpu"] == named]
        return rows.reset_index(drop=True)

    df, left = narrowed(df), narrowed(left)
    if len(left):
        warnings.warn(f"{workload}: {protocol_note(w.space, df, left)}", stacklevel=2)
    return df


def load_store(results: str | Path | None = None) -> pd.DataFrame:
    """Every evaluation in the store (default: the project's results folder), of every workload and GPU, with
    the columns of `results`: every row as stored, times under a superseded timing protocol too (`results`
    leaves those out), but each known workload's configs spelled as `results` and `best` spell them (a
    parameter added since with a default filled in). TunerError for a `results` that is not a folder (a typo
    must not read as an empty store)."""
    from tuner.store import checked_results_folder, load_evaluations

    df = load_evaluations(None, checked_results_folder(results, "results"))
    return _with_schema(df) if df.empty else df


def _check_text(**given: object) -> None:
    """The API's size, dtype and GPU are text, as on the command line: TunerError for another type (a size
    given as a number, `size=4194304`, is `size="n=4194304"` or a named size)."""
    from tuner.errors import TunerError

    for name, value in given.items():
        if value is not None and not isinstance(value, str):
            raise TunerError(
                f"{name}={value!r}: give it as text ({_a(value)} is not one)"
                + (", a named size or the variables, e.g. size='n=4194304'" if name == "size" else "")
            )


def _of(options: dict, *names: str) -> dict:
    return {n: options[n] for n in names if n in options}


def _check_kinds(options: dict, *, whole: tuple[str, ...], number: tuple[str, ...]) -> None:
    """tune()'s numeric options are numbers (a whole one where it counts): TunerError for another type, as the
    command line's parser refuses `--device x`, not a TypeError from deep in the campaign."""
    from tuner.errors import TunerError

    for name in (*whole, *number):
        value = options.get(name)
        ok = (int,) if name in whole else (int, float)
        if value is not None and (isinstance(value, bool) or not isinstance(value, ok)):
            kind = "a whole number" if name in whole else "a number"
            raise TunerError(f"{name}={value!r}: give {kind} ({_a(value)} is not one)")


def _a(value: object) -> str:
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _with_schema(df: pd.DataFrame) -> pd.DataFrame:
    """An empty frame with the evaluation schema's columns (tuner/store/schema.py), numbers as floats."""
    from tuner.store.schema import EVALUATION, NUMBER

    columns = {c: pd.Series(dtype=float if kind == NUMBER else object) for c, kind in EVALUATION.items()}
    return pd.DataFrame({**columns, **{c: df[c] for c in df.columns if c not in columns}})
