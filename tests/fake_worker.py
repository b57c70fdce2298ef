"""A GPU-free stand-in for the worker process's main function, speaking the same protocol, so the
campaign machinery (isolation, timeouts, crashes, store, resume) is tested on any machine.
Its 'measurements' are a fixed function of the config; some configs misbehave on purpose."""

import math
import os
import random
import time

from tuner.measure.protocol import CacheReady, Fatal, Measure, MeasureRounds, Ready, Result, Stop, UseCache
from tuner.workloads import get_workload


def cubin_requests(conn):
    """A stand-in measuring process's side of the protocol for the compile-ahead tests: it says it takes
    cubins, answers UseCache, and yields each measuring request until Stop."""
    conn.send(Ready({"gpu": {"gpu": "Fake GPU"}, "baselines": {}, "timing": "delayed-start",
                     "cubin": {"cc": "90", "compiler_options": []}}))
    while True:
        request = conn.recv()
        if isinstance(request, Stop):
            return
        if isinstance(request, UseCache):
            conn.send(CacheReady())
            continue
        yield request


def synthetic_time_ms(cfg: dict) -> float:
    """A smooth-ish landscape over the reduction space with one best region (variant 7, 256 threads, 16 items)."""
    t = 1.0 + 0.3 * abs(math.log2(cfg["block_size_x"]) - 8) + 0.2 * abs(math.log2(cfg["items_per_thread"]) - 4)
    t += 0.5 * (7 - cfg["variant"]) + 0.1 * (4 - cfg["vector"]) + 0.05 * cfg["finish"]
    if not os.environ.get("FAKE_TIES"):  # with it, shuffle makes no difference: every config has a twin
        t -= 0.05 * cfg["shuffle"]
    return t


def misbehaviour(cfg: dict) -> str | None:
    if cfg["variant"] == 1 and cfg["block_size_x"] == 64:
        return "wrong_answer"
    if cfg["variant"] == 1 and cfg["block_size_x"] == 128 and cfg["finish"] == 1:
        return "hang"
    if cfg["variant"] == 1 and cfg["block_size_x"] == 256 and cfg["finish"] == 1:
        return "crash"
    return None


def fake_worker_main(conn, spec):
    delay = float(os.environ.get("FAKE_DELAY", "0"))
    conn.send(Ready({"gpu": {"gpu": "Fake GPU 9000", "compute_capability": "9.0", "driver": "580.0", "cuda": "13.0"},
                     "baselines": {"copy": [0.5, 0.51, 0.49]}, "timing": "delayed-start"}))
    keys = ["variant", "block_size_x", "items_per_thread", "vector", "shuffle", "finish"]
    iterations = spec.iterations or get_workload(spec.workload).space.iterations  # as Kernel Tuner times
    rng = random.Random(os.getpid())
    while True:
        request = conn.recv()
        if isinstance(request, Stop):
            return
        if isinstance(request, UseCache):
            if os.environ.get("FAKE_BAD_CACHE") == "refused":  # as Kernel Tuner refuses another space's cache
                conn.send(Fatal("ValueError: All tunable parameters are present, but the order is wrong"))
                return
            if os.environ.get("FAKE_BAD_CACHE") == "die":
                os._exit(3)
            conn.send(CacheReady())
            continue
        if isinstance(request, MeasureRounds):  # configs measured in rounds; FAKE_SLOWDOWN plants a slowdown
            if os.environ.get("FAKE_DIE_ON_ROUNDS"):
                os._exit(3)
            noisy = lambda x: x * math.exp(rng.gauss(0, 0.01))
            rows = []
            for config in request.configs:
                t = synthetic_time_ms(dict(zip(keys, config))) * (1 + float(os.environ.get("FAKE_SLOWDOWN", "0")))
                rows.append({**dict(zip(keys, config)), "status": "ok", "error": "",
                             "rounds": [noisy(t) for _ in range(request.rounds)],
                             "references": {"copy": [noisy(0.5) for _ in range(request.rounds)]}})
            conn.send(Result(tuple(rows)))
            continue
        assert isinstance(request, Measure), request
        cfg = dict(zip(keys, request.values))
        time.sleep(delay)
        bad = os.environ.get("FAKE_EVERY_CONFIG") or misbehaviour(cfg)  # a broken kernel or reference: all fail
        if bad == "hang":
            time.sleep(3600)
        if bad == "crash":
            os._exit(3)
        row = {**cfg, "compile_time": 20.0, "verification_time": 1.0, "benchmark_time": 5.0}
        if bad == "compile":
            row.update(status="compile", error="CompilationFailedConfig: saxpy.cu(3): error: identifier \"x\" is undefined")
            conn.send(Result((row,)))
            continue
        if bad == "wrong_answer":
            row.update(status="wrong_answer", error="RuntimeError: Kernel result verification failed")
            conn.send(Result((row,)))
            return  # as the real measuring process does after a runtime failure
        t = synthetic_time_ms(cfg)
        row.update(status="ok", error="", times=[t * (1 + 0.01 * math.sin(i)) for i in range(iterations)])
        conn.send(Result((row,)))
