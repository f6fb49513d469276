"""``relevant_memories``: founder-os' ``## Relevant Memories`` block.

Every entry sits on exactly one line that starts with ``- [``, its text
neutralised by :mod:`memory_inject.render._contain`, so no memory can forge a
header or another entry. :func:`parse_relevant` reads a block back; the tests
use it to prove that a block holds exactly the entries it rendered.

The block ends with a blank line, like ``bracket``, so a host may prepend it
to the user's message with plain concatenation.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject._text import truncate_with_ellipsis
from memory_inject._tokens import load_encoding
from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.render._base import Rendered
from memory_inject.render._contain import neutralize_content, neutralize_label
from memory_inject.render._fields import confidence
from memory_inject.stages import StageContext, StageTrace

__all__ = [
    "RELEVANT_MEMORIES_HEADER",
    "RelevantMemoriesRenderer",
    "parse_relevant",
]

RELEVANT_MEMORIES_HEADER = "## Relevant Memories"
_CHARS_REASON = "budget:max_total_chars"
_TOKENS_REASON = "budget:max_total_tokens"


def _percent(value: float | None) -> str:
    return "" if value is None else f" (confidence: {round(value * 100)})"


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
        return config.budget.max_entries if self.max_entries is None else self.max_entries

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> Rendered:
        budget = ctx.config.budget
        cap = self.demand(ctx.config) or 0
        capped = list(entries[:cap])
        cap_dropped = {e.key: "budget:max_entries" for e in entries[cap:]}
        confidences = [confidence(e) for e in capped]
        order = sorted(
            range(len(capped)), key=lambda i: (confidences[i] is None, -(confidences[i] or 0.0))
        )

        head = RELEVANT_MEMORIES_HEADER + "\n"
        max_tokens = budget.max_total_tokens
        encoding = load_encoding(budget.tokenizer) if max_tokens is not None else None
        used = len(head) + 1  # the trailing blank line
        body: list[str] = []
        rendered: list[MemoryEntry] = []
        budget_dropped: dict[str, str] = {}
        stop: str | None = None
        for i in order:
            e = capped[i]
            content = truncate_with_ellipsis(neutralize_content(e.content), budget.entry_max_chars)
            line = f"- [{neutralize_label(str(e.category))}] {content}{_percent(confidences[i])}\n"
            if stop is None and used + len(line) > budget.max_total_chars:
                stop = _CHARS_REASON
            if stop is None and encoding is not None and max_tokens is not None:
                candidate = head + "".join(body) + line + "\n"
                if len(encoding.encode(candidate, disallowed_special=())) > max_tokens:
                    stop = _TOKENS_REASON
            if stop is not None:
                budget_dropped[e.key] = stop
                continue
            body.append(line)
            used += len(line)
            rendered.append(e)

        text = head + "".join(body) + "\n" if body else ""
        n_cap = len(capped)
        traces = (
            StageTrace("entry_cap", len(entries), n_cap, cap_dropped),
            StageTrace("truncate", n_cap, n_cap, {}),
            StageTrace("total_budget", n_cap, len(rendered), budget_dropped),
        )
        return Rendered(text, tuple(rendered), traces)


def parse_relevant(text: str) -> list[str]:
    """The entry lines of a ``## Relevant Memories`` block; ``ValueError`` if malformed."""
    if text == "":
        return []
    head = RELEVANT_MEMORIES_HEADER + "\n"
    if not text.startswith(head) or not text.endswith("\n\n"):
        raise ValueError("not a Relevant Memories block: bad header or ending")
    lines = text[len(head) : -2].split("\n")
    for line in lines:
        if not line.startswith("- ["):
            raise ValueError(f"not an entry line: {line[:80]!r}")
    return lines
