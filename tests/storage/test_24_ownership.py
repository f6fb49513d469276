"""Whose memory is it (issue 24): no write may replace, move or forget a row of another scope.

A row belongs to its scope: its namespace and session, or no session (the shared rows,
which are the host's). Every write path (the model's tools, ``remember``, autosave, the
host's ``store``) is tried against every kind of row another scope holds (another
session's, shared and curated, shared and model-written, autosaved), with hostile keys,
on every store, sync and async: the row never changes. Refusals are one line for the
model and change nothing.
"""

from __future__ import annotations

import asyncio
import io
import json
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig
from memory_inject.contract import SupportsJsonl, SupportsRecords
from memory_inject.exceptions import KeyOwnedError
from memory_inject.models import TurnOrigin
from memory_inject.policy import resolve_inject_policy
from memory_inject.storage.records import MemoryRecord

if TYPE_CHECKING:
    from adapters import _core
    from adapters.tools import aremember, memory_key, memory_tools, remember
else:
    from memory_inject.adapters import _core
    from memory_inject.adapters.tools import aremember, memory_key, memory_tools, remember

Factory = Callable[..., Any]
AGENT = AgentConfig(agent="alice")
KEYS = [
    "refund_policy",
    "%",
    "_",
    "' OR '1'='1",
    unicodedata.normalize("NFC", "caf\u00e9"),
    unicodedata.normalize("NFD", "caf\u00e9"),
    "k" * 3000,
]
#: (what the row is, its session, its category, its source)
KINDS = {
    "another_session": ("victim", "core", None),
    "shared_curated": (None, "core", None),
    "shared_model_written": (None, "core", "tool"),
    "autosaved": ("victim", "conversation", "autosave"),
}


def seed(store: Any, kind: str, key: str) -> Any:
    session, category, source = KINDS[kind]
    extra = {} if source is None else {"source": source}
    store.store(key, "the victim's own fact", category, session_id=session, **extra)
    return snapshot(store, key)


def snapshot(store: Any, key: str) -> tuple[Any, ...] | None:
    row = store.get(key)
    if row is None:
        return None
    return (row.content, row.session_id, str(row.category), row.source)


def attack(store: Any, path: str, key: str, mode: str) -> str:
    """One write of ``path`` from the attacker's scope under ``key``: ``"written"``, or
    what the refusal said."""
    said = _attack(store, path, key, mode)
    return "written" if said.startswith(("Remembered as", "Forgot ")) else said


def _attack(store: Any, path: str, key: str, mode: str) -> str:
    tools = memory_tools(store, AGENT, sessions=["attacker"])
    shared_tools = memory_tools(store, AGENT, shared_writes=True)
    run: Callable[[Any], Any] = (lambda c: c) if mode == "sync" else asyncio.run
    calls = {
        "tool_store": (tools, "memory_store", {"content": "the attacker's text", "key": key}),
        "tool_store_shared": (
            shared_tools,
            "memory_store",
            {"content": "the attacker's text", "key": key},
        ),
        "tool_forget": (tools, "memory_forget", {"key": key}),
        "tool_forget_shared": (shared_tools, "memory_forget", {"key": key}),
    }
    if path in calls:
        bound, name, args = calls[path]
        return str(bound.call(name, args) if mode == "sync" else run(bound.acall(name, args)))
    if path == "remember":
        kw: dict[str, Any] = {"key": key, "session_id": "attacker"}
        try:
            done = (
                remember(store, AGENT, "the attacker's text", **kw)
                if mode == "sync"
                else run(aremember(store, AGENT, "the attacker's text", **kw))
            )
        except ValueError as exc:  # remember's own argument checks (a 3,000-character key)
            return str(exc)
        return "written" if done.ok else str(done.error)
    if path == "autosave":
        policy = resolve_inject_policy(TurnOrigin.CHANNEL, has_session=True)
        save = _core.Save(key, "the attacker's message, long enough to be kept", "attacker")
        done = (
            _core.autosave(store, policy, save)
            if mode == "sync"
            else run(_core.aautosave(store, policy, save))
        )
        return "written" if done[0] else str(done[1])
    try:
        store.store(key, "the attacker's text", "core", session_id="attacker")
    except KeyOwnedError as exc:
        return str(exc)
    return "written"


