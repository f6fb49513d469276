"""``relevant_memories``: founder-os' ``## Relevant Memories`` block.

Every entry sits on exactly one line that starts with ``- [``, its text
neutralised by :mod:`memory_inject.render._contain`, so no memory can forge a
header or another entry. ``memory_inject.testing.parse_relevant`` reads a block
back; the tests use it to prove that a block holds exactly the entries it rendered.

The block ends with a blank line, like ``bracket``, so a host may prepend it
to the user's message with plain concatenation.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.render._base import Rendered
from memory_inject.render._budget import Frame, budget_lines
from memory_inject.render._contain import neutralize_content, neutralize_label
from memory_inject.render._fields import confidence
from memory_inject.stages import StageContext

__all__ = [
    "RELEVANT_MEMORIES_HEADER",
    "RelevantMemoriesRenderer",
]

RELEVANT_MEMORIES_HEADER = "## Relevant Memories"
# The whole block counts towards max_total_chars, the trailing blank line included.
_FRAME = Frame(RELEVANT_MEMORIES_HEADER + "\n", "\n", counted=True)


def _percent(value: float | None) -> str:
    return "" if value is None else f" (confidence: {round(value * 100)})"


def _line(entry: MemoryEntry, content: str) -> str:
    category = neutralize_label(str(entry.category))
    return f"- [{category}] {content}{_percent(confidence(entry))}\n"


def _confidence_order(entry: MemoryEntry) -> tuple[bool, float]:
    """Sort key: confidence descending, entries without a confidence last."""
    value = confidence(entry)
    return value is None, -(value or 0.0)


def _by_confidence(entries: list[MemoryEntry]) -> list[MemoryEntry]:
    return sorted(entries, key=_confidence_order)


class RelevantMemoriesRenderer:
    """founder-os' block: ``## Relevant Memories`` then ``- [category] content (confidence: N)``.

    The first ``max_entries`` candidates (the renderer's own value, else
    ``budget.max_entries``) are kept in pipeline order, which is relevance,
    then shown by confidence descending (stable; no confidence sorts last and
    shows no ``(confidence: N)``). N is an integer percent, as founder-os
    stores it. Contents longer than ``budget.entry_max_chars`` end in
    ``...``. The whole block, header and trailing blank line included, never
    exceeds ``budget.max_total_chars`` nor, when set, ``max_total_tokens``:
    the first line that does not fit ends the block. ``""`` when nothing fits.
    """

    name = "relevant_memories"

    def __init__(self, *, max_entries: int | None = None) -> None:
        if max_entries is not None and (
            isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0
        ):
            raise ValueError(f"'max_entries' must be an integer >= 0 or None (got {max_entries!r})")
        self.max_entries = max_entries

    def demand(self, config: MemoryInjectConfig) -> int | None:
        """The renderer's own ``max_entries``, else ``budget.max_entries``."""
        return config.budget.max_entries if self.max_entries is None else self.max_entries

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> Rendered:
        """The block for ``entries`` (best first) within the config's budget."""
        cap = self.demand(ctx.config) or 0
        return budget_lines(
            entries,
            ctx.config.budget,
            _FRAME,
            _line,
            cap=cap,
            prepare=neutralize_content,
            order=_by_confidence,
        )
