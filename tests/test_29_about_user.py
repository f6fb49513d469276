""" "What do you know about me?" recalls the newest memories the turn may see.

A prompt without a content word recalls nothing (``require_query_terms``), but a user
asking what the memory holds about them ("what do you know about me?", "who am I?",
"tell me about myself") names no topic because the topic is the memory itself. Such a
prompt recalls as an empty query does (the newest entries of the turn's scope, the
spec's time-only recall), so the model is shown what it knows instead of nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.storage import SQLiteStore
from memory_inject.testing import recording
from memory_inject.trivial import asks_about_user, has_query_terms

ABOUT_USER = [
    "what do you know about me?",
    "What do you remember about me",
    "who am I?",
    "Who am I",
    "tell me about myself",
    "so what do you actually know about me",
    "do you know anything about me?",
    "what do you remember?",
    "what have you learned about me",
]
NOT_ABOUT_USER = ["what about me?", "what do you think about me?", "hi", "what is it", "ok"]


@pytest.mark.parametrize("prompt", ABOUT_USER)
def test_asks_about_user(prompt: str) -> None:
    assert asks_about_user(prompt)


@pytest.mark.parametrize(
    "prompt", ["what do you know about me and my dog?", "who am I meeting on Friday?"]
)
def test_a_question_with_a_topic_is_asked_by_its_words(prompt: str) -> None:
    assert has_query_terms(prompt)
    assert not asks_about_user(prompt)


@pytest.mark.parametrize("prompt", NOT_ABOUT_USER)
def test_does_not_ask_about_user(prompt: str) -> None:
    assert not asks_about_user(prompt)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "m.db")
    for i in range(6):
        s.store(f"a{i}", f"Fact {i} about user A.", session_id="A", timestamp=f"2026-03-0{i + 1}")
    s.store("b", "User B's secret.", session_id="B", timestamp="2026-03-09")
    return s


@pytest.mark.parametrize("prompt", ["what do you know about me?", "who am I?"])
def test_the_newest_memories_of_the_turn_are_shown(store: SQLiteStore, prompt: str) -> None:
    with recording() as rec:
        out = render_memory_context(store, prompt, sessions=["A"])
    assert [e.key for e in out.entries] == ["a5", "a4", "a3", "a2"]  # max_entries 4
    assert "User B" not in out.text
    assert rec.events[0].abstained is None


def test_the_same_with_require_query_terms_off(store: SQLiteStore) -> None:
    cfg = MemoryInjectConfig(require_query_terms=False)
    out = render_memory_context(store, "what do you know about me?", config=cfg, sessions=["A"])
    assert [e.key for e in out.entries] == ["a5", "a4", "a3", "a2"]


def test_a_topicless_prompt_that_does_not_ask_still_abstains(store: SQLiteStore) -> None:
    with recording() as rec:
        out = render_memory_context(store, "what about me?", sessions=["A"])
    assert out.entries == ()
    assert rec.events[0].abstained == "no_query_terms"


def test_a_prompt_with_words_is_recalled_by_them(store: SQLiteStore) -> None:
    """ "What do you think about me?" asks an opinion: its word "think" is searched."""
    out = render_memory_context(store, "what do you think about me?", sessions=["A"])
    assert out.entries == ()


def test_a_long_prompt_is_never_such_a_question() -> None:
    """The check runs on every turn: past 200 characters it does not read the prompt."""
    assert asks_about_user("what do you know about me?" + " " * 170)
    assert not asks_about_user("what do you know about me?" + " " * 180)
