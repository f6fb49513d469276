"""A keyword hit found only through its neighbours' words is never shown at the default floor.

A record written in a session (or an event, or near others) indexes the two
records written before it as context, so a query word they hold finds it too.
For a chat that brings the reply to a question; for facts the memory tools
write one after another in a chat, it brought the next two facts into every
block ("what breed is Miso?" showed the cat, the home insurance and sprint
planning). Such a hit now scores ``CONTEXT_ONLY`` of its share: still recalled,
after the rows that hold the words, but under the default floor. Since the twentieth
round a turn of a chat beside one that reaches the floor needs only
``min_companion_score`` (0.25), so the reply after a match comes in with it; facts the
memory tools write stand alone and never do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.storage.calibration import CONTEXT_ONLY, coverage
from memory_inject.storage.sqlite.keyword_mirror import AFTER_RECALLS

ENGINES = ["sqlite", "postgres"]
SESSION = "chat-1"
#: Facts a model stores with the memory tools during one chat, in this order.
FACTS = [
    ("cat", "My cat Miso is a grey British Shorthair."),
    ("insurance", "Home insurance renews every April with Aviva."),
    ("sprint", "Sprint planning is every other Tuesday at 10:00."),
]
FLOOR = MemoryInjectConfig().min_relevance_score


class TestCoverage:
    def test_a_hit_through_context_alone_scores_context_only_of_its_share(self) -> None:
        assert coverage([1.0], [0.5]) == pytest.approx(0.5 * CONTEXT_ONLY)
        assert coverage([2.0, 1.0], [0.5, 0.25]) == pytest.approx((1.25 / 3) * CONTEXT_ONLY)

    def test_one_word_of_its_own_keeps_the_whole_share(self) -> None:
        assert coverage([1.0, 1.0], [1.0, 0.5]) == pytest.approx(0.75)
        assert coverage([1.0, 1.0], [1.0, 0.0]) == pytest.approx(0.5)

    def test_the_best_context_only_hit_is_under_the_default_floor(self) -> None:
        assert FLOOR == pytest.approx(0.4)
        assert coverage([1.0, 3.0], [0.5, 0.5]) < FLOOR
        assert coverage([1.0], [0.0]) == 0.0


def _write(store: Any, source: str | None = None) -> None:
    for key, content in FACTS:
        store.store(key, content, session_id=SESSION, source=source)


#: One floor for every entry: the turns beside a strong one get no lower floor
#: (``min_companion_score``, issue 29's twentieth round).
ONE_FLOOR = MemoryInjectConfig(min_companion_score=None)


def _block(store: Any, prompt: str, config: MemoryInjectConfig | None = None) -> list[str]:
    out = render_memory_context(store, prompt, sessions=[SESSION], config=config)
    return [e.key for e in out.entries]


@pytest.mark.parametrize("engine", ENGINES)
class TestFactsOfOneChat:
    @pytest.mark.parametrize(
        ("source", "config"), [("tool", None), (None, ONE_FLOOR)], ids=["tools", "one_floor"]
    )
    def test_a_block_shows_the_fact_not_the_facts_written_after_it(
        self,
        engine_store: Callable[[str], Any],
        engine: str,
        source: str | None,
        config: MemoryInjectConfig | None,
    ) -> None:
        # Facts the memory tools write stand alone (no context, no companions); rows of a
        # chat under one floor show a memory for its own words only.
        store = engine_store(engine)
        _write(store, source)
        for _ in range(AFTER_RECALLS + 2):  # SQLite: the FTS5 path first, then the mirror
            assert _block(store, "what breed is Miso?", config) == ["cat"]
            assert _block(store, "when does the home insurance renew?", config) == ["insurance"]

    def test_the_turn_after_a_strong_one_comes_in_beside_it(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Turns of one chat: the one after the match holds its words as context (0.395),
        under the floor but over the companion score, and is shown beside it, as a
        chat's reply is; alone it would not be."""
        store = engine_store(engine)
        _write(store)
        for _ in range(AFTER_RECALLS + 2):
            assert _block(store, "what breed is Miso?") == ["cat", "insurance"]

    def test_the_facts_after_it_are_still_recalled_below_it(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Recall keeps them (their neighbour's words are evidence), scored as what they are."""
        store = engine_store(engine)
        _write(store)
        for _ in range(AFTER_RECALLS + 2):
            found = store.recall("Miso", 10, session_id=SESSION)
            assert [e.key for e in found] == ["cat", "insurance", "sprint"]
            scores = {e.key: e.score for e in found}
            assert scores["cat"] == pytest.approx(1.0)
            assert scores["insurance"] == pytest.approx(0.5 * CONTEXT_ONLY)
            assert scores["sprint"] == pytest.approx(0.25 * CONTEXT_ONLY)

    def test_a_row_holding_a_word_itself_keeps_its_neighbours_share(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """ "insurance" is the row's own word and "Miso" its neighbour's: the row is shown."""
        store = engine_store(engine)
        _write(store)
        for _ in range(AFTER_RECALLS + 2):
            scores = {
                e.key: e.score for e in store.recall("Miso insurance", 10, session_id=SESSION)
            }
            assert scores["insurance"] > scores["cat"] >= FLOOR
            assert scores["sprint"] < FLOOR  # "insurance" two rows back, "Miso" none
            assert _block(store, "Miso insurance")[:2] == ["insurance", "cat"]
