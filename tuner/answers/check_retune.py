"""`tuner check --retune N`: after a regression, a small fresh campaign (`retuned`) to see whether another config
recovers the baseline's time, and its verdict (`recovery`): within the kernel's noise floor, where the times
compare."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from tuner import store
from tuner.answers.check_result import CheckResult, note
from tuner.formatting import config_text
from tuner.search.names import DEFAULT_STRATEGY
from tuner.space import Space, format_size
from tuner.stats import THRESHOLD


def recovery(
    res: CheckResult, base: dict, space: Space, found: dict | None, timing: str | None, whose: str
) -> dict | None:
    """A re-tune's answer `found` (its best: config, time_ms), with whether it recovers the baseline (`recovers`)
    and a note saying so, also added to the result's reason: it does where its time is within the kernel's raw
    noise floor of the baseline's median. Times taken with another timing protocol (`timing`, of `whose` times:
    tuner/measure/timing.py) than the baseline's are not compared: `recovers` is None and the note says why."""
    if found is None:
        return None
    config, ms, base_ms = found.get("config") or {}, found.get("time_ms"), res.baseline_ms
    own = space.complete(json.loads(base["config"]))
    changed = {k: v for k, v in config.items() if own.get(k, object()) != v}
    what = f"re-tuned to {config_text(changed)}" if changed else "re-tuned to the baseline's own config"
    recorded = store.recorded_timing(base.get("timing"))
    recovers: bool | None = None
    if ms is None or base_ms is None or not math.isfinite(ms) or ms <= 0:
        said = f"{what}: no time to compare with the baseline's"
    elif timing is None or not store.timing_matches(base, space, timing):
        said = (
            f"{what}: {ms:.4g} ms, not comparable with the baseline's {base_ms:.4g} ms: {whose} times were taken "
            f"{timing or 'in more than one way'}, the baseline's {recorded} (tuner/measure/timing.py)"
        )
    else:
        floor = res.raw.get("threshold", THRESHOLD)
        recovers = ms <= base_ms * (1 + floor)
        said = (
            f"{what}: {ms:.4g} ms, {ms / base_ms - 1:+.1%} against the baseline's {base_ms:.4g} ms (noise floor "
            f"{floor:.1%}): {'it recovers the baseline' if recovers else 'it does not recover the baseline'}"
        )
    note(res, said)
    return {**found, "baseline_ms": base_ms, "recovers": recovers, "note": said}


def retuned(
    base: dict,
    budget: int,
    log: Callable[[str], object],
    *,
    backend: str = "nvcuda",
    device: int = 0,
    replay: Path | None = None,
) -> dict | None:
    """A small fresh campaign (nothing served from the store) to see whether another config recovers; with
    `replay` (the store that holds the baseline GPU's recordings), that campaign replayed from its recording."""
    import tempfile

    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest

    with tempfile.TemporaryDirectory() as tmp:
        out = run_campaign(
            CampaignRequest(
                workload=base["workload"],
                # a recording is found by the size's name
                size=base["size"] if replay else format_size(json.loads(base["size_vars"])),
                dtype=base["dtype"],
                strategy=DEFAULT_STRATEGY,  # as `tuner tune` searches (`auto`: docs/strategies.md)
                max_evals=budget,
                backend=backend,
                device=device,
                results=replay or Path(tmp),
                simulate=replay is not None,
                gpu=base["gpu"] if replay else None,
                quiet=True,
                warm_start=replay is None,  # a replay's store is the real one: not served from it either
            )
        )
    how = f" (replayed from the recording of {out.gpu})" if replay else ""
    log(f"retuned {base['workload']} {base['size']} {base['dtype']}{how}: {out.best}")
    return out.best
