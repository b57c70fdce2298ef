"""How a trial is recorded: its state, its value, and one user attribute, `{"tuner": {"kind": ..., ...}}` (and
`tuner_warm_start` on a trial the warm start queued: WARM_START), in single-process and distributed campaigns
alike, so that Optuna's own tools (optuna-dashboard) read a study as it is: the parameters' real values, the
objective in its unit and direction.

- COMPLETE: a config measured (kind `measured`) or served from the store (`served`) that ran and verified;
  its value is the objective (GB/s under `maximize`, ms under `minimize`).
- PRUNED: a trial that holds no value of its own: its config failed (kind `measured`/`served`, `status`
  the failure class: compile, launch, runtime, wrong_answer, timeout, ...), broke a restriction (`invalid`),
  or was measured before (`repeat`).
- FAIL: a trial that holds nothing: another trial was measuring its config (`taken`: another worker's, or one
  this search asked ahead, tuner.search.ahead), a distributed brute force asked when no queued config was left
  (`surplus`), a distributed worker did not measure it after all (`given_back`: asked ahead of a stop or past the
  time limit, or its measurement raised), or it was never told (a lost worker's, retried).

Every told trial's record also keeps `cost`: what the search's sampler was told (the objective as a cost
to minimize, or for a trial with no value a penalty worse than the worst cost); tuner.search.sampler_view
shows the sampler the study that way. The extra fields (worker, status, objective, config, time_ms) say who
measured what: `tuner status` reads them."""

from __future__ import annotations

from optuna.trial import FrozenTrial, TrialState

KINDS = ("measured", "served", "invalid", "repeat", "taken", "surplus", "given_back")
MEASURED = ("measured", "served")  # trial kinds that hold a result of the campaign
HOLDS_NOTHING = ("taken", "surplus", "given_back")  # FAIL trials their worker told so: no config of theirs is retried
ATTR = "tuner"
FORMAT_ATTR = "tuner_format"  # a study attribute: 2 = real parameter values, the objective in its direction
FORMAT = 2
WARM_START = "tuner_warm_start"  # a user attribute of the trials the warm start queued (tuner.search.warmstart)


def record(kind: str, **fields) -> dict:
    """The user attribute's value for a trial of `kind`."""
    if kind not in KINDS:
        raise ValueError(f"unknown trial kind '{kind}'")
    return {"kind": kind, **fields}


def info(trial: FrozenTrial) -> dict:
    """The trial's record ({} when it has none yet: asked, not told)."""
    value = trial.user_attrs.get(ATTR)
    return value if isinstance(value, dict) else {}


def kind_of(trial: FrozenTrial) -> str | None:
    return info(trial).get("kind")


def holds_result(trial: FrozenTrial) -> bool:
    """A told trial whose config was measured or served (its value, or its failure): a result of the search."""
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED) and kind_of(trial) in MEASURED


def cost(trial: FrozenTrial, state: TrialState | None = None) -> float | None:
    """What the sampler was told for the trial; None for one that holds nothing (FAIL, running, waiting).
    `state`: the trial's state if not its own (the one it is being told, while it is still running)."""
    told = info(trial).get("cost")
    return (
        None if told is None or (state or trial.state) not in (TrialState.COMPLETE, TrialState.PRUNED) else float(told)
    )
