"""kt.searchspace, built once a space object and dtype and handed out as copies: each call gets a searchspace of
its own, as built, and another space object (a space file read again, a space changed) is never served one kept
for another."""

from __future__ import annotations

import dataclasses

from tuner.measure import kt
from tuner.workloads import get_workload


def test_each_call_gets_its_own_copy_of_the_same_searchspace():
    space = get_workload("reduction").space
    first, second = kt.searchspace(space, "float32"), kt.searchspace(space, "float32")
    assert first is not second and first.list == second.list and first.size == second.size
    first.list.clear()  # a strategy changes the one it walks: the next call's is whole
    assert kt.searchspace(space, "float32").list == second.list and second.size > 0


def test_another_space_object_gets_its_own_searchspace():
    space = get_workload("reduction").space
    whole = kt.searchspace(space, "float32")
    param, values = next((p, v) for p, v in space.params.items() if len(v) > 1)
    narrowed = dataclasses.replace(space, restrictions=[*space.restrictions, f"{param} != {values[0]!r}"])
    fewer = kt.searchspace(narrowed, "float32")
    assert 0 < fewer.size < whole.size
    assert all(dict(zip(space.params, c))[param] != values[0] for c in fewer.list)
    assert kt.searchspace(space, "float32").size == whole.size  # the first space's is still its own
