"""Hypothesis properties of the whole render: budgets, determinism, exactly one signal."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_inject import (
    BudgetConfig,
    MemoryEntry,
    MemoryInjectConfig,
    RerankConfig,
    render_memory_context,
)
from memory_inject._text import truncate_with_ellipsis
from memory_inject._tokens import count_tokens
from memory_inject.policy import direct_policy
from memory_inject.render import contain_content, contain_key
from memory_inject.testing import FixtureMemory, recording

NOW = datetime(2026, 6, 1, tzinfo=UTC)

rows_st = st.lists(
    st.builds(
        lambda k, c, cat, s, age: MemoryEntry(k, c, cat, NOW - timedelta(days=age), score=s),
        st.text(min_size=1, max_size=20),
        st.text(max_size=300),
        st.sampled_from(["core", "daily", "conversation", "x"]),
        st.one_of(st.none(), st.floats(0, 1)),
        st.floats(0, 60),
    ),
    max_size=12,
)
config_st = st.builds(
    lambda me, emc, mtc, mtt, rr, floor: MemoryInjectConfig(
        min_relevance_score=floor,
        budget=BudgetConfig(
            max_entries=me, entry_max_chars=emc, max_total_chars=mtc, max_total_tokens=mtt
        ),
        rerank=RerankConfig(enabled=rr, strategy="mmr"),
    ),
    st.integers(0, 6),
    st.integers(1, 200),
    st.integers(0, 2000),
    st.one_of(st.none(), st.integers(0, 300)),
    st.booleans(),
    st.floats(0, 1),
)


class TestRenderProperties:
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(rows=rows_st, cfg=config_st, exclude=st.booleans())
    def test_budgets_are_never_exceeded(
        self, rows: list[MemoryEntry], cfg: MemoryInjectConfig, exclude: bool
    ) -> None:
        """Entry count, per-entry chars, total chars and tokens all hold."""
        out = render_memory_context(
            FixtureMemory({None: rows}),
            "q",
            policy=direct_policy(cfg, exclude_conversation=exclude),
            now=NOW,
        )
        b = cfg.budget
        assert len(out.entries) <= b.max_entries
        shown = [truncate_with_ellipsis(e.content, b.entry_max_chars) for e in out.entries]
        assert all(len(c) <= b.entry_max_chars + 3 for c in shown)
        body = "".join(
            f"- {contain_key(e.key)}: {contain_content(c)}\n"
            for e, c in zip(out.entries, shown, strict=True)
        )
        assert len(body) <= b.max_total_chars
        if out.entries:
            assert f"[Memory context]\n{body}[/Memory context]\n\n" == out.text
        else:
            assert "" == out.text
        if b.max_total_tokens is not None:
            assert count_tokens(out.text, b.tokenizer) <= b.max_total_tokens

    @settings(max_examples=100, deadline=None)
    @given(rows=rows_st, cfg=config_st)
    def test_render_is_deterministic_for_a_fixed_now(
        self, rows: list[MemoryEntry], cfg: MemoryInjectConfig
    ) -> None:
        """Two renders with the same input and clock give the same bytes and entries."""
        a = render_memory_context(FixtureMemory({None: rows}), "q", config=cfg, now=NOW)
        b = render_memory_context(FixtureMemory({None: rows}), "q", config=cfg, now=NOW)
        assert (a.text, a.entries) == (b.text, b.entries)

    @settings(max_examples=100, deadline=None)
    @given(
        rows=rows_st,
        fail=st.sampled_from([None, "raise", "garbage", "stage"]),
        scopes=st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=3),
    )
    def test_exactly_one_signal_whatever_fails(
        self, rows: list[MemoryEntry], fail: str | None, scopes: list[str | None]
    ) -> None:
        """One event per render: success, store error, garbage results or a broken stage."""
        data: dict[str | None, list[Any]] = {s: list(rows) for s in scopes or [None]}
        mem = FixtureMemory(data, fail=(fail == "raise"))
        if fail == "garbage":
            for v in data.values():
                v.append(object())
        broken = patch("memory_inject.pipeline.run_stages", side_effect=RuntimeError("bug"))
        with recording() as rec, broken if fail == "stage" else nullcontext():
            out = render_memory_context(mem, "project status", sessions=scopes, now=NOW)
        assert 1 == len(rec.events)
        assert out.event is rec.events[0]
        if fail in ("raise", "stage") or (fail == "garbage"):
            assert not rec.events[0].success
