"""How a question is framed does not change what it recalls (benchmarks/facts.py --frames).

"I'm wondering, what is my dog called?" split at the apostrophe left "m", a word no
fact written in the third person holds, which weighed as a missing word and kept the
answer out; "do you remember ..." and "do you know ..." did the same with words about
asking, not about the topic.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.facts import FRAMES, read_prompts, write
from memory_inject import render_memory_context
from memory_inject._stopwords import REQUEST_WORDS, STOPWORDS
from memory_inject.contract import RecallQuery
from memory_inject.storage import SQLiteStore
from memory_inject.storage import fusion as _fusion
from memory_inject.storage.fusion import content_words
from memory_inject.trivial import has_query_terms
from tests.storage import _pg_backend as pgb

QUESTIONS = [q for q, _ in read_prompts()["questions"]]


class TestQueryWords:
    @pytest.mark.parametrize("frame", [f for f in FRAMES if f])
    def test_a_frame_adds_no_query_word(self, frame: str) -> None:
        for q in QUESTIONS:
            assert content_words(frame + q) == content_words(q), frame + q

    @pytest.mark.parametrize("part", ["I'm", "I've", "I'd", "we're", "you'll"])
    def test_contraction_parts_are_function_words(self, part: str) -> None:
        assert content_words(f"{part} moving to Lisbon") == [("moving", False), ("lisbon", False)]

    @pytest.mark.parametrize(
        "prompt", ["do you remember?", "I know", "we're curious", "can you remind me?"]
    )
    def test_a_prompt_of_asking_words_alone_has_no_content(self, prompt: str) -> None:
        assert not has_query_terms(prompt)

    def test_the_topic_is_kept(self) -> None:
        """Only the asking words go: the question's own words stay."""
        assert content_words("do you remember the recall of the car?") == [("car", False)]
        assert content_words("I don't eat peanuts") == [("eat", False), ("peanuts", False)]
        # Nothing else left: the asking word is the query (as for stopwords).
        assert content_words("remember?") == [("remember", False)]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "f.db")
    else:
        s = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"))
    try:
        write(s, read_prompts()["facts"], "now")
        yield s
    finally:
        s.close()


def _keys(store: Any, prompt: str) -> tuple[str, ...]:
    return tuple(e.key for e in render_memory_context(store, prompt).entries)


@pytest.mark.parametrize("frame", [f for f in FRAMES if f])
def test_a_framed_question_gets_the_bare_questions_block(store: Any, frame: str) -> None:
    blocks = [(q, _keys(store, q), _keys(store, frame + q)) for q in QUESTIONS]
    assert any(bare for _, bare, _ in blocks)  # the store answers some of them
    assert [(q, framed) for q, _, framed in blocks] == [(q, bare) for q, bare, _ in blocks]


class TestNegations:
    """A negation is no query word; the words a contraction shares with names stay."""

    @pytest.mark.parametrize(
        "prompt",
        [
            "I don't remember my dog's name",
            "I do not remember my dog\u2019s name",
            "I can\u2019t recall my dog's name, no idea",
            "my dog's name isn't coming back to me",
        ],
    )
    def test_dropped(self, prompt: str) -> None:
        words = [w for w, _ in content_words(prompt)]
        assert {"dog", "name"} <= set(words)
        assert not {"don", "not", "can", "isn", "no"} & set(words)

    def test_names_and_verbs_of_the_same_letters_stay(self) -> None:
        assert content_words("When is Don's birthday?") == [("don", False), ("birthday", False)]
        assert content_words("who won the game") == [("won", False), ("game", False)]

    def test_alone_it_is_the_query(self) -> None:
        assert content_words("don't") == [("don", False)]


class TestOpeners:
    """How a question is opened at the start of a prompt is no query word; the same words
    elsewhere may be the topic."""

    @pytest.mark.parametrize(
        "opener",
        [
            "Quick question: ",
            "out of curiosity, ",
            "By the way, ",
            "any idea ",
            "let me ask you: ",
            "just checking: ",
            "sorry, ",
            "hey, hmm, btw ",
            "lol ok ",
            "hey, quick question: ",
            "ok so, by the way, ",
            "real quick, ",
            "wait, honestly, ",
            "I have a question: ",
            "do you happen to know ",
        ],
    )
    def test_dropped(self, opener: str) -> None:
        question = "where does my sister live?"
        assert content_words(opener + question) == content_words(question)

    def test_after_markers(self) -> None:
        assert content_words("[cron:daily] quick question: when is standup?") == [
            ("standup", False)
        ]

    def test_elsewhere_the_words_stay(self) -> None:
        assert content_words("what was the quick question about taxes?") == [
            ("quick", False),
            ("question", False),
            ("taxes", False),
        ]
        assert ("way", False) in content_words("the way to the station, by the way")

    def test_an_opener_alone_is_the_query(self) -> None:
        assert content_words("quick question") == [("quick", False), ("question", False)]


