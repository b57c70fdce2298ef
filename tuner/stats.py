"""Statistics of the regression check: is `now` slower than `baseline`, by how much, how sure?

Samples are per-round medians of kernel times, each optionally divided by a reference (copy bandwidth,
cuBLAS) timed in the same round, so a throttled or slower runner moves both and cancels out."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

THRESHOLD = 0.03  # the smallest slowdown reported: below the 5% that must be caught, so noise does not hide it


@dataclass
class Comparison:
    change: float  # relative change of the median time: +0.05 = 5% slower
    ci_low: float  # bootstrap confidence interval of `change`
    ci_high: float
    verdict: str  # "regression", "faster", "pass", or "invalid" (no finite change, interval or threshold)


def normalise(times: ArrayLike, reference: ArrayLike) -> np.ndarray:
    """Kernel time of each round in units of the reference time of the same round."""
    times, reference = np.asarray(times, float), np.asarray(reference, float)
    if times.shape != reference.shape:
        raise ValueError("each round needs one kernel time and one reference time")
    return times / reference


def compare(
    baseline: ArrayLike,
    now: ArrayLike,
    *,
    threshold: float = THRESHOLD,
    confidence: float = 0.99,
    resamples: int = 4000,
    seed: int = 0,
) -> Comparison:
    """Regression when the whole confidence interval of the slowdown lies above zero (significant) and
    the estimate exceeds `threshold` (practical). The threshold sits below the 5% that must be caught,
    so a true 5% slowdown, estimated with noise, is still flagged."""
    b, n = np.asarray(baseline, float), np.asarray(now, float)
    if len(b) < 3 or len(n) < 3:
        raise ValueError("need at least 3 rounds on each side")
    rng = np.random.default_rng(seed)
    bs = _row_medians(rng.choice(b, (resamples, len(b))))
    ns = _row_medians(rng.choice(n, (resamples, len(n))))
    with np.errstate(divide="ignore", invalid="ignore"):  # a time of 0: not finite, which verdict() fails closed on
        change = float(np.median(n) / np.median(b) - 1)
        boot = ns / bs - 1
    alpha = 1 - confidence
    lo, hi = (float(x) for x in np.quantile(boot, [alpha / 2, 1 - alpha / 2]))
    return Comparison(change, lo, hi, verdict(change, lo, hi, threshold))


def _row_medians(a: np.ndarray) -> np.ndarray:
    """np.median(a, axis=1), the same values (NaN where a row holds one), from one sort of the rows: np.median
    partitions each short row apart, three times slower over a bootstrap's 4000 rows of a few rounds, and the
    regression check's simulations compare thousands of times."""
    s = np.sort(a, axis=1)
    k = a.shape[1] // 2
    med = s[:, k] if a.shape[1] % 2 else (s[:, k - 1] + s[:, k]) / 2
    return np.where(np.isnan(s[:, -1]), np.nan, med)


def verdict(change: float, ci_low: float, ci_high: float, threshold: float) -> str:
    """Regression: significant (the interval above zero) and practical (the change beyond `threshold`). Fails
    closed: where any of them is not a finite number (a time of zero, a NaN), every comparison below is False and
    would read as a pass; it is "invalid" instead, which no gate passes."""
    if not all(math.isfinite(x) for x in (change, ci_low, ci_high, threshold)):
        return "invalid"
    if ci_low > 0 and change > threshold:
        return "regression"
    if ci_high < 0 and change < -threshold:
        return "faster"
    return "pass"
