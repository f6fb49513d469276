"""What every format shares: the value a renderer returns and the protocol it follows.

Kept apart from the package's ``__init__`` so the format modules can import it
without importing the registry that imports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from attrs import frozen

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.stages import StageContext, StageTrace

__all__ = ["Rendered", "Renderer"]


@frozen(slots=True)
class Rendered:
    """A renderer's output: the block text, the entries in it and one trace per budget."""

    text: str
    entries: tuple[MemoryEntry, ...]
    traces: tuple[StageTrace, ...]


class Renderer(Protocol):
    """The last stage: turns the surviving candidates into the block of one format."""

    name: str

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> Rendered: ...

    def demand(self, config: MemoryInjectConfig) -> int | None:
        """At most how many candidates this renderer can use (None: unknown)."""
        ...