PATHS = [
    "tool_store",
    "tool_store_shared",
    "tool_forget",
    "tool_forget_shared",
    "remember",
    "autosave",
    "host_store",
]


def _shared_model_row_may_change(kind: str, path: str) -> bool:
    """The one write the rule allows here: tools the host let write shared rows, on a
    shared row the tools wrote (a model-written shared fact is the model's to update)."""
    return kind == "shared_model_written" and path in ("tool_store_shared", "tool_forget_shared")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_no_write_path_changes_a_row_of_another_scope(
    store_factory: Factory, kind: str, path: str, mode: str
) -> None:
    store = store_factory()
    key = "refund_policy"
    before = seed(store, kind, key)
    said = attack(store, path, key, mode)
    after = snapshot(store, key)
    if _shared_model_row_may_change(kind, path):
        return
    assert (before, True) == (after, bool(said) and said != "written"), said


@pytest.mark.parametrize("key", KEYS, ids=[f"key{i}" for i in range(len(KEYS))])
def test_hostile_keys_of_another_session_stay_its_own(store_factory: Factory, key: str) -> None:
    store = store_factory()
    before = seed(store, "another_session", key)
    for path in ("tool_store", "tool_forget", "remember", "host_store"):
        attack(store, path, key, "sync")
    assert before == snapshot(store, key)


def test_the_same_fact_remembered_in_two_sessions_is_two_rows(store_factory: Factory) -> None:
    store = store_factory()
    one = remember(store, AGENT, "I prefer email over phone.", session_id="u1")
    two = remember(store, AGENT, "i prefer EMAIL   over phone.", session_id="u2")
    assert one.ok and two.ok and one.key != two.key
    assert ("u1", "u2") == (store.get(one.key).session_id, store.get(two.key).session_id)
    again = remember(store, AGENT, "I prefer email over phone!", session_id="u1")
    assert again.key != one.key  # other text, other key; the same text updates one row
    assert one.key == remember(store, AGENT, "i prefer email over phone.", session_id="u1").key


def test_a_fact_remembered_under_the_old_unscoped_key_is_updated_not_duplicated(
    store_factory: Factory,
) -> None:
    store = store_factory()
    legacy = memory_key("The deploy target is prod-3.")
    store.store(legacy, "The deploy target is prod-3.", "core", session_id="u1")
    done = remember(store, AGENT, "The deploy target is prod-3.", session_id="u1")
    assert (legacy, 1) == (done.key, store.count())


@pytest.mark.parametrize(
    "category",
    ["hard_rules", "scratchpad", "inquiry", "core\x00", "x" * 1_000_000, ""],
    ids=["hard_rules", "scratchpad", "inquiry", "nul", "huge", "empty"],
)
def test_the_tools_write_only_their_schemas_categories(
    store_factory: Factory, category: str
) -> None:
    store = store_factory()
    tools = memory_tools(store, AGENT, sessions=["u1"])
    said = tools.call("memory_store", {"content": "A fact.", "category": category})
    assert said.startswith("Error: 'category' must be")
    assert 0 == store.count()


@pytest.mark.parametrize("key", ["user_msg_1", "user_msg", "telegram:chat:1:2", "a\x01b"])
def test_the_tools_refuse_the_conversation_logs_keys(store_factory: Factory, key: str) -> None:
    store = store_factory()
    store.store(key, "an autosaved message", "conversation", session_id="u1", source="autosave")
    tools = memory_tools(store, AGENT, sessions=["u1"])
    said = tools.call("memory_store", {"content": "A fact.", "key": key})
    assert said.startswith("Error: keys starting with 'user_msg'")
    assert "an autosaved message" == store.get(key).content


