"""`tuner tune NAME --dry-run`: a workload checked before any GPU time is spent on it. Everything a campaign
does ahead of its first launch, done here without one: the space's valid configs for the size and dtype, the
parameters the kernel never reads, a few configs compiled exactly as a campaign compiles them (Kernel Tuner's
source for the config; NVRTC to a cubin where cuda-python is installed and NVRTC's library loads, else nvcc
with the same options; host code with its own compiler), each one's grid at the size, the kernel's symbol in
what was built, the declared arguments against the kernel's signature, and the arguments and the reference
answer every config is verified against."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tuner.errors import TunerError
from tuner.formatting import config_text
from tuner.measure import kt
from tuner.measure.compile_pool import CompileJob
from tuner.measure.hostcode import BUILD_TIMEOUT_S
from tuner.measure.pipeline import cubin_options, kernel_tuner_source
from tuner.space import Space
from tuner.space.model import kt_block_names
from tuner.workloads.base import Workload
from tuner.workloads.signature import kernel_parameters, mismatches, source_with_includes

COMPILED = 3  # configs compiled: the first valid one and random others (a campaign compiles every one anyway)
DEFAULT_CC = "90"  # the architecture compiled for where no GPU says its own (the H100 the project tunes on)


@dataclass
class Finding:
    """One line of the check: `ok`, a `warning` (the campaign would run, perhaps not as meant) or a `problem`
    (the campaign would fail or measure nothing)."""

    level: str
    text: str


@dataclass
class DryRun:
    workload: str
    size: str
    dtype: str
    on_cpu: bool  # CPU code: a campaign needs no GPU either
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return sum(f.level == "problem" for f in self.findings)

    def add(self, level: str, text: str) -> None:
        self.findings.append(Finding(level, text))


def dry_run(
    workload: Workload,
    size_text: str | None,
    dtype: str | None,
    *,
    backend: str = "nvcuda",
    cc: str | None = None,
    gpu_here: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> DryRun:
    """Check `workload` at a size and dtype (the space's defaults where None); `cc`: the compute capability to
    compile for (default: this machine's GPU's, else sm_90); `gpu_here`: a reference that runs on the GPU can
    run. Problems with the size or dtype raise."""
    space = workload.space
    size_name, size = space.resolve_size(size_text, workload.parse_size)
    dtype = space.resolve_dtype(dtype)
    out = DryRun(space.workload, size_name, dtype, space.on_cpu)

    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space, dtype).list]
    box = int(np.prod([len(v) for v in space.params.values()]))
    if not configs:
        out.add("problem", f"no valid config: the restrictions (and 1024 threads a block) rule out all {box}")
        return out
    out.add("ok", f"{len(configs)} valid configs of {box} ({len(space.params)} parameters)")
    for name in unread_parameters(space):
        out.add(
            "warning",
            f"parameter {name} is not read by the kernel source, the launch geometry or the metrics: "
            "its values all build the same kernel",
        )

    declared = _kernel_declared(space)
    if declared is not None:
        out.add("problem", declared)
    for text in argument_mismatches(space, dtype):
        out.add("problem", text)
    chosen = [configs[0], *random.Random(0).sample(configs[1:], min(COMPILED - 1, len(configs) - 1))]
    cc = cc or _gpu_cc()
    what = space.compiler if space.lang == "host" else f"sm_{cc or DEFAULT_CC}" + ("" if cc else ", no GPU here")
    # (what went wrong, the gist of why) -> the configs it happened to, why: the compiler's first line, or the
    # launch geometry's message with the config's numbers masked
    failed: dict[tuple[str, str], list[tuple[dict, str]]] = {}
    compiler = CubinCompiler()
    for config in chosen:
        unlaunchable = _launch_error(space, config, size)
        if unlaunchable:  # not the source's fault, and nothing to compile: the grid is made before the source
            gist = re.sub(r"\{[^}]*\}|\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", unlaunchable)
            failed.setdefault(("cannot launch", gist), []).append((config, unlaunchable))
            continue
        progress(f"compiling {config_text(config)} for {what}")
        error = compile_config(
            space, config, size, dtype, backend, cc or DEFAULT_CC, find_kernel=declared is None, compiler=compiler
        )
        if error:
            failed.setdefault(("does not build", error.split(" | ")[0]), []).append((config, error))
        else:
            out.add("ok", f"{config_text(config)} builds ({what})")
    if compiler.fallback:
        out.add("warning", compiler.fallback)
    for (verb, _), same in failed.items():  # one line for the configs that fail alike (the source's own mistake)
        (config, error), more = same[0], len(same) - 1
        also = f" (and {more} more config{'s' if more > 1 else ''} alike)" if more else ""
        out.add("problem", f"{config_text(config)} {verb}{also}: {error}")

    progress(f"building the arguments and the reference answer for {size_name}")
    out.findings += _reference(workload, size, dtype, gpu_here)
    return out


def unread_parameters(space: Space) -> list[str]:
    """Parameters that no word of the kernel source (and the local files it #includes), the launch geometry or
    the metrics names: every value of one builds and launches the same program."""
    text = source_with_includes(space.kernel_source)
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    words |= set(kt_block_names(space.block_names)) | set(space.block_names)
    for expr in [*space.grid, *space.metrics.values()]:
        words |= set(re.findall(r"[A-Za-z_]\w*", expr.text))
    return [p for p in space.params if p not in words]


def _kernel_declared(space: Space) -> str | None:
    """A problem where the source declares `__global__` functions and none is the space's kernel (None where it
    is one, or where the source's declarations are not read here: host code, macros)."""
    from tuner.workloads.signature import global_functions

    if space.lang == "host":
        return None
    names = [name for name, _ in global_functions(source_with_includes(space.kernel_source))]
    if not names or space.kernel_name.split("<")[0].strip() in names:
        return None
    return (
        f"{space.kernel_source.name} has no __global__ function {space.kernel_name} (the space's kernel.name); "
        f"it has {', '.join(dict.fromkeys(names))}"
    )


def argument_mismatches(space: Space, dtype: str) -> list[str]:
    """The declared `arguments` that do not fit the CUDA kernel's signature, a line each: their count, scalar or
    array, and the element types for `dtype` (its `defines` resolve a macro type such as T). None where no
    arguments are declared (a Python module makes them) or the kernel is host code."""
    decl = space.declaration
    if space.lang == "host" or decl is None or not decl.args:
        return []
    params = kernel_parameters(source_with_includes(space.kernel_source), space.kernel_name)
    if params is None:  # not found by name: _kernel_declared or the compile says so
        return []
    defines = space.dtypes[dtype].get("defines", {})
    found = mismatches(decl.args, params, space.kernel_name, dtype, defines)
    return [f"{'.'.join(map(str, key))}: {text}" for key, text in found]


def _launch_error(space: Space, config: dict, size: dict) -> str | None:
    """Why `config`'s grid cannot be launched at `size` (a fraction of a block, no block, an expression that
    raises: Space.grid_dims says it), None where it can. Host code launches its own kernels."""
    if space.lang == "host":
        return None
    try:
        space.grid_dims(config, size)
    except TunerError as e:
        return str(e)
    return None


def compile_config(
    space: Space,
    config: dict,
    size: dict,
    dtype: str,
    backend: str,
    cc: str,
    find_kernel: bool = True,
    compiler: CubinCompiler | None = None,
) -> str | None:
    """Build `config` as a campaign builds it; None if it builds, else the compiler's verdict (its last lines).
    `find_kernel`: also look for the kernel's name in the cubin built; `compiler`: the one a dry run shares
    between its configs (it remembers that NVRTC cannot be loaded)."""
    run_by = kt.effective_backend(space, backend)
    try:
        if run_by in (kt.HOST_BACKEND, kt.CPU_BACKEND):
            from tuner.measure.hostcode import config_job
            from tuner.measure.library_backend import build_library

            build_library(config_job(space, config, dtype, size))
            return None
        options = kt.kernel_options(space, size, dtype, [], backend)
        made = kernel_tuner_source(options, config)
        if made is None:
            return "Kernel Tuner would not compile it (too many threads a block)"
        flags = cubin_options(space.build_flags, cc) or tuple(space.build_flags)
        job = CompileJob(made[0], made[1], flags)
        cubin = (compiler or CubinCompiler())(job, space.kernel_source.name)
    except (RuntimeError, TunerError) as e:
        return _tail(str(e))
    name = space.kernel_name.split("<")[0].strip().encode()
    if find_kernel and name not in cubin:  # NVRTC says so itself (its name expression); nvcc builds the file without it
        return f"no kernel named {space.kernel_name} in what the source builds (the space's kernel.name)"
    return None


class CubinCompiler:
    """Cubins as a campaign builds them: NVRTC where cuda-python (the `cuda` extra) is installed, else nvcc with
    the same options. Where cuda-python is installed but NVRTC's library cannot be loaded (a CUDA toolkit
    without libnvrtc), nvcc too, and `fallback` says so: every config would otherwise be reported as not
    building. The compiler's messages name the kernel's file."""

    def __init__(self) -> None:
        self.no_nvrtc: str | None = None  # why NVRTC is not used, once found out: NO_CUDA_PYTHON or NO_LIBNVRTC

    @property
    def fallback(self) -> str | None:
        """The warning that configs were built with nvcc where a campaign would use NVRTC; None: no such case."""
        return NVRTC_MISSING if self.no_nvrtc == NO_LIBNVRTC else None

    def __call__(self, job: CompileJob, file_name: str) -> bytes:
        if self.no_nvrtc is None:
            from tuner.measure.compile_pool import nvrtc_cubin

            try:
                return nvrtc_cubin(job)[0]
            except ImportError:
                self.no_nvrtc = NO_CUDA_PYTHON
            except RuntimeError as e:
                if not nvrtc_unloadable(e):  # the compiler's verdict; NVRTC calls the source CUDAProgram
                    raise RuntimeError(str(e).replace("CUDAProgram(", f"{file_name}(")) from None
                self.no_nvrtc = NO_LIBNVRTC
        return _nvcc_cubin(job, file_name, self.no_nvrtc)


# why NVRTC is not used: nvcc builds instead
NO_CUDA_PYTHON = "cuda-python is not installed (pip install 'gpu-tuner[cuda]')"
NO_LIBNVRTC = "cuda-python cannot load NVRTC's library (libnvrtc)"
NVRTC_MISSING = (
    "cuda-python is installed but NVRTC's library (libnvrtc) cannot be loaded: built with nvcc instead. A campaign "
    "compiles with NVRTC: where you tune, install it with `pip install 'cuda-python[all]'` or a full CUDA toolkit"
)
# how cuda-python says that NVRTC's library cannot be loaded: cuda.pathfinder's DynamicLibNotFoundError (a
# RuntimeError; cuda-bindings 12.9 and later) says 'Failure finding "libnvrtc.so.13 or ..."', older cuda-bindings
# raise a plain RuntimeError('Failed to dlopen libnvrtc.so.12'). Matched by name and words, not imported: the
# class lives in a private module whose place has moved between releases.
_UNLOADABLE = re.compile(r"(Failure finding|Failed to dlopen)\b.*nvrtc", re.IGNORECASE | re.DOTALL)


def nvrtc_unloadable(e: RuntimeError) -> bool:
    """Whether `e`, raised by calling NVRTC, says that its library cannot be loaded (not that a source is wrong)."""
    named = any(c.__name__ == "DynamicLibNotFoundError" for c in type(e).__mro__)
    return named or _UNLOADABLE.match(str(e)) is not None


def _nvcc_cubin(job: CompileJob, file_name: str, no_nvrtc: str) -> bytes:
    """The cubin of a job built by nvcc with the job's options; `no_nvrtc`: why NVRTC was not used."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise TunerError(f"nothing here compiles CUDA: {no_nvrtc}, and nvcc is not on PATH")
    with tempfile.TemporaryDirectory(prefix="tuner-dry-run-") as tmp:
        src, cubin = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        src.write_text(job.source)
        try:
            done = subprocess.run(
                [nvcc, "--cubin", *job.options, "-o", str(cubin), str(src)],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"nvcc did not finish in {BUILD_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise RuntimeError(done.stderr.replace(str(src), file_name))
        return cubin.read_bytes()


def _reference(workload: Workload, size: dict, dtype: str, gpu_here: bool) -> list[Finding]:
    """The arguments a campaign makes and the answer it verifies every config against, made once (a reference
    that runs on the GPU, a trusted config or kernel, only where there is one)."""
    start = time.perf_counter()
    try:
        args = workload.arguments(size, dtype, np.random.default_rng(0))
    except Exception as e:  # the user's code: whatever it raises is the finding
        return [Finding("problem", f"the arguments could not be made: {type(e).__name__}: {_tail(str(e))}")]
    decl = workload.space.declaration
    if decl is not None and decl.kind in ("config", "kernel") and not gpu_here:
        return [
            Finding("ok", f"{len(args)} arguments made"),
            Finding(
                "warning", f"the reference answer runs the space's reference {decl.kind} on a GPU: not checked here"
            ),
        ]
    try:
        answer = workload.answer(args, size, dtype)
    except Exception as e:
        return [Finding("problem", f"the reference answer could not be computed: {type(e).__name__}: {_tail(str(e))}")]
    seconds = time.perf_counter() - start
    found = [Finding("ok", f"{len(args)} arguments made, reference answer in {seconds:.2f} s")]
    if answer is not None and len(answer) != len(args):
        found.append(
            Finding(
                "problem",
                f"the answer has {len(answer)} entries for {len(args)} arguments (one each, None where an argument "
                "is not an output)",
            )
        )
    elif answer is None or not any(a is not None for a in answer):
        found.append(Finding("warning", "no reference answer: configs are timed but not verified"))
    return found


def _gpu_cc() -> str | None:
    """This machine's GPU's compute capability ('90'), or None without one (nvidia-smi answers)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    cap = done.stdout.strip().replace(".", "")
    return cap if done.returncode == 0 and cap.isdigit() else None


def _tail(text: str, lines: int = 6) -> str:
    """The last lines of a compiler's or a function's message, on one line each joined by ' | '."""
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)
