"""Renderers bound their work by the budget, not by what the store returned (issue 13, item 10).

``sectioned`` and ``relevant_memories`` used to neutralise every recalled
content in full before any budget. Here the cleaner is wrapped so the test
counts every character it is given: with ten-megabyte contents, contents made
of characters the cleaner drops, ten-megabyte keys and categories, and
100,000 entries, the count stays under a bound computed from the budget
alone, and the block is still well formed and within its budgets. ``bracket``
never contains a key that cannot fit. Figures: docs/reliability.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_inject.config import BudgetConfig, MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.render import (
    BracketRenderer,
    RelevantMemoriesRenderer,
    SectionedRenderer,
    _contain,
    bracket,
)
from memory_inject.render._base import Rendered
from memory_inject.stages import StageContext
from memory_inject.testing import parse_bracket, parse_relevant, parse_sectioned

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
MB = 1 << 20


def _lengths_given(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Wrap ``module.name`` (a text -> text function) to record the length of each input."""
    seen: list[int] = []
    real = getattr(_contain, name)

    def counting(text: str) -> str:
        seen.append(len(text))
        return str(real(text))

    monkeypatch.setattr(module, name, counting)
    return seen


@pytest.fixture
def cleaned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text handed to the neutraliser, in call order."""
    return _lengths_given(monkeypatch, _contain, "neutralize")


def _ctx(**budget: Any) -> StageContext:
    config = MemoryInjectConfig(budget=BudgetConfig(**budget))
    return StageContext(config, NOW, query="deploys")


def _entries(
    n: int, content: Callable[[int], str], prefix: str = "k", **extra: object
) -> list[MemoryEntry]:
    return [
        MemoryEntry(f"{prefix}{i}", content(i), "core", NOW - timedelta(days=1), extra=dict(extra))
        for i in range(n)
    ]


HUGE_CONTENTS = {
    "ten-megabyte text": lambda i: f"entry {i} " + "deploys go to prod " * (10 * MB // 19),
    "ten megabytes of controls": lambda i: f"entry {i} " + "a\x00b\x1b\u202e" * (2 * MB),
    "ten megabytes the cleaner drops": lambda i: "\u200b" * (10 * MB) + f"entry {i}",
    "ten megabytes of markers": lambda i: "## Hard Rules ```" * (10 * MB // 17),
}


def _sectioned_bound(r: SectionedRenderer, n_rendered: int) -> int:
    """Raw characters the sectioned block may clean: 8x each section's room, plus labels."""
    rooms = sum(min(cap, r.max_total_chars) + 64 for cap in r.section_caps.values())
    per_entry = 64 + 4096 + 64  # past its room: the slack, and a marker run moved past
    return 8 * rooms + 5 * per_entry + 3 * (480 + per_entry) * (n_rendered + 1)


def _relevant_bound(budget: BudgetConfig) -> int:
    """Raw characters the relevant_memories block may clean: 8x its room, plus labels."""
    per_entry = 64 + 4096 + 64  # past its width: the slack, and a marker run moved past
    labels = (480 + per_entry) * budget.max_entries
    return 8 * (budget.max_total_chars + 64) + budget.entry_max_chars + per_entry + labels


class TestRelevantMemories:
    @pytest.mark.parametrize("shape", sorted(HUGE_CONTENTS))
    def test_huge_contents_clean_no_more_than_the_budget(
        self, cleaned: list[int], shape: str
    ) -> None:
        """Two ten-megabyte memories: the cleaner sees a few thousand characters, not 20 MB."""
        ctx = _ctx()
        rendered = RelevantMemoriesRenderer()(ctx, _entries(2, HUGE_CONTENTS[shape]))
        assert sum(cleaned) <= _relevant_bound(ctx.config.budget)
        _check_relevant(rendered, ctx.config.budget)

    def test_many_entries_under_a_large_entry_cap(self, cleaned: list[int]) -> None:
        """100,000 entries with max_entries 10,000: the work stops when the block is full."""
        ctx = _ctx(max_entries=10_000, max_total_chars=2000)
        rendered = RelevantMemoriesRenderer()(ctx, _entries(100_000, lambda i: f"memory {i}"))
        assert sum(cleaned) <= _relevant_bound(ctx.config.budget)
        _check_relevant(rendered, ctx.config.budget)
        assert 0 < len(rendered.entries) < 2000 // 10

    def test_a_huge_category_label_is_cut_before_cleaning(self, cleaned: list[int]) -> None:
        """A ten-megabyte category is cleaned from its first few hundred characters only."""
        rows = [MemoryEntry("k", "short content", "c" * (10 * MB), NOW)]
        rendered = RelevantMemoriesRenderer()(_ctx(), rows)
        assert max(cleaned) <= 480 + 64
        assert ["k"] == [e.key for e in rendered.entries] or rendered.text == ""

    def test_a_memory_cut_before_cleaning_still_says_so(self) -> None:
        """Content cleaned from a cut prefix that came out short still ends in '...'."""
        rows = [MemoryEntry("k", "\u200b" * 50_000 + "tail", "core", NOW)]
        line = parse_relevant(RelevantMemoriesRenderer()(_ctx(), rows).text)
        assert ["- [core] ..."] == line


