"""`tuner check`'s inputs checked before anything is measured (tuner.answers.check and check_replay alike): the
options in range, the planted change one that changes every kernel checked, and the baselines that today's
space and timing can no longer compare (recorded before the space gained parameters, or timed otherwise)."""

from __future__ import annotations

import json

from tuner import store
from tuner.errors import TunerError
from tuner.formatting import config_text
from tuner.space import Space


def check_retune(retune: int) -> None:
    """--retune: a number of evaluations (0: no re-tune)."""
    if retune < 0:
        raise TunerError(f"--retune {retune}: give a number of evaluations (0: no re-tune)")


def check_threshold(threshold: float) -> None:
    """--threshold: a fraction above 0 and below 1 (5 is not 5%: a 500% slowdown would pass)."""
    if not 0 < threshold < 1:  # NaN too
        raise TunerError(
            f"--threshold {threshold:g}: give a fraction such as 0.03 (a regression must be more than 3% slower)"
        )


def lacking_parameters(base: dict, space: Space, config: dict) -> str | None:
    """Why the baseline is stale where its config (completed with the space's defaults) lacks parameters of
    today's space: it names no kernel of today's (recorded before the space gained them)."""
    missing = [k for k in space.params if k not in config]
    if not missing:
        return None
    return (
        f"its config lacks {', '.join(missing)}, parameters the space gained since; record it again with "
        f"`tuner baseline {base['workload']}`"
    )


def timing_differs(base: dict, space: Space, timing: str) -> str | None:
    """Why the baseline is stale where it was timed otherwise than kernels are timed now (`timing`, the worker's
    protocol: tuner/measure/timing.py): e.g. taken before kernels' start events waited for their launch, its
    times carry the launch overhead (8-20 us), which would hide a regression of that size in a short kernel."""
    if store.timing_matches(base, space, timing):
        return None
    return (
        f"timed {store.recorded_timing(base.get('timing'))}, kernels are timed {timing} now "
        f"(tuner/measure/timing.py); record it again with `tuner baseline {base['workload']}`"
    )


def check_plant(plant: dict, spaces: dict[str, Space]) -> None:
    """--plant must change the config of every kernel checked (`spaces`, by workload): a parameter that a space
    lacks, or a value that it does not have, would leave the config as it is, and the check would pass the very
    change it was asked to catch. One line naming what is wrong, with the parameters or values there are."""
    problems = []
    for k, v in plant.items():
        having = sorted(n for n, space in spaces.items() if k in space.params)
        lacking = sorted(n for n in spaces if n not in having)
        if lacking and having:
            problems.append(
                f"{' and '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no parameter {k}: name the "
                f"workloads it applies to, `tuner check {' '.join(having)} --plant {k}=...`"
            )
        elif len(lacking) == 1:
            problems.append(f"{lacking[0]} has no parameter {k} (it has {', '.join(spaces[lacking[0]].params)})")
        elif lacking:
            problems.append(f"none of {', '.join(lacking)} has a parameter {k}")
        outside: dict[tuple, list[str]] = {}  # the values of k, and the workloads whose k has them
        for n in having:
            if v not in spaces[n].params[k]:
                outside.setdefault(tuple(spaces[n].params[k]), []).append(n)
        if outside:
            problems.append(
                f"{k}={v} is not a value of {k} in "
                + ", ".join(f"{' and '.join(ns)} (it has {', '.join(map(str, vs))})" for vs, ns in outside.items())
            )
    if problems:
        raise TunerError("--plant: " + "; ".join(problems))


def planted_config(base: dict, space: Space, plant: dict) -> dict:
    """The baseline's config (completed with the space's defaults) with `plant` applied; a planted config that
    breaks a restriction of the space names no kernel, and is an error."""
    config = {**space.complete(json.loads(base["config"])), **plant}
    if plant and all(k in config for k in space.params) and not space.is_valid(config, base["dtype"]):
        raise TunerError(
            f"--plant {config_text(plant)} breaks a restriction of the {base['workload']} space for "
            f"{base['size']} {base['dtype']}: {config_text(config)}"
        )
    return config
