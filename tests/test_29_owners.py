"""A question about someone's thing is not answered by a fact about someone else.

Found on a held-out personal-assistant set (benchmarks/facts_heldout6.json): "when is
raj's birthday?" showed the user's own birthday and Raj's job, each holding one of the
question's words. Facts stored on purpose about someone else are dropped now; chat turns,
which say "I" for their speaker, are left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_inject import MemoryEntry, MemoryInjectConfig, RerankConfig, render_memory_context
from memory_inject.signals import MemoryRecall
from memory_inject.stages.owners import asked_owners
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import FixtureMemory

FACTS = {
    "raj_job": "Raj is my manager at Northgate.",
    "my_birthday": "My birthday is on 4 March.",
    "sister": "My sister is called Ana and lives in Porto.",
    "blood": "My blood type is O negative.",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "m.db")
    for key, text in FACTS.items():
        s.store(key, text, "core", source="remember")
    yield s
    s.close()


def render(store: SQLiteStore, prompt: str) -> tuple[list[str], dict[str, str]]:
    result = render_memory_context(store, prompt)
    event = result.event
    assert isinstance(event, MemoryRecall)
    return [e.key for e in result.entries], dict(event.dropped)


def test_someone_elses_birthday_is_no_answer(store: SQLiteStore) -> None:
    """Before: the block held both facts (0.5 each, over the 0.4 floor)."""
    keys, dropped = render(store, "when is raj's birthday?")
    assert [] == keys
    assert "other_owner:raj" == dropped["my_birthday"]
    assert "owner_only:raj" == dropped["raj_job"]


def test_a_block_the_owner_rule_empties_says_why(store: SQLiteStore) -> None:
    """The event's ``abstained`` was None (as for "nothing found"): the block is empty on
    purpose, because everything past the floor was about someone else."""
    result = render_memory_context(store, "when is raj's birthday?")
    assert isinstance(result.event, MemoryRecall)
    assert ("", "other_owner") == (result.text, result.event.abstained)
    store.store("raj_birthday", "Raj's birthday is on 12 June.", "core", source="remember")
    answered = render_memory_context(store, "when is raj's birthday?")
    assert isinstance(answered.event, MemoryRecall)
    assert answered.event.abstained is None


def test_the_owners_own_fact_answers(store: SQLiteStore) -> None:
    store.store("raj_birthday", "Raj's birthday is on 12 June.", "core", source="remember")
    keys, dropped = render(store, "when is raj’s birthday?")  # a typographic apostrophe
    assert ["raj_birthday"] == keys
    assert "other_owner:raj" == dropped["my_birthday"]


def test_a_question_for_the_owners_name_keeps_the_fact_that_names_them(
    store: SQLiteStore,
) -> None:
    keys, _ = render(store, "what's my sister's name?")
    assert ["sister"] == keys


def test_an_owner_the_memory_does_not_know_changes_nothing(store: SQLiteStore) -> None:
    """No recalled memory names Sam: the rule has nothing to tell apart."""
    keys, dropped = render(store, "what is sam's blood type?")
    assert ["blood"] == keys
    assert not any(r.startswith(("other_owner", "owner_only")) for r in dropped.values())


def test_chat_turns_are_left_alone(tmp_path: Path) -> None:
    """A chat turn says "I" for its speaker: it is never taken for someone else's fact."""
    with SQLiteStore(tmp_path / "chat.db") as s:
        s.store("t1", "Raj: my birthday is on 4 March, come along!", "conversation", session_id="c")
        s.store("t2", "Bo: I will bring a birthday cake.", "conversation", session_id="c")
        result = render_memory_context(s, "when is raj's birthday?", sessions=["c"])
        assert {"t1", "t2"} == {e.key for e in result.entries}


@pytest.mark.parametrize(
    ("query", "owners"),
    [
        ("when is raj's birthday?", ["raj"]),
        ("what's it's name? let's see: who's there", []),
        ("Quillfeather’s ARR and Lumora's budget", ["quillfeather", "lumora"]),
        ("today's plan, this week's goals", []),
        ("the user's favourite colour", []),  # the memory's own user: "my"
    ],
)
def test_asked_owners(query: str, owners: list[str]) -> None:
    assert owners == asked_owners(query)


def test_a_pasted_log_is_read_for_a_few_owners_only() -> None:
    """Thousands of "x's" in a prompt were each scanned over every entry (1.8 s)."""
    prompt = " ".join(f"name{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}'s" for i in range(600))
    assert ["nameaa", "nameba", "nameca", "nameda"] == asked_owners(prompt)


@pytest.mark.parametrize("rerank", [False, True])
def test_a_fact_the_owner_rule_drops_takes_no_slot_on_either_arm(rerank: bool) -> None:
    """Found by a helper (twenty-eighth round): the rerank arm picked until the block was
    full, and the owner rule after it then dropped a pick, so the block held 3 of 4 and the
    fifth fact was reported as ``budget:max_entries``. The arm applies the rule as it picks."""

    def fact(key: str, content: str, score: float) -> MemoryEntry:
        return MemoryEntry(key, content, "core", None, score=score, extra={"source": "remember"})

    entries = [
        fact("f1", "My birthday is on 4 March", 0.95),
        fact("f2", "Raj birthday party is on 9 June", 0.9),
        fact("f3", "Raj birthday cake is chocolate", 0.85),
        fact("f4", "Raj birthday is celebrated at the office", 0.8),
        fact("f5", "Raj birthday gift ideas: books", 0.75),
        fact("f6", "Raj birthday card is signed by the team", 0.7),
    ]
    config = MemoryInjectConfig(rerank=RerankConfig(enabled=rerank))
    result = render_memory_context(
        FixtureMemory({None: entries}), "when is raj's birthday?", config=config
    )
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert ("f2", "f3", "f4", "f5") == event.rendered_keys
    assert "other_owner:raj" == event.dropped["f1"]
    assert event.dropped["f6"] in {"budget:max_entries", "rerank:final_limit"}
