"""The `auto` sampler's surrogate: scikit-learn's random forest regressor, fit and asked without its per-tree
overhead.

A search fits a forest after every evaluation, on a few dozen configs. There scikit-learn's
RandomForestRegressor spends most of its time on bookkeeping, not on trees: it clones each tree's parameters by
introspection and checks the input of every tree's fit and predict again. Forest builds the same trees, with
scikit-learn's DecisionTreeRegressor and the same random draws, and hands them float32 input checked once, so
that its trees and predictions equal RandomForestRegressor's bit for bit (tests/test_forest.py holds it to
that), and `auto`'s runs are the same. Replaying runs of six spaces with `auto` took 73 s instead of 105 s (a
reduction space's alone 18 s instead of 30 s), on the 2-core build machine.

Two more costs went on 2026-11-30, still bit for bit: a new numpy RandomState a tree (about 0.23 ms each, twice
a tree: most of it drawing OS entropy that the seed then replaces) is one generator re-seeded, and each tree
is built by the builder DecisionTreeRegressor.fit itself calls, without the fit's checks of its settings and
sample weights. That builder is scikit-learn's private API (sklearn.tree._tree and friends, stable since 1.4);
where it is missing or its signature changed, the trees come from DecisionTreeRegressor.fit as before. A tree
took 0.15 ms instead of 0.93 ms (55 configs, 6 parameters); ten replays of reduction 64M int32 with `auto`
(warm-started, 58 evaluations each, the CI gate's) 12.0 s instead of 27.5 s, with the same score."""

from __future__ import annotations

from typing import Any

import numpy as np
import sklearn
from sklearn.tree import DecisionTreeRegressor

try:
    from sklearn.tree._criterion import MSE
    from sklearn.tree._splitter import BestSplitter
    from sklearn.tree._tree import DepthFirstTreeBuilder, Tree
except ImportError:  # a scikit-learn that moved its private modules: DecisionTreeRegressor.fit only
    MSE = None


class Forest:
    """RandomForestRegressor(n_estimators=n_trees, max_features=max_features, min_samples_leaf=1,
    bootstrap=True, random_state=seed), fit on (x, y)."""

    # whether trees come from scikit-learn's builder directly (False once that failed: the fit's way from then on)
    direct = MSE is not None

    def __init__(self, n_trees: int, max_features: float, seed: int) -> None:
        self.n_trees, self.max_features, self.seed = n_trees, max_features, seed
        self.trees: list[Any] = []  # scikit-learn's Tree objects (or fitted DecisionTreeRegressors)
        self._draw = np.random.RandomState(seed)  # re-seeded for each tree: see the module's docstring

    def fit(self, x: np.ndarray, y: np.ndarray) -> Forest:
        features = _features(x)
        target = np.ascontiguousarray(np.reshape(y, (-1, 1)), dtype=np.float64)
        n = len(features)
        # as RandomForestRegressor: one seed a tree from the forest's generator, drawn before any tree is fit;
        # the tree's bootstrap sample from its own seed, passed as counts in the sample weights
        self._draw.seed(self.seed)
        seeds = [self._draw.randint(np.iinfo(np.int32).max) for _ in range(self.n_trees)]
        self.trees = []  # a second fit starts over, as scikit-learn's does
        for seed in seeds:
            self._draw.seed(seed)
            weights = np.bincount(self._draw.randint(0, n, n), minlength=n).astype(np.float64)
            self._draw.seed(seed)  # the tree's own generator starts from the same seed (its splitter's draws)
            self.trees.append(self._tree(features, target, weights))
        return self

    def _tree(self, features: np.ndarray, target: np.ndarray, weights: np.ndarray) -> Any:
        """One tree as DecisionTreeRegressor(max_features, min_samples_leaf=1, random_state=self._draw) fits it."""
        n, d = features.shape
        if Forest.direct:
            try:  # the settings DecisionTreeRegressor._fit derives from these, and the builder it calls
                share = max(1, int(self.max_features * d))
                splitter = BestSplitter(MSE(1, n), share, 1, 0.0, self._draw, None)
                tree = Tree(d, np.ones(1, dtype=np.intp), 1)
                DepthFirstTreeBuilder(splitter, 2, 1, 0.0, np.iinfo(np.int32).max, 0.0).build(
                    tree, features, target, weights, None
                )
                return tree
            except TypeError:  # another scikit-learn's signatures
                Forest.direct = False
        regressor = DecisionTreeRegressor(max_features=self.max_features, min_samples_leaf=1, random_state=self._draw)
        with sklearn.config_context(skip_parameter_validation=True, assume_finite=True):
            return regressor.fit(features, target, sample_weight=weights, check_input=False)

    def per_tree(self, points: np.ndarray) -> np.ndarray:
        """Each tree's prediction of each point (trees x points)."""
        features = _features(points)
        return np.stack([_predict(tree, features) for tree in self.trees])

    def predict(self, points: np.ndarray) -> np.ndarray:
        """The trees' mean (summed tree after tree, as RandomForestRegressor sums: so its ties break alike)."""
        return self.per_tree(points).mean(axis=0)


def _predict(tree: Any, features: np.ndarray) -> np.ndarray:
    if isinstance(tree, DecisionTreeRegressor):
        return tree.predict(features, check_input=False)
    return tree.predict(features)[:, 0]  # as DecisionTreeRegressor.predict reads its Tree's (points x 1) values


def _features(x: np.ndarray) -> np.ndarray:
    """The input as scikit-learn's trees take it unchecked (and as its checks would have made it)."""
    return np.ascontiguousarray(x, dtype=np.float32)
