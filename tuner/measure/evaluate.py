"""One configuration through Kernel Tuner's runner (live or simulated): a row with its status (ok, or the
failure class: compile, launch, runtime, wrong_answer, invalid) and its times. Kernel Tuner raises on
unrecognised compile errors, illegal addresses and failed verifications; the device's stage when it raised
tells them apart (the measuring process marks compile, verify and benchmark: tuner/measure/process.py).
And back: a row as the result Kernel Tuner's strategies read (kt_result: the campaign's runner hands them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kernel_tuner import util

from tuner.measure.protocol import LaunchRefused, config_key
from tuner.space.model import row_time
from tuner.vocabulary import KT_ERROR_KINDS, kt_error_status

# the failure classes Kernel Tuner has error kinds of, and those kinds (named in tuner.vocabulary.KT_ERROR_KINDS,
# with kt_error_status, the way back)
ERROR_CONFIGS = {status: getattr(util, kind) for status, kind in KT_ERROR_KINDS.items()}


def open_cache(path: str | None, kernel_options: Any, tuning_options: Any, runner: Any) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tuning_options["cachefile"] = path
    util.process_cache(path, kernel_options, tuning_options, runner)  # header checked or written
    # Serve nothing from it: Kernel Tuner keys entries by config alone, so an entry may come from other kernel
    # code (a LocVolCalib campaign once got 6 of its 40 results from the previous kernel's recording). What
    # this code measured before is resumed from the store instead (`known`, by kernel hash); fresh entries
    # are appended, and a later read keeps the newest entry of a config.
    tuning_options["cache"] = {}


def evaluate(runner: Any, tuning_options: Any, keys: list[str], values: Sequence) -> dict:
    """One config through Kernel Tuner's runner (live or simulated): a row with its status and times."""
    params = dict(zip(keys, values))
    runner.dev._tuner_stage, runner.dev._tuner_compiled = "setup", None
    backend: Any = getattr(runner.dev, "dev", None)  # Kernel Tuner's backend object (not in simulation mode)
    if hasattr(backend, "launch_refused"):
        backend.launch_refused = None
    try:
        (result,) = runner.run([values], tuning_options)
    except Exception as e:
        stage = runner.dev._tuner_stage
        message = f"{type(e).__name__}: {e}".strip()
        stderr = getattr(e, "stderr", None)
        if stderr:  # nvcc run by Kernel Tuner's C backend: its diagnostics, not just the exit code
            message += "\n" + str(stderr)
        if stage == "compile":
            status = "compile"
        elif isinstance(e, LaunchRefused):
            status = "launch"
        elif stage == "verify" and "verification failed" in message.lower():
            status = "wrong_answer"
        else:
            status = "runtime"
        row = {**params, "status": status, "error": message[-2000:]}
        record_failure_in_cache(tuning_options, values, params, status)
        return row
    row = {k: result[k] for k in keys}
    err = result.get("__error__")
    if err is not None:
        status = kt_error_status(err)
        # Kernel Tuner's RuntimeFailedConfig says nothing of why; the backend kept the driver's refusal
        reason = getattr(backend, "launch_refused", None) if status == "launch" else None
        row.update(status=status, error=f"{type(err).__name__}: {reason}" if reason else str(err))
    elif any(t < 0 for t in result.get("times", [])):  # a host pipeline's way of saying a CUDA call failed
        row.update(status="runtime", error="the host pipeline reported a CUDA error (negative time); see its stderr")
    else:
        row.update(status="ok", error="", times=list(map(float, result.get("times", []))))
    for k in ("compile_time", "verification_time", "benchmark_time"):
        row[k] = float(result.get(k, 0.0) or 0.0)
    return row


def kt_result(row: dict, keys: list[str], tuning_options: Any) -> dict:
    """The other way: a row (measured, served from the store or a failure) as the result Kernel Tuner's
    strategies read, its `time` the median of the launches, as the store ranks (Space.objective_value), not
    Kernel Tuner's mean."""
    result = {k: row[k] for k in keys}
    result.update(
        compile_time=row.get("compile_time", 0.0),
        verification_time=row.get("verification_time", 0.0),
        benchmark_time=row.get("benchmark_time", 0.0),
        strategy_time=0,
        framework_time=0,
    )
    if row["status"] == "ok":
        result["times"] = row["times"]
        result["time"] = row_time(row)
        if tuning_options.metrics:
            result = util.process_metrics(result, tuning_options.metrics)
    else:
        result["__error__"] = ERROR_CONFIGS.get(row["status"], util.RuntimeFailedConfig)()
    return result


def record_failure_in_cache(tuning_options: Any, values: Sequence, params: dict, status: str) -> None:
    """Kernel Tuner's cache must hold every valid config (its simulation mode refuses gaps): a failure
    Kernel Tuner did not record itself is written as the nearest of its error kinds."""
    if not tuning_options.get("cachefile") or not os.path.isfile(tuning_options["cachefile"]):
        return  # no cache header written yet (the process never got ready): nothing to append to
    error = ERROR_CONFIGS.get(status, util.RuntimeFailedConfig)()
    entry = {
        **params,
        "__error__": error,
        "compile_time": 0,
        "verification_time": 0,
        "benchmark_time": 0,
        "timestamp": str(datetime.now(UTC)),
    }
    util.store_cache(config_key(values), entry, tuning_options.cachefile, tuning_options.cache)
