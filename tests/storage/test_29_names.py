"""A question about something a memory names is answered by that memory.

"who controls the purchasing at lumora?" against "Lumora: economic buyer is COO Ray
Kimura." holds one word of three: "controls" and "purchasing" are words no row holds,
which weigh the most (``calibration.ABSENT_WEIGHT``: they say the store cannot
answer), so the fact scored 0.22 and the block was empty. In a row that *names* a word
of the prompt (``_names``: written with a capital where no sentence starts, or at a
start followed by a colon or another capitalised word), such words weigh
``calibration.NAMED_ABSENT_WEIGHT`` instead (benchmarks/facts.py --prompts
benchmarks/facts_heldout4.json: 18 -> 30 of 52 written one after another; LoCoMo
block recall 0.570 -> 0.635, docs/performance.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject import render_memory_context
from memory_inject.storage import SQLiteStore
from memory_inject.storage._names import asked_words, names_asked, names_of
from memory_inject.storage.calibration import (
    ABSENT_WEIGHT,
    NAMED_ABSENT_WEIGHT,
    named_weights,
    smoothed_idf,
    term_weight,
)
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite.keyword_mirror import AFTER_RECALLS
from tests.storage._sqlite_backend import mirror_and_fts5

ENGINES = ["sqlite", "postgres", "in_memory"]
#: Rows that share no word with the questions below, so each word's idf is that of a
#: store of 40 rows.
FILLER = [f"Note {i}: errands and chores for week {i}." for i in range(36)]
FACTS = {
    "lumora_buyer": "Lumora: economic buyer is COO Ray Kimura.",
    "lumora_poc": "Lumora Health POC runs until 15 Jan 2027.",
    "quill": "Main contact at Quillfeather is Tobias Grant.",
    "clinic": "the clinic opens at nine on weekdays.",
}
ASKED = "who controls the purchasing at lumora?"


class TestNamesOf:
    @pytest.mark.parametrize(
        ("text", "names"),
        [
            ("Lumora: economic buyer is COO Ray Kimura.", {"lumora", "ray"}),
            ("Norvane Logistics renews on 2027-03-31.", {"norvane"}),
            ("a loan from Northgate Bank at 5%", {"northgate"}),
            (
                "I own the Norvane, Halvorsen and Sablewood renewals.",
                {"norvane", "halvorsen", "sablewood"},
            ),
            ("Fennick & Dale upgraded in October.", {"fennick", "october"}),
            ("Kestrel makes every vendor fill in a form.", set()),
            ("Caroline: What a day! Then we went home.", {"caroline"}),
            # A day or a month after a sentence's first word makes it no name (twenty-eighth
            # round: "Next" made "when is my next shift?" name this row).
            ("Gina: Sounds good. Next Friday works for me.", {"gina"}),
            ("Sure. Early March suits us.", set()),
            ("Uses VS Code and SSO.", {"code"}),
            ("Lumora's budget is set.", set()),
            ("the budget of Lumora's team", {"lumora"}),
            ("", set()),
        ],
    )
    def test_names(self, text: str, names: set[str]) -> None:
        assert names_of(text) == names

    def test_the_prompt_is_read_in_lower_case_without_possessives_or_times(self) -> None:
        assert asked_words(["lumora's", "budget", "friday", "May"]) == {"lumora", "budget"}

    def test_a_row_names_an_asked_word(self) -> None:
        asked = asked_words(["purchasing", "lumora"])
        assert names_asked(asked, FACTS["lumora_buyer"])
        assert not names_asked(asked, "lumora: economic buyer is COO Ray Kimura.")
        assert not names_asked(frozenset(), FACTS["lumora_buyer"])

    def test_names_asked_reads_as_names_of_does(self) -> None:
        """The fast check (only where an asked word is written) agrees with reading every
        word, on random texts of names, lower-case words, possessives, marks and letters
        that lower-case to two."""
        rng = random.Random(29)
        parts = [
            "Lumora", "lumora", "Lumora's", "LUMORA", "Ray", "ray", "Kimura", "Fennick", "Dale",
            "O'Lumora", "x_Lumora", "İstanbul", "Istanbul", "Lumoras", "Bo", ":", ".", "&", ",",
            "!", "\n", "-", "’s", "the", "at",
        ]  # fmt: skip
        words = ["lumora", "ray", "kimura", "fennick", "dale", "istanbul", "bo", "the"]
        agreed = named = 0
        for _ in range(3000):
            text = "".join(rng.choice(parts) + rng.choice(["", " ", "  "]) for _ in range(8))
            asked = frozenset(rng.sample(words, rng.randrange(1, 4)))
            want = bool(asked & names_of(text))
            assert names_asked(asked, text) == want, (asked, text)
            agreed += 1
            named += want
        assert 500 < named < agreed - 500

    def test_a_long_text_is_read_so_far(self) -> None:
        assert names_of("x " * 3000 + "at Lumora") == frozenset()


class TestNamedWeights:
    def test_an_absent_term_weighs_the_named_weight(self) -> None:
        weights = [2.8, term_weight(40, 0), 1.0]
        assert named_weights(weights, [2, 0, 30]) == [2.8, NAMED_ABSENT_WEIGHT, 1.0]

    def test_never_more_than_elsewhere(self) -> None:
        """In a store of a few rows an absent word weighs less than the named weight."""
        small = term_weight(3, 0)
        assert small < NAMED_ABSENT_WEIGHT
        assert named_weights([small], [0]) == [small]


def _expected(absent: float) -> float:
    """The lumora rows' score for ``ASKED`` in a store of 40 rows: "lumora" in two,
    two words in none, each weighing ``absent``."""
    name = max(1.0, smoothed_idf(40, 2))
    return name / (name + 2 * absent)


def _fill(store: Any, facts: dict[str, str]) -> Any:
    """``FILLER`` and ``facts``, two hours apart: no row is another's near context."""
    rows = [*((f"f{i}", text) for i, text in enumerate(FILLER)), *facts.items()]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i, (key, content) in enumerate(rows):
        store.store(key, content, timestamp=(start + timedelta(hours=2 * i)).isoformat())
    return store


