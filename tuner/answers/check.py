"""`tuner check`: catch performance regressions of the best configs in CI.

`check` re-measures each baseline's config (tuner.answers.baseline) the same way (verifying its output
again), normalises by the reference of the same round, and compares distributions (tuner.stats).
This module holds the run, the verdict for one kernel and the refusal rules; the results and the exit code are
in tuner.answers.check_result, the inputs' checks in check_inputs, the re-tune of a regressed kernel in
check_retune, the reports in check_report. Exit 0 pass, 1 regression (slower, or a
wrong answer / failure), 2 could not run (no GPU, no baseline, a refused comparison, a baseline recorded
before its space gained a parameter or timed otherwise than kernels are timed now, or of a workload nothing
defines now; a comparison that gave no finite number). The baselines are the project's own (its store's root
alone: never those shipped with the built-in workloads); those recorded on other GPUs are not checked, and said.
A check whose baseline's config is no longer the stored best for its GPU, size and dtype says so
(check_rows.StoreRows), and so does one whose kernel source changed since its baseline."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from tuner import store
from tuner.answers.baseline import (
    MIN_ROUNDS,
    Baselines,
    baseline_sessions,
    measuring_process,
    noise_floor,
    read_baselines,
    unreadable_text,
)
from tuner.answers.check_inputs import (
    check_plant,
    check_retune,
    check_threshold,
    lacking_parameters,
    planted_config,
    timing_differs,
)
from tuner.answers.check_result import CheckResult, CheckRun, note
from tuner.answers.check_retune import recovery, retuned
from tuner.answers.check_rows import StoreRows
from tuner.errors import TunerError
from tuner.measure.provenance import gpu_info, kernel_hash
from tuner.space import Space
from tuner.stats import THRESHOLD, compare, normalise
from tuner.workloads import get_workload


def _major(version: str) -> str:
    return str(version).split(".")[0]


def _positive_time(value: object) -> bool:
    try:
        return math.isfinite(float(value)) and float(value) > 0  # type: ignore[arg-type]  # checked: raises
    except (TypeError, ValueError):
        return False


def _refusal(base: dict, gpu: dict) -> str | None:
    if base["gpu"] != gpu["gpu"]:
        return f"baseline taken on {base['gpu']}, this is {gpu['gpu']}"
    if _major(base["driver"]) != _major(gpu["driver"]):
        return f"driver {base['driver']} at baseline, {gpu['driver']} now (major version differs)"
    if _major(base["cuda"]) != _major(gpu["cuda"]):
        return f"CUDA {base['cuda']} at baseline, {gpu['cuda']} now (major version differs)"
    return None


def check_one(
    base: dict, gpu: dict, now: dict, *, threshold: float = THRESHOLD, allow_different: bool = False
) -> CheckResult:
    """The verdict for one baseline row and one fresh measurement (pure: unit-tested without a GPU). Fails closed:
    a measurement, or a comparison, that holds no finite positive time is `invalid` (exit 2), never a pass."""
    res = CheckResult(
        base["workload"],
        base["size"],
        base["dtype"],
        json.loads(base["config"]),
        "pass",
        reference=base.get("reference") or "",
    )
    if now["status"] == "stale baseline":  # could not run: nothing of today's space to measure
        res.verdict, res.reason = "stale", now["error"]
        return res
    refusal = _refusal(base, gpu)
    if refusal and not allow_different:
        res.verdict, res.reason = "refused", refusal + " (use --allow-different to compare anyway)"
        return res
    if now["status"] != "ok":
        res.verdict, res.reason = "failed", f"{now['status']}: {now.get('error', '')[:300]}"
        return res
    b_rounds, n_rounds = list(base["rounds"]), list(now["rounds"])
    if len(b_rounds) < MIN_ROUNDS:  # compare() needs as many on each side
        res.verdict = "refused"
        res.reason = (
            f"the baseline holds {len(b_rounds)} round(s), fewer than the {MIN_ROUNDS} a comparison needs: record it "
            f"again with `tuner baseline {base['workload']}`"
        )
        return res
    if not n_rounds or not all(_positive_time(x) for x in n_rounds):
        res.verdict = "invalid"
        res.reason = f"the fresh measurement's rounds are not all positive finite times: {n_rounds[:5]}"
        return res
    sessions = baseline_sessions(base)
    res.baseline_ms, res.now_ms = float(pd.Series(b_rounds).median()), float(pd.Series(n_rounds).median())
    res.rounds = [float(x) for x in n_rounds]
    b_ref = json.loads(base["references"]).get(res.reference)
    n_ref = now.get("references", {}).get(res.reference)
    pairs = [("raw", b_rounds, n_rounds)]
    if b_ref and n_ref:
        pairs.append(("normalised", list(normalise(b_rounds, b_ref)), list(normalise(n_rounds, n_ref))))
    for label, b, n in pairs:
        floor = noise_floor(b, sessions, threshold)
        c = compare(b, n, threshold=floor)
        setattr(res, label, {"change": c.change, "ci": [c.ci_low, c.ci_high], "verdict": c.verdict, "threshold": floor})
    res.decided_by = deciding(res.raw, res.normalised)
    decider = getattr(res, res.decided_by)
    res.verdict, res.noise_floor = decider["verdict"], decider["threshold"]
    notes = ["compared anyway: " + refusal] if refusal else []
    if res.verdict == "invalid":
        notes.append(
            f"the {res.decided_by} comparison gave no finite change, interval or noise floor "
            f"({decider['change']:+.3g} [{decider['ci'][0]:+.3g}, {decider['ci'][1]:+.3g}], floor "
            f"{decider['threshold']:.3g}): not a verdict"
        )
    if res.normalised and res.decided_by == "raw":
        notes.append(
            f"decided on raw times: the {res.reference} reference did not track this kernel between "
            f"the baseline's sessions (noise floor {res.normalised['threshold']:.1%} normalised, "
            f"{res.raw['threshold']:.1%} raw)"
        )
    slow = slow_rounds(b_rounds, n_rounds)
    if slow and res.verdict == "pass" and decider["ci"][1] > decider["threshold"]:
        notes.append(
            f"{slow}, so the interval reaches {decider['ci'][1]:+.1%}: this pass does not rule out a slowdown that "
            "large (run the check again)"
        )
    if sessions < 2:
        notes.append(
            "one baseline session: its session-to-session noise is unknown, so only the "
            f"{threshold:.0%} threshold guards against it (take the baseline with --sessions 6)"
        )
    res.reason = "; ".join(notes)
    return res


SLOW_ROUND = 1.5  # a round this many times its side's median time: a cold start or a busy GPU, not the kernel


def slow_rounds(baseline: list[float], now: list[float]) -> str:
    """Which rounds of either side took SLOW_ROUND times their side's median or more, in words ("" where none): a
    few such rounds make a check's bootstrap interval reach as far as they are slow while its median stays put."""
    said = []
    for side, rounds in (("measured now", now), ("of the baseline", baseline)):
        median = float(np.median(rounds))
        slow = [i + 1 for i, r in enumerate(rounds) if r >= SLOW_ROUND * median]
        if slow:
            which = f"round{'s' if len(slow) > 1 else ''} {', '.join(map(str, slow))}"
            said.append(
                f"{len(slow)} of the {len(rounds)} rounds {side} ({which}) took {SLOW_ROUND}x their median or more"
            )
    return "; ".join(said)


