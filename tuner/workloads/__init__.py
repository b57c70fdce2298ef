"""The workloads stage: a workload is a space file, its kernel source(s) and, where YAML cannot say it, a
Python module (inputs for a size, the reference, vendor baselines). The registry finds them: the built-ins,
the user's workloads folder, installed packages."""

from tuner.workloads.base import Workload
from tuner.workloads.registry import BUILTINS, all_workloads, discover, get_workload

__all__ = ["BUILTINS", "Workload", "all_workloads", "discover", "get_workload"]
