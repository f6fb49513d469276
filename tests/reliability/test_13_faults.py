"""Issue 13, class 6: faults that escaped the render with no event.

Each store fault below runs sync and async and must give what every fault in
``test_faults.py`` gives: the render returns, nothing raises, exactly one
``memory_recall`` event, ``success=False`` and an ``error`` naming the fault.
A receiver that raises anything but ``KeyboardInterrupt``/``SystemExit`` is
isolated and logged. Wrong argument shapes (``sessions="alice"``, a list of
ints) are the caller's bug: a ``TypeError`` at the call, before any store is
touched, as docs/pipeline.md says; ``sessions=None`` is an unscoped turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from memory_inject import (
    InMemoryStore,
    MemoryEntry,
    MemoryInjectConfig,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.signals import MemoryRecall, memory_recall
from tests.reliability.test_faults import MODES, only_event, reason, render

FACT = MemoryEntry("fact", "the invoice server is prod-3", "core", None, score=0.9)


class Rows:
    """A store returning fixed rows (any object the test builds)."""

    name = "rows"

    def __init__(self, rows: Sequence[Any]) -> None:
        self.rows = rows

    def recall(self, query: str, limit: int, **kw: Any) -> list[Any]:
        return list(self.rows)


def odd_entry(**fields: Any) -> MemoryEntry:
    """A MemoryEntry whose fields hold what no store should put there (attrs does not check)."""
    return MemoryEntry(
        **{
            "key": "odd",
            "content": "invoice odd",
            "category": "core",
            "timestamp": None,
            "score": 0.9,
            **fields,
        }
    )


class ExplodingAttribute:
    """A store whose ``attribute`` raises when it is read (a broken proxy, a lazy client)."""

    name = "exploding"

    def __init__(self, attribute: str) -> None:
        self._attribute = attribute

    def __getattribute__(self, attr: str) -> Any:
        if attr == object.__getattribute__(self, "_attribute"):
            raise RuntimeError(f"reading {attr} exploded")
        return object.__getattribute__(self, attr)

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        return [FACT]

    async def arecall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        return [FACT]


class Unprintable(Exception):
    """An exception whose message cannot be read."""

    def __str__(self) -> str:
        raise ValueError("the message itself is broken")


class UnprintableStore:
    name = "unprintable"

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        raise Unprintable


class TestStoreFaults:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("field", ["key", "key_dict", "both"])
    def test_unhashable_keys_degrade_with_one_event(self, mode: str, field: str) -> None:
        """An entry with a list or dict as key is dropped as invalid (success False, as for
        any invalid entry); the others render."""
        bad = {"key": ["a"], "key_dict": {"a": 1}, "both": ["k"]}[field]
        extra = {"session_id": ["s"]} if field == "both" else {}
        result, events = render(Rows([FACT, odd_entry(key=bad, **extra)]), "invoice", mode)
        event = only_event(events)
        assert (False, ["fact"]) == (event.success, [e.key for e in result.entries])
        assert ["invalid_entry:key"] == [v for k, v in event.dropped.items() if k != "fact"]

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("content", [None, 42, b"bytes"], ids=["none", "int", "bytes"])
    def test_an_entry_whose_content_is_not_text_is_dropped_alone(
        self, mode: str, content: object
    ) -> None:
        """A NULL content column (a store of one's own) made every stage that reads the
        text raise: the whole render failed and the good entries were lost with it."""
        result, events = render(
            Rows([odd_entry(key="bad", content=content), FACT]), "invoice", mode
        )
        event = only_event(events)
        assert (False, ["fact"]) == (event.success, [e.key for e in result.entries])
        assert {"bad": "invalid_entry:content"} == dict(event.dropped)
        assert "1 entries whose key or content is not a string" in (event.error or "")

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("sessions", [("s",), ("s", None)])
    def test_an_unhashable_session_id_is_dropped_by_name(
        self, mode: str, sessions: tuple[str | None, ...]
    ) -> None:
        """A session id that is a list is not the turn's: the entry goes, the rest renders."""
        rows = Rows([FACT, odd_entry(session_id=["s"]), odd_entry(key="odd2", session_id={})])
        result, events = render(rows, "invoice", mode, sessions=sessions)
        event = only_event(events)
        assert event.success
        assert ["fact"] == [e.key for e in result.entries]
        assert {"odd": "invalid_session_id", "odd2": "invalid_session_id"} == {
            k: v for k, v in event.dropped.items() if k.startswith("odd")
        }

    @pytest.mark.parametrize(
        ("mode", "attribute"),
        [
            ("sync", "recall"),
            ("async", "recall"),
            ("async", "arecall"),  # the sync path never reads arecall
        ],
    )
    def test_a_store_attribute_that_raises_degrades(self, mode: str, attribute: str) -> None:
        """recall or arecall raising on access: one event naming it."""
        store = ExplodingAttribute(attribute)
        result, events = render(store, "invoice", mode)
        event = only_event(events)
        assert (False, "") == (event.success, result.text)
        assert f"reading {attribute} exploded" in reason(event)

    @pytest.mark.parametrize("mode", MODES)
    def test_an_exception_whose_message_raises_is_still_named(self, mode: str) -> None:
        """A store error whose __str__ raises: no traceback, one event naming its type."""
        result, events = render(UnprintableStore(), "invoice", mode)
        event = only_event(events)
        assert (False, "") == (event.success, result.text)
        assert "Unprintable: <the error's message could not be read>" in reason(event)


class BaseRaisingStore:
    """A sync store whose recall raises a ``BaseException`` that is not an ``Exception``
    (a sync wrapper around async code can raise ``CancelledError``)."""

    name = "base-raising"

    def __init__(self, raised: type[BaseException]) -> None:
        self.raised = raised

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        raise self.raised


class TestBaseExceptionFromAStore:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("deadline", [2000, None])
    @pytest.mark.parametrize(
        "raised", [asyncio.CancelledError, GeneratorExit, type("Custom", (BaseException,), {})]
    )
    def test_it_is_the_stores_failure_named_on_the_event(
        self, mode: str, deadline: int | None, raised: type[BaseException]
    ) -> None:
        """Under a deadline the recall thread swallowed it (success False, error None);
        without one the render raised and sent no event."""
        config = attrs.evolve(MemoryInjectConfig(), deadline_ms=deadline)
        if mode == "sync":
            result = render_memory_context(BaseRaisingStore(raised), "invoice", config=config)
        else:
            coro = arender_memory_context(BaseRaisingStore(raised), "invoice", config=config)
            result = asyncio.run(coro)
        assert isinstance(result.event, MemoryRecall)
        assert (False, "") == (result.event.success, result.text)
        assert raised.__name__ in (result.event.error or "")


class TestReceivers:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        "raised", [asyncio.CancelledError, GeneratorExit, type("Custom", (BaseException,), {})]
    )
    def test_a_receiver_raising_a_base_exception_is_isolated(
        self, mode: str, raised: type[BaseException], caplog: pytest.LogCaptureFixture
    ) -> None:
        """The render returns its block; the other receivers still hear the event; it is logged."""
        store = Rows([FACT])
        heard: list[MemoryRecall] = []

        def bad(sender: object, event: MemoryRecall) -> None:
            raise raised

        def good(sender: object, event: MemoryRecall) -> None:
            heard.append(event)

        with (
            caplog.at_level(logging.ERROR, logger="memory_inject"),
            memory_recall.connected_to(bad),
            memory_recall.connected_to(good),
        ):
            if mode == "sync":
                result = render_memory_context(store, "invoice")
            else:
                result = asyncio.run(arender_memory_context(store, "invoice"))
        assert ["fact"] == [e.key for e in result.entries]
        assert [result.event] == heard
        assert any(raised.__name__ in (r.exc_text or "") for r in caplog.records)

        def stop(sender: object, event: MemoryRecall) -> None:
            raise KeyboardInterrupt

        # Stopping the process is not an observer's fault: it still reaches the caller.
        with memory_recall.connected_to(stop), pytest.raises(KeyboardInterrupt):
            render_memory_context(store, "invoice")


