"""The campaign's side of the measuring process: a Kernel Tuner Runner whose evaluations happen in a
process it restarts after a crash, a hang (killed at the timeout) or a failure that may have broken the
CUDA context. Every strategy, ours or Kernel Tuner's, drives it unchanged."""

from __future__ import annotations

import importlib
import multiprocessing as mp
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from kernel_tuner.runners.runner import Runner

from tuner.errors import TunerError
from tuner.measure.entry import isolated, process_entry
from tuner.measure.evaluate import kt_result, record_failure_in_cache
from tuner.measure.pipeline import CompilePipeline, default_workers
from tuner.measure.protocol import (
    SURVIVABLE,
    CacheReady,
    Fatal,
    Measure,
    MeasureRounds,
    MeasureSpec,
    Ready,
    Result,
    Stop,
    UseCache,
    config_key,
)


def resolve_target(target: Callable | str | None) -> Callable | None:
    """A measuring process's main function, or its "module:function" name (None: the real one)."""
    if target is None or callable(target):
        return target
    module, _, func = str(target).partition(":")
    return getattr(importlib.import_module(module), func)


class IsolatedRunner(Runner):
    """A Kernel Tuner Runner whose evaluations happen in a restartable measuring process.

    `known` maps cache keys to rows already in the store: those are served, never measured again.
    `on_row(row, fresh)` sees every row (fresh=False for served ones) as it arrives.
    `compile_workers`: processes that compile the configs of a run ahead while the GPU measures
    (tuner/measure/pipeline.py; None: TUNER_COMPILE_WORKERS or the cores less two; 0: none).
    """

    def __init__(
        self,
        spec: MeasureSpec,
        *,
        timeout: float,
        setup_timeout: float = 900,
        known: Mapping[str, dict] | None = None,
        on_row: Callable[[dict, bool], object] | None = None,
        target: Callable = process_entry,
        compile_workers: int | None = None,
    ) -> None:
        super().__init__()
        self.target = target
        self.spec = spec
        self.timeout = timeout
        self.setup_timeout = setup_timeout
        self.known = dict(known or {})
        self.on_row = on_row or (lambda row, fresh: None)
        self.setup: dict | None = None
        self.restarts = 0
        self._proc: Any = None  # a SpawnProcess while one runs
        self._conn: Any = None  # its end of the pipe
        self._spawned: tuple[float, float] = (0.0, 0.0)  # perf_counter and wall time of the last spawn
        self._ctx = mp.get_context("spawn")  # CUDA cannot be forked
        self.lifecycle_s: dict = {}  # wall seconds of the last start (spawn to ready) and shutdown, as seen here
        self.compile_workers = default_workers() if compile_workers is None else compile_workers
        self.compiler: str | None = None  # what the pool runs ("module:function"; None: the backend's own)
        self._pipeline: CompilePipeline | None = None
        self._pipeline_made = False  # _pipeline is None for a space that compiles in its measuring process
        self._ok_here: set[str] = set()  # configs measured ok by the running process (compiled there already)
        self.paused_s = 0.0  # how long measuring processes kept the pool's workers stopped (measure/quiet.py)
        self._unwritten: list[tuple[dict, bool]] = []  # rows measured by `run`, not yet given to on_row

    @classmethod
    def for_campaign(
        cls,
        workload: str,
        size: dict,
        dtype: str,
        backend: str,
        device: int,
        *,
        timeout: float,
        env: dict | None = None,
        target: Callable | str | None = None,
    ) -> IsolatedRunner:
        """The measuring process of a campaign's session (tuner/campaign/session.py): one place builds it, so
        that a distributed worker may launch it early (see launch) and the session checks that it is the same.
        `target`: its main function or "module:function" (None: the real one)."""
        spec = MeasureSpec(
            workload=workload,
            size=size,
            dtype=dtype,
            backend=backend,
            device=device,
            cachefile=None,
            env=dict(env or {}),
        )
        target = resolve_target(target)
        return cls(spec, timeout=timeout, **({"target": target} if target else {}))  # type: ignore[arg-type]

    def same_as(self, other: IsolatedRunner) -> bool:
        return (self.spec, self.target, self.timeout) == (other.spec, other.target, other.timeout)

    # -- the process's lifecycle ----------------------------------------------------------------
    def launch(self) -> IsolatedRunner:
        """Spawn the measuring process without waiting for it to get ready (start waits): its set-up (a new
        Python, a CUDA context, the inputs and their reference) overlaps what the caller does meanwhile."""
        if self._proc is None:
            self._spawned = (time.perf_counter(), time.time())
            parent, child = self._ctx.Pipe()
            self._proc = self._ctx.Process(target=isolated, args=(self.target, child, self.spec), daemon=True)
            self._proc.start()
            child.close()
            self._conn = parent
        return self

    def start(self) -> dict:
        """Launch the measuring process unless launched already, and wait until it is ready. Its set-up."""
        self.launch()
        (t0, spawned_at), parent = self._spawned, self._conn
        if not parent.poll(self.setup_timeout):
            self._kill()
            raise TunerError(
                f"the measuring process did not get ready within {self.setup_timeout:.0f} s (GPU busy or hung?)"
            )
        try:
            reply = parent.recv()
        except EOFError:
            self._kill()
            raise TunerError("the measuring process died while starting (see the messages above)") from None
        if isinstance(reply, Fatal):
            self._kill()
            raise TunerError(self._cannot_start(reply.message))
        assert isinstance(reply, Ready), reply
        if self.setup is None:
            self.setup = reply.setup
        self.lifecycle_s["start"] = round(time.perf_counter() - t0, 2)
        if "entered_at" in reply.setup:  # of which: a new Python process up to the process's first line
            self.lifecycle_s["process"] = round(reply.setup["entered_at"] - spawned_at, 2)
        return self.setup

    def _cannot_start(self, message: str) -> str:
        """Why the measuring process could not start: what this machine lacks (a GPU, its driver, the backend's
        package) in the words of `tuner tune` (tuner.measure.machine.gpu_missing, the one place that says it),
        else the process's own error."""
        from tuner.measure import kt, machine
        from tuner.workloads import get_workload

        try:
            backend = kt.effective_backend(get_workload(self.spec.workload).space, self.spec.backend)
        except TunerError:  # the process's own error says more
            return f"cannot run on this machine: {message}"
        missing = None if backend == kt.CPU_BACKEND else machine.gpu_missing(backend)  # CPU code needs no GPU
        return f"cannot measure here: {missing}" if missing else f"cannot run on this machine: {message}"

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        self._ok_here = set()

    def shutdown(self) -> None:
        t0 = time.perf_counter()
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(Stop())
                self._proc.join(10)
            except (OSError, BrokenPipeError):
                pass
        self._kill()
        if self._pipeline is not None:
            self._pipeline.close()
        self._pipeline, self._pipeline_made = None, False
        self.lifecycle_s["shutdown"] = round(time.perf_counter() - t0, 2)

    # -- Kernel Tuner's Runner interface ----------------------------------------------------------
    def get_device_info(self) -> _DeviceInfo:
        return _DeviceInfo(self.setup["gpu"]["gpu"] if self.setup else "unknown")

    def get_environment(self, tuning_options: Any) -> dict:
        return dict(self.setup or {})

    def run(self, parameter_space: Iterable[Sequence], tuning_options: Any) -> list[dict | None]:
        """Kernel Tuner's call: measure these configs in order. Where several come at once (brute force), the
        next ones are compiled ahead in the compile pool while the GPU measures (tuner/measure/pipeline.py)."""
        results: list[dict | None] = []
        keys = list(tuning_options.tune_params)
        configs = [list(v) for v in parameter_space]
        try:
            for i, values in enumerate(configs):
                if tuning_options.budget.is_done():
                    results.append(None)
                    continue
                tuning_options.budget.add_evaluations(1)
                key = config_key(values)
                if key in self.known:
                    row, fresh = self.known[key], False
                else:
                    compiled = self._compiled_ahead(configs, i, tuning_options.budget)
                    if compiled is not None and compiled.crashed:  # the compiler crashed or hung: no binary to run
                        row = self._compile_failure(values, keys, compiled)
                    else:
                        request = Measure(tuple(values), (compiled,) if compiled else ())
                        row = self._request(request, values, keys)[0]
                    fresh = True
                    self.known[key] = row
                self._unwritten.append((row, fresh))
                results.append(kt_result(row, keys, tuning_options))
        finally:
            self._write_rows()
        return results

    def _write_rows(self) -> None:
        """Hand the rows measured so far to on_row (the campaign stores them). Where `run` measures several
        configs (brute force), each row is written while the GPU measures the next config (_request sends, then
        writes) or before `run` waits for a compile, so a row's Parquet write (16 ms at GEMM 2048^3 on the H200)
        keeps the GPU waiting no more, and each row is still on disk before the next one comes back."""
        while self._unwritten:
            self.on_row(*self._unwritten.pop(0))

    # -- compiling ahead ----------------------------------------------------------------------------
    def pipeline(self) -> CompilePipeline | None:
        """The compile pipeline of this runner's space on its GPU (made once the measuring process said which
        GPU), or None: its measuring process compiles (no workers, cupy or pycuda)."""
        if not self._pipeline_made:
            self._pipeline_made = True
            if self.compile_workers > 0:
                setup = self.setup or self.start()
                target = setup.get("cubin") or setup.get("library")  # what the measuring process loads
                if target:
                    s = self.spec
                    self._pipeline = CompilePipeline.for_space(
                        s.workload,
                        s.size,
                        s.dtype,
                        s.backend,
                        target,
                        workers=self.compile_workers,
                        timeout=self.timeout,
                        compiler=self.compiler,
                    )
        return self._pipeline

    def prefetch(self, configs: Iterable[Sequence]) -> None:
        """Configs a strategy will ask for soon (an ask-ahead): compiled meanwhile, loaded when measured."""
        pipeline = self.pipeline()
        if pipeline is not None and pipeline.depth:  # TUNER_COMPILE_AHEAD=0: never ahead
            pipeline.ahead([v for v in configs if config_key(v) not in self.known])

    def _compiled_ahead(self, configs: list[list], i: int, budget: Any) -> Any:
        """Config i's cubin from the pool (None: the measuring process compiles it), with the next configs the
        budget allows started. A lone config nobody announced is compiled where it runs, as before."""
        pipeline = self.pipeline()
        if pipeline is None:
            return None
        if pipeline.depth == 0:  # TUNER_COMPILE_AHEAD=0: the pool's binary, compiled while the GPU waits
            return pipeline.take(configs[i])
        left = budget.max_fevals - budget.num_fevals if budget.max_fevals is not None else len(configs)
        upcoming = [v for v in configs[i + 1 : i + 1 + pipeline.depth] if config_key(v) not in self.known]
        if not upcoming and not pipeline.started(configs[i]):
            return None
        pipeline.ahead([configs[i], *upcoming[: max(0, left)]])
        if not pipeline.done(configs[i]):  # waiting for the compiler anyway: the rows first
            self._write_rows()
        return pipeline.take(configs[i])

    def _compile_failure(self, values: list, keys: list[str], compiled: Any) -> dict:
        """The row of a config whose compiler crashed or hung in the pool (the pool replaced that worker)."""
        params = dict(zip(keys, values))
        if self.spec.cachefile:
            record_failure_in_cache(_Opts(cachefile=self.spec.cachefile, cache={}), values, params, "compile")
        return {
            **params,
            "status": "compile",
            "error": compiled.error,
            "compile_time": compiled.seconds * 1e3,
            "verification_time": 0.0,
            "benchmark_time": 0.0,
        }

    def use_cachefile(self, path: str) -> None:
        """Point the running measuring process (and any restarted one) at Kernel Tuner's cache file."""
        self.spec.cachefile = path
        if self._proc is not None and self._proc.is_alive():
            self._conn.send(UseCache(path))
            if not self._conn.poll(self.setup_timeout):
                raise TunerError("the measuring process did not open the cache file")
            try:
                reply = self._conn.recv()
            except EOFError:
                reply = Fatal("the measuring process died opening it")
            if isinstance(reply, Fatal):
                raise TunerError(
                    f"Kernel Tuner's cache {path} cannot be used: {reply.message}. It was recorded for "
                    "another parameter list or GPU, or is damaged: move it aside (its rows stay in the "
                    "store and are served from there), or give a parameter the space gained a default "
                    "(`defaults:` in the space's YAML)"
                )
            assert isinstance(reply, CacheReady), reply

    def measure_rounds(self, values: Sequence, keys: list[str], rounds: int) -> dict:
        """A regression check's measurement of one config (tuner/measure/rounds.py)."""
        return self.measure_interleaved([values], keys, rounds)[0]

    def measure_interleaved(
        self, configs: Iterable[Sequence], keys: list[str], rounds: int, references: bool = True
    ) -> list[dict]:
        """Several configs measured in alternation, `rounds` times each, in this process (see
        tuner/measure/rounds.py): one row per config, or a single failure row."""
        configs = [tuple(v) for v in configs]
        compiled = []
        pipeline = self.pipeline()
        if pipeline is not None:  # compiled in parallel for the first round, bar those this process compiled
            todo = [v for v in configs if config_key(v) not in self._ok_here]
            pipeline.ahead(todo)
            for values in todo:
                c = pipeline.take(values)
                if c is not None and c.crashed:
                    return [self._compile_failure(list(values), keys, c)]
                compiled += [c] if c is not None else []
        request = MeasureRounds(tuple(configs), rounds, references, tuple(compiled))
        return self._request(request, list(configs[0]), keys, timeout=self.timeout * rounds * len(configs))

    def _request(
        self, request: Measure | MeasureRounds, values: list, keys: list[str], timeout: float | None = None
    ) -> list[dict]:
        """Send one request; its rows, or one failure row when the process died or hung (it is killed)."""
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self.restarts += 1
            self._kill()
            self.start()
        params = dict(zip(keys, values))
        pool = self._pipeline.pool if self._pipeline is not None else None
        with pool.frozen() if pool is not None else nullcontext(()) as pids:
            # the pool's workers, which the measuring process stops while it times launches (measure/quiet.py)
            self._conn.send(replace(request, pause=pids))
            self._write_rows()  # while the GPU measures
            got = self._reply(timeout or self.timeout)
            if not isinstance(got, Result):  # killed before the workers are continued: it cannot stop them again
                self._kill()
        if isinstance(got, Result):
            if pool is not None:
                pool.credit(got.paused_s)
            self.paused_s += got.paused_s
            if isinstance(request, Measure) and got.row["status"] == "ok":
                self._ok_here.add(config_key(values))
            if got.row["status"] not in SURVIVABLE:
                self._proc.join(30)
                self._kill()
            return list(got.rows)
        status, error = got
        if self.spec.cachefile and isinstance(
            request, Measure
        ):  # rounds of several configs: no one config failed for sure
            record_failure_in_cache(_Opts(cachefile=self.spec.cachefile, cache={}), values, params, status)
        return [
            {
                **params,
                "status": status,
                "error": error,
                "compile_time": 0.0,
                "verification_time": 0.0,
                "benchmark_time": 0.0,
            }
        ]

    def _reply(self, timeout: float) -> Result | tuple[str, str]:
        """The measuring process's Result, or the failure class and error when it died or hung."""
        if not self._conn.poll(timeout):
            return "timeout", f"no result within {timeout:.0f} s; the process was killed"
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join(5)
            return "runtime", f"the measuring process died (exit code {self._proc.exitcode})"
        assert isinstance(reply, Result), reply
        return reply


class _Opts(dict):
    """Kernel Tuner reads its options as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _DeviceInfo:
    def __init__(self, name: str) -> None:
        self.name = name
        self.max_threads = 1024
