"""The measuring process's verification (tuner.measure.kt.verify_function): with the answer held, as Kernel
Tuner runs it (markers in Kernel Tuner's answer), it accepts and refuses exactly what numpy's allclose with the
finiteness check refuses, for float, mixed-precision and integer outputs."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_tuner import util

from tuner.measure import kt


def _allclose(answer: list, result: list, rtol: float, atol: float) -> bool:
    """The check as numpy states it: finite, and allclose (or equal, without tolerances)."""
    for expected, got in zip(answer, result):
        if expected is None:
            continue
        if not atol and not rtol:
            if not np.array_equal(got, expected):
                return False
        elif not np.all(np.isfinite(got)) or not np.allclose(got, expected, rtol=rtol, atol=atol):
            return False
    return True


def _pair(rng: np.random.Generator) -> tuple[list, list]:
    exact = rng.standard_normal((64, 48))  # a float64 reference, a float32 result (GEMM's case)
    counters = np.zeros(16, np.int32)
    answer = [None, exact, None, counters]
    result = [None, exact.astype(np.float32), None, counters.copy()]
    return answer, result


@pytest.mark.parametrize("rtol", [0.0, 1e-5])
def test_held_answer_agrees_with_allclose(rtol: float) -> None:
    rng = np.random.default_rng(3)
    answer, result = _pair(rng)
    held = util.normalize_verify_function(kt.verify_function(rtol, answer))
    plain = util.normalize_verify_function(kt.verify_function(rtol))  # the answer Kernel Tuner passes
    markers = kt.answer_markers(answer)
    assert [m is None for m in markers] == [a is None for a in answer]
    atol = 1e-6
    outcomes = set()
    for spoil in (None, np.nan, np.inf, -np.inf, 1e-3, 2e-6, 5e-7):
        got = [None if r is None else r.copy() for r in result]
        if spoil is not None:
            got[1][7, 5] = np.float32(answer[1][7, 5] + spoil) if np.isfinite(spoil) else spoil
        expected = _allclose(answer, got, rtol, atol)
        assert held(markers, got, atol=atol) == expected, spoil
        assert plain(answer, got, atol=atol) == expected, spoil
        assert held(markers, got, atol=atol) == expected  # again: the bounds and buffers are reused
        outcomes.add(expected)
    assert outcomes == {True, False}


def test_held_answer_integers_exactly() -> None:
    answer = [np.arange(10, dtype=np.int32)]
    held = util.normalize_verify_function(kt.verify_function(0.0, answer))
    assert held(kt.answer_markers(answer), [np.arange(10, dtype=np.int32)], atol=0.0)
    off = np.arange(10, dtype=np.int32)
    off[3] += 1
    assert not held(kt.answer_markers(answer), [off], atol=0.0)


def test_kernel_tuner_gets_markers() -> None:
    from tuner.workloads import get_workload

    w = get_workload("reduction")
    size = {"n": 4096}
    args = w.arguments(size, "float32", np.random.default_rng(0))
    answer = w.answer(args, size, "float32")
    opts = kt.tuning_options(w.space, size, "float32", answer=answer, tolerances=w.tolerances(size, "float32"))
    assert all((m is None) == (a is None) for m, a in zip(opts.answer, answer))
    assert all(m is None or m.size == 0 for m in opts.answer)  # nothing for Kernel Tuner to copy
    got = [None if a is None else np.array(a, copy=True) for a in answer]
    assert opts.verify(opts.answer, got, atol=opts.atol)
