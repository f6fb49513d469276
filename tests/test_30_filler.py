"""Chat whose words are topics elsewhere recalls nothing: "good job", "that works", "try again".

A held-out personal memory (a helper's 122 facts of one user, round 30) rendered the
user's job, laptop and a friend's work at a score of 1.0 for "yep that works": "works" was
its one content word. Such chat is most of what people type between questions, and its
words ("job", "works", "tomorrow", "love", "amazing") are topics of real memories.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject._filler import MAX_CHARS
from memory_inject.storage import SQLiteStore
from memory_inject.testing import recording
from memory_inject.trivial import has_query_terms

FILLER = [
    "yep that works",
    "that works for me!",
    "it works now, thanks",
    "good job",
    "Great job!!",
    "nice work 👍",
    "well done",
    "love it",
    "amazing!",
    "absolutely",
    "interesting",
    "see you tomorrow",
    "talk to you later",
    "have a good one",
    "try again",
    "one more time",
    "never mind",
    "no worries",
    "my bad",
    "fair enough",
    "good point",
    "let's do it",
    "go ahead",
    "hold on, let me check",
    "thanks for your help",
    "that helped a lot",
    "how are you today?",
    "what's up?",
    "I'm back",
    "oh no, that's sad",
    "make it shorter",
    "gracias",
    "merci beaucoup",
]

# The same words, asking about something the memory may hold: a question keeps its words
# of reaction and praise (a helper's review found these rendered nothing in the first cut).
TOPICAL = [
    "what was the good news?",
    "what was my great idea?",
    "what did I agree to?",
    "what makes me sad?",
    "when is my next stop?",
    "what's new with me?",
    "who is Prima?",
    "what was amazing about Kyoto?",
    "good job on the quarterly report?",
    "that works, add it to my calendar for friday",
    "see you at the gym at 6?",
    "try again with my work email",
    "where do I work?",
    "what job did Sam take?",
    "what did I love about Lisbon?",
    "who helped me move last year?",
    "what's my name?",
    "what happens tomorrow?",
    "the amazing ramen place we found in Osaka?",
    "my back hurts again",
]


@pytest.mark.parametrize("prompt", FILLER)
def test_chat_without_a_topic_has_no_query_terms(prompt: str) -> None:
    assert not has_query_terms(prompt)


@pytest.mark.parametrize("prompt", TOPICAL)
def test_the_same_words_with_a_topic_keep_it(prompt: str) -> None:
    assert has_query_terms(prompt)


def test_a_long_prompt_is_read_as_it_is() -> None:
    """The phrases are taken out of short prompts only: a long one is a message of its own."""
    long = ", ".join(["good job"] * 20)
    assert len(long) > MAX_CHARS
    assert has_query_terms(long)
    assert has_query_terms(" ".join(["amazing"] * 40))


def test_spaces_do_not_make_a_prompt_long() -> None:
    assert not has_query_terms("yep that works" + "\n" * 200)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "m.db")
    s.store("job", "Works as a nurse at St. Mary's; the job starts at 7am.")
    s.store("laptop", "Work laptop is a ThinkPad X1; it works only on the office VPN.")
    s.store("report", "The quarterly report is due on Friday; Dana reviews it.")
    s.store("lisbon", "Loved the tram rides in Lisbon; would go back.")
    return s


@pytest.mark.parametrize("prompt", ["yep that works", "good job!", "love it", "try again"])
def test_filler_gets_no_block_and_says_why(store: SQLiteStore, prompt: str) -> None:
    with recording() as rec:
        out = render_memory_context(store, prompt)
    assert out.text == ""
    assert rec.events[0].abstained == "no_query_terms"


def test_a_question_in_the_same_words_gets_its_memory(store: SQLiteStore) -> None:
    out = render_memory_context(store, "good job on the quarterly report?")
    assert [e.key for e in out.entries][:1] == ["report"]


def test_zeroclaws_setting_searches_filler_as_written(store: SQLiteStore) -> None:
    """``require_query_terms: false`` (zeroclaw's behaviour) searches every prompt."""
    cfg = MemoryInjectConfig(require_query_terms=False)
    out = render_memory_context(store, "yep that works", config=cfg)
    assert "job" in [e.key for e in out.entries] or "laptop" in [e.key for e in out.entries]


SETS = Path(__file__).resolve().parent.parent / "benchmarks" / "filler"


@pytest.mark.parametrize("name", ["set1_topical.txt", "set2_topical.txt"])
def test_no_topical_message_of_the_benchmark_sets_loses_its_words(name: str) -> None:
    """The helpers' 250 short messages that carry a topic (``benchmarks/filler``) all keep
    a word to recall by, whatever words of chat they share with the fillers."""
    lines = [x.strip() for x in (SETS / name).read_text(encoding="utf-8").splitlines()]
    lost = [x for x in lines if x and not has_query_terms(x)]
    assert lost == []