def test_shared_rows_are_the_hosts(store_factory: Factory) -> None:
    """Sessionless tools cannot write shared rows unless the host opts in, and never replace
    or forget a curated one unless it opts in again; the model is told why in one line."""
    store = store_factory()
    store.store("refund_policy", "Refunds within 30 days.", "core")
    plain = memory_tools(store, AGENT)
    said = plain.call("memory_store", {"content": "Refunds any time.", "key": "refund_policy"})
    assert said.startswith("Error: This memory is shared by every user")
    assert said.count("\n") == 0
    opted = memory_tools(store, AGENT, shared_writes=True)
    said = opted.call("memory_store", {"content": "Refunds any time.", "key": "refund_policy"})
    assert said.startswith("Error: That shared memory was written by the host")
    said = opted.call("memory_forget", {"key": "refund_policy"})
    assert said.startswith("Error: That shared memory was written by the host")
    assert "Refunds within 30 days." == store.get("refund_policy").content
    written = opted.call("memory_store", {"content": "Standup is at ten.", "key": "standup"})
    assert written.startswith("Remembered as")
    assert "Forgot 'standup'." == opted.call("memory_forget", {"key": "standup"})
    trusted = memory_tools(store, AGENT, shared_writes=True, curated_writes=True)
    assert "Forgot 'refund_policy'." == trusted.call("memory_forget", {"key": "refund_policy"})


def test_forget_is_limited_to_the_scopes_it_is_given(store_factory: Factory) -> None:
    """The store's forget with ``sessions``: one statement, never another scope's row."""
    store = store_factory()
    store.store("a", "alice's", "core", session_id="alice")
    store.store("s", "shared curated", "core")
    store.store("t", "shared by a tool", "core", source="tool")
    assert not store.forget("a", sessions=["bob"])
    assert not store.forget("s", sessions=["bob", None], shared_sources=["tool"])
    assert not store.forget("t", sessions=["bob"])
    assert store.forget("t", sessions=[None], shared_sources=["tool"])
    assert store.forget("a", sessions=["alice"])
    assert (None, None, "shared curated") == (
        store.get("a"),
        store.get("t"),
        store.get("s").content,
    )


def test_host_store_into_another_scope_is_refused_and_a_move_is_explicit(
    store_factory: Factory,
) -> None:
    store = store_factory()
    store.store("k", "alice's fact", "core", session_id="alice")
    with pytest.raises(KeyOwnedError, match="belongs to another scope") as info:
        store.store("k", "bob's fact", "core", session_id="bob")
    assert "alice" not in str(info.value)  # the refusal never names the other scope
    assert ("alice's fact", "alice") == (store.get("k").content, store.get("k").session_id)
    store.forget("k")
    store.store("k", "bob's fact", "core", session_id="bob")  # a forgotten row is no one's
    assert "bob" == store.get("k").session_id


@pytest.mark.needs.with_args(SupportsJsonl)
def test_an_import_never_replaces_another_scopes_row(store_factory: Factory) -> None:
    """A line whose key another scope holds live is refused with its key; nothing of the
    batch is written; the same lines into their own scope import (a re-run is safe)."""
    store = store_factory()
    store.store("k", "alice's fact", "core", session_id="alice")
    lines = (
        json.dumps({"key": "new", "content": "a new fact", "session_id": "bob"})
        + "\n"
        + json.dumps({"key": "k", "content": "bob's fact", "session_id": "bob"})
        + "\n"
    )
    # A KeyOwnedError on every store (SQLite's import raised a plain ValueError) naming
    # the line.
    with pytest.raises(KeyOwnedError, match=r"line 2\)?: the key 'k' belongs to another scope"):
        store.import_jsonl(io.StringIO(lines))
    assert (None, "alice's fact") == (store.get("new"), store.get("k").content)
    mine = json.dumps({"key": "k", "content": "alice again", "session_id": "alice"}) + "\n"
    assert 1 == store.import_jsonl(io.StringIO(mine))
    assert "alice again" == store.get("k").content


