"""Where a measurement came from: GPU (or, for CPU code, the CPU's model, cores and compiler), driver, CUDA,
backend, compiler options, kernel source hash, package versions and git commit."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from functools import cache
from typing import TYPE_CHECKING

from tuner import __version__
from tuner.locations import CHECKOUT_ROOT
from tuner.vocabulary import package_version

if TYPE_CHECKING:
    from tuner.space import Space


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def kernel_hash(space: Space) -> str:
    """The hash of the space's kernel source as it is now, as every row, study and baseline records it (the
    file's text, before any #defines, and the local files it #includes): which version of the kernel a
    measurement was taken with. A source without quoted includes found (every built-in's) hashes its text alone,
    as before includes were hashed; with some, each one's path (relative to the kernel's folder) and bytes
    follow the text, in the order the preprocessor meets them (Space.included_sources), so that editing a
    header makes the rows measured before it stale."""
    text, includes = space.source_text, space.included_sources
    if not includes:
        return source_hash(text)
    h = hashlib.sha256(text.encode())
    for label, content in includes:  # lengths first: no two lists of files hash alike
        h.update(f"\0#include {len(label.encode())}:{label} {len(content)}\0".encode())
        h.update(content)
    return h.hexdigest()[:16]


@cache
def git_commit() -> str:
    """The commit the code came from; TUNER_GIT_COMMIT where the tree travelled without .git."""
    if os.environ.get("TUNER_GIT_COMMIT"):
        return os.environ["TUNER_GIT_COMMIT"]
    if CHECKOUT_ROOT is None:  # an installed package: its version says which code it is
        return "unknown"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=CHECKOUT_ROOT, capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "tuner", "kernels", "spaces"],
            cwd=CHECKOUT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode == 0:
            return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def smi_id(device: int) -> str:
    """nvidia-smi's id of CUDA's device `device`. nvidia-smi sees every GPU of the host, in PCI order
    (CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's order the same, tuner/__init__.py); CUDA sees those that
    CUDA_VISIBLE_DEVICES lists, numbered from 0, and that list names them by nvidia-smi's index or UUID."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None and device < len(visible):
        return visible[device]
    return str(device)


def gpu_info(device: int = 0) -> dict:
    """Name, compute capability, driver and CUDA versions of one GPU (in a process that may use it)."""
    info = {"gpu": "unknown", "compute_capability": "", "driver": "", "cuda": ""}
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                f"--id={smi_id(device)}",
                "--query-gpu=name,compute_cap,driver_version",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if out.returncode == 0 and out.stdout.strip():
            name, cc, driver = [s.strip() for s in out.stdout.strip().splitlines()[0].split(",")]
            info.update(gpu=name, compute_capability=cc, driver=driver)
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    try:
        from cuda.bindings import runtime

        err, ver = runtime.cudaRuntimeGetVersion()
        info["cuda"] = f"{ver // 1000}.{ver % 1000 // 10}"
        if info["gpu"] == "unknown":
            err, prop = runtime.cudaGetDeviceProperties(device)
            info["gpu"] = prop.name.decode().strip("\x00")
            info["compute_capability"] = f"{prop.major}.{prop.minor}"
    except Exception:  # cuda-python missing or too old: nvidia-smi's answer stands
        pass
    return info


def _cpu_model() -> str:
    """The CPU's model as the kernel names it (/proc/cpuinfo's "model name"; else what platform says)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _physical_cores() -> int | None:
    """Distinct (package, core) pairs in /proc/cpuinfo among the CPUs this process may use; None if unknown."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores, cpu, package = set(), None, "0"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = (s.strip() for s in line.partition(":"))
                if key == "processor":
                    cpu = int(value)
                elif key == "physical id":
                    package = value
                elif key == "core id" and (allowed is None or cpu in allowed):
                    cores.add((package, value))
    except (OSError, ValueError):
        return None
    return len(cores) or None


@cache
def compiler_version(compiler: str) -> str:
    """`g++ (Debian 12.2.0-14) 12.2.0`: the first line of the compiler's --version ("" if it cannot say)."""
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
        lines = out.stdout.strip().splitlines()
        return lines[0].strip() if out.returncode == 0 and lines else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_info(compiler: str = "g++") -> dict:
    """The CPU as the store names a device: its model in the `gpu` column (the device key, slugged like a
    GPU's), the logical CPUs this process may use and the physical cores among them, and the compiler."""
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0
    return {
        "gpu": _cpu_model(),
        "compute_capability": "",
        "driver": "",
        "cuda": "",
        "cpu_threads": threads,
        "cpu_cores": _physical_cores() or threads,
        "compiler": compiler_version(compiler),
    }


def device_info(space: Space, device: int = 0) -> dict:
    """The device that runs `space`'s code: the CPU for host code built by the system compiler (Space.on_cpu),
    else CUDA device `device`."""
    return cpu_info(space.compiler) if space.on_cpu else gpu_info(device)


def local_device_name(space: Space) -> str | None:
    """This machine's device for `space` as the store names it (the CPU's model, or the GPU's), None without one."""
    name = device_info(space).get("gpu")
    return None if name in (None, "", "unknown") else str(name)


def software() -> dict:
    return {
        "package_version": __version__,
        "kernel_tuner_version": package_version("kernel_tuner"),
        "optuna_version": package_version("optuna"),
        "git_commit": git_commit(),
        "host": platform.node(),
    }
