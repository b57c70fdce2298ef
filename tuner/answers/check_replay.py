"""`tuner check --simulate`: the regression check replayed from the rounds its baselines recorded, so that a
CI without a GPU tests the gate itself (the statistics, the noise floors, the verdicts and the exit code).

A baseline holds several worker sessions of rounds (tuner.answers.baseline). The replay holds its last
session out: the other sessions are the baseline, the held-out one plays "now", measured in a worker session
of its own as a real check's would be. Unchanged code should then pass; `slowdown` scales the held-out
session's kernel times (not its reference's) by 1 + slowdown, a regression the gate must flag. Nothing is
measured: the verdicts are check_one's on recorded figures, and each result says it was replayed."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from tuner import store
from tuner.answers.baseline import MIN_ROUNDS, load_baselines
from tuner.answers.check import CheckResult, check_one
from tuner.answers.stats import THRESHOLD
from tuner.errors import TunerError
from tuner.workloads import get_workload

GPU_KEYS = ("gpu", "driver", "cuda")


def held_out(base: dict) -> tuple[dict, dict] | None:
    """The baseline without its last session, and that session as a fresh measurement; None when the
    baseline has one session only or its rounds do not split into its sessions."""
    sessions = int(base.get("sessions") or 1)
    rounds = list(base["rounds"])
    references = json.loads(base["references"])
    if sessions < 2 or len(rounds) % sessions or any(len(v) != len(rounds) for v in references.values()):
        return None
    cut = len(rounds) - len(rounds) // sessions
    if cut < MIN_ROUNDS:
        return None
    earlier = {
        **base,
        "rounds": rounds[:cut],
        "sessions": sessions - 1,
        "references": json.dumps({k: v[:cut] for k, v in references.items()}),
    }
    now = {"status": "ok", "rounds": rounds[cut:], "references": {k: v[cut:] for k, v in references.items()}}
    return earlier, now


def simulate_check(
    workloads: Sequence[str] | None = None,
    *,
    threshold: float = THRESHOLD,
    slowdown: float = 0.0,
    root: Path | None = None,
    log: Callable[[str], object] = print,
) -> list[CheckResult]:
    """Every stored baseline (of `workloads`) checked against its own held-out session."""
    if not -0.5 < slowdown < 10:
        raise TunerError(f"--plant-slowdown {slowdown}: give a fraction such as 0.1 (a 10% slower kernel)")
    for name in workloads or ():
        get_workload(name)
    df = load_baselines(Path(root or store.results_root()))
    if workloads:
        df = df[df["workload"].isin(workloads)]
    if df.empty:
        raise TunerError("no baseline stored to replay: record one with `tuner baseline WORKLOAD ...` on a GPU")
    results = []
    for base in df.to_dict("records"):
        split = held_out(base)
        if split is None:
            res = CheckResult(base["workload"], base["size"], base["dtype"], json.loads(base["config"]), "refused")
            res.reason = "a replay needs a baseline of two sessions or more (take it with --sessions 6)"
        else:
            earlier, now = split
            now["rounds"] = [x * (1 + slowdown) for x in now["rounds"]]
            res = check_one(earlier, {k: base[k] for k in GPU_KEYS}, now, threshold=threshold)
            planted = f", its kernel times scaled by {1 + slowdown:g}" if slowdown else ""
            said = f"replayed: sessions 1-{earlier['sessions']} against session {earlier['sessions'] + 1}{planted}"
            res.reason = f"{said}; {res.reason}" if res.reason else said
        log(f"{res.workload} {res.size} {res.dtype}: {res.verdict} ({res.reason})")
        results.append(res)
    return results