def deciding(raw: dict, normalised: dict) -> str:
    """Which comparison's verdict is the check's. The normalised times (a throttled runner moves kernel
    and reference alike), unless the reference did not move with the kernel between the baseline's
    sessions: then dividing by it only adds its own noise (the copy beside LocVolCalib's compute-bound
    solver on the H100: a floor of 10.9% normalised against 3.0% raw)."""
    return "normalised" if normalised and normalised["threshold"] <= raw["threshold"] else "raw"


def note_kernel_changed(res: CheckResult, base: dict, space: Space) -> None:
    """The note of a check whose kernel source changed since its baseline (its kernel_hash, as every row records
    it: tuner.measure.provenance.kernel_hash): a regression may be that change, or the baseline may be due for a
    refresh once the change is meant."""
    recorded = base.get("kernel_hash")
    if res.verdict == "stale" or not isinstance(recorded, str) or not recorded:
        return
    now = kernel_hash(space)
    if recorded != now:
        note(
            res,
            f"the kernel source changed since the baseline (kernel_hash {recorded} then, {now} now): refresh the "
            f"baseline with `tuner baseline {base['workload']}` once the change is meant",
        )


def missing_baseline(workload: str, baselines: Baselines, gpu: str | None, none: str) -> str:
    """Why a workload named on the command line has no baseline to check: its baseline part could not be read
    (named), else `none`."""
    damaged = baselines.unreadable_of([workload], gpu)
    if damaged:
        return unreadable_text(damaged)
    return none