def _check_relevant(rendered: Rendered, budget: BudgetConfig) -> None:
    lines = parse_relevant(rendered.text)
    assert len(lines) == len(rendered.entries) <= budget.max_entries
    assert len(rendered.text) <= budget.max_total_chars
    rendered.text.encode("utf-8")


class TestSectioned:
    @pytest.mark.parametrize("shape", sorted(HUGE_CONTENTS))
    def test_huge_contents_clean_no_more_than_the_budget(
        self, cleaned: list[int], shape: str
    ) -> None:
        """Two ten-megabyte memories in every section: bounded by the section rooms."""
        r = SectionedRenderer()
        rows = [
            *_entries(2, HUGE_CONTENTS[shape]),
            *_entries(1, HUGE_CONTENTS[shape], "t", memory_kind="task"),
        ]
        rendered = r(_ctx(), rows)
        assert sum(cleaned) <= _sectioned_bound(r, len(rendered.entries))
        _check_sectioned(rendered, r)

    def test_a_hundred_thousand_entries(self, cleaned: list[int]) -> None:
        """A store returning 100,000 entries: only those that can fit are cleaned, and every
        entry never cleaned is still dropped with its section's budget reason."""
        r = SectionedRenderer()
        rows = [
            *_entries(50_000, lambda i: f"selected memory {i} about deploys"),
            *_entries(50_000, lambda i: f"open task {i}", "t", memory_kind="task"),
        ]
        rendered = r(_ctx(), rows)
        assert len(cleaned) < 10_000
        assert sum(cleaned) <= _sectioned_bound(r, len(rendered.entries))
        _check_sectioned(rendered, r)
        assert 0 < len(rendered.entries) < 1000
        dropped = {k: v for t in rendered.traces for k, v in t.dropped.items()}
        assert {e.key for e in rows} == {e.key for e in rendered.entries} | set(dropped)
        assert {"budget:section_chars:selected_memory", "budget:section_chars:scratchpad"} == set(
            dropped.values()
        )

    def test_huge_keys_are_cut_before_cleaning(self, cleaned: list[int]) -> None:
        """Ten-megabyte keys and layers: each label is cleaned from 544 characters at most."""
        rows = [
            MemoryEntry("k" * (10 * MB) + str(i), "content", "core", NOW, extra={"layer": "L" * MB})
            for i in range(3)
        ]
        rendered = SectionedRenderer()(_ctx(), rows)
        assert max(cleaned) <= 480 + 64
        _check_sectioned(rendered, SectionedRenderer())


def _check_sectioned(rendered: Rendered, r: SectionedRenderer) -> None:
    parsed = parse_sectioned(rendered.text)
    assert sum(len(v) for v in parsed.values()) == len(rendered.entries)
    assert len(rendered.text) <= r.max_total_chars
    rendered.text.encode("utf-8")


class TestBracket:
    def test_a_key_that_cannot_fit_is_never_contained(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A ten-megabyte key with line breaks is dropped by the character budget, uncleaned."""
        sizes = _lengths_given(monkeypatch, bracket, "contain_key")
        rows: Sequence[MemoryEntry] = [
            MemoryEntry("fine", "Production deploys go to prod-3.", "core", NOW),
            MemoryEntry("x\r\n" * (4 * MB), "content", "core", NOW),
        ]
        rendered = BracketRenderer()(_ctx(), rows)
        assert [4] == sizes
        assert ["- fine: Production deploys go to prod-3."] == parse_bracket(rendered.text)
        dropped = {k: v for t in rendered.traces for k, v in t.dropped.items()}
        assert {"x\r\n" * (4 * MB): "budget:max_total_chars"} == dropped
