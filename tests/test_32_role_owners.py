"""A question about a relative's thing is answered by the facts that name the relative.

A hunter's assistant stored "User's sister is Anna" and "Anna's phone number is ...";
"what's my sister's phone number?" rendered nothing: the owner rule read "sister" as a
name, dropped Anna's phone as ``other_owner:sister`` (untrue: Anna is the sister) and
the tie as ``owner_only:sister``. A role is also named by the names of the facts that
mention it, and the fact that says who the role is stays beside the answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_inject import render_memory_context
from memory_inject.signals import MemoryRecall
from memory_inject.storage.sqlite import SQLiteStore

FACTS = {
    "sister": "User's sister is Anna; she lives in Lyon.",
    "anna_phone": "Anna's phone number is 0176 5555 1234.",
    "my_phone": "User's own phone number is 0151 1111 2222.",
    "boss": "User's boss is Raj.",
    "raj_contact": "Raj prefers email over Slack; his email is raj@example.com.",
    "my_birthday": "My birthday is on 4 March.",
    "mum": "Mum is called Linda and lives in Leeds.",
    "mum_birthday": "Mum's birthday is on 9 May.",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "m.db")
    for key, text in FACTS.items():
        s.store(key, text, "core", source="tool")
    yield s
    s.close()


def render(store: SQLiteStore, prompt: str) -> tuple[set[str], dict[str, str]]:
    result = render_memory_context(store, prompt)
    assert isinstance(result.event, MemoryRecall)
    return {e.key for e in result.entries}, dict(result.event.dropped)


def test_my_sisters_phone_is_annas_phone(store: SQLiteStore) -> None:
    keys, dropped = render(store, "What's my sister's phone number?")
    assert {"anna_phone", "sister"} <= keys
    assert "my_phone" not in keys  # the user's own number is someone else's for this question
    assert dropped.get("my_phone") == "other_owner:sister"
    assert not any(r.endswith(":sister") for k, r in dropped.items() if k.startswith("anna"))


def test_my_bosss_email_is_rajs_email(store: SQLiteStore) -> None:
    keys, _ = render(store, "What's my boss's email?")
    assert {"boss", "raj_contact"} <= keys


def test_the_tie_alone_is_no_answer(store: SQLiteStore) -> None:
    """No fact under Anna's name holds a birthday: the tie is dropped as before, and the
    user's own birthday is still someone else's."""
    keys, dropped = render(store, "When is my sister's birthday?")
    assert not keys & {"sister", "my_birthday", "anna_phone"}
    assert dropped.get("my_birthday") == "other_owner:sister"


def test_a_role_fact_without_a_name_is_not_a_tie(store: SQLiteStore) -> None:
    """ "Mum's birthday is on 9 May" mentions the role but names no one: for "what's mum's
    address" it answers nothing, as before."""
    keys, _ = render(store, "what's mum's address")
    assert "mum_birthday" not in keys


def test_names_still_work(store: SQLiteStore) -> None:
    keys, dropped = render(store, "What's Anna's phone number?")
    assert keys == {"anna_phone"}
    assert dropped.get("my_phone") == "other_owner:anna"


def test_a_name_near_the_role_is_not_the_role(tmp_path: Path) -> None:
    """Attack on the first version (helper 118): any capitalised word of any fact that
    mentioned "sister" became her name, so Tom's phone joined Anna's."""
    s = SQLiteStore(tmp_path / "m.db")
    try:
        facts = {
            **{k: FACTS[k] for k in ("sister", "anna_phone")},
            "tom_phone": "Tom's phone number is 0160 9999 0000.",
            "tom_sister": "Tom's sister is Carol.",
            "trip": "My sister and Tom went to Paris in May.",
        }
        for key, text in facts.items():
            s.store(key, text, "core", source="tool")
        keys, dropped = render(s, "What's my sister's phone number?")
        assert "anna_phone" in keys
        assert "tom_phone" not in keys
        assert dropped.get("tom_phone") == "other_owner:sister"
    finally:
        s.close()
