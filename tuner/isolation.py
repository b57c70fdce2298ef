"""Each configuration runs in a worker process that the campaign restarts: Kernel Tuner stops on
unrecognised compile errors, illegal addresses and failed verifications, and waits forever on a
kernel that hangs. Here each of those becomes a recorded failure with its class, and the search goes on.

The parent side is a Kernel Tuner Runner, so every strategy (ours or Kernel Tuner's) drives it unchanged.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import statistics
import time
import traceback
from datetime import datetime, timezone

from kernel_tuner import util
from kernel_tuner.runners.runner import Runner

from tuner.errors import TunerError
from tuner.worker_entry import WorkerSpec, worker_entry

FAILURE_CLASSES = ("compile", "launch", "runtime", "wrong_answer", "timeout", "invalid")
_KT_ERRORS = {"CompilationFailedConfig": "compile", "RuntimeFailedConfig": "launch", "InvalidConfig": "invalid"}
# after any other outcome the CUDA context may be broken, so the worker exits and a fresh one starts
WORKER_SURVIVES = ("ok", "compile", "launch", "invalid")
_ERROR_CONFIGS = {"compile": util.CompilationFailedConfig, "launch": util.RuntimeFailedConfig,
                  "invalid": util.InvalidConfig}


def config_key(values) -> str:
    """Kernel Tuner's cache key of a configuration."""
    return ",".join(str(v) for v in values)