@pytest.mark.needs.with_args(SupportsJsonl)
@pytest.mark.parametrize(("first", "then"), [(None, "s9"), ("alice", "bob"), ("alice", None)])
def test_one_import_never_moves_its_own_key_to_another_scope(
    store_factory: Factory, first: str | None, then: str | None
) -> None:
    """Two lines of one key in one batch, the second in another scope: the table was
    checked against the last line only, so the key was written and moved. A forgotten
    first line belongs to no one, and the same scope twice is an update."""
    store = store_factory()
    lines = [
        {"key": "a", "content": "shared fact", "session_id": first},
        {"key": "a", "content": "moved", "session_id": then},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    with pytest.raises(KeyOwnedError, match="'a' belongs to another scope"):
        store.import_jsonl(io.StringIO(text))
    assert store.get("a") is None
    lines[0]["session_id"] = then
    assert 2 == store.import_jsonl(io.StringIO("".join(json.dumps(x) + "\n" for x in lines)))
    assert ("moved", then) == (store.get("a").content, store.get("a").session_id)


def test_the_cli_add_and_import_never_replace_another_scopes_row(tmp_path: Any) -> None:
    """The CLI is a host write path too: ``add`` and ``import`` into a key another session
    holds stop with the refusal and change nothing."""
    from click.testing import CliRunner

    from memory_inject.cli import cli
    from memory_inject.storage.sqlite import SQLiteStore

    db = tmp_path / "m.db"
    with SQLiteStore(db) as store:
        store.store("k", "alice's fact", "core", session_id="alice")
    added = CliRunner().invoke(cli, ["add", "k", "bob's fact", "--session", "bob", "--db", str(db)])
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"key": "k", "content": "bob's", "session_id": "bob"}) + "\n")
    imported = CliRunner().invoke(cli, ["import", str(src), "--db", str(db)])
    with SQLiteStore(db) as store:
        row = store.get("k")
    assert (1, 1) == (added.exit_code, imported.exit_code)
    assert "belongs to another scope" in added.output
    assert "belongs to another scope" in imported.output
    assert row is not None
    assert ("alice's fact", "alice") == (row.content, row.session_id)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_row_written_between_the_look_and_the_forget_is_not_forgotten(
    store_factory: Factory, mode: str
) -> None:
    """The interleaving forced: the attacker's tools look at their own row, then (before
    the forget) that row goes and the victim writes under the key. The forget is one
    statement limited to the attacker's scope, so the victim's row stays."""
    store = store_factory()
    store.store("k", "the attacker's own fact", "core", session_id="attacker")
    real_get = store.get

    def get_then_interleave(key: str) -> Any:
        found = real_get(key)
        store.forget(key)  # the host's cleanup, then the victim's write, in between
        store.store(key, "the victim's fact", "core", session_id="victim")
        return found

    store.get = get_then_interleave
    tools = memory_tools(store, AGENT, sessions=["attacker"])
    said = (
        tools.call("memory_forget", {"key": "k"})
        if mode == "sync"
        else asyncio.run(tools.acall("memory_forget", {"key": "k"}))
    )
    store.get = real_get
    row = store.get("k")
    assert "No memory under 'k'." == said
    assert row is not None
    assert ("the victim's fact", "victim") == (row.content, row.session_id)


@pytest.mark.needs.with_args(SupportsRecords)
def test_an_upsert_refusal_names_the_upsert_on_every_engine(store_factory: Factory) -> None:
    """PostgreSQL said "store: the key ..." for an ``upsert()``; SQLite "upsert: ..."."""
    store = store_factory()
    store.store("k", "alice's fact", "core", session_id="alice")
    with pytest.raises(KeyOwnedError, match=r"^upsert: the key 'k' belongs to another scope"):
        store.upsert(MemoryRecord(key="k", content="bob's fact", session_id="bob"))
    assert "alice's fact" == store.get("k").content
