"""A lookup by text no row can hold finds nothing, on every store (twenty-eighth round).

A lone surrogate (what ``os.fsdecode`` or ``errors="surrogateescape"`` makes of
bytes that are not UTF-8) can never be stored: ``store()`` refuses it by name. A
lookup by one is still asked: a session id from a channel, a key a model wrote
through the memory tools. SQLite and PostgreSQL raised a bare
``UnicodeEncodeError`` for ``get``, ``forget``, ``list`` and a scoped recall, and a
render whose sessions held such an id lost its shared rows too (``success=False``,
"surrogates not allowed"). The in-memory store answered None, False and [].
Each store now answers as the in-memory one does: such a value matches no row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from memory_inject import render_memory_context
from memory_inject.signals import memory_recall

ODD = "a\udc80b"  # b"a\x80b" decoded with surrogateescape


def _filled(store_factory: Callable[..., Any]) -> Any:
    store = store_factory()
    store.store("shared", "the coffee order is an oat latte")
    store.store("mine", "the coffee beans are arabica", session_id="a\ufffdb")
    return store


def test_get_and_forget_find_nothing(store_factory: Callable[..., Any]) -> None:
    store = _filled(store_factory)
    assert store.get(ODD) is None
    assert store.forget(ODD) is False
    assert 2 == store.count()


def test_a_forget_scope_naming_only_such_a_session_forgets_nothing(
    store_factory: Callable[..., Any],
) -> None:
    store = _filled(store_factory)
    assert store.forget("mine", sessions=[ODD]) is False
    assert store.forget("shared", sessions=[ODD], shared_sources=[ODD]) is False
    assert store.get("mine") is not None
    assert store.get("shared") is not None
    # The rest of the scope still works: the shared row may go.
    assert store.forget("shared", sessions=[ODD, None]) is True
    assert store.get("shared") is None


def test_list_finds_nothing(store_factory: Callable[..., Any]) -> None:
    store = _filled(store_factory)
    assert [] == store.list(session_id=ODD)
    assert [] == store.list(category=ODD)


def test_a_recall_scoped_to_such_a_session_is_a_session_with_no_rows(
    store_factory: Callable[..., Any],
) -> None:
    """A session's scope is its rows and the shared ones: such a session has none of
    its own, like a session never written to, and the shared row still comes."""
    store = _filled(store_factory)
    never = [e.key for e in store.recall("coffee", 5, session_id="never written")]
    assert ["shared"] == never
    assert never == [e.key for e in store.recall("coffee", 5, session_id=ODD)]
    assert never == [e.key for e in asyncio.run(store.arecall("coffee", 5, session_id=ODD))]
    # The session whose id differs only by U+FFFD is not that scope.
    found = {e.key for e in store.recall("coffee", 5, session_id="a\ufffdb")}
    assert {"mine", "shared"} == found


def test_a_plan_query_by_such_an_entity_or_source_finds_nothing(
    store_factory: Callable[..., Any],
) -> None:
    store = _filled(store_factory)
    if not hasattr(store, "recall_where"):
        pytest.skip("this store has no recall plans")  # the in-memory store
    assert [] == store.recall_where(None, 5, entity_id=ODD)
    assert [] == store.recall_where(None, 5, source=ODD)
    kept = store.recall_where("coffee", 5, statuses=["active", ODD])
    assert {"shared", "mine"} == {e.key for e in kept}


def test_a_render_with_such_a_session_keeps_the_shared_rows(
    store_factory: Callable[..., Any],
) -> None:
    store = _filled(store_factory)
    events: list[Any] = []

    def hear(sender: object, **kw: Any) -> None:
        events.append(kw["event"])

    with memory_recall.connected_to(hear):
        result = render_memory_context(store, "what coffee do I order?", sessions=[ODD, None])
    assert ["shared"] == [e.key for e in result.entries]
    assert 1 == len(events)
    assert events[0].success is True
    assert events[0].error is None
