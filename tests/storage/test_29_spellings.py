"""A query word's other spellings find a memory, and count as the one word they spell.

The model writes memories in American English, the user asks in British English (or the
other way), a note says "Production database" and the question "prod db", a CJK
keyboard types "ＭＩＳＯ". ``_variants.with_variants`` adds each word's other spellings
to the match; ``calibration.coverage`` counts the word once, held when any spelling is
(benchmarks/facts.py --prompts benchmarks/facts_heldout3.json: 30 -> 32 of 50 written
one after another, 38 -> 40 apart, near misses unchanged).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage._variants import MAX_VARIANTS, distinct, spellings, with_variants
from memory_inject.storage.calibration import coverage
from memory_inject.storage.fusion import content_words
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite.keyword_mirror import AFTER_RECALLS
from tests.storage._sqlite_backend import mirror_and_fts5

ENGINES = ["sqlite", "postgres", "in_memory"]
FACTS = {
    "color": "User's favorite color is sage green.",
    "neighbour": "Our neighbours, the Okafors, have a grey cat called Miso.",
    "offsite": "Dana organized the team offsite in Lisbon.",
    "db": "The prod db is Postgres 16.",
    "bread": "Bakes sourdough bread on Sundays.",
    "gp": "Dr Okoye at the Elm Street surgery is my GP.",
    "physio": "Knee physiotherapy with Sam every Thursday.",
    "pet": "Biscuit's vet is Hartley & Co.",
}
#: Asked in the other spelling; every content word is held by the fact through one.
ASKED = [
    ("favourite colour", "color"),
    ("neighbors gray", "neighbour"),
    ("organised offsite", "offsite"),
    ("production database", "db"),
    ("ＭＩＳＯ", "neighbour"),
    # a personal assistant's everyday abbreviations (benchmarks/facts_heldout6.json)
    ("doctor surgery", "gp"),
    ("physio thursday", "physio"),
    ("veterinarian biscuit", "pet"),
]


class TestSpellings:
    @pytest.mark.parametrize(
        ("word", "others"),
        [
            ("colour", ("color",)),
            ("favourite", ("favorite",)),
            ("neighbourhood", ("neighborhood",)),
            ("color", ("colour",)),
            ("favorites", ("favourites",)),
            ("organise", ("organize",)),
            ("realizing", ("realising",)),
            ("prioritisation", ("prioritization",)),
            ("analyse", ("analyze",)),
            ("grey", ("gray",)),
            ("db", ("database",)),
            ("production", ("prod",)),
            ("ｍｉｓｏ", ("miso",)),
            ("doctor", ("gp",)),  # an abbreviation, not "doctour"
        ],
    )
    def test_other_spellings(self, word: str, others: tuple[str, ...]) -> None:
        assert spellings(word) == others

    @pytest.mark.parametrize(
        "word", ["hour", "four", "your", "tour", "flour", "tractor", "editor", "size", "prize", "x"]
    )
    def test_words_with_none(self, word: str) -> None:
        """Short "-our" words and American "-or" words with no British "-our" keep theirs."""
        assert spellings(word) == ()

    def test_a_long_run_of_letters_has_none(self) -> None:
        assert spellings("colour" * 1000) == ()


class TestWithVariants:
    def test_each_term_names_its_word(self) -> None:
        terms, groups = with_variants([("favourite", False), ("film", False), ("colour", False)])
        assert terms == [
            ("favourite", False),
            ("film", False),
            ("colour", False),
            ("favorite", False),
            ("color", False),
        ]
        assert groups == [0, 1, 2, 0, 2]

    def test_nothing_added_says_none(self) -> None:
        assert with_variants([("film", False)]) == ([("film", False)], None)

    def test_a_prefix_or_a_spelling_already_asked_is_not_added(self) -> None:
        assert with_variants([("colour", True)]) == ([("colour", True)], None)
        terms, groups = with_variants([("colour", False), ("color", False)])
        assert (terms, groups) == ([("colour", False), ("color", False)], None)

    def test_at_most_max_variants_are_added(self) -> None:
        """A pasted log of abbreviations stays cheap."""
        asked = "db prod repo msg env config auth docs info pwd deps pkg perf impl appt bday"
        words = [(w, False) for w in f"{asked} tmrw mins hrs yrs mgr dept js colour".split()]
        terms, groups = with_variants(words)
        assert len(terms) == len(words) + MAX_VARIANTS
        assert groups == [*range(len(words)), *range(MAX_VARIANTS)]


class TestCoverage:
    def test_a_word_held_through_a_spelling_counts_once(self) -> None:
        # "colour" (absent from the store, weight 4.5) and "color" (3.0) spell word 0.
        assert coverage([4.5, 3.0], [0.0, 1.0], [0, 0]) == pytest.approx(1.0)
        assert coverage([4.5, 3.0, 3.0], [0.0, 1.0, 0.0], [0, 0, 1]) == pytest.approx(0.5)

    def test_the_word_weighs_its_commonest_spelling(self) -> None:
        # Word 0 weighs min(4.5, 3.0) = 3.0 beside word 1's 1.0.
        assert coverage([4.5, 1.0, 3.0], [0.0, 1.0, 0.0], [0, 1, 0]) == pytest.approx(0.25)


def _store(engine_store: Callable[[str], Any], engine: str) -> Any:
    store = InMemoryStore() if engine == "in_memory" else engine_store(engine)
    for key, content in FACTS.items():
        store.store(key, content)
    return store


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("prompt", "key"), ASKED, ids=[k for _, k in ASKED])
def test_a_fact_is_found_in_the_other_spelling(
    engine_store: Callable[[str], Any], engine: str, prompt: str, key: str
) -> None:
    store = _store(engine_store, engine)
    for _ in range(AFTER_RECALLS + 2):  # SQLite: the FTS5 path first, then the mirror
        [top, *_] = store.recall(prompt, 3)
        assert (top.key, top.score) == (key, pytest.approx(1.0))


@pytest.mark.parametrize("engine", ENGINES)
def test_both_spellings_in_the_store_are_both_found(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    store = _store(engine_store, engine)
    store.store("colour", "The hallway's colour is a warm white.")
    for _ in range(AFTER_RECALLS + 2):
        found = {e.key: e.score for e in store.recall("colour", 5)}
        assert found == {"color": pytest.approx(1.0), "colour": pytest.approx(1.0)}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_question_the_store_cannot_answer_still_scores_low(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    """A spelling no row holds never makes its word weigh more: "favourite film" holds
    "favorite" and not "film", as "favorite film" would."""
    store = _store(engine_store, engine)
    british = {e.key: e.score for e in store.recall("favourite film", 3)}
    american = {e.key: e.score for e in store.recall("favorite film", 3)}
    assert british == pytest.approx(american)
    assert british["color"] < 0.5


#: Words with their other spellings among them, and words in most rows.
_VOCAB = "colour color favourite favorite grey gray db database prod production cat the".split()


def test_the_mirror_scores_spellings_as_the_fts5_path_to_the_bit(tmp_path: Path) -> None:
    """Random stores of both spellings: the mirror and the FTS5 path return the same rows
    in the same order with the same scores (``coverage`` with groups on both)."""
    rng = random.Random(29)
    mirrored, plain = mirror_and_fts5(tmp_path / "m.db")
    for i in range(80):
        text = " ".join(rng.choice(_VOCAB) for _ in range(rng.randrange(1, 7)))
        mirrored.store(f"k{i}", text, session_id=rng.choice([None, "s1"]))
    grouped = 0
    for _ in range(120):
        query = " ".join(rng.choice(_VOCAB) for _ in range(rng.randrange(1, 4)))
        grouped += with_variants(content_words(query))[1] is not None
        for session in (None, "s1"):
            got = [(e.key, e.score) for e in mirrored.recall(query, 6, session_id=session)]
            want = [(e.key, e.score) for e in plain.recall(query, 6, session_id=session)]
            assert [k for k, _ in got] == [k for k, _ in want], query
            assert [s for _, s in got] == [s for _, s in want], query
    assert grouped > 60
    assert getattr(mirrored._engine._mirror, "builds", None) == 1
    mirrored.close()
    plain.close()


class TestDistinct:
    def test_a_spelling_the_index_reads_as_the_word_is_dropped(self) -> None:
        terms, groups = with_variants([("traveling", False), ("chicago", False)])
        assert groups == [0, 1, 0]
        same = distinct(terms, groups, [("travel",), ("chicago",), ("travel",)])
        assert same == ([("traveling", False), ("chicago", False)], None)
        other = distinct(terms, groups, [("travel",), ("chicago",), ("travell",)])
        assert other == (terms, groups)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_spellings_that_stem_alike_count_once(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    """ "travelling" and "traveling" stem to "travel" on both engines, so the spelling is
    dropped (``distinct``) and the query recalls exactly as the one word does."""
    store = engine_store(engine)
    store.store("first", "travel travel travel chicago")
    store.store("second", "travel chicago chicago chicago")
    for i in range(4):
        store.store(f"other{i}", f"unrelated note number {i}")
    for _ in range(AFTER_RECALLS + 2):
        got = [(e.key, e.score) for e in store.recall("traveling chicago", 2)]
        assert got == [(e.key, e.score) for e in store.recall("travel chicago", 2)]