def _store(engine_store: Callable[[str], Any], engine: str, facts: dict[str, str]) -> Any:
    return _fill(InMemoryStore() if engine == "in_memory" else engine_store(engine), facts)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_question_about_a_name_finds_its_rows(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    store = _store(engine_store, engine, FACTS)
    want = _expected(NAMED_ABSENT_WEIGHT)
    assert want >= 0.4 > _expected(ABSENT_WEIGHT * max(1.0, smoothed_idf(40, 1)))
    for _ in range(AFTER_RECALLS + 2):  # SQLite: the FTS5 path first, then the mirror
        found = {e.key: e.score for e in store.recall(ASKED, 5)}
        assert found == {"lumora_buyer": pytest.approx(want), "lumora_poc": pytest.approx(want)}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_same_words_not_written_as_a_name_still_score_low(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    """The rule reads the row's capitals: the facts in lower case keep the absent words'
    full weight, and the block stays empty."""
    lower = {k: v.lower() for k, v in FACTS.items()}
    store = _store(engine_store, engine, lower)
    want = _expected(ABSENT_WEIGHT * max(1.0, smoothed_idf(40, 1)))
    for _ in range(AFTER_RECALLS + 2):
        found = {e.key: e.score for e in store.recall(ASKED, 5)}
        assert found == {"lumora_buyer": pytest.approx(want), "lumora_poc": pytest.approx(want)}
        assert want < 0.4


@pytest.mark.parametrize("engine", ENGINES)
def test_a_question_that_names_nothing_is_unchanged(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    """ "when does the clinic take walk-ins?": "clinic" is not written as a name, so the
    two words no row holds keep their weight."""
    store = _store(engine_store, engine, FACTS)
    [hit] = store.recall("when does the clinic take walkins", 5)
    clinic = max(1.0, smoothed_idf(40, 1))
    absent = ABSENT_WEIGHT * clinic
    assert (hit.key, hit.score) == ("clinic", pytest.approx(clinic / (clinic + 2 * absent)))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_question_every_word_of_which_is_held_is_unchanged(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    store = _store(engine_store, engine, FACTS)
    [top, *_] = store.recall("lumora poc", 5)
    assert (top.key, top.score) == ("lumora_poc", pytest.approx(1.0))


def test_the_default_block_shows_the_named_fact(tmp_path: Path) -> None:
    store = _fill(SQLiteStore(tmp_path / "m.db"), FACTS)
    out = render_memory_context(store, "Who controls the purchasing at Lumora?")
    assert {e.key for e in out.entries} == {"lumora_buyer", "lumora_poc"}
    assert "Ray Kimura" in out.text
    empty = render_memory_context(store, "who controls the purchasing at the clinic?")
    assert empty.entries == ()


#: Names, words in lower case, and words no row holds (the last four).
_VOCAB = "Lumora lumora Norvane norvane budget Team team the note buyer".split()
_ABSENT = "controls purchasing renewal quota".split()


def test_the_mirror_scores_named_rows_as_the_fts5_path_to_the_bit(tmp_path: Path) -> None:
    """Random stores of names and words, asked with words no row holds: the mirror and
    the FTS5 path return the same rows in the same order with the same scores."""
    rng = random.Random(2029)
    mirrored, plain = mirror_and_fts5(tmp_path / "m.db")
    for i in range(80):
        words = [rng.choice(_VOCAB) for _ in range(rng.randrange(1, 7))]
        mirrored.store(f"k{i}", "note: " + " ".join(words), session_id=rng.choice([None, "s1"]))
    raised = 0
    for _ in range(120):
        asked = [rng.choice([w.lower() for w in _VOCAB]) for _ in range(rng.randrange(1, 3))]
        query = " ".join(asked + rng.sample(_ABSENT, rng.randrange(0, 3)))
        for session in (None, "s1"):
            hits = mirrored.recall(query, 6, session_id=session)
            got = [(e.key, e.score) for e in hits]
            want = [(e.key, e.score) for e in plain.recall(query, 6, session_id=session)]
            assert [k for k, _ in got] == [k for k, _ in want], query
            assert [s for _, s in got] == [s for _, s in want], query
            named = any(names_asked(asked_words(asked), e.content) for e in hits)
            raised += named and query != " ".join(asked)
    assert raised > 40  # named rows asked with absent words, on both paths
    assert getattr(mirrored._engine._mirror, "builds", None) == 1
    mirrored.close()
    plain.close()
