"""tuner.search.forest.Forest builds scikit-learn's RandomForestRegressor without its per-tree overhead: the
same trees and the same predictions, bit for bit, so that `auto`'s runs are those its design was measured with
(a scikit-learn release that changed how its forest draws would fail here, not shift the search unseen)."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from tuner.search.forest import Forest


@pytest.fixture(params=["builder", "fit"])
def way(request, monkeypatch):
    """Each way Forest builds its trees: scikit-learn's tree builder called directly (the installed release has
    it), and DecisionTreeRegressor.fit (where a release's private builder is missing or different)."""
    if request.param == "fit":
        monkeypatch.setattr(Forest, "direct", False)
    return request.param


def test_the_installed_scikit_learn_builds_trees_directly():
    Forest(4, max_features=0.8, seed=0).fit(np.eye(5), np.arange(5.0))
    assert Forest.direct, "scikit-learn's private tree builder failed: every fit now takes the slower way"


@pytest.mark.parametrize("case", range(40))
def test_the_forest_is_scikit_learns_bit_for_bit(case, way):
    rng = np.random.default_rng(case)
    n, d = int(rng.integers(2, 200)), int(rng.integers(1, 9))
    levels = rng.integers(0, 6, (n, d)) / 5.0  # the sampler's input: value indices, scaled to [0, 1]
    costs = rng.normal(size=n)
    if case % 3 == 0:
        costs = np.round(costs, 1)  # ties, as a plateau of equal times gives
    seed, trees, share = int(rng.integers(2**31)), int(rng.integers(1, 60)), [0.8, 1.0, 0.5][case % 3]
    points = rng.integers(0, 6, (300, d)) / 5.0
    theirs = RandomForestRegressor(
        n_estimators=trees, max_features=share, min_samples_leaf=1, bootstrap=True, random_state=seed
    ).fit(levels, costs)
    ours = Forest(trees, max_features=share, seed=seed).fit(levels, costs)
    assert np.array_equal(np.stack([t.predict(points) for t in theirs.estimators_]), ours.per_tree(points))
    assert np.array_equal(theirs.predict(points), ours.predict(points))


def test_a_second_fit_starts_over(way):
    rng = np.random.default_rng(0)
    x, y = rng.random((20, 3)), rng.random(20)
    forest = Forest(8, max_features=0.8, seed=1).fit(x, y)
    first = forest.predict(x)
    assert len(forest.fit(x, y).trees) == 8 and np.array_equal(forest.predict(x), first)
