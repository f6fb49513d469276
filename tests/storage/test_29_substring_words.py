"""The substring fallback searches a short word only in scripts the tokenizer cannot split.

When no row holds any query word as a word, both stores look for the words
inside the rows. For CJK that is how a word is found at all; for a word of a
script written with spaces, a short one found inside a longer word is mostly
chance ("what colour is my car?" showed the rows holding "Oscar" and
"cardiologist"), so such words need ``MIN_WORD_SUBSTRING_CHARS`` characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memory_inject import render_memory_context
from memory_inject.storage._substring import SubstringQuery
from memory_inject.storage.calibration import MIN_WORD_SUBSTRING_CHARS, SUBSTRING_WEIGHT

ENGINES = ["sqlite", "postgres"]


class TestWords:
    @pytest.mark.parametrize(
        ("prompt", "searched"),
        [
            ("what colour is my car?", ()),
            ("cat dog", ()),
            ("serv", ("serv",)),
            ("Hausratversicherung", ("hausratversicherung",)),
            ("東京都", ("東京", "京都")),
            ("東京都 car", ("東京", "京都")),
        ],
    )
    def test_which_words_are_searched(self, prompt: str, searched: tuple[str, ...]) -> None:
        assert SubstringQuery.of(prompt).words == searched

    def test_every_word_still_counts_in_the_share(self) -> None:
        """ "car" is not searched, but a row holding only 東京都 holds half the query."""
        query = SubstringQuery.of("東京都 car")
        assert query.every == 2
        assert query.scores([("k", "東京都のサーバー")]) == pytest.approx([SUBSTRING_WEIGHT / 2])

    def test_the_bound(self) -> None:
        assert MIN_WORD_SUBSTRING_CHARS == 4
        assert SubstringQuery.of("abc").words == ()
        assert SubstringQuery.of("abcd").words == ("abcd",)


@pytest.mark.parametrize("engine", ENGINES)
class TestStores:
    def test_a_short_word_inside_longer_ones_brings_no_block(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        store = engine_store(engine)
        store.store("kids", "Dan has twin boys, Felix and Oscar, born March 2019.")
        store.store("wife", "Dan's wife Priya is a cardiologist at the Royal Infirmary.")
        assert store.recall("car", 5) == []
        assert render_memory_context(store, "what colour is my car?").entries == ()

    def test_a_longer_part_of_a_word_and_a_cjk_run_are_found(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        store = engine_store(engine)
        store.store("ins", "Die Hausratversicherung wird im April verlängert.")
        store.store("tokyo", "東京都のサーバーは三台です")
        assert [e.key for e in store.recall("versicherung", 5)] == ["ins"]
        assert [e.key for e in store.recall("東京都", 5)] == ["tokyo"]
