"""``memory_store`` is no oracle of another user's facts (twenty-ninth round).

Found by a helper driving the tools through the real OpenAI SDK: a key the tools derive
is ``mem_`` + sha256(scope + text), so a model knowing another user's session id could
derive the key of each guess of that user's fact and name it in ``memory_store``. The
store refused the one guess that was that user's row ("belongs to another scope") and
wrote the others: 100 parallel calls confirmed a locker code. A derived key the model
names must now be one of its own rows; a missing one and another scope's are refused
alike, before the store is asked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memory_inject import AgentConfig
from memory_inject.storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from adapters.tools import memory_key, memory_tools
else:
    from memory_inject.adapters.tools import memory_key, memory_tools

B_FACT = "My locker code is 4471."


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "memory.db")
    yield s
    s.close()


def _answers(store: SQLiteStore, guesses: list[str], *, use_async: bool = False) -> list[str]:
    """What A's model hears for each guess of B's fact, named by B's derived key."""
    agent = AgentConfig(agent="bot")
    b = memory_tools(store, agent, sessions=["user_b"])
    assert b.call("memory_store", {"content": B_FACT}).startswith("Remembered as 'mem_")
    a = memory_tools(store, agent, sessions=["user_a"])
    calls = [json.dumps({"content": g, "key": memory_key(g, "user_b")}) for g in guesses]
    if use_async:

        async def run() -> list[str]:
            return [await a.acall("memory_store", c) for c in calls]

        return asyncio.run(run())
    return [a.call("memory_store", c) for c in calls]


@pytest.mark.parametrize("use_async", [False, True])
def test_the_right_guess_is_answered_as_the_wrong_ones(store: SQLiteStore, use_async: bool) -> None:
    guesses = ["My locker code is 4470.", B_FACT, "My locker code is 4472."]
    answers = _answers(store, guesses, use_async=use_async)
    assert len(set(answers)) == 1, answers
    assert answers[0].startswith("Error: keys shaped 'mem_'")
    [row] = store.list(session_id="user_b")
    assert B_FACT == row.content
    assert [] == store.list(session_id="user_a")


def test_a_model_updates_its_own_derived_key(store: SQLiteStore) -> None:
    a = memory_tools(store, AgentConfig(agent="bot"), sessions=["user_a"])
    key = memory_key("My desk is 4B.", "user_a")
    assert f"Remembered as {key!r}." == a.call("memory_store", {"content": "My desk is 4B."})
    args = {"content": "My desk is 5C now.", "key": key}
    assert f"Remembered as {key!r}." == a.call("memory_store", args)
    record = store.get(key)
    assert record is not None
    assert ("My desk is 5C now.", "user_a") == (record.content, record.session_id)
    # A key of another shape is the model's to choose, as before.
    assert "Remembered as 'desk'." == a.call("memory_store", {"content": "4B", "key": "desk"})
