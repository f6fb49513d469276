"""Words with combining marks (issue 29, thirty-second round): Hindi, Bengali, Tamil and
Arabic words are whole words in a prompt, in every store's index and in its queries.

Python's ``\\w`` and FTS5's default ``unicode61`` categories hold no combining mark, so
"बेटी" ("daughter") was read as "ब" and "ट": a Hindi question abstained (no query terms),
and an unrelated Hindi prompt matched a stored fact by its consonants.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters import remember
from memory_inject import (
    AgentConfig,
    InMemoryStore,
    SQLiteStore,
    render_memory_context,
    resolve_inject_policy,
)
from memory_inject.signals import MemoryRecall
from memory_inject.storage.sqlite import ddl
from memory_inject.trivial import has_query_terms
from tests.storage._sqlite_backend import on_file

AGENT = AgentConfig(agent="t")
POLICY = resolve_inject_policy("interactive", has_session=True, config=AGENT.memory)
HINDI_FACT = "मेरी बेटी का नाम प्रिया है और वह प्राथमिक स्कूल में पढ़ती है"
HINDI_QUESTION = "मेरी बेटी का नाम क्या है?"  # "what is my daughter's name?"
UNRELATED = ("प्रधानमंत्री", "प्रधानमंत्री कौन हैं?", "मुझे क्रिकेट पसंद है")
ARABIC_FACT = "ابنتي اسمها ليلى وهي في المدرسة الابتدائية"


def _open(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if kind == "memory":
        return InMemoryStore()
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "m.db")
    from tests.storage._pg_backend import make_postgres_store

    return make_postgres_store(request.getfixturevalue("pg_dsn"))


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store of each kind, closed after the test."""
    opened = _open(request.param, request, tmp_path)
    yield opened
    if callable(close := getattr(opened, "close", None)):
        close()


def _keys(store: Any, prompt: str) -> list[str]:
    return [
        e.key for e in render_memory_context(store, prompt, policy=POLICY, sessions=["s1"]).entries
    ]


@pytest.mark.parametrize("prompt", [HINDI_QUESTION, "प्रिया", "لَيْلَى", "ليلى", "দেশ"])
def test_a_word_with_marks_is_a_query_term(prompt: str) -> None:
    """A Devanagari, Arabic (with or without harakat) or Bengali word is a word."""
    assert has_query_terms(prompt)


def test_a_hindi_question_finds_its_fact(store: Any) -> None:
    remember(store, AGENT, HINDI_FACT, session_id="s1")
    result = render_memory_context(store, HINDI_QUESTION, policy=POLICY, sessions=["s1"])
    assert isinstance(result.event, MemoryRecall)
    assert result.event.abstained is None
    assert HINDI_FACT in result.text


@pytest.mark.parametrize("prompt", UNRELATED)
def test_an_unrelated_hindi_prompt_injects_nothing(store: Any, prompt: str) -> None:
    """ "प्रधानमंत्री" ("prime minister") shares consonants with the fact, no word."""
    remember(store, AGENT, HINDI_FACT, session_id="s1")
    store.store("other", "My dentist appointment is on Tuesday", "core")
    assert _keys(store, prompt) == []


@pytest.mark.parametrize("prompt", ["لَيْلَى", "ما اسم ابنتي لَيْلَى؟"])
def test_an_arabic_prompt_with_harakat_finds_the_plain_fact(store: Any, prompt: str) -> None:
    """Harakat in the prompt are read as the plain letters users mostly type."""
    store.store("daughter", ARABIC_FACT, "core")
    store.store("brother", "أخي يعمل في دبي مهندسا", "core")
    assert _keys(store, prompt) == ["daughter"]


def test_the_in_process_store_folds_stored_harakat() -> None:
    """A fact written with harakat is found by the plain word on the in-process store,
    whose index and queries pass through one fold (SQLite's and PostgreSQL's indexes do
    not drop harakat yet: docs/storage.md)."""
    store = InMemoryStore()
    store.store("daughter", "ابْنَتِي اسْمُهَا لَيْلَى", "core")
    assert _keys(store, "ليلى") == ["daughter"]


def test_a_schema_12_file_is_indexed_again_with_whole_words(tmp_path: Path) -> None:
    """A file the previous release wrote indexed "बेटी" as "ब" and "ट": opening it builds
    the index again, once, with the marks kept, and the Hindi question finds its fact."""
    db = tmp_path / "m.db"
    with SQLiteStore(db) as store:
        remember(store, AGENT, HINDI_FACT, session_id="s1")
    on_file(db, *ddl.MIGRATIONS[11], "PRAGMA user_version = 12")
    assert "बेटी" not in _tokens(db)
    with SQLiteStore(db) as store:
        assert (
            HINDI_FACT
            in render_memory_context(store, HINDI_QUESTION, policy=POLICY, sessions=["s1"]).text
        )
        assert _keys(store, "प्रधानमंत्री") == []
    assert {"बेटी", "प्रिया"} <= _tokens(db)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == ddl.SCHEMA_VERSION
    finally:
        conn.close()


def _tokens(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, memories_fts, row)")
        return {row[0] for row in conn.execute("SELECT term FROM temp.vocab")}
    finally:
        conn.close()


def test_latin_accents_typed_apart_still_fold(tmp_path: Path) -> None:
    """With marks part of a word, "me\u0301decin" (NFD) is still "medecin" in the index."""
    with SQLiteStore(tmp_path / "m.db") as store:
        store.store("doc", "Mon me\u0301decin s'appelle Lefe\u0300vre", "core")
        assert _keys(store, "médecin") == ["doc"]
        assert _keys(store, "medecin lefevre") == ["doc"]
