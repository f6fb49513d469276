"""InMemoryStore scores on the calibrated scale (issue 14): query coverage, not batch-relative."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_inject import InMemoryStore, MemoryInjectConfig, render_memory_context
from memory_inject.signals import MemoryRecall
from memory_inject.testing import recording

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def store_of(*facts: tuple[str, str]) -> InMemoryStore:
    mem = InMemoryStore()
    for key, content in facts:
        mem.store(key, content, "core", timestamp=NOW)
    return mem


def score_of(mem: InMemoryStore, query: str, key: str) -> float | None:
    return next((e.score for e in mem.recall(query, 50) if e.key == key), None)


class TestCalibratedScores:
    def test_one_shared_common_word_is_not_relevant_enough(self) -> None:
        """The headline case: a lone hiking fact scores under the floor for a deploy question."""
        mem = store_of(("bob", "Bob likes to go hiking on weekends."))
        score = score_of(mem, "where do production deploys go?", "bob")
        assert score is not None and score < 0.4
        out = render_memory_context(mem, "where do production deploys go?", now=NOW)
        assert "" == out.text

    def test_a_hit_holding_every_content_word_scores_one(self) -> None:
        """A memory holding every content word of the prompt scores 1.0, even when alone."""
        mem = store_of(("deploy", "Production deploys go to prod-3."))
        assert 1.0 == score_of(mem, "where do production deploys go?", "deploy")

    def test_a_better_match_elsewhere_does_not_lower_a_score(self) -> None:
        """The score is not divided by the batch's best: another, better hit leaves it alone.

        Both stores hold "oolong" in some row, so it weighs the same in each (a word no
        row holds would weigh ABSENT_WEIGHT); only the better hit differs.
        """
        alone = store_of(
            ("tea", "the user drinks green tea"), ("noise", "oolong prices at the market")
        )
        crowded = store_of(
            ("tea", "the user drinks green tea"), ("both", "green tea and oolong tea tasting")
        )
        query = "green oolong"
        a, b = score_of(alone, query, "tea"), score_of(crowded, query, "tea")
        assert a is not None and b is not None
        assert 0.0 < a < 1.0
        assert a == pytest.approx(b, abs=0.05)
        assert score_of(alone, query, "noise") == pytest.approx(a, abs=0.05)
        assert 1.0 == score_of(crowded, query, "both")

    def test_rare_words_weigh_more_than_common_ones(self) -> None:
        """Holding the rare query word scores higher than holding the common one."""
        facts = [(f"n{i}", f"project update number {i}") for i in range(20)]
        mem = store_of(*facts, ("rare", "the kubernetes cluster was resized"))
        rare = score_of(mem, "kubernetes project", "rare")
        common = score_of(mem, "kubernetes project", "n0")
        assert rare is not None and common is not None
        assert rare > 0.5 > common

    def test_scores_stay_in_range_and_order_is_by_score(self) -> None:
        """Every score lies in 0..1 and recall returns the best first."""
        mem = store_of(
            ("a", "alpha beta gamma"), ("b", "alpha beta"), ("c", "alpha"), ("d", "delta")
        )
        scores = [e.score for e in mem.recall("alpha beta gamma", 10)]
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
        assert all(s is not None and 0.0 < s <= 1.0 for s in scores)
        assert ["a", "b", "c"] == [e.key for e in mem.recall("alpha beta gamma", 10)]

    def test_the_render_abstains_below_relevance(self) -> None:
        """Recalled but weak: the block is empty and the event says below_relevance."""
        mem = store_of(("bob", "Bob likes to go hiking on weekends."))
        with recording() as rec:
            render_memory_context(
                mem, "where do production deploys go?", config=MemoryInjectConfig(), now=NOW
            )
        [event] = rec.events
        assert isinstance(event, MemoryRecall)
        assert (1, "below_relevance") == (event.num_entries, event.abstained)
