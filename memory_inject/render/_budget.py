"""The one budget loop: entry cap, per-entry truncation, total characters, total tokens.

``bracket`` and ``relevant_memories`` render one line per entry between a fixed
head and foot and budget them the same way; they differ only in what a line
looks like, the order the lines go in and whether the head and foot count
towards ``max_total_chars``. ``sectioned`` lays out its own sections (per-section
caps, sections filled in order) but counts tokens with the same test
(:func:`token_fit`), finds how many entries fit with :func:`most_that_fit`
and reports the same reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from attrs import frozen

from memory_inject._text import truncate_with_ellipsis
from memory_inject._tokens import load_encoding
from memory_inject.config import BudgetConfig
from memory_inject.models import MemoryEntry
from memory_inject.render._base import Rendered
from memory_inject.render._contain import CUT_SLACK, cut_point
from memory_inject.stages import StageTrace

__all__ = [
    "CHARS_REASON",
    "ENTRIES_REASON",
    "TOKENS_REASON",
    "Frame",
    "budget_lines",
    "cut_for_cleaning",
    "most_that_fit",
    "token_fit",
]

ENTRIES_REASON = "budget:max_entries"
CHARS_REASON = "budget:max_total_chars"
TOKENS_REASON = "budget:max_total_tokens"


def token_fit(budget: BudgetConfig) -> Callable[[str], bool] | None:
    """A test that a block fits ``max_total_tokens``; ``None`` when no token budget is set.

    Loads the encoding (``ValueError`` if it cannot be loaded offline), so call
    it only when a block may need counting.
    """
    max_tokens = budget.max_total_tokens
    if max_tokens is None:
        return None
    encoding = load_encoding(budget.tokenizer)

    def fits(block: str) -> bool:
        return len(encoding.encode(block, disallowed_special=())) <= max_tokens

    return fits


def most_that_fit(most: int, fits: Callable[[int], bool]) -> int:
    """The largest ``n`` in ``0..most`` with ``fits(n)``, by bisection.

    ``fits`` must hold for 0 and, once false, stay false for every larger ``n``.
    """
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


#: How many raw characters a block may clean per character of its budget: entries made
#: mostly of characters the cleaner drops cannot make the work grow with the store.
RAW_PER_CHAR = 8


def cut_for_cleaning(text: str, width: int, clean: Callable[[str], str]) -> str:
    """``clean(text)`` cut to ``width`` with ``...``, cleaning only the first ``width + 64``
    or so characters (:func:`~memory_inject.render._contain.cut_point`); a text
    cut before cleaning ends in ``...`` even when cleaning left it shorter
    than ``width`` (it was mostly characters the cleaner drops).

    Cleaning is linear but costly per character, so no more of a memory is
    cleaned than its line could ever show.
    """
    end = cut_point(text, width)
    if end >= len(text):
        return truncate_with_ellipsis(clean(text), width)
    out = clean(text[:end])
    return truncate_with_ellipsis(out, width) if len(out) > width else out.rstrip() + "..."


@frozen
class Frame:
    """The fixed text around the entry lines of a block."""

    head: str
    foot: str
    #: Whether ``head`` and ``foot`` count towards ``max_total_chars``.
    counted: bool


def budget_lines(
    entries: Sequence[MemoryEntry],
    budget: BudgetConfig,
    frame: Frame,
    line: Callable[[MemoryEntry, str], str],
    *,
    cap: int,
    prepare: Callable[[str], str] | None = None,
    order: Callable[[list[MemoryEntry]], list[MemoryEntry]] | None = None,
) -> Rendered:
    """Render the first ``cap`` entries one line each, within every budget, in ``order``.

    Each entry's content goes through ``prepare`` (only its first
    ``entry_max_chars`` + 64 characters, and only while the block has room:
    see :func:`cut_for_cleaning`), is cut to ``budget.entry_max_chars`` with
    ``...`` and becomes ``line(entry, content)``.
    The first line over ``max_total_chars`` or (when set) ``max_total_tokens``
    of the whole block ends the block: later, smaller lines are not tried (the
    spec's ``break``). Traces: ``entry_cap``, ``truncate``, ``total_budget``.
    """
    capped = list(entries[:cap])
    cap_dropped = {e.key: ENTRIES_REASON for e in entries[cap:]}
    fits = token_fit(budget)
    used = len(frame.head) + len(frame.foot) if frame.counted else 0
    body: list[str] = []
    rendered: list[MemoryEntry] = []
    budget_dropped: dict[str, str] = {}
    stop: str | None = None
    limit = budget.entry_max_chars
    raw_left = RAW_PER_CHAR * (budget.max_total_chars + CUT_SLACK)
    for e in capped if order is None else order(capped):
        if stop is None and prepare is not None and raw_left <= 0:
            stop = CHARS_REASON  # only text the cleaner drops so far: the budget of work is spent
        if stop is not None:
            budget_dropped[e.key] = stop
            continue
        if prepare is None:
            content = truncate_with_ellipsis(e.content, limit)
        else:
            raw_left -= min(len(e.content), cut_point(e.content, limit))
            content = cut_for_cleaning(e.content, limit, prepare)
        text = line(e, content)
        if used + len(text) > budget.max_total_chars:
            stop = budget_dropped[e.key] = CHARS_REASON
            continue
        body.append(text)
        used += len(text)
        rendered.append(e)
    if fits is not None and body:
        # The first line over the token budget ends the block, as the first over the
        # characters does. A block's tokens grow with its lines, so that line is found
        # by bisection: one count when the whole block fits, about log2(lines) when it
        # does not, never one count of the whole block per line.
        head, foot = frame.head, frame.foot
        if not fits(head + "".join(body) + foot):
            kept = most_that_fit(len(body) - 1, lambda n: fits(head + "".join(body[:n]) + foot))
            over = [e.key for e in rendered[kept:]]
            budget_dropped = dict.fromkeys([*over, *budget_dropped], TOKENS_REASON)
            del body[kept:], rendered[kept:]

    block = frame.head + "".join(body) + frame.foot if body else ""
    n_cap = len(capped)
    traces = (
        StageTrace("entry_cap", len(entries), n_cap, cap_dropped),
        StageTrace("truncate", n_cap, n_cap, {}),
        StageTrace("total_budget", n_cap, len(rendered), budget_dropped),
    )
    return Rendered(block, tuple(rendered), traces)