def note_stored_best(res: CheckResult, base: dict, space: Space, rows: StoreRows) -> None:
    """The note (and `stored_best`) of a check whose baseline's config is no longer the stored best."""
    if res.verdict == "stale":  # said already: record it again
        return
    found = rows.stored_best(base, space)
    if found:
        res.stored_best, said = found
        note(res, said)


def unknown_workload(base: dict, why: str) -> CheckResult:
    """The result of a baseline of a workload nothing defines now (renamed, its plugin gone): stale, naming the part
    it was read from, so that the rest of the gate still runs."""
    res = CheckResult(base["workload"], base["size"], base["dtype"], json.loads(base["config"]), "stale")
    res.reason = (
        f"the baseline part {base.get('part', '?')} is of workload '{base['workload']}', which nothing defines now "
        f"({why}): remove its baseline, or restore the workload"
    )
    return res


def prepare(
    df: pd.DataFrame,
    workloads: Sequence[str] | None,
    plant: dict | None,
    baselines: Baselines,
    gpu: str | None,
    none: Callable[[str], str],
    log: Callable[[str], object],
) -> tuple[dict[str, Space], dict[str, str], list[CheckResult]]:
    """What a check (run_check) and its replay (tuner.answers.check_replay) do before the first kernel: the spaces
    of the workloads of the baselines `df` (and why each workload nothing defines now is unknown: its baselines
    are stale, unknown_workload), --plant checked against them and against every baseline's config (said now,
    not after minutes of measuring), a line for each baseline row or part the read left out, and a refused result
    for each workload named without a baseline (named, so a CI gate must not pass it by): its baseline part on
    `gpu` could not be read (named), else `none(workload)`. Returns the spaces and the unknown workloads, by
    workload, and those results, each logged."""
    spaces, unknown = {}, {}
    for name in sorted(set(df["workload"])):
        try:
            spaces[name] = get_workload(name).space
        except TunerError as e:  # a baseline of a workload since renamed or removed: that baseline is stale
            unknown[name] = str(e)
    check_plant(plant or {}, spaces)
    for base in df.to_dict("records") if plant else ():  # a planted config that breaks a restriction: said first
        if base["workload"] in spaces:
            planted_config(base, spaces[base["workload"]], plant or {})
    for line in baselines.left_out.lines():  # the exit status says a part was left out; this says which, and why
        log(f"not checked: {line}")
    checked = set(df["workload"])
    results = [
        CheckResult(w, "", "", {}, "refused", missing_baseline(w, baselines, gpu, none(w)))
        for w in workloads or ()
        if w not in checked
    ]
    for res in results:
        log(f"{res.workload}: refused ({res.reason})")
    return spaces, unknown, results


