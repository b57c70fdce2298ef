"""`tuner check --simulate`: the regression check replayed from the rounds its baselines recorded, so that a
CI without a GPU tests the gate itself (the statistics, the noise floors, the verdicts and the exit code).

A baseline holds several worker sessions of rounds (tuner.answers.baseline). The replay holds its last
session out: the other sessions are the baseline, the held-out one plays "now", measured in a worker session
of its own as a real check's would be. Unchanged code should then pass; `slowdown` scales the held-out
session's kernel times (not its reference's) by 1 + slowdown, a regression the gate must flag; a planted
config (--plant) scales them by how much longer that config took than the baseline's in the store's campaigns
on the same GPU, size and dtype. Nothing is measured: the verdicts are check_one's on recorded figures, and each
result says it was replayed. A re-tune (--retune) of a regression replays a campaign from the recording, and says
whether its config recovers the baseline where the recording was timed as the baseline was (else that the times
are not comparable). As on a GPU (tuner.answers.check.run_check): the baselines are the project's own, a project
with none is an error (exit 2: a gate never passes on baselines not its own), and those shipped with the built-in
workloads are replayed only when asked (`--demo`, the README's tour), which every report says; a workload named
without one is refused, and a stale baseline (timed otherwise than kernels are timed now, its config lacking
parameters its space gained, or of a workload nothing defines now) is stale, not replayed."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tuner import locations, store
from tuner.answers.baseline import MIN_ROUNDS, baseline_sessions, read_baselines, unreadable_text
from tuner.answers.check import check_one, note_kernel_changed, note_stored_best, prepare, unknown_workload
from tuner.answers.check_inputs import check_retune, check_threshold, lacking_parameters, planted_config, timing_differs
from tuner.answers.check_result import PROJECT, SHIPPED, CheckResult, CheckRun, note
from tuner.answers.check_retune import recovery, retuned
from tuner.answers.check_rows import StoreRows
from tuner.errors import TunerError
from tuner.formatting import config_text
from tuner.stats import THRESHOLD
from tuner.vocabulary import PROTOCOL
from tuner.workloads import get_workload

if TYPE_CHECKING:
    import pandas as pd

    from tuner.space import Space

GPU_KEYS = ("gpu", "driver", "cuda")


def held_out(base: dict) -> tuple[dict, dict] | None:
    """The baseline without its last session, and that session as a fresh measurement; None where it cannot be
    split so (why_not_held_out says why)."""
    if why_not_held_out(base):
        return None
    sessions, rounds = baseline_sessions(base), list(base["rounds"])
    references = json.loads(base["references"])
    cut = len(rounds) - len(rounds) // sessions
    earlier = {
        **base,
        "rounds": rounds[:cut],
        "sessions": sessions - 1,
        "references": json.dumps({k: v[:cut] for k, v in references.items()}),
    }
    now = {"status": "ok", "rounds": rounds[cut:], "references": {k: v[cut:] for k, v in references.items()}}
    return earlier, now


def why_not_held_out(base: dict) -> str | None:
    """Why the baseline's last session cannot play a fresh measurement against the others (None: it can): one
    session, rounds that do not split into its sessions, or too few rounds on either side to compare."""
    sessions, rounds = baseline_sessions(base), list(base["rounds"])
    again = f"record it again with `tuner baseline {base['workload']}`"
    if sessions < 2:
        return "a replay needs a baseline of two sessions or more, and this one has 1 (take it with --sessions 6)"
    if len(rounds) % sessions:
        return (
            f"its {len(rounds)} rounds do not split into its {sessions} sessions (each session holds as many): the "
            f"last session cannot be told from the others; {again}"
        )
    for name, times in json.loads(base["references"]).items():
        if len(times) != len(rounds):
            return f"its {name} reference holds {len(times)} times for {len(rounds)} rounds; {again}"
    per = len(rounds) // sessions
    if per < MIN_ROUNDS or len(rounds) - per < MIN_ROUNDS:
        return (
            f"its sessions hold {per} round(s) each: the held-out session and the others need {MIN_ROUNDS} rounds or "
            f"more each to be compared ({again} with --rounds {MIN_ROUNDS} or more)"
        )
    return None


def simulate_check(
    workloads: Sequence[str] | None = None,
    *,
    threshold: float = THRESHOLD,
    slowdown: float = 0.0,
    plant: dict | None = None,
    retune: int = 0,
    root: Path | None = None,
    demo: bool = False,
    log: Callable[[str], object] = print,
) -> CheckRun:
    """Every baseline of the project's store (of `workloads`) checked against its own held-out session; with
    `demo`, those shipped with the built-in workloads instead (CheckRun.baselines "shipped", said in every
    report). `plant` scales that session's kernel times by how much longer the planted config took in the store's
    campaigns (planted_ratio), `slowdown` by 1 + slowdown; `retune` replays a campaign of that many evaluations for
    each regression. A baseline a check on the GPU would not run (stale: timed otherwise than kernels are timed
    now, its config lacking parameters its space gained, or of a workload nothing defines now) is stale here too."""
    check_threshold(threshold)
    if not -0.5 < slowdown < 10:
        raise TunerError(f"--plant-slowdown {slowdown}: give a fraction such as 0.1 (a 10% slower kernel)")
    check_retune(retune)
    for name in workloads or ():
        get_workload(name)
    root = Path(root or store.results_root())
    baselines = read_baselines(root, demo=demo)
    # the store the baselines' campaigns are read from (a plant's times, the stored best, a re-tune's recording)
    source = locations.BUILTIN_RESULTS if demo else root
    df = baselines.frame
    if workloads and not df.empty:  # a store without baselines has no columns to select by
        df = df[df["workload"].isin(workloads)]
    if df.empty:
        damaged = baselines.unreadable_of(workloads)
        if damaged:
            raise TunerError(f"no baseline could be read to replay: {unreadable_text(damaged)} (on a GPU)")
        of = f" of {', '.join(workloads)}" if workloads else ""
        named = " ".join(workloads or ["WORKLOAD ..."])
        if demo:
            raise TunerError(f"no baseline{of} is shipped with the built-in workloads ({source}) to replay")
        raise TunerError(
            f"no baseline{of} stored to replay in this project's store ({root}): record one with `tuner baseline "
            f"{named}` on a GPU (to try the gate on the baselines shipped with the built-in workloads: `tuner check "
            "--simulate --demo`)"
        )
    run = CheckRun(baselines=SHIPPED if demo else PROJECT)
    if demo:  # never mistaken for the project's own: said here, in each result and in the reports
        run.notes.append(
            f"a demo: the {len(df)} baseline(s) replayed are those shipped with the built-in workloads ({source}), "
            "not this project's (a gate checks the project's own: record them with `tuner baseline WORKLOAD ...`)"
        )
        log(run.notes[-1])
    spaces, unknown, refused = prepare(
        df,
        workloads,
        plant,
        baselines,
        None,
        lambda w: f"no baseline stored to replay: record one with `tuner baseline {w}`",
        log,
    )
    run.extend(refused)
    rows = StoreRows(df, source)
    shipped = "; a baseline shipped with the built-in workloads (--demo)" if demo else ""
    for base in df.to_dict("records"):
        if base["workload"] in unknown:
            res = unknown_workload(base, unknown[base["workload"]])
            res.reason = f"replayed: {res.reason}{shipped}"
            log(f"{res.workload} {res.size} {res.dtype}: {res.verdict} ({res.reason})")
            run.append(res)
            continue
        space = spaces[base["workload"]]
        # as a check on the GPU would: stale where the config lacks parameters, or was timed otherwise than
        # a worker times kernels now (tuner.measure.timing.PROTOCOL)
        stale = lacking_parameters(base, space, planted_config(base, space, plant or {})) or timing_differs(
            base, space, PROTOCOL
        )
        split = held_out(base)
        scales = []  # (factor, why): what the held-out session's kernel times are scaled by
        if split is not None and plant and not stale:
            rows.record_left_out(base["workload"])  # the plant's times come from the evaluations
            config = planted_config(base, space, plant)
            ratio, why = planted_ratio(base, space, config, rows.evaluations(base["workload"]))
            scales.append((ratio, f"planted {config_text(plant)}: {why}"))
        if slowdown:
            scales.append((1 + slowdown, f"--plant-slowdown {slowdown:g}"))
        gpu = {k: base[k] for k in GPU_KEYS}
        if stale:
            res = check_one(base, gpu, {"status": "stale baseline", "error": stale})
            res.reason = f"replayed: {res.reason}"
        elif split is None:
            res = CheckResult(base["workload"], base["size"], base["dtype"], json.loads(base["config"]), "refused")
            res.reason = f"not replayed: {why_not_held_out(base)}"
        elif any(factor is None for factor, _ in scales):
            res = CheckResult(base["workload"], base["size"], base["dtype"], json.loads(base["config"]), "refused")
            res.reason = next(why for factor, why in scales if factor is None)
        else:
            earlier, now = split
            factor = math.prod(f for f, _ in scales if f is not None)
            now["rounds"] = [x * factor for x in now["rounds"]]
            res = check_one(earlier, gpu, now, threshold=threshold)
            planted = f", its kernel times scaled by {factor:.4g} ({'; '.join(w for _, w in scales)})" if scales else ""
            said = f"replayed: sessions 1-{earlier['sessions']} against session {earlier['sessions'] + 1}{planted}"
            res.reason = f"{said}; {res.reason}" if res.reason else said
            if res.verdict == "regression" and retune:
                try:
                    found = retuned(base, retune, log, replay=source)
                except TunerError as e:  # no recording to replay it from: the verdict stands, said
                    note(res, f"not re-tuned: {e}")
                else:  # the recording's times, as its rows were timed: comparable with the baseline's, or not
                    timing = rows.timing_of(base, found["config"], space) if found else None
                    res.retuned = recovery(res, base, space, found, timing, "the recording's")
        res.reason += shipped
        note_kernel_changed(res, base, space)
        note_stored_best(res, base, space, rows)
        log(f"{res.workload} {res.size} {res.dtype}: {res.verdict} ({res.reason})")
        run.append(res)
    return run


def planted_ratio(base: dict, space: Space, config: dict, rows: pd.DataFrame) -> tuple[float | None, str]:
    """How much longer the planted `config` took than the baseline's own config in the store's campaigns
    (`rows`, the workload's evaluations) on the baseline's GPU, size and dtype: the ratio of their median times,
    and where it comes from; None, and why, where either was never measured there."""
    medians: dict[str, float] = {}
    if not rows.empty:  # a store without campaigns of the workload reads as no columns at all
        size = json.loads(base["size_vars"])
        ok = rows[(rows["gpu"] == base["gpu"]) & (rows["dtype"] == base["dtype"]) & (rows["status"] == "ok")]
        ok = ok[ok["size_vars"].map(lambda sv: json.loads(sv) == size).astype(bool)]  # a mask also when empty
        medians = ok.groupby("config")["time_ms"].median().to_dict()
    own = store.canonical_config(space.complete(json.loads(base["config"])))
    planted = store.canonical_config(config)
    if planted == own:
        return 1.0, "the baseline's config has it already: nothing planted"
    where = f"on {base['gpu']} at {base['size']} {base['dtype']}"
    unmeasured = [
        what for what, key in (("the planted config", planted), ("the baseline's", own)) if key not in medians
    ]
    if unmeasured:
        return None, (
            f"{' and '.join(unmeasured)} {'was' if len(unmeasured) == 1 else 'were'} never measured {where} in "
            "the store's campaigns: no time to replay the planted kernel from (plant it on a GPU, or plant a "
            "slowdown with --plant-slowdown)"
        )
    return float(medians[planted] / medians[own]), "its median time over the baseline config's in the store's campaigns"
