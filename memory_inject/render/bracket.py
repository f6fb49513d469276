"""``bracket``: zeroclaw's ``[Memory context]`` block, byte for byte.

Spec section 5, stages 4 and 6.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.render._base import Rendered
from memory_inject.render._budget import Frame, budget_lines
from memory_inject.render._contain import contain_content, contain_key
from memory_inject.render._view import replace_surrogates
from memory_inject.stages import StageContext

__all__ = [
    "MEMORY_CONTEXT_CLOSE",
    "MEMORY_CONTEXT_OPEN",
    "BracketRenderer",
]

MEMORY_CONTEXT_OPEN = "[Memory context]"
MEMORY_CONTEXT_CLOSE = "[/Memory context]"
_HEADER = MEMORY_CONTEXT_OPEN + "\n"
_FOOTER = MEMORY_CONTEXT_CLOSE + "\n\n"
_FRAME = Frame(_HEADER, _FOOTER, counted=False)  # max_total_chars counts the entry lines only


def _contained_line(entry: MemoryEntry, content: str) -> str:
    return f"- {contain_key(entry.key)}: {contain_content(content)}\n"


def _verbatim_line(entry: MemoryEntry, content: str) -> str:
    return f"- {replace_surrogates(entry.key)}: {replace_surrogates(content)}\n"


class BracketRenderer:
    """``[Memory context]`` / ``- key: content`` lines / ``[/Memory context]`` + blank line.

    Content is contained (:func:`contain_content`) unless the config says
    ``contain_content: false``, which restores zeroclaw's verbatim output for
    multi-line content too. Budgets, in order: entry count; per-entry
    truncation with ``...``; total characters of the entry lines (header and
    footer not counted); and, when set, total tokens of the whole block. An
    entry that does not fit ends the block: later, smaller entries are not
    tried (the spec's ``break``).
    """

    name = "bracket"

    def demand(self, config: MemoryInjectConfig) -> int | None:
        """``budget.max_entries``: the block never shows more."""
        return config.budget.max_entries

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> Rendered:
        """The block for ``entries`` (best first) within the config's budget."""
        budget = ctx.config.budget
        make = _contained_line if ctx.config.contain_content else _verbatim_line
        # Containing a key never makes it shorter than half (CRLF -> one space), so a key
        # this long cannot fit: it is dropped without being contained (keys are not cut).
        hopeless = 2 * budget.max_total_chars + 2

        def line(entry: MemoryEntry, content: str) -> str:
            return entry.key if len(entry.key) > hopeless else make(entry, content)

        return budget_lines(entries, budget, _FRAME, line, cap=budget.max_entries)
