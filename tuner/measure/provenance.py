"""Where a measurement came from: GPU, driver, CUDA, backend, compiler options, kernel source hash,
package versions and git commit."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from tuner import __version__
from tuner.locations import CHECKOUT_ROOT


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def _version(pkg: str) -> str:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return ""


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


def software() -> dict:
    return {
        "package_version": __version__,
        "kernel_tuner_version": _version("kernel_tuner"),
        "optuna_version": _version("optuna"),
        "git_commit": git_commit(),
        "host": platform.node(),
    }
