"""A token budget counts the block a few times, not once per line (twenty-eighth round).

Found by a helper: with ``max_total_tokens`` set, ``bracket`` and
``relevant_memories`` encoded the whole block again for every line they added, so
1,000 entries took 4 to 6 s and 2,000 took 20 s (none without the cap). The first
line over the budget is now found by bisection; these tests hold it to the spec's
rule, the first line over the budget ends the block, by a sequential reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_inject import BudgetConfig, MemoryEntry
from memory_inject._text import truncate_with_ellipsis
from memory_inject.render import _budget
from memory_inject.render._budget import Frame, budget_lines, token_fit

FRAME = Frame("[Memory context]\n", "[/Memory context]\n", counted=False)
WORDS = ["deploy", "server", "🙂", "数据库", "naïve", "x" * 40, "\u200d", "a b", "#", "1234"]


def line(e: MemoryEntry, content: str) -> str:
    return f"- {e.key}: {content}\n"


def sequential(entries: list[MemoryEntry], budget: BudgetConfig) -> tuple[str, list[str], Any]:
    """The rule as a loop: each line must keep the whole block within both budgets; the
    first that does not ends the block and names why every later entry is dropped."""
    fits = token_fit(budget)
    body: list[str] = []
    kept: list[str] = []
    dropped: dict[str, str] = {}
    stop = None
    for e in entries[: budget.max_entries]:
        if stop is None:
            text = line(e, truncate_with_ellipsis(e.content, budget.entry_max_chars))
            if sum(map(len, body)) + len(text) > budget.max_total_chars:
                stop = _budget.CHARS_REASON
            elif fits is not None and not fits(FRAME.head + "".join(body) + text + FRAME.foot):
                stop = _budget.TOKENS_REASON
            else:
                body.append(text)
                kept.append(e.key)
                continue
        dropped[e.key] = stop
    block = FRAME.head + "".join(body) + FRAME.foot if body else ""
    return block, kept, dropped


def entries_of(texts: list[str]) -> list[MemoryEntry]:
    return [MemoryEntry(f"k{i}", t, "core", None, score=0.9) for i, t in enumerate(texts)]


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), max_size=30),
    max_entries=st.integers(0, 40),
    entry_chars=st.integers(1, 120),
    total_chars=st.integers(0, 2000),
    tokens=st.integers(0, 400),
)
def test_the_block_is_the_sequential_rules(
    texts: list[list[str]], max_entries: int, entry_chars: int, total_chars: int, tokens: int
) -> None:
    budget = BudgetConfig(
        max_entries=max_entries,
        entry_max_chars=entry_chars,
        max_total_chars=total_chars,
        max_total_tokens=tokens,
    )
    entries = entries_of([" ".join(t) for t in texts])
    out = budget_lines(entries, budget, FRAME, line, cap=max_entries)
    block, kept, dropped = sequential(entries, budget)
    assert block == out.text
    assert kept == [e.key for e in out.entries]
    # The same reasons, in the same order.
    assert list(dropped.items()) == list(out.traces[2].dropped.items())


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counts: list[int] = []
    real: Callable[[BudgetConfig], Any] = token_fit

    def wrapped(budget: BudgetConfig) -> Any:
        fits = real(budget)
        if fits is None:
            return None

        def counted(block: str) -> bool:
            counts.append(len(block))
            return bool(fits(block))

        return counted

    monkeypatch.setattr(_budget, "token_fit", wrapped)
    return counts


@pytest.mark.parametrize(("tokens", "most_counts"), [(10**6, 1), (2_000, 11)])
def test_a_long_block_is_counted_a_few_times(
    monkeypatch: pytest.MonkeyPatch, tokens: int, most_counts: int
) -> None:
    """1,000 lines: one count when the block fits, about log2(1,000) + 1 when it does not."""
    counts = counting(monkeypatch)
    entries = entries_of([f"server deploy note number {i} about the thing" for i in range(1000)])
    budget = BudgetConfig(max_entries=10_000, max_total_chars=1_000_000, max_total_tokens=tokens)
    out = budget_lines(entries, budget, FRAME, line, cap=10_000)
    assert 0 < len(counts) <= most_counts
    fits = token_fit(budget)
    assert fits is not None and fits(out.text)
    if len(out.entries) < 1000:  # the next line would not have fitted
        nxt = line(entries[len(out.entries)], entries[len(out.entries)].content)
        assert not fits(out.text[: -len(FRAME.foot)] + nxt + FRAME.foot)
        assert 1000 - len(out.entries) == len(out.traces[2].dropped)
