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


def test_the_shared_searchspace_is_one_object_no_copy_handed_out_is_it():
    """kt.shared_searchspace (the replays' read-only one) is the same object each call, whether it or a copy was
    asked for first, and no copy is it: a strategy changing its copy leaves the shared one whole."""
    space = get_workload("reduction").space
    for first_asked in (kt.searchspace, kt.shared_searchspace):
        narrowed = dataclasses.replace(space)  # a space object of its own: nothing built for it yet
        first_asked(narrowed, "int32")
        shared = kt.shared_searchspace(narrowed, "int32")
        assert kt.shared_searchspace(narrowed, "int32") is shared
        copy = kt.searchspace(narrowed, "int32")
        assert copy is not shared and copy.list == shared.list
        copy.list.clear()
        assert shared.list == kt.searchspace(narrowed, "int32").list and len(shared.list) == shared.size > 0
