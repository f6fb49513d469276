"""The store an agent gets when its own cannot be opened and its config says to degrade.

founder-os opens its memory file lazily and, when it is missing or unreadable,
goes on without memory and shows a status line. An agent whose
``memory.backend`` says ``missing: degrade`` (a file that does not exist is
not created) or ``unavailable: degrade`` (a file or server that cannot be
opened) gets an :class:`UnavailableStore` from ``open_store`` instead of an
exception: every turn renders no memory and its event says why
(``store_unavailable: ...``), writes raise :class:`StoreMissingError` (an
autosave reports ``autosave_failed``), and :attr:`status` is the line a host
can show.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.exceptions import StoreMissingError
from memory_inject.models import MemoryEntry

__all__ = ["UnavailableStore"]


class UnavailableStore:
    """No memory, and why (see the module docstring)."""

    name = "unavailable"
    #: Always False: the host can test it instead of the type.
    available = False

    def __init__(self, status: str) -> None:
        """``status``: why there is no store, as a host would show it."""
        self.status = (
            status if status.startswith("store_unavailable") else (f"store_unavailable: {status}")
        )

    def __repr__(self) -> str:
        return f"UnavailableStore({self.status!r})"

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """No entries; the status on the turn's event."""
        return RecallAnswer([], degraded=(self.status,))

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Sequence[MemoryEntry]:
        """Nothing."""
        return []

    def store(self, key: str, content: str, category: str = "core", **fields: Any) -> None:
        """Refused: there is nowhere to write."""
        raise StoreMissingError(f"{self.status}; nothing was written")

    def count(self) -> int:
        """No memories."""
        return 0

    def list(self, **_: Any) -> list[Any]:
        """No memories."""
        return []

    def close(self) -> None:
        """Nothing to release."""