class TestWithoutApostrophes:
    """Contractions typed without the apostrophe are function words too."""

    @pytest.mark.parametrize(
        ("typed", "written"),
        [
            ("whats my dog called", "what's my dog called"),
            ("im wondering whos my doctor", "I'm wondering, who's my doctor"),
            ("dont remember wheres my car", "don't remember where's my car"),
        ],
    )
    def test_the_same_words_as_with_them(self, typed: str, written: str) -> None:
        assert content_words(typed) == content_words(written) != []

    def test_forms_that_are_words_stay(self) -> None:
        assert content_words("my user id") == [("user", False), ("id", False)]
        assert content_words("lets feel ill") == [("lets", False), ("feel", False), ("ill", False)]

    @pytest.mark.parametrize(
        ("typed", "written"),
        [("whos my manager", "who's my manager"), ("wheres my sister", "where's my sister")],
    )
    def test_a_typed_question_gets_the_written_ones_block(
        self, store: Any, typed: str, written: str
    ) -> None:
        assert _keys(store, typed) == _keys(store, written) != ()


class TestAnswerKind:
    """ "What kind of music ..." is about music: the row that answers says "jazz", not "kind"."""

    @pytest.mark.parametrize(
        ("question", "topic"),
        [
            ("What kind of music do I like?", [("music", False), ("like", False)]),
            ("which types of  pottery", [("pottery", False)]),
            ("what time is the daily standup?", [("daily", False), ("standup", False)]),
            ("what breed is Miso?", [("miso", False)]),
            (
                "What color did Joanna choose for her hair?",
                [("joanna", False), ("choose", False), ("hair", False)],
            ),
            ("which colour is the car", [("car", False)]),
        ],
    )
    def test_the_kind_asked_for_is_no_query_word(
        self, question: str, topic: list[tuple[str, bool]]
    ) -> None:
        assert content_words(question) == topic

    def test_elsewhere_the_word_stays(self) -> None:
        assert content_words("the kind of time we had") == [("kind", False), ("time", False)]
        assert content_words("how often does the cron run") == [
            ("often", False),
            ("cron", False),
            ("run", False),
        ]

    def test_alone_it_is_the_query(self) -> None:
        assert content_words("what kind of?") == [("kind", False)]

    def test_a_trait_asked_about_otherwise_stays(self) -> None:
        """Only "what/which breed|colour" asks for one: "why ... the hair color" is about it."""
        assert ("color", False) in content_words("Why did Joanna choose the hair color she did?")
        assert ("breed", False) in content_words("do they breed dogs?")

    def test_a_name_asked_for_stays_a_query_word(self) -> None:
        """Measured, not dropped: LoCoMo's answers say "names" ("their names are Luna and
        Oliver"), and without the word 4 of its 10 name questions lost their evidence."""
        assert ("name", False) in content_words("what's my cat's name?")


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("what kind of music do I like?", "music do I like?"),
        ("what time is standup?", "standup?"),
        ("what breed is my dog?", "my dog?"),
        ("what colour is my car?", "my car?"),
    ],
)
def test_a_question_of_a_kind_gets_its_topics_block(store: Any, question: str, topic: str) -> None:
    assert _keys(store, question) == _keys(store, topic) != ()


class TestPastedLog:
    """content_words stops reading at ``max_terms`` topic words: the same words as reading all."""

    @staticmethod
    def _reference(text: str, max_terms: int) -> list[tuple[str, bool]]:
        lowered = text.lower()
        kinds = {w for m in _fusion._ANSWER_KIND.finditer(lowered) for w in m.group().split()}
        terms = list(dict.fromkeys((w, bool(s)) for w, s in _fusion._TOKEN.findall(lowered)))
        kept = [t for t in terms if t[0] not in STOPWORDS and t[0] not in REQUEST_WORDS]
        return ([t for t in kept if t[0] not in kinds] or kept or terms)[:max_terms]

    @pytest.mark.parametrize("max_terms", [1, 3, 64])
    def test_the_first_words_of_a_long_prompt(self, max_terms: int) -> None:
        rng = random.Random(max_terms)
        vocab = [*sorted(STOPWORDS)[:30], "kind", "time", "deploy", "publ*", "node", "what kind of"]
        vocab += [f"worker{i}" for i in range(120)]
        text = " ".join(rng.choice(vocab) for _ in range(3000))
        assert content_words(text, max_terms=max_terms) == self._reference(text, max_terms)
        assert len(content_words(text, max_terms=max_terms)) == max_terms


@pytest.mark.parametrize("frame", ["do you remember ", "hey, quick question: "])
def test_the_substring_fallback_reads_the_same_words(store: Any, frame: str) -> None:
    """Where the word index finds nothing (a CJK run is one token), the LIKE fallback
    searches the same query words: a frame changes neither what it finds nor the score."""
    store.store("tokyo", "東京都のサーバーは三台です")
    bare, framed_ = (store.answer(RecallQuery(q, 5)) for q in ("東京都", frame + "東京都?"))
    assert bare.strategy == framed_.strategy == "like"
    assert [(e.key, e.score) for e in framed_.entries] == [(e.key, e.score) for e in bare.entries]
    assert [e.key for e in bare.entries] == ["tokyo"]
