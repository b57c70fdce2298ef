"""How a trial is recorded: one user attribute, `{"tuner": {"kind": ..., ...}}`, in single-process and
distributed campaigns alike. The kinds:

- measured: its config was measured for this trial (its value is the cost, or the penalty if it failed);
- served: its config's result came from the store (measured before, by this campaign or an earlier one);
- invalid: the sampler suggested a config that breaks a restriction (told the penalty, never measured);
- repeat: the sampler suggested a config already measured (told the value it has);
- taken: another worker's trial was measuring that config (failed: it holds no value of its own);
- surplus: a distributed brute force asked when no queued config was left (failed, nothing to measure).

The extra fields (worker, status, objective, config, time_ms) say who measured what: `tuner status` reads
them. Single-process studies from before the kinds marked a measured trial `"measured": True` (and
`"invalid"`, `"repeat"`); `kind_of` reads those too, so that such a study resumes."""

from __future__ import annotations

from optuna.trial import FrozenTrial, TrialState

KINDS = ("measured", "served", "invalid", "repeat", "taken", "surplus")
MEASURED = ("measured", "served")  # trial kinds that hold a result of the campaign
ATTR = "tuner"
_LEGACY = ("measured", "invalid", "repeat")


def record(kind: str, **fields) -> dict:
    """The user attribute's value for a trial of `kind`."""
    if kind not in KINDS:
        raise ValueError(f"unknown trial kind '{kind}'")
    return {"kind": kind, **fields}


def info(trial: FrozenTrial) -> dict:
    """The trial's record ({} when it has none yet: asked, not told)."""
    value = trial.user_attrs.get(ATTR)
    if isinstance(value, dict):
        return value
    legacy = next((k for k in _LEGACY if trial.user_attrs.get(k) is True), None)
    return {"kind": legacy} if legacy else {}


def kind_of(trial: FrozenTrial) -> str | None:
    return info(trial).get("kind")


def holds_result(trial: FrozenTrial) -> bool:
    """A complete trial whose config was measured or served: a result of the search."""
    return trial.state == TrialState.COMPLETE and kind_of(trial) in MEASURED
