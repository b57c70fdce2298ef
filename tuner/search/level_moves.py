"""Configs around other configs, as the `auto` sampler (tuner.search.auto_sampler) sees them: rows of value
indices ("levels", one column per parameter, 0 .. size - 1). The space's valid configs, the neighbours a greedy
step ranks (one or two parameters changed), the local moves, crossovers and random points the model ranks, and
the filter of those already tried. Every random choice is drawn from the sampler's own generator, so a seeded run repeats."""

from __future__ import annotations

import numpy as np

MAX_TWO_AWAY = 4096  # the greedy step's candidates two parameters away from the incumbent, at most
# an ordinal parameter's steps in a local move, drawn as STEPS[rng.integers(4)]: the same draw as rng.choice(STEPS)
# (numpy's Generator.choice draws integers(0, 4) for one value), in a quarter of its time: choice converts the
# tuple to an array at each of the thousands of draws a search makes
STEPS = (-2, -1, 1, 2)


class ValidLevels:
    """The space's valid configs as level indices (the `auto` sampler draws from them alone), each parameter's
    common values (the covering start's), and a membership test for candidates: each config as one mixed-radix
    integer, in a sorted array (a set of tuples would cost ~100 bytes a config on a large space)."""

    def __init__(self, names: tuple, levels: np.ndarray, sizes: np.ndarray):
        self.names, self.levels = names, levels
        self._radix = np.concatenate([[1], np.cumprod(sizes[:-1])]).astype(np.int64)
        self._keys = np.sort(levels.astype(np.int64) @ self._radix)
        # each parameter's common values: those held by at least 1 / (its values) of the valid configs
        self.common: list[np.ndarray] = []
        for j in range(levels.shape[1]):
            values, counts = np.unique(levels[:, j], return_counts=True)
            self.common.append(values[counts >= len(levels) / len(values)] if len(values) > 1 else values[:0])

    def with_untried_common(self, tried: np.ndarray) -> np.ndarray:
        """The valid configs that hold a common value no config of `tried` holds."""
        holds = np.zeros(len(self.levels), dtype=bool)
        for j, common in enumerate(self.common):
            untried = np.setdiff1d(common, tried[:, j])
            if len(untried):
                holds |= np.isin(self.levels[:, j], untried)
        return self.levels[holds]

    def contains(self, candidates: np.ndarray) -> np.ndarray:
        keys = candidates.astype(np.int64) @ self._radix
        at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return self._keys[at] == keys


def with_values(config: np.ndarray, j: int, values: list[int] | np.ndarray) -> np.ndarray:
    """`config` once for each of `values` of parameter `j`."""
    block = np.repeat(config[None, :], len(values), axis=0)
    block[:, j] = values
    return block


def one_away(config: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Every config with one parameter of `config` changed to any other of its values."""
    blocks = [config[None, :][:0]]
    for j, size in enumerate(sizes):
        blocks.append(with_values(config, j, [x for x in range(size) if x != config[j]]))
    return np.vstack(blocks)


def two_away(config: np.ndarray, sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every config with two parameters of `config` changed, each to any other of its values; where they
    number more than MAX_TWO_AWAY (the list grows with the square of the values per parameter), a random
    MAX_TWO_AWAY of them."""
    pairs = [(i, j) for i in range(len(sizes)) for j in range(i + 1, len(sizes)) if min(sizes[i], sizes[j]) > 1]
    if not pairs:
        return config[None, :][:0]
    counts = np.array([(sizes[i] - 1) * (sizes[j] - 1) for i, j in pairs], dtype=float)
    if counts.sum() > MAX_TWO_AWAY:
        picks = rng.choice(len(pairs), size=MAX_TWO_AWAY, p=counts / counts.sum())
        out = np.repeat(config[None, :], MAX_TWO_AWAY, axis=0)
        for row, k in enumerate(picks):
            for j in pairs[k]:  # another value of parameter j: an offset of 1 .. size - 1, around
                out[row, j] = (config[j] + rng.integers(1, sizes[j])) % sizes[j]
        return np.unique(out, axis=0)
    blocks = []
    for i, j in pairs:
        a = [x for x in range(sizes[i]) if x != config[i]]
        b = [x for x in range(sizes[j]) if x != config[j]]
        block = np.repeat(config[None, :], len(a) * len(b), axis=0)
        block[:, i] = np.repeat(a, len(b))
        block[:, j] = np.tile(b, len(a))
        blocks.append(block)
    return np.vstack(blocks)


def local_candidates(
    levels: np.ndarray,
    target: np.ndarray,
    sizes: np.ndarray,
    categorical: list[bool],
    rng: np.random.Generator,
    n_random: int,
) -> np.ndarray:
    """Local moves from the best configs (`levels`, that ran, ranked by `target`), crossovers of them, and
    `n_random` random points."""
    ranked = levels[np.argsort(target, kind="stable")]
    top = ranked[: min(5, len(ranked))]
    out = [random_points(rng, sizes, n_random)]
    for config in top:  # every move of one parameter: one or two steps (ordinal), any other value (categorical)
        for j, size in enumerate(sizes):
            steps = range(size) if categorical[j] else (config[j] + s for s in (-2, -1, 1, 2))
            out.append(with_values(config, j, [v for v in steps if 0 <= v < size and v != config[j]]))
    # moves of two or three parameters at once from the incumbent: steps across a restriction's edge
    n_moves = 64
    several = np.repeat(top[:1], n_moves, axis=0)
    for row in several:
        for j in rng.choice(len(sizes), size=min(len(sizes), int(rng.integers(2, 4))), replace=False):
            row[j] = rng.integers(sizes[j]) if categorical[j] else row[j] + STEPS[rng.integers(len(STEPS))]
    out.append(np.clip(several, 0, sizes - 1))
    parents = ranked[: min(10, len(ranked))]
    if len(parents) >= 2:
        a = parents[rng.integers(len(parents), size=n_moves)]
        b = parents[rng.integers(len(parents), size=n_moves)]
        out.append(np.where(rng.random(a.shape) < 0.5, a, b))
    return np.unique(np.vstack(out), axis=0)


def random_points(rng: np.random.Generator, sizes: np.ndarray, n: int) -> np.ndarray:
    """`n` configs drawn uniformly from the parameter box (valid or not)."""
    return np.floor(rng.random((n, len(sizes))) * sizes).astype(int)


def unseen(candidates: np.ndarray, seen: set) -> np.ndarray:
    """The rows of `candidates` not in `seen` (tuples of levels)."""
    keep = [i for i, row in enumerate(map(tuple, candidates.tolist())) if row not in seen]
    return candidates[keep]