def run_check(
    workloads: Sequence[str] | None = None,
    *,
    rounds: int = 20,
    threshold: float = THRESHOLD,
    allow_different: bool = False,
    backend: str = "nvcuda",
    device: int = 0,
    timeout: float = 120,
    root: Path | None = None,
    plant: dict | None = None,
    retune: int = 0,
    log: Callable[[str], object] = print,
) -> CheckRun:
    check_threshold(threshold)
    if rounds < MIN_ROUNDS:
        raise TunerError(f"a check needs at least {MIN_ROUNDS} rounds to compare, got --rounds {rounds}")
    check_retune(retune)
    root = Path(root or store.results_root())
    for name in workloads or ():  # an unknown name: an error, not an empty check
        get_workload(name)
    here = gpu_info(device)
    baselines = read_baselines(root)  # the project's own: not those shipped with the built-in workloads
    if here["gpu"] == "unknown":  # what to run instead: --simulate replays baselines, the project's or the shipped
        instead = (
            "`tuner check --simulate --demo` tries the gate on the baselines shipped with the built-in workloads"
            if baselines.frame.empty
            else "`tuner check --simulate` tests the gate on the baselines' recorded rounds"
        )
        raise TunerError(f"no CUDA GPU found: a check needs the GPU it compares (without one, {instead})")
    df = baselines.frame
    if df.empty:
        damaged = baselines.unreadable_of()
        if damaged:
            raise TunerError(f"no baseline could be read: {unreadable_text(damaged)}")
        raise TunerError("no baseline stored: record one with `tuner baseline WORKLOAD ...`")
    if workloads:
        df = df[df["workload"].isin(workloads)]
    mine = df[df["gpu"] == here["gpu"]]
    if mine.empty and not allow_different:
        of = f" of {', '.join(workloads)}" if workloads else ""
        damaged = baselines.unreadable_of(workloads, here["gpu"])
        raise TunerError(
            f"no baseline{of} for {here['gpu']}"
            + (
                f": {unreadable_text(damaged)}"
                if damaged
                else f" (there are for {', '.join(sorted(df['gpu'].unique()))}); use --allow-different to compare anyway"
                if not df.empty
                else f": record one with `tuner baseline {' '.join(workloads or ['WORKLOAD'])}`"
            )
        )
    run = CheckRun()
    others = df[df["gpu"] != here["gpu"]] if not mine.empty else df.iloc[:0]
    if not others.empty:  # never silently: a gate that names no kernels checks this GPU's alone
        gpus = ", ".join(f"{g}: {n}" for g, n in others["gpu"].value_counts().sort_index().items())
        run.notes.append(
            f"{len(others)} baseline(s) recorded on other GPUs ({gpus}) not checked: a check compares the baselines "
            f"of the GPU it runs on ({here['gpu']})"
        )
        log(run.notes[-1])
    df = mine if not mine.empty else df
    spaces, unknown, refused = prepare(
        df,
        workloads,
        plant,
        baselines,
        here["gpu"],
        lambda w: f"no baseline on {here['gpu']}: record one with `tuner baseline {w}`",
        log,
    )
    run.extend(refused)
    rows = StoreRows(df, root)
    for base in df.to_dict("records"):
        if base["workload"] in unknown:
            res = unknown_workload(base, unknown[base["workload"]])
            log(f"{res.workload} {res.size} {res.dtype}: {res.verdict} ({res.reason})")
            run.append(res)
            continue
        space = spaces[base["workload"]]
        config = planted_config(base, space, plant or {})
        t0 = time.monotonic()
        lacking = lacking_parameters(base, space, config)
        if lacking:  # recorded before the space gained these parameters: the config names no kernel of today's
            gpu, lifecycle = here, {}
            now = {"status": "stale baseline", "error": lacking}
        else:
            runner, gpu = measuring_process(
                base["workload"], json.loads(base["size_vars"]), base["dtype"], backend, device, timeout
            )
            try:
                stale = timing_differs(base, space, gpu["timing"])
                if stale:
                    now = {"status": "stale baseline", "error": stale}
                elif allow_different or not _refusal(base, gpu):
                    now = runner.measure_rounds([config[k] for k in space.params], list(space.params), rounds)
                else:
                    now = {"status": "refused"}
            finally:
                runner.shutdown()
            lifecycle = runner.lifecycle_s
        res = check_one(base, gpu, now, threshold=threshold, allow_different=allow_different)
        if plant:
            note(res, f"planted config {plant}")
        note_kernel_changed(res, base, space)
        note_stored_best(res, base, space, rows)
        if res.verdict == "regression" and retune:
            found = retuned(base, retune, log, backend=backend, device=device)
            # the campaign times kernels as this check's worker does (tuner/measure/timing.py)
            res.retuned = recovery(res, base, space, found, gpu.get("timing"), "the re-tune's")
        log(
            f"{res.workload} {res.size} {res.dtype}: {res.verdict} ({time.monotonic() - t0:.1f} s: worker "
            f"{lifecycle}, measured {now.get('measure_s')} s) {res.reason}"
        )
        run.append(res)
    return run
