"""Replay: Kernel Tuner's simulation mode behind the worker protocol, so a campaign runs without a GPU."""

from __future__ import annotations

import os
import random
import statistics
import time
import zlib

from tuner import kt, store
from tuner.workloads import get_workload


def replay_worker_main(conn, spec):
    """A worker process that answers from a recorded Kernel Tuner cache (env TUNER_REPLAY) in Kernel
    Tuner's simulation mode, so a distributed campaign runs end to end without a GPU. TUNER_REPLAY_DELAY
    (seconds per evaluation) paces it, e.g. to rehearse killing a worker mid-way."""
    import traceback

    from kernel_tuner import util
    from kernel_tuner.interface import Options
    from kernel_tuner.runners.simulation import SimulationRunner

    from tuner.isolation import _evaluate

    os.environ.update(spec.env)
    recording = os.environ["TUNER_REPLAY"]
    delay = float(os.environ.get("TUNER_REPLAY_DELAY", "0"))
    try:
        space = get_workload(spec.workload).space
        kernel_options = kt.kernel_options(space, spec.size, spec.dtype, [], "nvcuda")
        runner = SimulationRunner(kernel_options.kernel_source, kernel_options, Options(quiet=True), space.iterations, None)
        tuning_options = kt.tuning_options(space, spec.size, spec.dtype, simulation=True, metrics=False)
        tuning_options["cache"] = util.process_cache(recording, kernel_options, tuning_options, runner)
    except Exception as e:  # noqa: BLE001  (reported to the parent, as the real worker does)
        conn.send(("fatal", f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    gpu = {"gpu": store.recorded_gpu(recording) or runner.dev.name, "compute_capability": "", "driver": "", "cuda": "",
           "replayed_from": recording}  # the GPU's name: a host-code space's cache names the CPU
    conn.send(("ready", {"gpu": gpu, "baselines": {}}))
    keys = list(tuning_options.tune_params)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if isinstance(msg, dict) and "cachefile" in msg:  # a replay writes no cache
            conn.send(("cache", None))
            continue
        if isinstance(msg, dict):  # configs in rounds: each round the median of a resample of its recorded times
            rows = []
            for values in msg["configs"]:
                row = _evaluate(runner, tuning_options, keys, values)
                if row["status"] == "ok":
                    rng = random.Random(zlib.crc32(",".join(map(str, values)).encode()))
                    row["rounds"] = [statistics.median(rng.choices(row["times"], k=len(row["times"])))
                                     for _ in range(msg["rounds"])]
                    row["references"] = {}
                rows.append(row)
            conn.send(("result", rows))
            continue
        time.sleep(delay)
        conn.send(("result", _evaluate(runner, tuning_options, keys, msg)))
