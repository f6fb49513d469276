"""A child of ``fork()`` uses a ``PostgresStore`` its parent opened (twenty-ninth round).

``gunicorn --preload`` opens the store once, then forks its workers. The children
shared the parent's pooled connections (sockets): a child's statement interleaved with
another's on one session, a child failed with "too many values to unpack", and the
parent's and children's turns lost their memory or hung. Each process now opens its
own pool on its first call and never closes its parent's.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from memory_inject import MemoryRecall, render_memory_context
from memory_inject.storage.postgres import PostgresStore
from tests.reliability.test_29_fork import child_result, start_child

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_scratch_dsn: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_scratch_dsn, max_size=2)
    s.store("parent", "the parent row about deploys")
    assert ["parent"] == [e.key for e in s.recall("deploys", 5)]  # the pool is in use
    yield s
    s.close()


def _child_turn(store: PostgresStore, i: int) -> Any:
    store.store(f"child{i}", f"child {i} row about deploys")
    result = render_memory_context(store, "what about deploys?")
    event = result.event
    assert isinstance(event, MemoryRecall)
    return [event.success, event.error, f"child{i}" in result.text]


def test_children_and_parent_each_keep_their_memory(store: PostgresStore) -> None:
    children = [start_child(partial(_child_turn, store, i)) for i in range(3)]
    answers = [child_result(pid, read) for pid, read in children]
    assert [[True, None, True]] * 3 == answers
    assert {"parent", "child0", "child1", "child2"} == {e.key for e in store.recall("deploys", 10)}
    result = render_memory_context(store, "what about deploys?")
    assert isinstance(result.event, MemoryRecall)
    assert (True, None) == (result.event.success, result.event.error)
