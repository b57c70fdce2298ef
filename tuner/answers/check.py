"""`tuner baseline` and `tuner check`: catch performance regressions of the best configs in CI.

A baseline is the best stored config of a (workload, size, dtype) on this GPU, re-measured over many
rounds, each round also timing the workload's reference (copy bandwidth, cuBLAS) in the same worker.
`check` re-measures the same config the same way (verifying its output again), normalises by the
reference of the same round, and compares distributions (tuner.answers.stats). Exit 0 pass, 1 regression
(slower, or a wrong answer / failure), 2 could not run (no GPU, no baseline, a refused comparison, a baseline
recorded before its space gained a parameter)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

import numpy as np
import pandas as pd
import scipy.stats

from tuner import store
from tuner.answers import best_config
from tuner.answers.stats import THRESHOLD, compare, normalise
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.protocol import MeasureSpec
from tuner.measure.provenance import gpu_info, software, source_hash
from tuner.measure.runner import IsolatedRunner
from tuner.space import format_size
from tuner.workloads import get_workload

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

BASELINE_FILE = "check/baseline.parquet"
CHECK_ITERATIONS = 30  # timed launches per round: a steadier median than a campaign's 7
MIN_ROUNDS = 3  # a comparison's fewest rounds on each side (tuner.answers.stats.compare)
BASELINE_SESSIONS = 6  # worker sessions per baseline kernel: their spread sets the noise floor (session_noise)
NOISE_ALPHA = 0.005  # how often an unchanged kernel may exceed its noise floor by session wobble alone
measure_target = None  # the measuring process's main function (None: the real one); tests substitute one


@dataclass
class CheckResult:
    workload: str
    size: str
    dtype: str
    config: dict
    verdict: str  # pass, faster, regression, failed, refused
    reason: str = ""
    reference: str = ""
    baseline_ms: float | None = None
    now_ms: float | None = None
    raw: dict = field(default_factory=dict)  # change and confidence interval of raw times
    normalised: dict = field(default_factory=dict)  # the same, in units of the reference
    retuned: dict | None = None
    noise_floor: float | None = None  # the slowdown this kernel must show to be flagged on this runner
    rounds: list = field(default_factory=list)  # this check's per-round medians (ms), for a closer look
    decided_by: str = ""  # "normalised" or "raw": whose verdict is the check's

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "faster": 0, "regression": 1, "failed": 1}.get(self.verdict, 2)


def _measuring_process(
    workload: str, size: dict, dtype: str, backend: str, device: int, timeout: float
) -> tuple[IsolatedRunner, dict]:
    """A fresh measuring process, and its GPU with the timing protocol it times kernels with (tuner/measure/timing.py):
    both go into a baseline's row, and a check compares them with the baseline's."""
    runner = IsolatedRunner(
        MeasureSpec(workload, size, dtype, backend, device, None, baseline_repeats=0, iterations=CHECK_ITERATIONS),
        timeout=timeout,
        **({"target": measure_target} if measure_target else {}),
    )
    setup = runner.start()
    return runner, {**setup["gpu"], "timing": setup.get("timing", "plain")}


def _baseline_path(root: Path, gpu: str, workload: str) -> Path:
    return store.workload_dir(root, gpu, workload) / BASELINE_FILE


def load_baselines(root: Path | None = None, gpu: str | None = None) -> pd.DataFrame:
    df = store.read_parts(f"*/*/{BASELINE_FILE}", root or store.results_root())
    if gpu and not df.empty:
        df = df[df["gpu"] == gpu]
    return df


def take_baseline(
    workloads: Iterable[str],
    sizes: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    *,
    rounds: int = 10,
    sessions_per_baseline: int = BASELINE_SESSIONS,
    backend: str = "nvcuda",
    device: int = 0,
    timeout: float = 120,
    root: Path | None = None,
    log: Callable[[str], object] = print,
) -> list[dict]:
    """Re-measure the best stored config of each (workload, size, dtype) and store it as the baseline.

    Each kernel is measured in several worker sessions, and the sessions are spread over the whole run
    (pass 1 measures every kernel once, pass 2 again, ...): the spread between a kernel's sessions then
    holds what changes over minutes (clocks, temperature, launch state), which is what a later check on a
    runner that has been busy for minutes meets. Measured back to back, the sessions agreed better than
    the card agreed with itself ten minutes later, and A/A checks failed on that drift."""
    if rounds < 1 or sessions_per_baseline < 1 or rounds * sessions_per_baseline < MIN_ROUNDS:
        raise TunerError(
            f"a baseline needs at least {MIN_ROUNDS} rounds in all (--rounds x --sessions), "
            f"got {rounds} x {sessions_per_baseline}"
        )
    root = Path(root or store.results_root())
    kernels = []
    for name in workloads:
        workload = get_workload(name)
        space = workload.space
        evals = store.load_evaluations(name, root)
        if evals.empty:
            raise TunerError(f"nothing stored for {name}: tune it before taking a baseline")
        for size_text in sizes or sorted(evals["size"].unique()):
            size_name, size = space.resolve_size(size_text, workload.parse_size)
            for dtype in dtypes or sorted(evals["dtype"].unique()):
                kernels.append(_Kernel(name, size_name, size, space.resolve_dtype(dtype)))
    rows = {}
    for session in range(sessions_per_baseline):
        for kernel in kernels:
            name, size_name, size, dtype, sessions = (
                kernel.name,
                kernel.size_name,
                kernel.size,
                kernel.dtype,
                kernel.sessions,
            )
            if session > 0 and not sessions:
                continue  # nothing tuned for it: skipped in the first pass
            space = get_workload(name).space
            t0 = time.monotonic()
            runner, gpu = _measuring_process(name, size, dtype, backend, device, timeout)
            try:
                if kernel.config is None:
                    # size_name is a named size or the k=v spelling of an ad-hoc one: either resolves again
                    answer = best_config.best(name, size_name, dtype, gpu=gpu["gpu"], root=root)
                    if answer["fallback"] != "exact":
                        log(f"skip {name} {size_name} {dtype}: nothing tuned for it on {gpu['gpu']}")
                        continue
                    kernel.config = answer["config"]
                config = kernel.config
                row = runner.measure_rounds([config[k] for k in space.params], list(space.params), rounds)
            finally:
                runner.shutdown()
            if row["status"] != "ok":
                raise TunerError(
                    f"{name} {size_name} {dtype}: the best config fails now ({row['status']}: {row['error'][:300]})"
                )
            sessions.append(row)
            rows[(name, size_name, dtype)] = _baseline_row(name, size_name, size, dtype, config, gpu, sessions, backend)
            _save_baseline(root, rows[(name, size_name, dtype)])  # at once: an interrupted run keeps what it measured
            log(
                f"baseline {name} {size_name} {dtype}, session {len(sessions)}/{sessions_per_baseline}: {config} "
                f"median {np.median(row['rounds']):.4g} ms over {rounds} rounds ({time.monotonic() - t0:.1f} s; "
                f"worker set-up {runner.setup.get('setup_s')})"  # type: ignore[union-attr]  # set by _worker's start
            )
    return list(rows.values())


@dataclass
class _Kernel:
    """One (workload, size, dtype) of a baseline: its config, chosen in the first pass, and its sessions."""

    name: str
    size_name: str
    size: dict
    dtype: str
    config: dict | None = None
    sessions: list = field(default_factory=list)


def _baseline_row(
    name: str, size_name: str, size: dict, dtype: str, config: dict, gpu: dict, sessions: list[dict], backend: str
) -> dict:
    workload = get_workload(name)
    space = workload.space
    references = {k: [x for r in sessions for x in r["references"][k]] for k in sessions[0]["references"]}
    return {
        "workload": name,
        "size": size_name,
        "size_vars": json.dumps(size, sort_keys=True),
        "dtype": dtype,
        "config": json.dumps(config, sort_keys=True),
        "rounds": [x for r in sessions for x in r["rounds"]],
        "sessions": len(sessions),
        "references": json.dumps(references),
        "reference": workload.check_reference,
        **gpu,
        "backend": kt.effective_backend(space, backend),
        "kernel_hash": source_hash(space.source_text),
        **software(),
        "timestamp": datetime.now(UTC).isoformat(),
    }


def session_noise(rounds: ArrayLike, sessions: int, alpha: float = NOISE_ALPHA) -> float:
    """The relative slowdown that one fresh session of an unchanged kernel exceeds with probability `alpha`
    (0 for a single session, whose spread is unknown). Every session (worker process) lands at its own
    offset, so a check, itself one session, is one more draw from the baseline's per-session medians: the
    one-sided upper prediction bound t(n-1) quantile x s x sqrt(1 + 1/n), s their relative spread.
    A fixed 3 s instead, with the spread of 3 sessions (2 degrees of freedom), is exceeded by about 6% of
    unchanged checks, which is what the first A/A runs on the H100 showed; the t quantile prices in how
    little a few sessions say about the spread (with 3 it is wide: a baseline wants 6 or more)."""
    if sessions < 2:
        return 0.0
    medians = [float(np.median(part)) for part in np.array_split(np.asarray(rounds, float), sessions)]
    spread = float(np.std(medians, ddof=1) / np.median(medians))
    return float(scipy.stats.t.ppf(1 - alpha, sessions - 1) * spread * np.sqrt(1 + 1 / sessions))


def noise_floor(rounds: ArrayLike, sessions: int, threshold: float = THRESHOLD) -> float:
    """The slowdown a kernel must show to be flagged: the practical threshold or its session noise."""
    return max(threshold, session_noise(rounds, sessions))


def _save_baseline(root: Path, row: dict) -> None:
    """Add (or replace) one (size, dtype) baseline in its workload's file, atomically."""
    path = _baseline_path(root, row["gpu"], row["workload"])
    old = pd.read_parquet(path) if path.exists() else pd.DataFrame()
    if not old.empty:
        old = old[~((old["size_vars"] == row["size_vars"]) & (old["dtype"] == row["dtype"]))]
    store.write_parquet(pd.concat([old, pd.DataFrame([row])], ignore_index=True), path)


