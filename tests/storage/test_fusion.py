"""Score fusion (spec 7.4) and the Fusion options."""

from __future__ import annotations

from typing import Any

import pytest

from memory_inject.storage.fusion import Fusion, fuse

W = Fusion()
RRF = Fusion(mode="rrf")


class TestWeighted:
    def test_keyword_only_is_divided_by_the_batch_max(self) -> None:
        """Without vector hits the best keyword score becomes 1 and the rest scale."""
        assert [("a", 1.0), ("b", 0.5)] == fuse([("a", 4.0), ("b", 2.0)], [], W, 5)

    def test_all_zero_keyword_batch_scores_zero(self) -> None:
        """A batch whose maximum is zero scores every hit 0."""
        assert [("a", 0.0), ("b", 0.0)] == fuse([("b", 0.0), ("a", 0.0)], [], W, 5)

    def test_vector_only_is_the_cosine(self) -> None:
        """Without keyword hits the score is the cosine similarity itself."""
        assert [("c", 0.8), ("d", 0.25)] == fuse([], [("d", 0.25), ("c", 0.8)], W, 5)

    def test_both_use_the_mean_over_present_modalities(self) -> None:
        """An id found by one stage is scored by that stage alone; by both, a weighted mean."""
        got = dict(fuse([("a", 2.0), ("b", 1.0)], [("b", 0.8), ("c", 0.5)], W, 5))
        assert {"a": 1.0, "b": pytest.approx(0.7 * 0.8 + 0.3 * 0.5), "c": 0.5} == got

    def test_tiny_keyword_max_is_not_amplified(self) -> None:
        """A keyword batch max below epsilon is treated as 1 when vectors are present."""
        got = dict(fuse([("a", 1e-15)], [("b", 0.5)], W, 5))
        # typed as object: mypy's strict equality cannot see pytest.Approx's __eq__ inside a tuple
        expected: tuple[object, float] = (pytest.approx(0.0, abs=1e-12), 0.5)
        assert expected == (got["a"], got["b"])

    def test_ties_break_by_id(self) -> None:
        """Equal scores are ordered by id ascending."""
        assert ["a", "b", "c"] == [
            k for k, _ in fuse([("c", 1.0), ("a", 1.0), ("b", 1.0)], [], W, 5)
        ]

    def test_limit_truncates(self) -> None:
        """At most ``limit`` pairs; a non-positive limit gives none."""
        pairs = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
        assert (["a", "b"], []) == ([k for k, _ in fuse(pairs, [], W, 2)], fuse(pairs, [], W, 0))

    def test_duplicate_ids_keep_their_best(self) -> None:
        """An id listed twice in one stage keeps its higher score."""
        assert [("a", 1.0), ("b", 0.5)] == fuse([("a", 1.0), ("a", 4.0), ("b", 2.0)], [], W, 5)

    def test_weights_are_configurable(self) -> None:
        """The vector and keyword weights set the mix for ids found by both."""
        f = Fusion(vector_weight=1.0, keyword_weight=1.0)
        # typed as object: mypy's strict equality cannot see pytest.Approx's __eq__ inside a list
        expected: list[tuple[str, object]] = [("a", pytest.approx(0.75))]
        assert expected == fuse([("a", 1.0)], [("a", 0.5)], f, 5)


class TestRrf:
    def test_first_in_every_list_scores_one(self) -> None:
        """Rank 1 in both lists is the maximum possible, so it scores 1."""
        got = dict(fuse([("a", 9.0), ("b", 1.0)], [("a", 0.9), ("c", 0.1)], RRF, 5))
        assert 1.0 == pytest.approx(got["a"])

    def test_scores_follow_the_formula(self) -> None:
        """Each score is the weighted sum of 1/(k + rank), divided by the maximum possible."""
        got = dict(fuse([("a", 9.0), ("b", 1.0)], [("b", 0.9), ("c", 0.1)], RRF, 5))
        best = 0.3 / 61 + 0.7 / 61
        assert {
            "a": pytest.approx((0.3 / 61) / best),
            "b": pytest.approx((0.3 / 62 + 0.7 / 61) / best),
            "c": pytest.approx((0.7 / 62) / best),
        } == got

    def test_single_list_is_scaled_to_that_list(self) -> None:
        """With only keyword hits the top hit still scores 1."""
        assert [("a", 1.0), ("b", pytest.approx(61 / 62))] == fuse(
            [("a", 2.0), ("b", 1.0)], [], RRF, 5
        )


class TestFusionOptions:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"mode": "sum"}, "'mode' must be one of 'weighted', 'rrf' (got 'sum')"),
            ({"search_mode": "fts"}, "'search_mode' must be one of"),
            ({"vector_weight": -0.1}, "'vector_weight' must be >= 0 (got -0.1)"),
            ({"vector_weight": 0, "keyword_weight": 0}, "must be > 0"),
            ({"rrf_k": -1}, "'rrf_k' must be an integer >= 0 (got -1)"),
            ({"rrf_k": True}, "'rrf_k' must be an integer"),
        ],
    )
    def test_bad_values_are_rejected(self, kwargs: dict[str, Any], message: str) -> None:
        """Each bad option is a ValueError naming the field and the value."""
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            Fusion(**kwargs)

    def test_defaults_are_the_spec(self) -> None:
        """Weighted fusion, 0.7 / 0.3, k = 60, hybrid search."""
        assert ("weighted", 0.7, 0.3, 60, "hybrid") == (
            W.mode,
            W.vector_weight,
            W.keyword_weight,
            W.rrf_k,
            W.search_mode,
        )
