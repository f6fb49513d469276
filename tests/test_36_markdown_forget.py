"""``MarkdownStore.forget`` and ``erase`` take the scope arguments every other store takes
(issue 36), so the model's ``memory_forget`` works on a markdown store.

``forget(key)`` had no ``sessions=`` / ``shared_sources=``: the memory tools, whose forget is
one call limited to their scopes, answered "This memory cannot forget within a scope" to
every forget, and a user's "please forget X" kept X in the files and in every later block.
The scope rules are those of docs/storage.md ("Who owns a row"), compared here with
``InMemoryStore`` and ``SQLiteStore`` case by case.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig
from memory_inject.storage.markdown import MarkdownStore
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage.test_24_ownership import (
    test_forget_is_limited_to_the_scopes_it_is_given as _forget_rules,
)
from tests.storage.test_30_erase import test_erase_keeps_forgets_scope_rules as _erase_rules

if TYPE_CHECKING:
    from adapters._tool_scope import _scoped
    from adapters.tools import memory_tools
else:
    from memory_inject.adapters._tool_scope import _scoped
    from memory_inject.adapters.tools import memory_tools

AGENT = AgentConfig(agent="alice")
#: key -> (session, source): a row of each kind another scope may hold
ROWS: dict[str, tuple[str | None, str | None]] = {
    "alice_row": ("alice", None),
    "bob_row": ("bob", "tool"),
    "shared_tool": (None, "tool"),
    "shared_host": (None, "host"),
    "shared_plain": (None, None),
}
_SESSIONS: list[list[str | None] | None] = [
    None,
    [],
    ["alice"],
    ["bob"],
    [None],
    ["alice", None],
    ["carol", None],
]
_SOURCES: list[list[str] | None] = [None, [], ["tool"], ["host", "tool"]]
SCOPES = list(itertools.product(_SESSIONS, _SOURCES))


def markdown(tmp_path: Path) -> MarkdownStore:
    return MarkdownStore(tmp_path / "notes")


def seed(store: Any) -> None:
    for key, (session, source) in ROWS.items():
        extra = {} if source is None else {"source": source}
        store.store(key, f"the fact of {key}", "core", session_id=session, **extra)


def content(store: Any, key: str) -> str | None:
    row = store.get(key)
    return None if row is None else str(row.content)


def live(store: Any) -> list[str]:
    return sorted(k for k in ROWS if store.get(k) is not None)


def test_the_model_forgets_its_own_row_on_a_markdown_store(tmp_path: Path) -> None:
    store = markdown(tmp_path)
    tools = memory_tools(store, AGENT, sessions=["dm_alice"])
    said = tools.call("memory_store", {"content": "Alice sees a therapist.", "key": "therapy"})
    assert "Remembered as 'therapy'." == said
    assert "Forgot 'therapy'." == tools.call("memory_forget", {"key": "therapy"})
    assert store.get("therapy") is None
    assert "therapist" not in "".join(p.read_text() for p in (tmp_path / "notes").rglob("*.md"))
    assert "No memory under 'therapy'." == tools.call("memory_forget", {"key": "therapy"})


def test_the_async_tools_forget_on_a_markdown_store(tmp_path: Path) -> None:
    store = markdown(tmp_path)
    tools = memory_tools(store, AGENT, sessions=["dm_alice"])

    async def main() -> tuple[str, str]:
        await tools.acall("memory_store", {"content": "Alice likes tea.", "key": "tea"})
        return await tools.acall("memory_forget", {"key": "tea"}), "done"

    assert ("Forgot 'tea'.", "done") == asyncio.run(main())
    assert store.get("tea") is None


def test_the_tools_see_a_scoped_forget(tmp_path: Path) -> None:
    assert _scoped(markdown(tmp_path).forget)


def test_another_sessions_tools_never_forget_its_row(tmp_path: Path) -> None:
    store = markdown(tmp_path)
    store.store("k", "alice's fact", "core", session_id="alice")
    bob = memory_tools(store, AGENT, sessions=["bob"])
    assert "No memory under 'k'." == bob.call("memory_forget", {"key": "k"})
    assert not store.forget("k", sessions=["bob"])
    assert not store.erase("k", sessions=["bob", None])
    row = store.get("k")
    assert row is not None
    assert ("alice's fact", "alice") == (row.content, row.session_id)


def test_shared_rows_are_the_hosts(tmp_path: Path) -> None:
    """As tests/storage/test_24_ownership.py on the other stores."""
    store = markdown(tmp_path)
    store.store("refund_policy", "Refunds within 30 days.", "core")
    opted = memory_tools(store, AGENT, shared_writes=True)
    said = opted.call("memory_forget", {"key": "refund_policy"})
    assert said.startswith("Error: That shared memory was written by the host")
    written = opted.call("memory_store", {"content": "Standup is at ten.", "key": "standup"})
    assert written.startswith("Remembered as")
    assert "Forgot 'standup'." == opted.call("memory_forget", {"key": "standup"})
    assert "Refunds within 30 days." == content(store, "refund_policy")
    trusted = memory_tools(store, AGENT, shared_writes=True, curated_writes=True)
    assert "Forgot 'refund_policy'." == trusted.call("memory_forget", {"key": "refund_policy"})
    assert store.get("refund_policy") is None


def test_forget_is_limited_to_the_scopes_it_is_given(tmp_path: Path) -> None:
    """As tests/storage/test_24_ownership.py on the other stores; a string is refused and
    the host's unscoped forget takes any row."""
    store = markdown(tmp_path)
    _forget_rules(lambda: store)
    with pytest.raises(TypeError):
        store.forget("s", sessions="alice")
    assert store.forget("s")


