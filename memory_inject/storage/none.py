"""``NoneStore``: ``memory.backend.kind: none``, an agent that keeps no memory.

zeroclaw's ``none`` backend (spec 7.3) "returns nothing": every recall is
empty and every write is accepted and dropped, so an agent whose memory is
switched off still runs its autosave and its memory tools without an error.
A write is still checked (an unknown field is a ``TypeError``), so code
tested against this store runs on a real one. Each turn's recall event says
why it has no memory: ``backend`` is ``none`` and ``degraded`` holds
:data:`NOTE`.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.models import MemoryCategory, MemoryEntry
from memory_inject.storage.records import MemoryRecord, store_draft

__all__ = ["NOTE", "NoneStore"]

#: The line on every turn's recall event.
NOTE = "backend: none (memory.backend.kind is none: no memory is kept or recalled)"


class NoneStore:
    """No memory, on purpose (see the module docstring)."""

    name = "none"
    #: Nothing here waits: every answer comes at once.
    honours_deadline = True

    def __repr__(self) -> str:
        return "NoneStore()"

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """No entries, and :data:`NOTE`.

        A plan's semantic query gets no note: the render reads a note on that
        query as a failed embedder, and the turn's other query carries it.
        """
        notes = () if query.mode == "semantic" else (NOTE,)
        return RecallAnswer([], degraded=notes, strategy="none")

    async def aanswer(self, query: RecallQuery) -> RecallAnswer:
        """The async twin of :meth:`answer`."""
        return self.answer(query)

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> Sequence[MemoryEntry]:
        """Nothing."""
        return []

    async def arecall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> Sequence[MemoryEntry]:
        """Nothing."""
        return []

    def store(
        self,
        key: str,
        content: str,
        category: str = MemoryCategory.CORE,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **fields: Any,
    ) -> MemoryRecord:
        """The record a real store would have written, checked and then dropped."""
        return store_draft(
            key,
            content,
            category,
            namespace="default",
            session_id=session_id,
            timestamp=timestamp,
            importance=importance,
            fields=fields,
            now=datetime.now(UTC),
        )

    async def astore(
        self,
        key: str,
        content: str,
        category: str = MemoryCategory.CORE,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **fields: Any,
    ) -> MemoryRecord:
        """The async twin of :meth:`store`."""
        return self.store(
            key,
            content,
            category,
            session_id=session_id,
            timestamp=timestamp,
            importance=importance,
            **fields,
        )

    def get(self, key: str) -> MemoryRecord | None:
        """Nothing is kept."""
        return None

    def forget(self, key: str) -> bool:
        """Nothing to forget."""
        return False

    def erase(self, key: str) -> bool:
        """Nothing to erase."""
        return False

    def erase_forgotten(self) -> int:
        """Nothing is kept, forgotten or not."""
        return 0

    def list(
        self,
        *,
        category: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[MemoryRecord]:
        """No memories."""
        return []

    def count(self) -> int:
        """No memories."""
        return 0

    def close(self) -> None:
        """Nothing to release."""