# ---------------------------------------------------------------------------------------------
# worker process
# ---------------------------------------------------------------------------------------------
def worker_main(conn, spec: WorkerSpec, entered: float | None = None):
    entered = entered or time.time()  # the parent compares it with its spawn: the cost of a new process
    os.environ.update(spec.env)
    try:
        runner, tuning_options, setup = _setup(spec)
        setup["entered_at"] = entered
    except Exception as e:  # no GPU, no backend, bad inputs: the campaign cannot run at all
        conn.send(("fatal", f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    conn.send(("ready", setup))
    keys = list(tuning_options.tune_params)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if isinstance(msg, dict) and "cachefile" in msg:  # the campaign knows the GPU now, hence where its cache goes
            spec.cachefile = msg["cachefile"]
            try:
                _open_cache(spec, runner, tuning_options)
            except Exception as e:  # Kernel Tuner refuses a cache of another space or device, or a broken one
                conn.send(("fatal", f"{type(e).__name__}: {e}", traceback.format_exc()))
                return
            conn.send(("cache", None))
            continue
        if isinstance(msg, dict):  # {"rounds": R, "configs": [values, ...]}: re-measurement in rounds
            rows = _measure_rounds(runner, tuning_options, keys, msg["configs"], msg["rounds"], spec,
                                   references=msg.get("references", True))
            conn.send(("result", rows))
            if rows[0]["status"] not in WORKER_SURVIVES:
                return
            continue
        row = _evaluate(runner, tuning_options, keys, msg)
        spec.fastest.offer(config_key(msg), row, runner.dev)
        conn.send(("result", row))
        if row["status"] not in WORKER_SURVIVES:
            return


def _setup(spec: WorkerSpec):
    t_imports = time.perf_counter()
    import numpy as np
    from kernel_tuner.runners.sequential import SequentialRunner

    from tuner import kt, timing
    from tuner.provenance import gpu_info
    from tuner.workloads import get_workload

    t0 = time.perf_counter()
    workload = get_workload(spec.workload)
    space = workload.space
    args = workload.arguments(spec.size, spec.dtype, np.random.default_rng(spec.data_seed))
    answer = workload.answer(args, spec.size, spec.dtype)
    t1 = time.perf_counter()
    kernel_options = kt.kernel_options(space, spec.size, spec.dtype, args, spec.backend)
    runner = SequentialRunner(kernel_options.kernel_source, kernel_options,
                              kt.device_options(space, spec.dtype, spec.device), spec.iterations or space.iterations, None)
    # host code times its own pipeline inside; a kernel's start event waits for the host's launch (tuner/timing.py)
    timing_protocol = "host" if space.lang == "host" else timing.delay_start_events(runner.dev.dev)
    t2 = time.perf_counter()
    tuning_options = kt.tuning_options(space, spec.size, spec.dtype, answer=answer, metrics=False,
                                       tolerances=workload.tolerances(spec.size, spec.dtype))
    spec.args = args  # kept in the worker only, for the references of a regression check
    spec.kernel_options = kernel_options
    _open_cache(spec, runner, tuning_options)
    # stage markers tell a compile error from a wrong answer from a crash in a benchmark
    dev = runner.dev
    for method, stage in (("compile_kernel", "compile"), ("check_kernel_output", "verify"), ("benchmark", "benchmark")):
        setattr(dev, method, _staged(getattr(dev, method), stage, dev))
    # a C-backend (host code) library is replaced by the next one built: nothing to keep
    spec.fastest = _Fastest(0 if kernel_options.lang == kt.kt_lang(kt.HOST_BACKEND) else _Fastest.KEEP)
    baselines = workload.baselines(args, spec.size, spec.dtype, spec.baseline_repeats) if spec.baseline_repeats else {}
    gpu = gpu_info(spec.device)
    # where a worker's start goes (a regression check starts one per kernel): inputs and numpy reference,
    # Kernel Tuner's runner (CUDA context, arguments on the GPU), the rest (references, GPU query)
    seconds = {"imports": t0 - t_imports, "data": t1 - t0, "kernel_tuner": t2 - t1, "rest": time.perf_counter() - t2}
    return runner, tuning_options, {"gpu": gpu, "baselines": baselines, "timing": timing_protocol,
                                    "setup_s": {k: round(v, 2) for k, v in seconds.items()}}


def _open_cache(spec, runner, tuning_options):
    if spec.cachefile:
        os.makedirs(os.path.dirname(os.path.abspath(spec.cachefile)), exist_ok=True)
        tuning_options["cachefile"] = spec.cachefile
        util.process_cache(spec.cachefile, spec.kernel_options, tuning_options, runner)  # header checked or written
        # Serve nothing from it: Kernel Tuner keys entries by config alone, so an entry may come from other kernel
        # code (a LocVolCalib campaign once got 6 of its 40 results from the previous kernel's recording). What
        # this code measured before is resumed from the store instead (`known`, by kernel hash); fresh entries
        # are appended, and a later read keeps the newest entry of a config.
        tuning_options["cache"] = {}


def _staged(fn, stage, holder):
    def wrapper(*a, **kw):
        holder._tuner_stage = stage
        out = fn(*a, **kw)
        if stage == "compile":
            holder._tuner_compiled = out  # for _Fastest
        return out

    return wrapper


class _Fastest:
    """The compiled kernels of the fastest configs measured so far in this process, so that the campaign's
    confirmation (tuner/confirm.py), which measures its near-best configs again, does not compile them again:
    five nvcc runs were 2-3 s of every campaign's wall time, which no number of GPUs divides."""

    KEEP = 8  # confirm.MAX_FINALISTS, as many as a confirmation measures (not imported: it brings pandas)

    def __init__(self, keep: int):
        self.keep, self.funcs, self.ms = keep, {}, {}

    def offer(self, key: str, row: dict, dev) -> None:
        func = getattr(dev, "_tuner_compiled", None)  # what this evaluation compiled
        if not self.keep or func is None or row["status"] != "ok" or not row.get("times"):
            return  # served from a cache or failed: nothing was compiled, or nothing worth keeping
        self.ms[key], self.funcs[key] = statistics.median(row["times"]), func
        if len(self.ms) > self.keep:
            slowest = max(self.ms, key=self.ms.get)
            del self.ms[slowest], self.funcs[slowest]


def _evaluate(runner, tuning_options, keys, values) -> dict:
    params = dict(zip(keys, values))
    runner.dev._tuner_stage, runner.dev._tuner_compiled = "setup", None
    try:
        (result,) = runner.run([values], tuning_options)
    except Exception as e:
        stage = runner.dev._tuner_stage
        message = f"{type(e).__name__}: {e}".strip()
        if getattr(e, "stderr", None):  # nvcc run by Kernel Tuner's C backend: its diagnostics, not just the exit code
            message += "\n" + str(e.stderr)
        if stage == "compile":
            status = "compile"
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
        row.update(status=_KT_ERRORS.get(type(err).__name__, "runtime"), error=str(err))
    elif any(t < 0 for t in result.get("times", [])):  # a host pipeline's way of saying a CUDA call failed
        row.update(status="runtime", error="the host pipeline reported a CUDA error (negative time); see its stderr")
    else:
        row.update(status="ok", error="", times=list(map(float, result.get("times", []))))
    for k in ("compile_time", "verification_time", "benchmark_time"):
        row[k] = float(result.get(k, 0.0) or 0.0)
    return row


ROUND_S = 0.05  # launches of a round after the first: enough for this much GPU time, at least MIN_LAUNCHES
MIN_LAUNCHES = 5
WARMUP_S = 0.5  # seconds of warm-up rounds after the first (which compiles and verifies) before any is kept


def _measure_rounds(runner, tuning_options, keys, configs, rounds, spec, warmup=3, references=True,
                    warmup_s=WARMUP_S, timers=None) -> list[dict]:
    """Alternate `rounds` times over `configs`: one Kernel Tuner run of each config (its repeats' median),
    then, with `references`, the workload's references (their medians), so a throttled or slower card shows
    in both. Warm-up rounds are not kept: at least `warmup`, and after the first (compile, verify) as many
    as `warmup_s` seconds take. The clocks of an idle card take a moment to rise, and three rounds of a
    17-us kernel are milliseconds of GPU work after the seconds of a worker's start.
    Returns one row per config (the first failure instead, should a config fail).

    Each round takes the configs in another order (_rotated). Each config is compiled and verified once, in
    its first round; later rounds re-run that binary (a compile per round made nvcc, not the GPU, the cost
    of a check), with as many launches as ROUND_S of GPU time takes (the full count for kernels under
    1.7 ms; 5 for a 0.1 s Floyd-Warshall pipeline).
    Kernel Tuner's C backend (host code) holds one library at a time, so interleaved, every turn would run
    nvcc again (seconds for a host pipeline, many minutes for a confirmation's finalists x 18 rounds):
    there each config's rounds run together, one config after the other."""
    from tuner import kt
    from tuner.workloads import get_workload

    workload = get_workload(spec.workload)
    opts = dict(tuning_options, cache=None, cachefile=None)  # every round really runs
    unverified = dict(opts, answer=None, verify=None)  # a binary verified in its first round does not change
    dev, compile_kernel = runner.dev, runner.dev.compile_kernel
    started = time.perf_counter()
    if timers is None:  # the references, set up once (`timers` passes them on to one config's rounds)
        timers = workload.reference_timers(spec.args, spec.size, spec.dtype) if references else {}
    prepared_s = round(time.perf_counter() - started, 2)
    if spec.kernel_options.lang == kt.kt_lang(kt.HOST_BACKEND) and len(configs) > 1:
        rows = []
        for values in configs:
            (row,) = _measure_rounds(runner, tuning_options, keys, [values], rounds, spec, warmup, references, warmup_s,
                                     timers)
            if row["status"] != "ok":
                return [row]
            rows.append({**row, "references_s": prepared_s})  # set up here, not in its own call
        return rows
    fastest = getattr(spec, "fastest", None)  # set by _setup (a test may pass a bare spec)
    binaries = dict(fastest.funcs) if fastest else {}  # a campaign's fastest configs come compiled already

    def compile_once(instance, verbose):
        key = config_key(instance.params[k] for k in keys)
        if key not in binaries:
            binaries[key] = compile_kernel(instance, verbose)
        return binaries[key]

    dev.compile_kernel = compile_once
    out = [{"rounds": [], "references": {}} for _ in configs]
    launches, full = {}, dev.iterations
    kept_from, i = None, 0  # the first round kept, once the warm-up is over
    try:
        while kept_from is None or i < kept_from + rounds:
            for j in _rotated(len(configs), i):
                values = configs[j]
                dev.iterations = launches.get(j, full)
                row = _evaluate(runner, _Opts(unverified if j in launches else opts), keys, values)
                if row["status"] != "ok":
                    return [row]
                if j not in launches:  # a pipeline of 0.1 s needs no 30 launches a round for a steady median
                    ms = statistics.median(row["times"])
                    launches[j] = max(MIN_LAUNCHES, min(full, math.ceil(ROUND_S * 1e3 / ms))) if ms > 0 else full
                    # where a check's time goes: the first round's compile, verify and benchmark (ms)
                    out[j]["first_round_ms"] = {k: row[k] for k in ("compile_time", "verification_time", "benchmark_time")}
                refs = {name: timer(len(row["times"])) for name, timer in timers.items()}
                kept = {k: out[j][k] for k in ("rounds", "references", "first_round_ms")}
                out[j] = {**row, **kept, "references_s": prepared_s, "measure_s": round(time.perf_counter() - started, 2)}
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


def _rotated(n: int, i: int) -> list[int]:
    """Round i's order of n configs: each takes each place in turn, so a place's bias (the GPU coming from idle,
    or from the config before) is shared by all instead of favouring one config in every round."""
    return [(i + j) % n for j in range(n)]


def record_failure_in_cache(tuning_options, values, params, status):
    """Kernel Tuner's cache must hold every valid config (its simulation mode refuses gaps): a failure
    Kernel Tuner did not record itself is written as the nearest of its error kinds."""
    if not tuning_options.get("cachefile") or not os.path.isfile(tuning_options["cachefile"]):
        return  # no cache header written yet (the worker never got ready): nothing to append to
    error = _ERROR_CONFIGS.get(status, util.RuntimeFailedConfig)()
    entry = {**params, "__error__": error, "compile_time": 0, "verification_time": 0, "benchmark_time": 0,
             "timestamp": str(datetime.now(timezone.utc))}
    util.store_cache(config_key(values), entry, tuning_options.cachefile, tuning_options.cache)


# ---------------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------------
def resolve_target(target):
    """A worker process's main function, or its "module:function" name (None: the real one)."""
    if target is None or callable(target):
        return target
    module, _, func = str(target).partition(":")
    import importlib

    return getattr(importlib.import_module(module), func)


class IsolatedRunner(Runner):
    """A Kernel Tuner Runner whose evaluations happen in a restartable worker process.

    `known` maps cache keys to rows already in the store: those are served, never measured again.
    `on_row(row, fresh)` sees every row (fresh=False for served ones) as it arrives.
    """

    def __init__(self, spec: WorkerSpec, *, timeout: float, setup_timeout: float = 900, known=None, on_row=None,
                 target=worker_entry):
        super().__init__()
        self.target = target
        self.spec = spec
        self.timeout = timeout
        self.setup_timeout = setup_timeout
        self.known = dict(known or {})
        self.on_row = on_row or (lambda row, fresh: None)
        self.setup = None
        self.restarts = 0
        self._proc = self._conn = self._spawned = None
        self._ctx = mp.get_context("spawn")  # CUDA cannot be forked
        self.lifecycle_s = {}  # wall seconds of the last start (spawn to ready) and shutdown, as the parent saw them

    @classmethod
    def for_campaign(cls, workload: str, size: dict, dtype: str, backend: str, device: int, *, timeout: float,
                     env: dict | None = None, target=None) -> IsolatedRunner:
        """The measuring process of a campaign's session (tuner/campaign.py's open_session): one place builds
        it, so that a worker may launch it early (see launch) and the session checks that it is the same.
        `target`: its main function or "module:function" (None: the real one)."""
        spec = WorkerSpec(workload=workload, size=size, dtype=dtype, backend=backend, device=device, cachefile=None,
                          env=dict(env or {}))
        target = resolve_target(target)
        return cls(spec, timeout=timeout, **({"target": target} if target else {}))

    def same_as(self, other: IsolatedRunner) -> bool:
        return (self.spec, self.target, self.timeout) == (other.spec, other.target, other.timeout)

    # -- worker lifecycle ---------------------------------------------------------------------
    def launch(self) -> IsolatedRunner:
        """Spawn the worker process without waiting for it to get ready (start waits): its set-up (a new
        Python, a CUDA context, the inputs and their reference) overlaps what the caller does meanwhile."""
        if self._proc is None:
            self._spawned = (time.perf_counter(), time.time())
            parent, child = self._ctx.Pipe()
            self._proc = self._ctx.Process(target=self.target, args=(child, self.spec), daemon=True)
            self._proc.start()
            child.close()
            self._conn = parent
        return self

    def start(self) -> dict:
        """Launch the worker process unless launched already, and wait until it is ready. Its set-up."""
        self.launch()
        (t0, spawned_at), parent = self._spawned, self._conn
        if not parent.poll(self.setup_timeout):
            self._kill()
            raise TunerError(f"the worker did not get ready within {self.setup_timeout:.0f} s (GPU busy or hung?)")
        try:
            msg = parent.recv()
        except EOFError:
            self._kill()
            raise TunerError("the worker died while starting (see the messages above)") from None
        if msg[0] == "fatal":
            self._kill()
            raise TunerError(f"cannot run on this machine: {msg[1]}")
        if self.setup is None:
            self.setup = msg[1]
        self.lifecycle_s["start"] = round(time.perf_counter() - t0, 2)
        if "entered_at" in msg[1]:  # of which: a new Python process up to the worker's first line
            self.lifecycle_s["process"] = round(msg[1]["entered_at"] - spawned_at, 2)
        return self.setup

    def _kill(self):
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def shutdown(self):
        t0 = time.perf_counter()
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(10)
            except (OSError, BrokenPipeError):
                pass
        self._kill()
        self.lifecycle_s["shutdown"] = round(time.perf_counter() - t0, 2)

    # -- Runner interface ---------------------------------------------------------------------
    def get_device_info(self):
        return _DeviceInfo(self.setup["gpu"]["gpu"] if self.setup else "unknown")

    def get_environment(self, tuning_options):
        return dict(self.setup or {})

    def run(self, parameter_space, tuning_options):
        results = []
        keys = list(tuning_options.tune_params)
        for values in parameter_space:
            values = list(values)
            if tuning_options.budget.is_done():
                results.append(None)
                continue
            tuning_options.budget.add_evaluations(1)
            key = config_key(values)
            if key in self.known:
                row, fresh = self.known[key], False
            else:
                row, fresh = self._measure(values, keys), True
                self.known[key] = row
            self.on_row(row, fresh)
            results.append(self._as_kt_result(row, keys, tuning_options))
        return results

    def use_cachefile(self, path: str):
        """Point the running worker (and any restarted one) at Kernel Tuner's cache file."""
        self.spec.cachefile = path
        if self._proc is not None and self._proc.is_alive():
            self._conn.send({"cachefile": path})
            if not self._conn.poll(self.setup_timeout):
                raise TunerError("the worker did not open the cache file")
            try:
                reply = self._conn.recv()
            except EOFError:
                reply = ("fatal", "the worker died opening it")
            if reply[0] == "fatal":
                raise TunerError(f"Kernel Tuner's cache {path} cannot be used: {reply[1]}. It was recorded for "
                                 "another parameter list or GPU, or is damaged: move it aside (its rows stay in the "
                                 "store and are served from there), or give a parameter the space gained a default "
                                 "(`defaults:` in the space's YAML)")

    def measure_rounds(self, values, keys, rounds: int) -> dict:
        """A regression check's measurement of one config: see _measure_rounds."""
        return self.measure_interleaved([values], keys, rounds)[0]

    def measure_interleaved(self, configs, keys, rounds: int, references: bool = True) -> list[dict]:
        """Several configs measured in alternation, `rounds` times each, in this worker (see _measure_rounds):
        one row per config, or a single failure row."""
        configs = [list(v) for v in configs]
        rows = self._measure(configs[0], keys, timeout=self.timeout * rounds * len(configs),
                             request={"configs": configs, "rounds": rounds, "references": references})
        return rows if isinstance(rows, list) else [rows]

    def _measure(self, values, keys, request=None, timeout=None) -> dict:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self.restarts += 1
            self._kill()
            self.start()
        params = dict(zip(keys, values))
        self._conn.send(values if request is None else request)
        if self._conn.poll(timeout or self.timeout):
            try:
                kind, row = self._conn.recv()
                if (row[0] if isinstance(row, list) else row)["status"] not in WORKER_SURVIVES:
                    self._proc.join(30)
                    self._kill()
                return row
            except (EOFError, OSError):
                self._proc.join(5)
                status, error = "runtime", f"the worker process died (exit code {self._proc.exitcode})"
        else:
            status, error = "timeout", f"no result within {timeout or self.timeout:.0f} s; the worker was killed"
        self._kill()
        if self.spec.cachefile and request is None:  # rounds of several configs: no one config failed for sure
            opts = {"cachefile": self.spec.cachefile, "cache": {}}
            record_failure_in_cache(_Opts(opts), values, params, status)
        return {**params, "status": status, "error": error,
                "compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0}

    def _as_kt_result(self, row, keys, tuning_options) -> dict:
        result = {k: row[k] for k in keys}
        result.update(compile_time=row.get("compile_time", 0.0), verification_time=row.get("verification_time", 0.0),
                      benchmark_time=row.get("benchmark_time", 0.0), strategy_time=0, framework_time=0)
        if row["status"] == "ok":
            result["times"] = row["times"]
            result["time"] = statistics.median(row["times"])  # as the store ranks (Space.objective_value), not KT's mean
            if tuning_options.metrics:
                result = util.process_metrics(result, tuning_options.metrics)
        else:
            result["__error__"] = _ERROR_CONFIGS.get(row["status"], util.RuntimeFailedConfig)()
        return result


class _Opts(dict):
    """Kernel Tuner reads its options as attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _DeviceInfo:
    def __init__(self, name):
        self.name = name
        self.max_threads = 1024
