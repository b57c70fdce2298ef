"""The `auto` strategy's sampler: a search that adapts to a space it knows nothing about (no stored
neighbours, no settings fitted to it), through Optuna's public sampler interface only.

- It draws from the space's valid configs (`restrict_to`; tuner.search.sampler_view hands them over), so no
  suggestion breaks a restriction and none is replaced by the loop's nearest valid config: that repair makes
  even random sampling favour the configs at the edges of the restrictions (on the reduction space 84% of
  the parameter grid is invalid). Without them it searches the parameter box as before.
- A space-filling start: each of the first suggestions is, of a few random unseen valid configs, the one
  farthest from every config tried so far (maximin), so the start spreads out where the valid configs are.
- A covering start: until every common value of every parameter (one that holds at least its fair share,
  1 / the values the parameter takes, of the valid configs) has been tried, each suggestion is the unseen
  valid config with an untried common value that the forest predicts best. A model fit to a start that missed
  a region judges the region by the others (spmv: the start lands in the variant that holds 55% of the
  configs, and the forest rates the variant holding every config within 5% of the optimum by it), and the
  local steps never leave the start's hill. Values rarer than their share are left to the model: covering
  GEMM's rare tile shapes cost its small budget more than it found. Not after a warm start (trials the study
  marks trial_kinds.WARM_START): its configs give the search a region, and covering took evaluations from it.
- Then a model: a random forest (bootstrapped trees, SMAC's surrogate) over the parameters' value indices,
  which handles ordinal and categorical parameters and the sharp edges of GPU spaces alike. Each suggestion
  is a Thompson sample: one tree drawn at random, and the config it predicts best of every unseen valid
  config (a random part of them on a large space, with the valid local moves from the best configs so far
  and crossovers of them, so the search can still refine around its incumbent). The balance of exploring
  and exploiting follows the model as it learns: the trees disagree (and the draws spread) where the data
  are few, and agree around the incumbent once the data there are many.
- A greedy local step, more often as the run goes on: with a chance of 1 - n_startup / (configs that ran),
  the suggestion is instead the incumbent's unseen valid neighbour (one parameter changed to any other value)
  that the forest ranks best by a lower confidence bound (the trees' mean cost less their spread: a neighbour
  the trees disagree on goes before one they agree is a little worse, so a change the data barely tell about
  is tried rather than ruled out), so the run climbs to the top of the incumbent's hill early (the
  score rewards reaching the very top within the first evaluations). Once every neighbour is tried, the
  step goes to the unseen valid config two parameters away with the lowest bound, and once those are all tried the
  Thompson draw takes the step's place. Right after a config that improved on every one before it, the
  suggestion is always such a step (momentum: the climb goes on while it pays), and first the same move
  once more where the improvement changed one or two ordinal parameters (a pattern search's move: 128 -> 256
  paid, so try 512).
- Failed configs (the loop tells them a penalty, tuner.search.codec.penalty_for) are learnt by a classifier
  whose chance of a config running weighs the drawn tree's predicted gain, so suggestions move away from
  where kernels fail.
- Configs already tried or being measured (running trials: parallel workers) are never suggested again.

Trials are read through the study alone (`study.get_trials`, `study.direction`: tuner.search.study_history);
parameters are Optuna's values of the distributions asked for (the codec's ordinal indices, categorical values)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study
from optuna.trial import FrozenTrial
from sklearn.ensemble import RandomForestClassifier

from tuner.search.forest import Forest
from tuner.search.level_moves import ValidLevels, local_candidates, one_away, random_points, two_away, unseen
from tuner.search.study_history import History, level_of, n_levels, read_history, value_of


class AutoSampler(BaseSampler):
    """Space-filling start, a covering start (each common value of each parameter tried once), then Thompson
    sampling from a random forest over the valid configs (or, with no valid configs given, over local, crossover
    and random candidates of the parameter box), interleaved with greedy steps to the incumbent's neighbour of
    the lowest bound on its cost, more of them as the configs tried accumulate.

    `n_startup`: configs with a cost before the model takes over; `n_pool`: the start's random candidates
    per suggestion, of which the one farthest from those tried is taken; `max_train`: the model is fit on at
    most this many configs (the best half of them and a random rest), so each suggestion stays cheap on large
    spaces with large budgets; `n_random`: random candidates per suggestion (8x that from the valid configs)."""

    def __init__(
        self,
        seed: int | None = None,
        *,
        n_startup: int = 4,
        n_pool: int = 8,
        n_trees: int = 48,
        max_train: int = 400,
        n_random: int = 256,
    ):
        self._rng = np.random.default_rng(seed)
        self._independent = RandomSampler(seed)
        self.n_startup, self.n_pool, self.n_trees = n_startup, n_pool, n_trees
        self.max_train, self.n_random = max_train, n_random
        self._valid: list[dict] = []
        self._valid_levels: ValidLevels | None = None  # `_valid` as levels of the names last asked for
        self._drawn: dict[int, dict] = {}  # trial number -> the valid config its independent params come from

    def restrict_to(self, configs: Sequence[dict]) -> None:
        """The space's valid configs, params as the sampler sees them: suggestions are drawn from them alone.
        Without them suggestions range over the parameter box, and the loop measures the nearest valid config
        to an invalid one (which biases the search toward the edges of the restrictions)."""
        self._valid, self._valid_levels = list(configs), None

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._independent.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """Every integer or categorical parameter the study's trials were asked for, that has a choice."""
        space: dict[str, BaseDistribution] = {}
        for t in study.get_trials(deepcopy=False):
            for name, dist in t.distributions.items():
                if isinstance(dist, (IntDistribution, CategoricalDistribution)) and not dist.single():
                    space.setdefault(name, dist)
        return space

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        # the first trial (no space known yet), and parameters outside the relative space; restricted to the
        # valid configs, each of the trial's parameters comes from one valid config drawn for the trial
        if self._valid and param_name in self._valid[0]:
            if trial.number not in self._drawn:
                self._drawn = {trial.number: self._valid[int(self._rng.integers(len(self._valid)))]}
            return self._drawn[trial.number][param_name]
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        names = list(search_space)
        dists = [search_space[n] for n in names]
        sizes = np.array([n_levels(d) for d in dists])
        history = read_history(study, names, dists)
        valid = self._levels_of_valid(names, dists, sizes)
        if np.count_nonzero(~np.isnan(history.costs)) < self.n_startup:
            chosen = self._space_filling(history, sizes, valid)
        else:
            categorical = [isinstance(d, CategoricalDistribution) for d in dists]
            # no covering start after a warm start, which gave it a region (warm mean of 21 spaces: 0.746 -> 0.768)
            chosen = self._model_choice(history, sizes, categorical, valid, cover=not history.warm_start)
        return {n: value_of(d, int(i)) for n, d, i in zip(names, dists, chosen, strict=True)}

    # ---- the two phases --------------------------------------------------------------------------------

    def _levels_of_valid(
        self, names: list[str], dists: list[BaseDistribution], sizes: np.ndarray
    ) -> ValidLevels | None:
        if not self._valid:
            return None
        if self._valid_levels is None or self._valid_levels.names != tuple(names):
            levels = [[level_of(d, c[n]) for n, d in zip(names, dists, strict=True)] for c in self._valid]
            self._valid_levels = ValidLevels(tuple(names), np.unique(np.array(levels, dtype=int), axis=0), sizes)
        return self._valid_levels

    def _some_valid(self, valid: ValidLevels, seen: set, n: int) -> np.ndarray:
        """Unseen valid configs: all of them, or a random `n` of them on a large space."""
        levels = valid.levels
        if len(levels) > n:
            levels = levels[self._rng.choice(len(levels), n, replace=False)]
        return unseen(levels, seen)

    def _space_filling(self, history: History, sizes: np.ndarray, valid: ValidLevels | None) -> np.ndarray:
        """Of a few random unseen configs, the one farthest from every config tried (maximin). Drawn from the
        valid configs, the start stays where they are dense: a maximin over the whole box would spend the
        start on the box's corners and rare regions (e.g. a parameter value few valid configs have)."""
        if valid is None:
            candidates = unseen(random_points(self._rng, sizes, self.n_pool), history.seen)
        else:
            candidates = self._some_valid(valid, history.seen, self.n_pool)
            if len(candidates) == 0:  # a large space whose random draw was all seen: any unseen valid one
                candidates = self._some_valid(valid, history.seen, 8 * self.n_random)[: self.n_pool]
        if len(candidates) == 0:
            return random_points(self._rng, sizes, 1)[0]
        tried = np.vstack([history.levels, history.pending])
        if len(tried) == 0:
            return candidates[0]
        scale = np.maximum(sizes - 1, 1)
        dist = np.abs(candidates[:, None, :] / scale - tried[None, :, :] / scale).sum(axis=2).min(axis=1)
        return candidates[int(np.argmax(dist))]

    def _model_choice(
        self,
        history: History,
        sizes: np.ndarray,
        categorical: list[bool],
        valid: ValidLevels | None,
        cover: bool = True,
    ) -> np.ndarray:
        ok = ~np.isnan(history.costs)
        target = _model_target(history.costs[ok])
        scale = np.maximum(sizes - 1, 1)
        x, y = self._training_set(history.levels[ok], target)
        # min_samples_leaf=1: with the few configs of a small budget, larger leaves average the best away
        forest = Forest(self.n_trees, max_features=0.8, seed=int(self._rng.integers(2**31))).fit(x / scale, y)
        local = local_candidates(history.levels[ok], target, sizes, categorical, self._rng, self.n_random)
        if valid is None:
            candidates = unseen(local, history.seen)
        else:  # every valid config on a small space; on a large one a random part, and the local moves that are valid
            some = self._some_valid(valid, history.seen, 8 * self.n_random)
            candidates = np.unique(np.vstack([some, unseen(local[valid.contains(local)], history.seen)]), axis=0)
        if len(candidates) == 0:
            return random_points(self._rng, sizes, 1)[0]
        # the covering start (module docstring): cold, 0.532 to 0.635 over 16 spaces; spmv -0.840 to 0.740
        if cover and valid is not None:
            covering = unseen(valid.with_untried_common(np.vstack([history.levels, history.pending])), history.seen)
            if len(covering) > 8 * self.n_random:  # a random part of them on a large space
                covering = covering[self._rng.choice(len(covering), 8 * self.n_random, replace=False)]
            if len(covering):
                return covering[int(np.argmin(forest.predict(covering / scale)))]
        # a greedy step, with a chance rising from 0 as the run goes on: 1/2 at twice the start's configs, 9/10
        # at ten times; tried alone, it or a step whenever the last 3 evaluations had not improved lifted the
        # mean score from 0.49 to 0.54-0.55 (docs/strategies.md). And always right after a config that improved
        # on every one before it (momentum: climb on while the climb pays; 0.537 to 0.570 at 20 repeats, with
        # the two-parameter steps of `_local_step`; the pattern move of `_step_on` first: 0.599 to 0.613 at 10
        # repeats, 0.570 to 0.599 at 20).
        n_ok = int(ok.sum())
        if self._improved_last(history) or self._rng.random() < 1 - self.n_startup / max(n_ok, self.n_startup):
            step = self._local_step(history, sizes, categorical, valid, forest, scale)
            if step is not None:
                return step
        # Thompson sampling: one tree, drawn at random, is a sample of the cost surface from the model's
        # posterior; the candidate it predicts best is taken. Where the forest is sure, the trees agree and this
        # exploits; where it is unsure, some draws land elsewhere. Expected improvement with the trees' spread
        # kept trying far, uncertain configs: on the two large reduction spaces half its runs were still 1-3%
        # short of the optimum at their 40th evaluation (docs/strategies.md).
        per_tree = forest.per_tree(candidates / scale)
        drawn = per_tree[int(self._rng.integers(len(per_tree)))]
        score = (drawn.max() - drawn + 1e-9) * self._p_valid(history, candidates, scale)
        # a tree of one-config leaves predicts many candidates alike: ties go to the forest's lowest mean cost
        order = np.lexsort((self._rng.random(len(candidates)), per_tree.mean(axis=0), -score))
        return candidates[order[0]]

    def _local_step(
        self,
        history: History,
        sizes: np.ndarray,
        categorical: list[bool],
        valid: ValidLevels | None,
        forest: Forest,
        scale: np.ndarray,
    ) -> np.ndarray | None:
        """Right after an improvement, the same move once more (`_step_on`); else the incumbent's unseen (valid)
        neighbour, one parameter changed to any other of its values, with the lowest bound on its cost
        (`lower_bound`); once every such neighbour is tried, the same of those two parameters away; None when
        those are all tried too."""
        ahead = self._step_on(history, sizes, categorical, valid)
        if ahead is not None:
            return ahead
        ok = ~np.isnan(history.costs)
        best = history.levels[ok][int(np.argmin(history.costs[ok]))]

        def lowest_bound(neighbours: np.ndarray) -> np.ndarray | None:
            if valid is not None:
                neighbours = neighbours[valid.contains(neighbours)]
            neighbours = unseen(neighbours, history.seen)
            return neighbours[int(np.argmin(lower_bound(forest, neighbours / scale)))] if len(neighbours) else None

        step = lowest_bound(one_away(best, sizes))
        return step if step is not None else lowest_bound(two_away(best, sizes, self._rng))

    def _step_on(
        self, history: History, sizes: np.ndarray, categorical: list[bool], valid: ValidLevels | None
    ) -> np.ndarray | None:
        """A pattern search's move: when the last config improved on every one before it and differs from the
        best of those in one or two ordinal parameters, the same change applied to it once more (block size 128
        -> 256 paid, so try 512), where that config is unseen, in range and valid. The forest ranks the
        neighbours by the configs around them, and rates a value past the last one tried no better than what it
        has seen; the move follows the measured trend instead. None otherwise."""
        if not self._improved_last(history):
            return None
        ran = np.flatnonzero(~np.isnan(history.costs))
        new = history.levels[ran[-1]]
        before = history.levels[ran[:-1]][int(np.argmin(history.costs[ran[:-1]]))]
        changed = np.flatnonzero(new != before)
        if not 1 <= len(changed) <= 2 or any(categorical[j] for j in changed):
            return None
        ahead = 2 * new - before
        if np.any(ahead < 0) or np.any(ahead >= sizes) or tuple(ahead.tolist()) in history.seen:
            return None
        if valid is not None and not valid.contains(ahead[None, :])[0]:
            return None
        return ahead

    def _improved_last(self, history: History) -> bool:
        """Whether, past the start, the last config that ran improved on every config that ran before it."""
        ran = np.flatnonzero(~np.isnan(history.costs))
        if len(ran) <= self.n_startup:
            return False
        return bool(history.costs[ran[-1]] < history.costs[ran[:-1]].min())

    def _p_valid(self, history: History, candidates: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """The chance that a candidate is valid and runs, by a forest that tells the configs that ran from
        those told a penalty (invalid or failed)."""
        ok = ~np.isnan(history.costs)
        if ok.all():
            return np.ones(len(candidates))
        classifier = RandomForestClassifier(
            n_estimators=self.n_trees, min_samples_leaf=1, random_state=int(self._rng.integers(2**31))
        ).fit(history.levels / scale, ok)
        return classifier.predict_proba(candidates / scale)[:, list(classifier.classes_).index(True)]

    # ---- the model's data and candidates ---------------------------------------------------------------

    def _training_set(self, levels: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(levels) <= self.max_train:
            return levels, target
        order = np.argsort(target, kind="stable")
        best, rest = order[: self.max_train // 2], order[self.max_train // 2 :]
        keep = np.concatenate([best, self._rng.choice(rest, self.max_train - len(best), replace=False)])
        return levels[keep], target[keep]


def lower_bound(forest: Forest, points: np.ndarray) -> np.ndarray:
    """The forest's optimistic cost of each point: the trees' mean less one standard deviation of them (a
    lower confidence bound). Ranked by the mean alone, the greedy step kept passing over the changes the
    power-law spmv needs (`row_iters` 8 and `full_occupancy` 0: each alone had fallen short, and the mean put
    them below neighbours the trees all rated a little worse): cold 0.181 there, 0.709 with the bound; the
    mean of 22 spaces 0.642 -> 0.655 (docs/strategies.md has the sweep and the bound's weight)."""
    per_tree = forest.per_tree(points)
    return per_tree.mean(axis=0) - per_tree.std(axis=0)


def _model_target(costs: np.ndarray) -> np.ndarray:
    """Costs on the scale the model fits: logarithmic where they share a sign (times, throughputs), standardised."""
    c = costs
    if np.all(c > 0):
        c = np.log(c)
    elif np.all(c < 0):
        c = -np.log(-c)
    return (c - c.mean()) / (float(c.std()) or 1.0)