def _major(version: str) -> str:
    return str(version).split(".")[0]


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
    """The verdict for one baseline row and one fresh measurement (pure: unit-tested without a GPU)."""
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
    res.baseline_ms, res.now_ms = float(pd.Series(b_rounds).median()), float(pd.Series(n_rounds).median())
    res.rounds = [float(x) for x in n_rounds]
    b_ref = json.loads(base["references"]).get(res.reference)
    n_ref = now.get("references", {}).get(res.reference)
    pairs = [("raw", b_rounds, n_rounds)]
    if b_ref and n_ref:
        pairs.append(("normalised", list(normalise(b_rounds, b_ref)), list(normalise(n_rounds, n_ref))))
    for label, b, n in pairs:
        floor = noise_floor(b, int(base.get("sessions") or 1), threshold)
        c = compare(b, n, threshold=floor)
        setattr(res, label, {"change": c.change, "ci": [c.ci_low, c.ci_high], "verdict": c.verdict, "threshold": floor})
    res.decided_by = deciding(res.raw, res.normalised)
    decider = getattr(res, res.decided_by)
    res.verdict, res.noise_floor = decider["verdict"], decider["threshold"]
    notes = ["compared anyway: " + refusal] if refusal else []
    if res.normalised and res.decided_by == "raw":
        notes.append(
            f"decided on raw times: the {res.reference} reference did not track this kernel between "
            f"the baseline's sessions (noise floor {res.normalised['threshold']:.1%} normalised, "
            f"{res.raw['threshold']:.1%} raw)"
        )
    if int(base.get("sessions") or 1) < 2:
        notes.append(
            "one baseline session: its session-to-session noise is unknown, so only the "
            f"{threshold:.0%} threshold guards against it (take the baseline with --sessions 6)"
        )
    res.reason = "; ".join(notes)
    return res


