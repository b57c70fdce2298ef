"""The words of a store row that the stages share: the measure stage writes them, search, store and answers read
them. A leaf module (the standard library only): anything may import it, so that reading a row's words never
imports the stage that writes them.

- PROTOCOL: how kernel times are taken now (tuner.measure.timing), the value of a row's `timing`;
- KT_ERROR_KINDS: the failure classes (a row's `status`) that Kernel Tuner has error kinds of, by the kinds'
  names in kernel_tuner.util (a cache entry's `__error__`), and kt_error_status, the way back;
- package_version: an installed package's version, as a row's provenance records it."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

PROTOCOL = "delayed-start"
KT_ERROR_KINDS = {"compile": "CompilationFailedConfig", "launch": "RuntimeFailedConfig", "invalid": "InvalidConfig"}
_STATUS_OF_KIND = {kind: status for status, kind in KT_ERROR_KINDS.items()}


def kt_error_status(error: object) -> str:
    """The failure class of one of Kernel Tuner's error kinds (an unknown one: runtime)."""
    return _STATUS_OF_KIND.get(type(error).__name__, "runtime")


@cache
def package_version(pkg: str) -> str:
    """The installed version of `pkg` ("" if it is not installed); read once a process (a metadata search of
    sys.path each time: half a millisecond)."""
    try:
        return version(pkg)
    except PackageNotFoundError:
        return ""
