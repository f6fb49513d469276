"""``bracket``: zeroclaw's ``[Memory context]`` block, byte for byte.

Spec section 5, stages 4 and 6.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject._text import truncate_with_ellipsis
from memory_inject._tokens import load_encoding
from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.render._base import Rendered
from memory_inject.render._contain import contain_content, contain_key
from memory_inject.stages import StageContext, StageTrace

__all__ = [
    "MEMORY_CONTEXT_CLOSE",
    "MEMORY_CONTEXT_OPEN",
    "BracketRenderer",
    "parse_bracket",
]

MEMORY_CONTEXT_OPEN = "[Memory context]"
MEMORY_CONTEXT_CLOSE = "[/Memory context]"
_HEADER = MEMORY_CONTEXT_OPEN + "\n"
_FOOTER = MEMORY_CONTEXT_CLOSE + "\n\n"


def parse_bracket(text: str) -> list[str]:
    """The entry lines of a bracket block (continuations joined), for tests and tools.

    Raises ``ValueError`` if the block is not exactly one header, entries that
    start with ``- `` with two-space continuation lines, and one footer.
    """
    if text == "":
        return []
    if not (text.startswith(_HEADER) and text.endswith(_FOOTER)):
        raise ValueError("not a [Memory context] block")
    body = text[len(_HEADER) : -len(_FOOTER)]
    entries: list[str] = []
    for line in body.split("\n")[:-1]:
        if line.startswith("- "):
            entries.append(line)
        elif line.startswith("  ") and entries:
            entries[-1] += "\n" + line
        else:
            raise ValueError(f"unexpected line in block: {line!r}")
    return entries


class BracketRenderer:
    """``[Memory context]`` / ``- key: content`` lines / ``[/Memory context]`` + blank line.

    Content is contained (:func:`contain_content`) unless the config says
    ``contain_content: false``, which restores zeroclaw's verbatim output for
    multi-line content too. Budgets, in order: entry count; per-entry
    truncation with ``...``; total
    characters of the entry lines (header and footer not counted); and, when
    set, total tokens of the whole block. An entry that does not fit ends the
    block: later, smaller entries are not tried (the spec's ``break``).
    """

    name = "bracket"

    def demand(self, config: MemoryInjectConfig) -> int | None:
        return config.budget.max_entries

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> Rendered:
        budget = ctx.config.budget
        capped = list(entries[: budget.max_entries])
        cap_dropped = {e.key: "budget:max_entries" for e in entries[budget.max_entries :]}

        max_chars = budget.entry_max_chars
        escape = ctx.config.contain_content
        lines = []
        for e in capped:
            content = e.content
            if len(content) > max_chars:
                content = truncate_with_ellipsis(content, max_chars)
            if escape:
                lines.append(f"- {contain_key(e.key)}: {contain_content(content)}\n")
            else:
                lines.append(f"- {e.key}: {content}\n")

        max_total = budget.max_total_chars
        max_tokens = budget.max_total_tokens
        encoding = load_encoding(budget.tokenizer) if max_tokens is not None else None
        used = 0
        body: list[str] = []
        rendered: list[MemoryEntry] = []
        budget_dropped: dict[str, str] = {}
        stop: str | None = None
        for e, line in zip(capped, lines, strict=True):
            if stop is None and used + len(line) > max_total:
                stop = "budget:max_total_chars"
            if stop is None and encoding is not None and max_tokens is not None:
                candidate = _HEADER + "".join(body) + line + _FOOTER
                if len(encoding.encode(candidate, disallowed_special=())) > max_tokens:
                    stop = "budget:max_total_tokens"
            if stop is not None:
                budget_dropped[e.key] = stop
                continue
            body.append(line)
            used += len(line)
            rendered.append(e)

        text = _HEADER + "".join(body) + _FOOTER if body else ""
        n_cap = len(capped)
        traces = (
            StageTrace("entry_cap", len(entries), n_cap, cap_dropped),
            StageTrace("truncate", n_cap, n_cap, {}),
            StageTrace("total_budget", n_cap, len(rendered), budget_dropped),
        )
        return Rendered(text, tuple(rendered), traces)