def deciding(raw: dict, normalised: dict) -> str:
    """Which comparison's verdict is the check's. The normalised times (a throttled runner moves kernel
    and reference alike), unless the reference did not move with the kernel between the baseline's
    sessions: then dividing by it only adds its own noise (the copy beside LocVolCalib's compute-bound
    solver on the H100: a floor of 10.9% normalised against 3.0% raw)."""
    return "normalised" if normalised and normalised["threshold"] <= raw["threshold"] else "raw"


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
) -> list[CheckResult]:
    if rounds < MIN_ROUNDS:
        raise TunerError(f"a check needs at least {MIN_ROUNDS} rounds to compare, got --rounds {rounds}")
    root = Path(root or store.results_root())
    for name in workloads or ():  # an unknown name: an error, not an empty check
        get_workload(name)
    here = gpu_info(device)
    if here["gpu"] == "unknown":
        raise TunerError("no CUDA GPU found: a check needs the GPU it compares")
    df = load_baselines(root)
    if df.empty:
        raise TunerError("no baseline stored: record one with `tuner baseline WORKLOAD ...`")
    if workloads:
        df = df[df["workload"].isin(workloads)]
    mine = df[df["gpu"] == here["gpu"]]
    if mine.empty and not allow_different:
        of = f" of {', '.join(workloads)}" if workloads else ""
        raise TunerError(
            f"no baseline{of} for {here['gpu']}"
            + (
                f" (there are for {', '.join(sorted(df['gpu'].unique()))}); use --allow-different to compare anyway"
                if not df.empty
                else f": record one with `tuner baseline {' '.join(workloads or ['WORKLOAD'])}`"
            )
        )
    df = mine if not mine.empty else df
    spaces = {name: get_workload(name).space for name in set(df["workload"])}
    planted = plant or {}
    for name, space in spaces.items() if planted else ():  # a planted parameter that no config has plants nothing
        unknown = sorted(set(planted) - set(space.params))
        bad = {k: v for k, v in planted.items() if k in space.params and v not in space.params[k]}
        if unknown or bad:
            raise TunerError(
                f"--plant for {name}: "
                + (f"unknown parameters {', '.join(unknown)} (it has {', '.join(space.params)})" if unknown else "")
                + (f"values outside the space: {bad}" if bad else "")
            )
    results = [
        CheckResult(w, "", "", {}, "refused", f"no baseline on {here['gpu']}: record one with `tuner baseline {w}`")
        for w in workloads or ()
        if w not in set(df["workload"])
    ]  # named, so a CI gate must not pass it by
    for res in results:
        log(f"{res.workload}: refused ({res.reason})")
    for base in df.to_dict("records"):
        space = spaces[base["workload"]]
        config = {**space.complete(json.loads(base["config"])), **(plant or {})}
        t0 = time.monotonic()
        missing = [k for k in space.params if k not in config]
        if plant and not missing and not space.is_valid(config):
            raise TunerError(f"--plant {plant} breaks a restriction of the {base['workload']} space: {config}")
        if missing:  # recorded before the space gained these parameters: the config names no kernel of today's
            gpu, lifecycle = here, {}
            now = {
                "status": "stale baseline",
                "error": f"its config lacks {', '.join(missing)}, parameters the "
                f"space gained since; record it again with `tuner baseline {base['workload']}`",
            }
        else:
            runner, gpu = _measuring_process(
                base["workload"], json.loads(base["size_vars"]), base["dtype"], backend, device, timeout
            )
            try:
                if not store.timing_matches(base, space, gpu["timing"]):
                    # e.g. taken before kernels' start events waited for their launch: its times carry the
                    # launch overhead (8-20 us), which would hide a regression of that size in a short kernel
                    now = {
                        "status": "stale baseline",
                        "error": f"timed {base.get('timing') or 'plain'}, kernels "
                        f"are timed {gpu['timing']} now (tuner/measure/timing.py); record it again with "
                        f"`tuner baseline {base['workload']}`",
                    }
                elif allow_different or not _refusal(base, gpu):
                    now = runner.measure_rounds([config[k] for k in space.params], list(space.params), rounds)
                else:
                    now = {"status": "refused"}
            finally:
                runner.shutdown()
            lifecycle = runner.lifecycle_s
        res = check_one(base, gpu, now, threshold=threshold, allow_different=allow_different)
        if plant:
            res.reason = (res.reason + "; " if res.reason else "") + f"planted config {plant}"
        if res.verdict == "regression" and retune:
            res.retuned = _retune(base, retune, backend, device, log)
        log(
            f"{res.workload} {res.size} {res.dtype}: {res.verdict} ({time.monotonic() - t0:.1f} s: worker "
            f"{lifecycle}, measured {now.get('measure_s')} s) {res.reason}"
        )
        results.append(res)
    return results