class TestSessionsArgument:
    @pytest.mark.parametrize("mode", MODES)
    def test_none_is_an_unscoped_turn(self, mode: str) -> None:
        """sessions=None renders like sessions=[]: one event, the block, scopes (None,)."""
        store = InMemoryStore()
        store.store("fact", "the invoice server is prod-3", "core")
        result, events = render(store, "invoice", mode, sessions=None)
        event = only_event(events)
        assert (True, (None,), ["fact"]) == (
            event.success,
            event.sessions,
            [e.key for e in result.entries],
        )

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        ("sessions", "says"),
        [
            ("alice", "not a str"),
            (b"alice", "not a bytes"),
            (42, "iterable of session ids"),
            ([42], "got int at index 0"),
            (["alice", ["bob"]], "got list at index 1"),
        ],
    )
    def test_a_wrong_shape_is_a_type_error_before_any_store_call(
        self, mode: str, sessions: Any, says: str
    ) -> None:
        """A str is not split into letter scopes: TypeError naming 'sessions', no event."""
        touched: list[object] = []

        class Watching(Rows):
            def recall(self, query: str, limit: int, **kw: Any) -> list[Any]:
                touched.append(kw.get("session_id"))
                return []

        with pytest.raises(TypeError, match="'sessions'") as info:
            render(Watching([]), "invoice", mode, sessions=sessions)
        assert says in str(info.value)
        assert [] == touched
