"""The `auto` sampler's surrogate: scikit-learn's random forest regressor, fit and asked without its per-tree
overhead.

A search fits a forest after every evaluation, on a few dozen configs. There scikit-learn's
RandomForestRegressor spends most of its time on bookkeeping, not on trees: it clones each tree's parameters by
introspection and checks the input of every tree's fit and predict again. Forest builds the same trees, with
scikit-learn's DecisionTreeRegressor and the same random draws, and hands them float32 input checked once, so
that its trees and predictions equal RandomForestRegressor's bit for bit (tests/test_forest.py holds it to
that), and `auto`'s runs are the same. Replaying runs of six spaces with `auto` took 73 s instead of 105 s (a
reduction space's alone 18 s instead of 30 s), on the 2-core build machine."""

from __future__ import annotations

import numpy as np
import sklearn
from sklearn.tree import DecisionTreeRegressor


class Forest:
    """RandomForestRegressor(n_estimators=n_trees, max_features=max_features, min_samples_leaf=1,
    bootstrap=True, random_state=seed), fit on (x, y)."""

    def __init__(self, n_trees: int, max_features: float, seed: int) -> None:
        self.n_trees, self.max_features, self.seed = n_trees, max_features, seed
        self.trees: list[DecisionTreeRegressor] = []

    def fit(self, x: np.ndarray, y: np.ndarray) -> Forest:
        features = _features(x)
        target = np.ascontiguousarray(np.reshape(y, (-1, 1)), dtype=np.float64)
        n = len(features)
        # as RandomForestRegressor: one seed a tree from the forest's generator, drawn before any tree is fit;
        # the tree's bootstrap sample from its own seed, passed as counts in the sample weights
        draw = np.random.RandomState(self.seed)
        seeds = [draw.randint(np.iinfo(np.int32).max) for _ in range(self.n_trees)]
        self.trees = []  # a second fit starts over, as scikit-learn's does
        with sklearn.config_context(skip_parameter_validation=True, assume_finite=True):
            for seed in seeds:
                tree = DecisionTreeRegressor(max_features=self.max_features, min_samples_leaf=1, random_state=seed)
                sample = np.random.RandomState(seed).randint(0, n, n).astype(np.int32)
                tree.fit(
                    features,
                    target,
                    sample_weight=np.bincount(sample, minlength=n).astype(np.float64),
                    check_input=False,
                )
                self.trees.append(tree)
        return self

    def per_tree(self, points: np.ndarray) -> np.ndarray:
        """Each tree's prediction of each point (trees x points)."""
        features = _features(points)
        return np.stack([tree.predict(features, check_input=False) for tree in self.trees])

    def predict(self, points: np.ndarray) -> np.ndarray:
        """The trees' mean (summed tree after tree, as RandomForestRegressor sums: so its ties break alike)."""
        return self.per_tree(points).mean(axis=0)


def _features(x: np.ndarray) -> np.ndarray:
    """The input as scikit-learn's trees take it unchecked (and as its checks would have made it)."""
    return np.ascontiguousarray(x, dtype=np.float32)