def test_erase_keeps_forgets_scope_rules(tmp_path: Path) -> None:
    """As tests/storage/test_30_erase.py on the other stores."""
    _erase_rules(lambda: markdown(tmp_path))


def test_a_forgotten_block_of_another_scope_stays_in_its_file(tmp_path: Path) -> None:
    """A block written forgotten (an import of a forgotten row): a scoped forget or erase
    of another scope leaves it; its own scope's erase removes it."""
    store = markdown(tmp_path)
    when = datetime(2026, 3, 1, tzinfo=UTC)
    store.upsert(MemoryRecord(key="old", content="gone", session_id="alice", deleted_at=when))
    assert not store.forget("old", sessions=["bob", None])
    assert not store.erase("old", sessions=["bob", None])
    assert "gone" in (tmp_path / "notes" / "MEMORY.md").read_text()
    assert not store.forget("old", sessions=["alice"])  # not live: nothing forgotten
    assert not store.erase("old", sessions=["alice"])  # the forget removed its block
    assert "gone" not in (tmp_path / "notes" / "MEMORY.md").read_text()


def test_a_row_written_between_the_look_and_the_forget_is_not_forgotten(
    tmp_path: Path,
) -> None:
    """The tools look at their own row; before their forget, the host forgets it and the
    victim writes under the key: the forget, limited to the tools' scope, leaves it."""
    store = markdown(tmp_path)
    store.store("k", "the attacker's own fact", "core", session_id="attacker")
    real_get = store.get

    def get_then_interleave(key: str) -> Any:
        found = real_get(key)
        store.forget(key)
        store.store(key, "the victim's fact", "core", session_id="victim")
        return found

    store.get = get_then_interleave  # type: ignore[method-assign]
    tools = memory_tools(store, AGENT, sessions=["attacker"])
    said = tools.call("memory_forget", {"key": "k"})
    store.get = real_get  # type: ignore[method-assign]
    assert "No memory under 'k'." == said
    row = store.get("k")
    assert row is not None
    assert ("the victim's fact", "victim") == (row.content, row.session_id)


def _stores(tmp_path: Path) -> dict[str, Callable[[], Any]]:
    return {
        "in_memory": InMemoryStore,
        "sqlite": lambda: SQLiteStore(tmp_path / "m.db"),
        "markdown": lambda: markdown(tmp_path),
    }


@pytest.mark.parametrize("op", ["forget", "erase"])
@pytest.mark.parametrize(("sessions", "sources"), SCOPES, ids=[repr(s) for s in SCOPES])
def test_every_scope_gives_what_the_other_stores_give(
    tmp_path: Path, op: str, sessions: list[str | None] | None, sources: list[str] | None
) -> None:
    """Each kind of row, each scope: the same answers and the same rows left as on
    ``InMemoryStore`` and ``SQLiteStore``."""
    got = {}
    for name, make in _stores(tmp_path).items():
        store = make()
        seed(store)
        answers = [getattr(store, op)(k, sessions=sessions, shared_sources=sources) for k in ROWS]
        got[name] = (answers, live(store))
        getattr(store, "close", lambda: None)()
    assert got["markdown"] == got["in_memory"] == got["sqlite"], got
