"""Measurement in rounds, for a regression check and a campaign's confirmation: configs measured in
alternation, each compiled and verified once, with the workload's references timed in the same rounds so
that a throttled or slower card shows in both."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from tuner.measure.evaluate import evaluate
from tuner.measure.protocol import config_key

ROUND_S = 0.05  # launches of a round after the first: enough for this much GPU time, at least MIN_LAUNCHES
MIN_LAUNCHES = 5
WARMUP_S = 0.5  # seconds of warm-up rounds after the first (which compiles and verifies) before any is kept


def measure_rounds(
    runner: Any,
    tuning_options: Any,
    keys: list,
    configs: list,
    rounds: int,
    *,
    timers: dict[str, Callable[[int], list[float]]],
    one_at_a_time: bool = False,
    compiled: dict | None = None,
    warmup: int = 3,
    warmup_s: float = WARMUP_S,
) -> list[dict]:
    """Alternate `rounds` times over `configs`: one Kernel Tuner run of each config (its repeats' median),
    then the references' `timers` (their medians). Warm-up rounds are not kept: at least `warmup`, and after
    the first (compile, verify) as many as `warmup_s` seconds take. The clocks of an idle card take a moment
    to rise, and three rounds of a 17-us kernel are milliseconds of GPU work after the seconds of a start.
    Returns one row per config (the first failure instead, should a config fail).

    Each round takes the configs in another order (rotated). Each config is compiled and verified once, in
    its first round (or not at all where `compiled` holds its binary, by cache key); later rounds re-run that
    binary (a compile per round made nvcc, not the GPU, the cost of a check), with as many launches as ROUND_S
    of GPU time takes (the full count for kernels under 1.7 ms; 5 for a 0.1 s Floyd-Warshall pipeline).
    `one_at_a_time`: Kernel Tuner's C backend (host code) holds one library at a time, so interleaved, every
    turn would run nvcc again (seconds for a host pipeline, many minutes for a confirmation's finalists x 18
    rounds): there each config's rounds run together, one config after the other."""
    started = time.perf_counter()
    if one_at_a_time and len(configs) > 1:
        rows = []
        for values in configs:
            (row,) = measure_rounds(
                runner, tuning_options, keys, [values], rounds, timers=timers, warmup=warmup, warmup_s=warmup_s
            )
            if row["status"] != "ok":
                return [row]
            rows.append(row)
        return rows
    opts = _Options(tuning_options, cache=None, cachefile=None)  # every round really runs
    unverified = _Options(opts, answer=None, verify=None)  # a binary verified in its first round does not change
    dev, compile_kernel = runner.dev, runner.dev.compile_kernel
    binaries = dict(compiled or {})

    def compile_once(instance: Any, verbose: bool) -> Any:
        key = config_key(instance.params[k] for k in keys)
        if key not in binaries:
            binaries[key] = compile_kernel(instance, verbose)
        return binaries[key]

    dev.compile_kernel = compile_once
    out: list[dict] = [{"rounds": [], "references": {}} for _ in configs]
    launches: dict[int, int] = {}
    full = dev.iterations
    kept_from, i, warm_from = None, 0, time.perf_counter()  # the first round kept, once the warm-up is over
    try:
        while kept_from is None or i < kept_from + rounds:
            for j in rotated(len(configs), i):
                values = configs[j]
                dev.iterations = launches.get(j, full)
                row = evaluate(runner, unverified if j in launches else opts, keys, values)
                if row["status"] != "ok":
                    return [row]
                if j not in launches:  # a pipeline of 0.1 s needs no 30 launches a round for a steady median
                    ms = statistics.median(row["times"])
                    launches[j] = max(MIN_LAUNCHES, min(full, math.ceil(ROUND_S * 1e3 / ms))) if ms > 0 else full
                    # where a check's time goes: the first round's compile, verify and benchmark (ms)
                    out[j]["first_round_ms"] = {
                        k: row[k] for k in ("compile_time", "verification_time", "benchmark_time")
                    }
                refs = {name: timer(len(row["times"])) for name, timer in timers.items()}
                kept = {k: out[j][k] for k in ("rounds", "references", "first_round_ms")}
                out[j] = {**row, **kept, "measure_s": round(time.perf_counter() - started, 2)}
                if kept_from is None:
                    continue
                out[j]["rounds"].append(statistics.median(row["times"]))
                for name, times in refs.items():
                    out[j]["references"].setdefault(name, []).append(statistics.median(times))
            if i == 0:
                warm_from = time.perf_counter()  # every config compiled and verified: the warm-up clock starts
            if kept_from is None and i + 1 >= warmup and time.perf_counter() - warm_from >= warmup_s:
                kept_from = i + 1
            i += 1
    finally:
        dev.compile_kernel, dev.iterations = compile_kernel, full
    return out


def rotated(n: int, i: int) -> list[int]:
    """Round i's order of n configs: each takes each place in turn, so a place's bias (the GPU coming from idle,
    or from the config before) is shared by all instead of favouring one config in every round."""
    return [(i + j) % n for j in range(n)]


class _Options(dict):
    """Kernel Tuner's options, read as attributes, with some replaced."""

    def __init__(self, base: Mapping[str, Any], **changes: Any) -> None:
        super().__init__({**base, **changes})

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
