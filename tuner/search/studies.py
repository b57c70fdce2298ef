"""Creating or reopening a campaign's Optuna study, in the form Optuna's own tools read (trial_kinds): its
direction the objective's, its metric named, and a mark of that form, so that a study an earlier version
wrote (parameters as indices, values negated) is refused with a clear line instead of mixed with this one."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Literal

import optuna

from tuner.errors import TunerError
from tuner.search.trial_kinds import FORMAT, FORMAT_ATTR

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler
    from optuna.storages import BaseStorage


def open_study(
    storage: str | BaseStorage | None,
    name: str | None,
    *,
    maximize: bool,
    metric: str,
    sampler: BaseSampler | None = None,
    where: str = "",
) -> optuna.Study:
    """The study `name` in `storage`, created if new. `where`: the storage as a message may name it."""
    direction: Literal["minimize", "maximize"] = "maximize" if maximize else "minimize"
    study = optuna.create_study(
        storage=storage, study_name=name, load_if_exists=True, direction=direction, sampler=sampler
    )
    form = check_form(study, where)
    if study.direction.name.lower() != direction:
        raise TunerError(
            f"the Optuna study '{study.study_name}'{where and f' in {where}'} was made to "
            f"{study.direction.name.lower()}, this objective ({metric}) is to {direction}: name the campaign otherwise"
        )
    if form is None:
        study.set_user_attr(FORMAT_ATTR, FORMAT)
        with warnings.catch_warnings():  # experimental since Optuna 3.2, and what optuna-dashboard labels by
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([metric])
    return study


def check_form(study: optuna.Study, where: str = "") -> int | None:
    """The study's form mark (None for a new, empty study); refuses one an earlier version wrote."""
    form = study.user_attrs.get(FORMAT_ATTR)
    if form is None and study.get_trials(deepcopy=False):
        raise TunerError(
            f"the Optuna study '{study.study_name}'{where and f' in {where}'} was written by an earlier version "
            "of the tuner (parameters as indices, values negated); the measurements it led to are in the store "
            f"and are reused: delete it (optuna delete-study --study-name '{study.study_name}' --storage URL) "
            "or name the campaign otherwise"
        )
    return form
