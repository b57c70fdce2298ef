"""What a sampler sees of a study: the search's own encoding, kept out of what the study stores.

A study stores what its users read in Optuna's tools (tuner.search.trial_kinds): real parameter values,
the objective in its unit and direction, PRUNED and FAIL trials without values. The samplers search better
on another picture of the same trials: numeric parameters as ordinal indices (64 lies between 32 and 128),
one cost to minimize, and a penalty for a config that failed or broke a restriction, so that the sampler
learns to leave such regions (a FAIL trial would teach it nothing). `ViewSampler` wraps any Optuna sampler
and hands it that picture (`StudyView`): every trial translated by the codec, its value the cost recorded
with it. The wrapped sampler's suggestions are translated back, so a seeded search suggests exactly what
it did when the study stored the sampler's encoding itself (tests/test_search_loop.py pins that)."""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import optuna
from optuna.distributions import BaseDistribution
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from tuner.search import trial_kinds
from tuner.search.codec import Codec
from tuner.search.optuna_private import trial_id


def view_trial(trial: FrozenTrial, codec: Codec, state: TrialState | None = None) -> FrozenTrial:
    """One trial as the sampler sees it: ordinal params; told with a cost, COMPLETE with that cost. `state`:
    the trial's state if not its own (the one it is being told, while it is still running)."""
    state = state or trial.state
    cost = trial_kinds.cost(trial, state)
    params = codec.view_params(trial.params)
    return FrozenTrial(
        number=trial.number,
        state=TrialState.COMPLETE if cost is not None else state,
        value=None,
        values=[cost] if cost is not None else None,
        datetime_start=trial.datetime_start,
        datetime_complete=trial.datetime_complete,
        params=params,
        distributions={n: codec.view_dists[n] for n in params},
        user_attrs=trial.user_attrs,
        system_attrs=trial.system_attrs,
        intermediate_values=trial.intermediate_values,
        trial_id=trial_id(trial),
    )


class StudyView:
    """The study as its sampler sees it: trials through `view_trial`, one direction (minimize). Everything
    else (the storage a sampler keeps its own attributes in, the study's id) is the study's own."""

    def __init__(self, study: optuna.Study, codec: Codec) -> None:
        self._study, self._codec = study, codec
        self._finished: dict[int, FrozenTrial] = {}  # a finished trial never changes: translated once

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    @property
    def direction(self) -> StudyDirection:
        return StudyDirection.MINIMIZE

    @property
    def directions(self) -> list[StudyDirection]:
        return [StudyDirection.MINIMIZE]

    def _is_multi_objective(self) -> bool:
        return False

    def get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy, states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self._get_trials()

    def _get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        # the stored state of a trial differs from its seen state (PRUNED is seen COMPLETE): filter after
        seen = [self.view(t) for t in self._study.get_trials(deepcopy=False)]
        return [t for t in seen if states is None or t.state in states]

    def view(self, trial: FrozenTrial) -> FrozenTrial:
        if trial.state.is_finished():
            if (seen := self._finished.get(trial.number)) is None:
                seen = self._finished[trial.number] = view_trial(trial, self._codec)
            return seen
        return view_trial(trial, self._codec)


@runtime_checkable
class Restrictable(Protocol):
    """A sampler that can draw from the space's valid configs (params as it sees them) alone."""

    def restrict_to(self, configs: Sequence[dict]) -> None: ...


class ViewSampler(optuna.samplers.BaseSampler):
    """`inner`, fed the study through a StudyView; its suggestions become the study's real values. `valid`:
    the space's valid configs (values in the codec's parameter order), handed to an inner sampler that can
    draw from them alone (Restrictable); Optuna's own samplers never see them."""

    def __init__(self, inner: optuna.samplers.BaseSampler, codec: Codec, valid: Iterable[Sequence] = ()) -> None:
        self.inner, self.codec = inner, codec
        self._views: dict[int, StudyView] = {}
        if isinstance(inner, Restrictable) and valid:
            inner.restrict_to([codec.view_params(codec.encode(c)) for c in valid])

    def _view(self, study: optuna.Study) -> StudyView:
        key = id(study)
        if key not in self._views or self._views[key]._study is not study:  # noqa: SLF001
            self._views = {key: StudyView(study, self.codec)}
        return self._views[key]

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        view = self._view(study)
        space = self.inner.infer_relative_search_space(view, view.view(trial))  # type: ignore[arg-type]
        return {n: self.codec.dists[n] for n in space if n in self.codec.dists}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        view = self._view(study)
        seen = {n: self.codec.view_dists[n] for n in search_space}
        codes = self.inner.sample_relative(view, view.view(trial), seen)  # type: ignore[arg-type]
        return {n: self.codec.from_view(n, c) for n, c in codes.items()}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        if param_name not in self.codec.view_dists:  # not a parameter of the space: as the study asks it
            return self.inner.sample_independent(study, trial, param_name, param_distribution)
        view = self._view(study)
        code = self.inner.sample_independent(
            view,  # type: ignore[arg-type]
            view.view(trial),
            param_name,
            self.codec.view_dists[param_name],
        )
        return self.codec.from_view(param_name, code)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        view = self._view(study)
        self.inner.before_trial(view, view.view(trial))  # type: ignore[arg-type]

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        view = self._view(study)
        seen = view_trial(trial, self.codec, state)
        self.inner.after_trial(view, seen, seen.state, seen.values)  # type: ignore[arg-type]

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
