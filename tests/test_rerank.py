"""The rerank arm: the spec's rerank.rs cases and equivalence with the reference version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_inject import MemoryEntry, MemoryInjectConfig, RerankConfig
from memory_inject.stages import StageContext
from memory_inject.stages.rerank import blended, recency_factor
from tests._stages import collapse, rerank
from tests.reference_rerank import reference_rerank

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def e(
    key: str,
    content: str,
    score: float | None = 0.5,
    category: str = "core",
    age: float = 0,
    importance: float | None = None,
) -> MemoryEntry:
    return MemoryEntry(
        key, content, category, NOW - timedelta(days=age), score=score, importance=importance
    )


def run(entries: list[MemoryEntry], exclude: bool = False, **rr: Any) -> list[str]:
    limit = rr.pop("limit", 5)
    floor = rr.pop("floor", 0.0)
    cfg = MemoryInjectConfig(
        recall_limit=limit, min_relevance_score=floor, rerank=RerankConfig(enabled=True, **rr)
    )
    return [x.key for x in rerank(StageContext(cfg, NOW, exclude), entries).survivors]


class TestRerankCases:
    def test_blend_uses_the_weighted_final_score(self) -> None:
        """Default weights blend 0.7/0.2/0.1."""
        assert blended(0.8, 0.5, 1.0, 0.2, 0.1) == pytest.approx(0.7 * 0.8 + 0.1 + 0.1)

    def test_custom_weights_renormalise(self) -> None:
        """Custom weights split what is left to relevance and renormalise."""
        assert blended(1.0, 0.0, 0.0, 0.5, 0.5) == pytest.approx(0.0)
        assert blended(0.6, 0.0, 0.0, 0.0, 0.0) == pytest.approx(0.6)

    def test_exact_duplicates_collapse_after_whitespace_normalisation(self) -> None:
        """'same content' and 'same   content' collapse to the higher-scored one."""
        assert ["a"] == run([e("a", "same content", 0.9), e("b", "Same   content", 0.8)])

    def test_near_duplicates_collapse_at_the_threshold(self) -> None:
        """With threshold 0.6, a one-word extension collapses."""
        rows = [e("a", "one two three four five", 0.9), e("b", "one two three four five six", 0.8)]
        assert ["a"] == run(rows, near_duplicate_threshold=0.6)
        assert ["a", "b"] == run(rows)

    def test_order_matters_for_near_duplicates(self) -> None:
        """'alice manages bob' and 'bob manages alice' are both kept."""
        assert 2 == len(run([e("a", "alice manages bob", 0.9), e("b", "bob manages alice", 0.8)]))

    def test_mmr_puts_the_diverse_entry_second(self) -> None:
        """With lambda 0.5 the unrelated entry beats a close paraphrase for second place."""
        rows = [
            e("a", "deploy target is prod-3 eu", 0.95),
            e("b", "deploy target is prod-3 us", 0.93),
            e("c", "user likes green tea", 0.75),
        ]
        assert ["a", "c", "b"] == run(rows, strategy="mmr", mmr_lambda=0.5, threshold=2)

    def test_lambda_extremes(self) -> None:
        """Lambda 1 is pure relevance order; lambda 0 still keeps the leader first."""
        rows = [e("a", "x y z", 0.9), e("b", "x y w", 0.8), e("c", "p q r", 0.7)]
        assert ["a", "b", "c"] == run(rows, strategy="mmr", mmr_lambda=1.0, threshold=2)
        assert "a" == run(rows, strategy="mmr", mmr_lambda=0.0, threshold=2)[0]

    def test_week_old_daily_has_low_recency(self) -> None:
        """A seven-day-old daily entry has recency under 0.6; core stays 1."""
        assert recency_factor(e("d", "x", category="daily", age=7), NOW) < 0.6
        assert 1.0 == recency_factor(e("c", "x", age=700), NOW)

    def test_scoreless_entries_keep_backend_order_and_pass_the_floor(self) -> None:
        """Unscored entries sort as 0 after scored ones and pass any floor."""
        rows = [e("n1", "first", None), e("s", "scored", 0.9), e("n2", "second", None)]
        assert ["s", "n1", "n2"] == run(rows, floor=0.5)

    def test_ineligible_duplicate_cannot_shadow_an_eligible_fact(self) -> None:
        """A skipped autosave with the same content does not remove the real fact."""
        rows = [e("user_msg_1", "server is prod-3", 0.99), e("fact", "server is prod-3", 0.5)]
        assert ["fact"] == run(rows)

    def test_pool_is_truncated_in_backend_order_before_ranking(self) -> None:
        """Entries past the pool cap never compete, even with a higher score."""
        rows = [e(f"k{i}", f"fact {i} v{i}", 0.5) for i in range(6)] + [e("late", "late", 1.0)]
        assert "late" not in run(rows, limit=2, candidate_multiplier=3)

    def test_collapse_reports_what_each_duplicate_duplicates(self) -> None:
        """collapse returns kept indices and the index each dropped entry duplicates."""
        rows = [e("a", "x y z", 0.9), e("b", "X  y z", 0.8), e("c", "other", 0.7)]
        kept, dups = collapse(rows, [0.9, 0.8, 0.7], 0.92)
        assert ([0, 2], {1: 0}) == (kept, dups)

    def test_a_copy_of_a_dropped_duplicate_names_the_entry_that_stayed(self) -> None:
        """B near-duplicates A; C is B's exact copy. C named B, a key not in the block
        (found by a helper, twenty-eighth round); it names A, which stayed."""
        base = "the deploy goes to prod three on friday after the standup meeting"
        rows = [
            e("A", base, 0.95),
            e("B", base + " today", 0.9),
            e("C", base.replace("the", "The  ", 1) + " TODAY", 0.85),
        ]
        cfg = MemoryInjectConfig(rerank=RerankConfig(enabled=True, near_duplicate_threshold=0.9))
        result = rerank(StageContext(cfg, NOW), rows)
        assert ["A"] == [x.key for x in result.survivors]
        assert {"B": "duplicate_of:A", "C": "duplicate_of:A"} == result.dropped

    def test_mmr_of_one_candidate_is_itself(self) -> None:
        """A single candidate is returned as is."""
        assert ["a"] == run([e("a", "x")], strategy="mmr", threshold=0)

    def test_demand_gives_a_prefix_of_the_full_ranking(self) -> None:
        """With a renderer demand of 2, the arm returns the first 2 of the full result."""
        rows = [e(f"k{i}", f"w{i} w{i + 1} shared words here", 0.9 - i / 20) for i in range(12)]
        cfg = MemoryInjectConfig(
            recall_limit=8, rerank=RerankConfig(enabled=True, strategy="mmr", threshold=2)
        )
        full = rerank(StageContext(cfg, NOW), rows).survivors
        lazy = rerank(StageContext(cfg, NOW, demand=2), rows)
        assert full[:2] == lazy.survivors
        assert 8 == len(full)
        assert "budget:max_entries" == lazy.dropped[full[2].key]


texts = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "ALPHA", "prod-3", "eu"]),
    min_size=0,
    max_size=6,
).map(" ".join)
entries_st = st.lists(
    st.tuples(
        texts,
        st.one_of(st.none(), st.floats(0, 1), st.sampled_from([0.5, 0.9, 1.0])),
        st.sampled_from(["core", "daily", "conversation", "custom"]),
        st.floats(0, 40),
        st.one_of(st.none(), st.floats(0, 1)),
        st.sampled_from(["", "user_msg_1", "x_history"]),
    ),
    max_size=40,
)


class TestEquivalence:
    @settings(max_examples=500, deadline=None)
    @given(
        rows=entries_st,
        limit=st.integers(0, 8),
        mult=st.integers(1, 4),
        threshold=st.integers(0, 6),
        strategy=st.sampled_from(["none", "mmr"]),
        lam=st.floats(0, 1),
        floor=st.floats(0, 1),
        exclude=st.booleans(),
        near=st.sampled_from([0.92, 0.5, 0.3]),
        weights=st.sampled_from([(0.2, 0.1), (0.3, 0.3), (0.0, 0.0), (1.0, 1.0)]),
    )
    def test_optimised_rerank_equals_the_reference(
        self,
        rows: list[Any],
        limit: int,
        mult: int,
        threshold: int,
        strategy: str,
        lam: float,
        floor: float,
        exclude: bool,
        near: float,
        weights: tuple[float, float],
    ) -> None:
        """Same entries, same order, same scores as the straightforward spec version."""
        pool = [
            MemoryEntry(
                f"{kp}{i}" if kp else f"k{i}",
                content or "x",
                cat,
                NOW - timedelta(days=age),
                score=score,
                importance=imp,
            )
            for i, (content, score, cat, age, imp, kp) in enumerate(rows)
        ]
        cfg = MemoryInjectConfig(
            recall_limit=limit,
            min_relevance_score=floor,
            rerank=RerankConfig(
                enabled=True,
                strategy=strategy,
                threshold=threshold,
                mmr_lambda=lam,
                candidate_multiplier=mult,
                near_duplicate_threshold=near,
                importance_weight=weights[0],
                recency_weight=weights[1],
            ),
        )
        got = rerank(StageContext(cfg, NOW, exclude), pool).survivors
        eff = limit or 1024
        final = max(1, min(eff, 1024))
        want = reference_rerank(
            pool,
            now=NOW,
            final_limit=final,
            pool_cap=max(min(final * mult, 1024), final, 1),
            threshold=threshold,
            strategy=strategy,
            lam=lam,
            iw=weights[0],
            rw=weights[1],
            floor=floor,
            exclude_conversation=exclude,
            near_dup=near,
        )
        assert want == [(x.key, x.score) for x in got]
