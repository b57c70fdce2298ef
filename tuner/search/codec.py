"""Configs as Optuna sees them (Codec), the nearest unmeasured valid config to a suggestion (Repair), and
the value Optuna is told for a config that has none (penalty_for)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace


def penalty_for(costs: Iterable[float | None]) -> float:
    """What Optuna is told for a failed or invalid config: a quarter of the range worse than the worst cost."""
    finite = [c for c in costs if c is not None and c < sys.float_info.max]
    if not finite:
        return 1e30
    lo, hi = min(finite), max(finite)
    return hi + 0.25 * (hi - lo) + 1e-9 * abs(hi)


class Codec:
    """Configs <-> Optuna params, in two encodings:

    - stored (`dists`, `encode`, `decode`): what the study keeps and Optuna's tools show, the parameters'
      real values (a categorical distribution of each parameter's values, sorted where numeric);
    - seen by the sampler (`view_dists`, `view_params`, `from_view`; tuner.search.sampler_view translates):
      numeric parameters as the index into their sorted values (`ordinal`), so samplers see that 64 lies
      between 32 and 128; `categorical` gives every parameter a categorical distribution of its values."""

    def __init__(self, tune_params: dict, encoding: str = "ordinal"):
        self.names = list(tune_params)
        self.dists: dict[str, optuna.distributions.BaseDistribution] = {}
        self.view_dists: dict[str, optuna.distributions.BaseDistribution] = {}
        self._values: dict[str, list] = {}  # the ordinal parameters' sorted values
        for name, values in tune_params.items():
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            self.dists[name] = optuna.distributions.CategoricalDistribution(sorted(values) if numeric else list(values))
            if encoding == "ordinal" and numeric:
                self._values[name] = sorted(values)
                self.view_dists[name] = optuna.distributions.IntDistribution(0, len(values) - 1)
            else:
                self.view_dists[name] = optuna.distributions.CategoricalDistribution(list(values))

    def code(self, name: str, value: Any) -> Any:
        """One parameter's value as the sampler sees it."""
        return self._values[name].index(value) if name in self._values else value

    def encode(self, config: Sequence, names: Sequence[str] | None = None) -> dict:
        """A config (values in `names` order, default the space's) as the study's params."""
        return dict(zip(names or self.names, config, strict=True))

    def decode(self, params: dict) -> tuple | None:
        """The config of a trial's params; None when some are missing."""
        if not all(n in params for n in self.names):
            return None
        return tuple(params[n] for n in self.names)

    def view_params(self, params: dict) -> dict:
        """Stored params as the sampler sees them (those the space does not have are left out)."""
        return {n: self.code(n, v) for n, v in params.items() if n in self.dists}

    def from_view(self, name: str, code: Any) -> Any:
        """A sampler's suggestion of one parameter as the study stores it."""
        return self._values[name][code] if name in self._values else code


class Repair:
    """Nearest unmeasured valid configuration to a suggestion, by L1 distance over value indices."""

    def __init__(self, searchspace: Searchspace, codec: Codec, rng: random.Random):
        self.configs = [tuple(c) for c in searchspace.list]
        self.index = {c: i for i, c in enumerate(self.configs)}
        self.codes = np.array(
            [[_distance_code(codec, n, v) for n, v in zip(codec.names, c, strict=True)] for c in self.configs],
            dtype=float,
        )
        self.codes += np.array([rng.random() * 1e-3 for _ in self.configs])[:, None]  # random tie-break
        self.free = np.ones(len(self.configs), dtype=bool)
        self.codec = codec

    def mark(self, config: Sequence) -> None:
        """`config` is measured (or held by a trial): never the nearest free one again."""
        i = self.index.get(tuple(config))
        if i is not None:
            self.free[i] = False

    def exhausted(self) -> bool:
        return not self.free.any()

    def nearest(self, config: Sequence) -> tuple:
        target = np.array(
            [_distance_code(self.codec, n, v) for n, v in zip(self.codec.names, config, strict=True)], dtype=float
        )
        dist = np.abs(self.codes - target).sum(axis=1)
        dist[~self.free] = np.inf
        return self.configs[int(np.argmin(dist))]


def _distance_code(codec: Codec, name: str, value: Any) -> int | np.integer:
    """Ordinal parameters by their index; categorical ones are 0 (equal) or apart by their hash."""
    code = codec.code(name, value)
    return code if isinstance(code, (int, np.integer)) else (hash(code) % 997)
