"""The confirmation step after a campaign: its near-ties re-measured side by side, and one of them chosen by a
rule that gives the same answer from run to run.

A campaign measures each config once, a few launches, at some moment of the run; configs that came within
a fraction of a percent of each other are ranked by that moment's noise (two brute-force runs of GEMM 2048^3
on the H200 each named a different one of two configs 0.25% apart). Here the finalists (configs whose
campaign value lies within FINALIST_WITHIN of the best, at most MAX_FINALISTS) are measured again in
alternating rounds, in the space's order and each round starting at the next one (host-code pipelines: one
config's rounds after another's, see tuner/measure/rounds.py), in one worker on one GPU, each compiled and
verified once; then the fastest by median is
found, and the chosen config is the first finalist in the space's order that is not slower than it
significantly (99% bootstrap interval of the change above zero) and by more than TIE. Ties thus resolve to
the canonical config instead of to the noise, at a cost of at most TIE in speed. What a confirmation chose is
read back from the store by tuner.store.confirmations.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tuner import store
from tuner.errors import TunerError
from tuner.stats import compare
from tuner.store.confirmations import CONFIRM_DIR

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace

    from tuner.campaign.session import Session
    from tuner.measure.runner import IsolatedRunner
    from tuner.space import Space

FINALIST_WITHIN = 0.02  # a campaign's single measurement of a config varies by about 1%
# enough that the window, not the count, decides who is a finalist: a cut by count falls among near-ties, where
# the campaign's noise picks who makes it (the H200's GEMM 2048^3 has 7 configs within 1%). A measuring
# process keeps the compiled kernels of as many (tuner.measure.process.Fastest)
MAX_FINALISTS = 8
ROUNDS = 15
# slower by less than this, or not significantly: a tie. Fifteen confirmations of GEMM 2048^3 on two H200s
# (results/records/gemm/nvidia-h200/distributed/*-confirmations-*) measured each finalist's gap to the fastest
# within 0.2%, yet one config sat at +0.33% to +0.54%: a 0.5% band split them 14 to 1, this one agrees in all
TIE = 0.01


def finalists(
    values: dict, order: list[str], maximize: bool, within: float = FINALIST_WITHIN, most: int = MAX_FINALISTS
) -> list[str]:
    """Config keys (canonical JSON) whose campaign objective `values[key]` lies within `within` of the best,
    nearest first, at most `most`."""
    if not values:
        return []
    sign, place = -1 if maximize else 1, _place_in(order)
    ranked = sorted(values, key=lambda k: (sign * values[k], place(k)))
    best = values[ranked[0]]
    near = [k for k in ranked if abs(values[k] / best - 1) <= within]
    return near[:most]


def choose(rounds: dict, order: list[str], tie: float = TIE) -> tuple[str, dict]:
    """rounds: {config key: times in ms}. Returns the chosen key and, per key, its median and its change
    against the fastest (with the interval)."""
    medians = {k: statistics.median(v) for k, v in rounds.items()}
    fastest = min(medians, key=lambda k: medians[k])
    table = {}
    for k in rounds:
        c = compare(rounds[fastest], rounds[k], threshold=tie)
        table[k] = {
            "median_ms": medians[k],
            "change": c.change,
            "ci": [c.ci_low, c.ci_high],
            "tie": c.verdict != "regression",
        }
    ties = [k for k in sorted(rounds, key=_place_in(order)) if table[k]["tie"]]
    return ties[0], table


def space_order(space: Space, searchspace: Searchspace) -> list[str]:
    """The space's configs (canonical JSON) in Kernel Tuner's order: the order ties resolve in."""
    return [store.canonical_config(dict(zip(space.params, c))) for c in searchspace.list]


def _place_in(order: list[str]) -> Callable[[str], int]:
    """A sort key: a config key's place in the space's order (one lookup, not a scan of a space of thousands)."""
    place = {k: i for i, k in enumerate(order)}
    return lambda k: place.get(k, len(order))


def confirm(
    runner: IsolatedRunner,
    params: list[str],
    values: dict,
    order: list[str],
    maximize: bool,
    *,
    rounds: int = ROUNDS,
    log: Callable[[str], object] = print,
) -> dict | None:
    """Re-measure the finalists of `values` ({config key: campaign objective}) in `runner` (an IsolatedRunner)
    and choose among them. None when there is nothing to confirm (fewer than two finalists)."""
    keys = sorted(finalists(values, order, maximize), key=_place_in(order))  # the same order in every run
    if len(keys) < 2:
        return None
    t0 = time.monotonic()
    configs = [json.loads(k) for k in keys]
    try:
        rows = runner.measure_interleaved([[c[p] for p in params] for c in configs], params, rounds, references=False)
    except TunerError as e:  # e.g. the worker cannot start again: the campaign's own answer stands
        log(f"confirmation skipped: {e}")
        return None
    if len(rows) != len(keys) or any(r["status"] != "ok" for r in rows):
        bad = next(
            (r for r in rows if r["status"] != "ok"),
            {"status": "missing", "error": f"{len(rows)} rows for {len(keys)}"},
        )
        log(
            f"confirmation skipped: a finalist failed when measured again ({bad['status']}: {bad.get('error', '')[:200]})"
        )
        return None
    measured = {k: list(r["rounds"]) for k, r in zip(keys, rows)}
    chosen, table = choose(measured, order)
    seconds = time.monotonic() - t0
    fastest = min(table, key=lambda k: table[k]["median_ms"])
    log(
        f"confirmed among {len(keys)} finalists in {seconds:.1f} s: {chosen}"
        + ("" if chosen == fastest else f" (ties the fastest, {table[chosen]['change']:+.2%})")
    )
    return {
        "chosen": json.loads(chosen),
        "finalists": [
            {"config": json.loads(k), "campaign_value": values[k], "rounds_ms": measured[k], **table[k]} for k in keys
        ],
        "rounds": rounds,
        "drawn_from": len(values),  # the campaign's configs measured without error (choice_for prefers the most)
        "seconds": round(seconds, 2),
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "rule": f"first in space order within {TIE:.1%} of the fastest or not significantly slower (99% bootstrap)",
    }


def confirm_and_save(
    session: Session,
    space: Space,
    searchspace: Searchspace,
    values: dict,
    root: Path,
    worker: str,
    log: Callable[[str], object],
) -> dict | None:
    """A finished campaign's confirmation in its session's worker (`values`: {config key: campaign objective}),
    stored under confirmations/ when there was one to make. The record, or None."""
    record = confirm(
        session.runner, list(space.params), values, space_order(space, searchspace), space.maximize, log=log
    )
    if record is not None:
        save(root, record, session.common, session.provenance, worker)
    return record


def save(root: Path, record: dict, common: dict, provenance: dict, worker: str) -> Path:
    """One row per finalist under results/<gpu>/<workload>/confirmations/<campaign>.<worker>.parquet."""
    rows = [
        {
            **common,
            **{k: v for k, v in provenance.items() if not isinstance(v, (dict, list))},
            "worker": worker,
            "config": store.canonical_config(f["config"]),
            "campaign_value": f["campaign_value"],
            "rounds_ms": f["rounds_ms"],
            "median_ms": f["median_ms"],
            "change": f["change"],
            "ci_low": f["ci"][0],
            "ci_high": f["ci"][1],
            "tie": f["tie"],
            "chosen": f["config"] == record["chosen"],
            "rule": record["rule"],
            "drawn_from": record["drawn_from"],
            "seconds": record["seconds"],
            "timestamp": record["timestamp"],
        }
        for f in record["finalists"]
    ]
    part = f"{store.safe_name(common['campaign_id'])}.{store.safe_name(worker)}.parquet"
    path = store.workload_dir(root, provenance["gpu"], common["workload"]) / CONFIRM_DIR / part
    store.write_parquet(pd.DataFrame(rows), path)
    return path
