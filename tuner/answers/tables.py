"""`tuner results`: the measured configurations of one GPU, size and dtype as a table, best first, and the
sweep tables the course reports printed by hand (the best and median objective per value of a parameter, or
a grid of the best over two parameters)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from rich.console import RenderableType

from tuner.answers.best_config import best_row
from tuner.answers.selection import Selection
from tuner.errors import TunerError
from tuner.formatting import Field, Items, config_text, fitted, readable

if TYPE_CHECKING:
    from tuner.space import Space


def config_table(sel: Selection) -> pd.DataFrame:
    """One row per configuration: its parameters, the median objective and time of its successful
    measurements and how many there were; a configuration that never succeeded shows its latest failure
    class and message. Best first, failures last."""
    space = sel.workload.space
    objective = objective_column(space)
    rows = sel.rows.sort_values("timestamp", kind="stable")
    # one grouped median for every config, not a pandas selection per config (GEMM's 2384 configs at one size
    # took 7 s that way): the configs in the order they were first measured, as a groupby keeps them
    by_config = rows[rows["status"] == "ok"].groupby("config", sort=False)
    medians = by_config[["objective_value", "time_ms"]].median().to_dict("index")
    counts = by_config.size().to_dict()
    last = rows.drop_duplicates("config", keep="last").set_index("config")[["status", "error"]].to_dict("index")
    out = []
    for config in rows["config"].unique():
        median = medians.get(config)
        out.append(
            {
                **json.loads(str(config)),
                objective: median["objective_value"] if median else None,
                "time_ms": median["time_ms"] if median else None,  # the same column when time is the objective
                "measurements": counts.get(config, 0),
                "status": "ok" if median else last[config]["status"],
                "error": None if median else (str(last[config]["error"] or "").strip().splitlines() or [""])[-1][:200],
            }
        )
    columns = [
        *space.params,
        *([objective] if objective != "time_ms" else []),
        "time_ms",
        "measurements",
        "status",
        "error",
    ]
    table = pd.DataFrame(out, columns=columns)
    # `tuner best`'s answer: among near-ties that a confirmation measured again, its choice, not always the top row
    chosen = json.loads(best_row(sel.ok, space.maximize, sel.root)["config"]) if len(sel.ok) else {}
    table.insert(
        len(space.params),
        "chosen",
        [
            all(r.get(k) == v for k, v in chosen.items()) and bool(chosen)
            for r in table[list(space.params)].to_dict("records")
        ],
    )
    failed = table["status"] != "ok"
    table = table.assign(_failed=failed).sort_values(
        ["_failed", objective], ascending=[True, not space.maximize], kind="stable", na_position="last"
    )
    return table.drop(columns="_failed").reset_index(drop=True)


def objective_column(space: Space) -> str:
    """The table's column of the objective: its metric (GB/s, GFLOP/s), or time_ms where time is the objective."""
    return "time_ms" if space.objective == "time" else space.objective


def by_parameters(table: pd.DataFrame, params: list[str], objective: str, maximize: bool) -> pd.DataFrame:
    """One parameter: per value, the configurations measured and failed, the best and median objective, and
    the best one's other parameters. Two: a grid of the best objective, the first parameter's values down,
    the second's across (empty where no configuration of that pair succeeded)."""
    names = [c for c in table.columns if c not in (objective, "chosen", "time_ms", "measurements", "status", "error")]
    unknown = [p for p in params if p not in names]
    if unknown or not 1 <= len(params) <= 2 or len(set(params)) != len(params):
        raise TunerError(
            f"--by takes one or two different parameters of the space ({', '.join(names)}); got " + ", ".join(params)
        )
    ok = table[table["status"] == "ok"]
    if len(params) == 2:
        grid = ok.pivot_table(
            index=params[0], columns=params[1], values=objective, aggfunc="max" if maximize else "min"
        )
        return grid.reindex(index=sorted(table[params[0]].unique()), columns=sorted(table[params[1]].unique()))
    (param,) = params
    rows = []
    for value, group in table.groupby(param, sort=True):
        good = group[group["status"] == "ok"]
        top = good.sort_values(objective, ascending=not maximize, kind="stable").head(1)
        rows.append(
            {
                param: value,
                "configs": len(group),
                "failed": len(group) - len(good),
                f"best {objective}": top[objective].iloc[0] if len(top) else None,
                f"median {objective}": good[objective].median() if len(good) else None,
                "best config": config_text({k: top[k].iloc[0] for k in names if k != param}) if len(top) else "",
            }
        )
    return pd.DataFrame(rows)