def _retune(base: dict, budget: int, backend: str, device: int, log: Callable[[str], object]) -> dict | None:
    """A small fresh campaign (nothing served from the store) to see whether another config recovers."""
    import tempfile

    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest

    with tempfile.TemporaryDirectory() as tmp:
        out = run_campaign(
            CampaignRequest(
                workload=base["workload"],
                size=format_size(json.loads(base["size_vars"])),
                dtype=base["dtype"],
                strategy="tpe",
                max_evals=budget,
                backend=backend,
                device=device,
                results=Path(tmp),
                quiet=True,
            )
        )
    log(f"retuned {base['workload']} {base['size']} {base['dtype']}: {out.best}")
    return out.best


def exit_code(results: list[CheckResult]) -> int:
    codes = [r.exit_code for r in results]
    return 1 if 1 in codes else (2 if 2 in codes else 0)


def _fmt(d: dict) -> str:
    if not d:
        return ""
    return f"{d['change']:+.1%} [{d['ci'][0]:+.1%}, {d['ci'][1]:+.1%}]"


def markdown(results: list[CheckResult]) -> str:
    lines = [
        "| kernel | size | dtype | verdict | baseline ms | now ms | raw change [99% CI] | "
        "normalised change [99% CI] | reference | flagged above | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        floor = f"{r.noise_floor:.1%}" if r.noise_floor is not None else ""
        lines.append(
            f"| {r.workload} | {r.size} | {r.dtype} | **{r.verdict}** | {r.baseline_ms or '':.6} | "
            f"{r.now_ms or '':.6} | {_fmt(r.raw)} | {_fmt(r.normalised)} | {r.reference} | {floor} | {r.reason} |"
        )
    return "\n".join(lines) + "\n"


def junit(results: list[CheckResult]) -> str:
    suite = ET.Element(
        "testsuite",
        name="tuner check",
        tests=str(len(results)),
        failures=str(sum(r.verdict in ("regression", "failed") for r in results)),
        errors=str(sum(r.exit_code == 2 for r in results)),
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"tuner.{r.workload}", name=f"{r.size}-{r.dtype}")
        text = f"raw {_fmt(r.raw)}; normalised {_fmt(r.normalised)}; {r.reason}"
        if r.verdict in ("regression", "failed"):
            ET.SubElement(case, "failure", message=r.verdict).text = text
        elif r.exit_code == 2:
            ET.SubElement(case, "error", message=r.verdict).text = text
        else:
            ET.SubElement(case, "system-out").text = text
    return ET.tostring(suite, encoding="unicode")


def as_json(results: list[CheckResult]) -> str:
    return json.dumps({"exit_code": exit_code(results), "checks": [asdict(r) for r in results]}, indent=2, default=str)
