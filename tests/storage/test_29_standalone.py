"""A fact stored on purpose (``remember()``, the memory tools) takes no neighbours as context.

Facts a session of remembering writes seconds apart are not each other's turns. A fact
holding the two before it made every word look three times as common, so a question's
missing words weighed the more, and it brought the fact written after it into a block
(``benchmarks/facts.py --layout now --layout session`` answered 5-8 fewer questions than
``--layout apart``). A row one of ``day_vote.STANDALONE_SOURCES`` wrote now scores as the
same fact written alone; it is still context for a turn written after it.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.day_vote import STANDALONE_SOURCES
from memory_inject.storage.sqlite import SQLiteStore, ddl
from tests.storage._sqlite_backend import on_file

ENGINES = ["sqlite", "postgres"]
SESSION = "chat-9"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FACTS = [
    ("cat", "My cat Miso is a grey British Shorthair."),
    ("insurance", "Home insurance renews every April with Aviva."),
    ("sprint", "Sprint planning is every other Tuesday at 10:00 with Miso's vet nearby."),
    ("lumora", "Lumora: economic buyer = COO Ray Kimura."),
]
PROMPTS = [
    "Miso",
    "when does the insurance renew",
    "who controls the budget at lumora",
    "grey shorthair sprint",
    "what does Ray do at Lumora?",
]


def _write(store: Any, source: str | None, session: str | None, gap: timedelta) -> None:
    for i, (key, content) in enumerate(FACTS):
        stamp = (START + i * gap).isoformat()
        extra = {} if source is None else {"source": source}
        store.store(key, content, session_id=session, timestamp=stamp, **extra)


def _import(store: Any, source: str | None, session: str | None, gap: timedelta) -> None:
    lines = []
    for i, (key, content) in enumerate(FACTS):
        row = {"key": key, "content": content, "timestamp": (START + i * gap).isoformat()}
        if session is not None:
            row["session_id"] = session
        if source is not None:
            row["source"] = source
        lines.append(json.dumps(row))
    store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))


def _scored(store: Any, prompt: str, session: str | None) -> list[tuple[str, float]]:
    return [(e.key, round(e.score or 0.0, 9)) for e in store.recall(prompt, 10, session_id=session)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("write", [_write, _import], ids=["store", "import"])
@pytest.mark.parametrize("session", [SESSION, None], ids=["session", "sessionless"])
class TestStandalone:
    @pytest.mark.parametrize("source", STANDALONE_SOURCES)
    def test_a_fact_stored_on_purpose_scores_as_if_written_alone(
        self,
        engine_store: Callable[[str], Any],
        engine: str,
        write: Callable[..., None],
        session: str | None,
        source: str,
    ) -> None:
        """Seconds apart by a standalone source: the same hits and scores as a day apart."""
        remembered, apart = engine_store(engine), engine_store(engine)
        write(remembered, source, session, timedelta(seconds=2))
        write(apart, None, session, timedelta(days=1))
        for prompt in PROMPTS:
            assert _scored(remembered, prompt, session) == _scored(apart, prompt, session)
        assert [k for k, _ in _scored(remembered, "Miso", session)] == ["cat", "sprint"]

    def test_other_writers_still_give_neighbours(
        self,
        engine_store: Callable[[str], Any],
        engine: str,
        write: Callable[..., None],
        session: str | None,
    ) -> None:
        """The same facts seconds apart by another source (a chat's turns, an import of a
        conversation) hold the rows before them: the fact after the cat's finds "Miso"."""
        store = engine_store(engine)
        write(store, "chat", session, timedelta(seconds=2))
        found = [k for k, _ in _scored(store, "Miso", session)]
        assert found[:2] == ["cat", "sprint"] or found[:2] == ["sprint", "cat"]
        assert "insurance" in found if session is not None else "insurance" not in found


@pytest.mark.parametrize("engine", ENGINES)
def test_a_turn_after_a_remembered_fact_takes_it_as_context(
    engine_store: Callable[[str], Any], engine: str
) -> None:
    store = engine_store(engine)
    store.store(
        "cat", "My cat Miso is a grey British Shorthair.", session_id=SESSION, source="tool"
    )
    store.store("reply", "That sounds lovely, tell me more!", session_id=SESSION)
    assert [e.key for e in store.recall("Miso", 10, session_id=SESSION)] == ["cat", "reply"]


def _context(db: Path, key: str) -> tuple[Any, ...]:
    conn = sqlite3.connect(db)
    try:
        return tuple(
            conn.execute(
                "SELECT ctx_prev, ctx_prev2, ctx_near FROM memories WHERE key = ?", (key,)
            ).fetchone()
        )
    finally:
        conn.close()


def test_a_schema_10_file_gets_the_rule_for_new_writes(tmp_path: Path) -> None:
    """Opening a file the previous release wrote replaces its insert trigger; the facts
    already written keep the context they were written with."""
    db = tmp_path / "memory.db"
    SQLiteStore(db).close()
    old = next(s for s in ddl.MIGRATIONS[9] if s.startswith("CREATE TRIGGER"))
    on_file(db, "DROP TRIGGER memories_fts_insert", old)
    with SQLiteStore(db) as store:  # still at the current version: the old trigger writes
        for key, text in (("a", "first fact"), ("b", "second fact"), ("c", "third fact")):
            store.store(key, text, source="remember")
    assert _context(db, "c") == ("second fact", "first fact", 1)
    on_file(db, "PRAGMA user_version = 10")
    with SQLiteStore(db) as store:
        store.store("d", "fourth fact", source="remember")
        store.store("e", "a turn after it")
        assert [e.key for e in store.recall("third", 5)] == ["c"]
    assert _context(db, "c") == ("second fact", "first fact", 1)  # kept
    assert _context(db, "d") == (None, None, None)
    assert _context(db, "e") == ("fourth fact", "third fact", 1)

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == ddl.SCHEMA_VERSION
    finally:
        conn.close()


def test_remember_and_the_tools_write_facts_that_stand_alone(tmp_path: Path) -> None:
    """The sources ``remember()`` and the memory tools stamp are the ones the stores read as
    standalone: facts written through them, the tools' arguments as the OpenAI SDK hands
    them over, take no neighbours (a renamed source would quietly undo the rule)."""
    from openai.types.chat import ChatCompletionMessageFunctionToolCall
    from openai.types.chat.chat_completion_message_function_tool_call import Function

    from adapters import memory_tools, remember

    db = tmp_path / "memory.db"
    with SQLiteStore(db) as store:
        tools = memory_tools(store, None, sessions=[SESSION])
        for i, (key, content) in enumerate(FACTS):
            if i % 2:
                assert remember(store, None, content, key=key, session_id=SESSION).ok
            else:
                call = ChatCompletionMessageFunctionToolCall(
                    id=f"call_{i}",
                    type="function",
                    function=Function(
                        name="memory_store",
                        arguments=json.dumps({"content": content, "key": key}),
                    ),
                )
                answer = tools.call(call.function.name, call.function.arguments)
                assert not answer.startswith("Error"), answer
        sources = {r.key: r.source for r in store.list(session_id=SESSION)}
        assert sources == {
            key: "tool" if i % 2 == 0 else "remember" for i, (key, _) in enumerate(FACTS)
        }
    for key, _ in FACTS:
        assert _context(db, key) == (None, None, None), key
