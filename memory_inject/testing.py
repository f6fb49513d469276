"""Test doubles for code that uses memory_inject (the way httpx ships ``MockTransport``).

``FixtureMemory`` returns a preset list per session scope and records every
call; it can fail, hang or return garbage on demand. ``RecordingReceiver``
collects ``memory_recall`` events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from memory_inject.contract import Memory
from memory_inject.models import MemoryEntry
from memory_inject.signals import MemoryRecall, memory_recall

__all__ = ["FixtureMemory", "RecordingReceiver", "recording"]


class FixtureMemory:
    """A store whose answers are fixed per scope (a missing scope answers ``[]``)."""

    def __init__(
        self,
        by_scope: Mapping[str | None, Sequence[Any]] | None = None,
        *,
        name: str = "fixture",
        fail: BaseException | bool = False,
        delay: float = 0.0,
    ) -> None:
        """``by_scope`` maps a session id (None: no session) to what ``recall`` returns.

        The lists may hold anything, so a test can hand the renderer garbage.
        ``fail`` (an exception, or True for a ``RuntimeError``) makes every recall
        raise; ``delay`` seconds are slept first, and ``name`` is the store's name.
        """
        self._by_scope = dict(by_scope or {})
        self._name = name
        self.fail = fail
        self.delay = delay
        self.calls: list[dict[str, Any]] = []

    @property
    def name(self) -> str:
        """The store's name (``name=``), reported on the recall event."""
        return self._name

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Sequence[MemoryEntry]:
        """Record the call, sleep ``delay``, raise ``fail`` if set, else the scope's list.

        An unknown scope answers ``[]``; ``query``, ``since`` and ``until`` are ignored.
        """
        self.calls.append({"query": query, "limit": limit, "session_id": session_id})
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise self.fail if isinstance(self.fail, BaseException) else RuntimeError("boom")
        return list(self._by_scope.get(session_id, ()))

    @property
    def limits(self) -> list[int]:
        """The ``limit`` of each recorded call, in call order."""
        return [c["limit"] for c in self.calls]


class RecordingReceiver:
    """Collects every ``memory_recall`` event while connected."""

    def __init__(self) -> None:
        self.events: list[MemoryRecall] = []

    def __call__(self, sender: Memory, *, event: MemoryRecall) -> None:
        self.events.append(event)

    @property
    def pairs(self) -> list[tuple[int, bool]]:
        """``(num_entries, success)`` per event, as the spec's tests write them."""
        return [(e.num_entries, e.success) for e in self.events]


@contextmanager
def recording() -> Iterator[RecordingReceiver]:
    """``with recording() as rec:`` collects the events sent inside the block."""
    rec = RecordingReceiver()
    memory_recall.connect(rec)
    try:
        yield rec
    finally:
        memory_recall.disconnect(rec)