def grid_records(grid: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """by_parameters' grid as rows for --json and --csv: the first parameter's values in a column of its name,
    each other column keyed by the second parameter and its value ("block_size_x=32"), so that the keys say
    which parameter they are."""
    named = grid.rename(columns={c: f"{by[1]}={c}" for c in grid.columns})
    named.columns.name = None
    return named.rename_axis(by[0]).reset_index()


def render(
    sel: Selection, table: pd.DataFrame, shown: pd.DataFrame, by: list[str] | None, limit: int | None, width: int
) -> tuple[str, RenderableType]:
    """A heading (what was measured, and what failed how) and `shown` laid out to fit `width` columns
    (tuner.formatting.fitted): the best `limit` configs of `table` (None: all), or by_parameters' table for
    `by`."""
    space = sel.workload.space
    first = sel.rows.iloc[0]
    failed = table[table["status"] != "ok"]["status"].value_counts()
    heading = (
        f"[bold]{sel.workload.name}[/] {first['size']} {sel.dtype} on {first['gpu']}: {len(table)} configuration(s) "
        f"measured in {sel.rows['campaign_id'].nunique()} campaign(s)"
        + (", failed: " + ", ".join(f"{k} {v}" for k, v in failed.items()) if len(failed) else "")
    )
    objective = objective_column(space)
    if by and len(by) == 2:
        # the columns are headed by the across parameter's bare values (the title names it): "32", not
        # "block_size_x=32" in every column, which would wrap over three lines at 80 columns
        fields = [Field(by[0], numeric=True), *(Field(str(c), numeric=True, keep=True) for c in shown.columns)]
        rows = [[value, *(_cell(v) for v in row)] for value, row in shown.iterrows()]
        title = f"best {objective} by {by[0]} (down) and {by[1]} (across)"
        return heading, fitted(fields, rows, width, title=title)
    if by:
        title = f"best {objective} by {by[0]}"
        frame, columns = shown, list(shown.columns)
    else:
        frame = table.head(len(table) if limit is None else limit)
        title = (
            f"best {len(frame)} of {len(table)}, by {objective} ({'higher' if space.maximize else 'lower'} is better)"
        )
        columns = [c for c in table.columns if c != "error" or (frame["status"] != "ok").any()]
        marks = table["chosen"].fillna(False).astype(bool) if "chosen" in table.columns else pd.Series(dtype=bool)
        chosen = [i for i, mark in enumerate(marks) if mark]
        if chosen and chosen[0] >= len(frame):  # a near-tie below the cut: say where the answer is
            title += f"; the config `tuner best` answers is row {chosen[0] + 1} (--top {chosen[0] + 1})"
    fields = [_field(str(c), objective) for c in columns]
    rows = [
        [_cell(v, c) for c, v in zip(columns, values, strict=True)] for values in frame[columns].itertuples(index=False)
    ]
    return heading, fitted(fields, rows, width, title=title)


def _field(column: str, objective: str) -> Field:
    """How a column of these tables is laid out: numbers right, prose and configs wrapping, `chosen` a flag."""
    if column == "chosen":
        return Field(column, flag=True, keep=True)
    if column in ("error", "best config"):
        return Field(column, wrap=True)
    if column in (objective, f"best {objective}"):
        return Field(column, numeric=True, keep=True)
    return Field(column, numeric=column != "status")


def _cell(v: object, column: str = "") -> object:
    if column == "best config" and isinstance(v, str):
        return Items(v.split(", ")) if v else ""  # by_parameters' config_text: wraps between its parameters
    if isinstance(v, (bool, np.bool_)):  # the `chosen` column
        return bool(v)
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return readable(v, keep_zeros=True)
    return str(v)
