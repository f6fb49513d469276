"""Issue 27, item 11: zeroclaw's ``MemoryEntry`` fields and its ``none`` / ``markdown`` backends.

The stores are seeded from the seed's own examples (spec 7.2-7.4 and the
zeroclaw markdown backend's tests): a preference "User likes Rust", the
"Rust is fast" / "Python is slow" / "Rust and safety" recall trio.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import io
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import memory_inject
from memory_inject import (
    ConfigError,
    MemoryEntry,
    MemoryKind,
    MemoryRecall,
    RenderResult,
    StorageError,
    arender_memory_context,
    load_agent_config,
    open_store,
    render_memory_context,
)
from memory_inject.contract import RecallQuery
from memory_inject.exceptions import KeyOwnedError
from memory_inject.records import ENTRY_KEY, MemoryRecord
from memory_inject.storage import MarkdownStore, NoneStore
from memory_inject.storage import _markdown_writes as markdown_writes
from memory_inject.storage._jsonl import record_from_json
from memory_inject.storage.markdown import CORE_FILE, DAILY_DIR, markdown_score
from memory_inject.storage.none import NOTE
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage import _sqlite_schema as sqlite_schema

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

#: The seed's entry fields (spec 7.2) on its own example memory.
PREF_FIELDS: dict[str, Any] = {
    "kind": "semantic:preference",
    "pinned": True,
    "tenant_id": "acme",
    "agent_alias": "coder",
    "agent_id": "agent-7",
}


def seed(store: Any) -> None:
    """The seed's examples: a pinned preference, an episodic note and a procedure."""
    store.store("pref", "User likes Rust", "core", timestamp=T0, **PREF_FIELDS)
    store.store(
        "note",
        "Finished tests",
        "daily",
        timestamp=T0 + timedelta(minutes=1),
        kind=MemoryKind.EPISODIC,
    )
    store.store(
        "deploy",
        "Always run the migration before deploy",
        "core",
        timestamp=T0 + timedelta(minutes=2),
        kind="procedural",
        metadata={"owner": "ops"},
    )


def got(store: Any, key: str) -> MemoryRecord:
    """``store.get(key)``, which must be there."""
    record = store.get(key)
    assert isinstance(record, MemoryRecord), key
    return record


def recall_event(result: RenderResult) -> MemoryRecall:
    """The render's recall event (the turn was not skipped)."""
    assert isinstance(result.event, MemoryRecall)
    return result.event


def fields_of(entry: MemoryEntry | MemoryRecord) -> dict[str, Any]:
    """The five entry fields of an entry or a record."""
    return {name: getattr(entry, name) for name in PREF_FIELDS}


# -- the fields on the value types -------------------------------------------------------


class TestEntryFields:
    def test_positional_construction_is_unchanged(self) -> None:
        """The new fields come after the old ones, with zeroclaw's defaults."""
        entry = MemoryEntry("k", "c", "core", T0, "s1", 0.5, 0.7, "id-1", "ns", {"x": 1})
        assert (("id-1", "ns", {"x": 1}), dict.fromkeys(PREF_FIELDS) | {"pinned": False}) == (
            (entry.id, entry.namespace, entry.extra),
            fields_of(entry),
        )

    def test_kind_takes_its_serialisation_and_names_the_choices(self) -> None:
        """``semantic:fact`` is MemoryKind.SEMANTIC_FACT; an unknown kind lists the six."""
        entry = MemoryEntry("k", "c", "core", None, kind="semantic:fact")
        with pytest.raises(ValueError, match=r"'kind' must be one of 'episodic', .*'procedural'"):
            MemoryEntry("k", "c", "core", None, kind="semantic")
        assert (MemoryKind.SEMANTIC_FACT, "semantic:fact") == (entry.kind, str(entry.kind))

    @pytest.mark.parametrize(
        ("name", "value", "message"),
        [
            ("kind", 3, "'kind' must be a MemoryKind"),
            ("pinned", "yes", "'pinned' must be a bool"),
            ("tenant_id", 5, "'tenant_id' must be a string or None"),
            ("agent_alias", b"x", "'agent_alias' must be a string or None"),
            ("agent_id", 1.5, "'agent_id' must be a string or None"),
        ],
    )
    def test_a_bad_value_names_the_field(self, name: str, value: Any, message: str) -> None:
        """Entries and records refuse a wrong type, naming the field."""
        with pytest.raises(TypeError, match=re.escape(message)):
            MemoryEntry("k", "c", "core", None, **{name: value})
        with pytest.raises(TypeError, match=re.escape(message)):
            MemoryRecord(key="k", content="c", **{name: value})

    def test_the_kind_is_exported_from_the_package_root(self) -> None:
        """``from memory_inject import MemoryKind`` works and is in ``__all__``."""
        assert (True, ["episodic", "procedural"]) == (
            "MemoryKind" in memory_inject.__all__,
            [k.value for k in memory_inject.MemoryKind if ":" not in k.value],
        )

    def test_a_record_hands_its_fields_to_its_entry(self) -> None:
        """``to_entry`` carries the five fields; they are not in ``extra``."""
        entry = MemoryRecord(key="pref", content="User likes Rust", **PREF_FIELDS).to_entry(0.5)
        assert (PREF_FIELDS | {"kind": MemoryKind.SEMANTIC_PREFERENCE}, set()) == (
            fields_of(entry),
            set(PREF_FIELDS) & set(entry.extra),
        )

    def test_metadata_holding_the_packed_fields_unpacks_them(self) -> None:
        """A row's metadata ``_entry`` fills the fields and leaves the user's metadata alone."""
        record = MemoryRecord(key="pref", content="c", metadata={"x": 1, ENTRY_KEY: PREF_FIELDS})
        assert ({"x": 1}, PREF_FIELDS, {"x": 1, ENTRY_KEY: PREF_FIELDS}) == (
            record.metadata,
            {k: (str(v) if k == "kind" else v) for k, v in fields_of(record).items()},
            record.stored_metadata,
        )

    def test_a_field_given_wins_over_the_packed_one(self) -> None:
        """Only fields left at their default are filled from metadata."""
        record = MemoryRecord(
            key="k", content="c", agent_id="mine", metadata={ENTRY_KEY: {"agent_id": "theirs"}}
        )
        assert ("mine", None) == (record.agent_id, record.metadata)

    @pytest.mark.parametrize(
        ("packed", "message"),
        [
            ("pinned", "must be an object"),
            ({"colour": "red"}, "unknown fields: colour"),
            ({"pinned": 1}, "'pinned' must be a bool"),
            ({"tenant_id": 7}, "'tenant_id' must be a string or None"),
            ({"kind": "semantic"}, "'kind' must be one of"),
        ],
    )
    def test_bad_packed_fields_are_refused(self, packed: Any, message: str) -> None:
        """A hand-made ``_entry`` that is not the store's is a clear error."""
        with pytest.raises((TypeError, ValueError), match=re.escape(message)):
            MemoryRecord(key="k", content="c", metadata={ENTRY_KEY: packed})

    def test_an_empty_packed_entry_is_dropped(self) -> None:
        """``_entry: null`` leaves the defaults and no metadata behind."""
        record = MemoryRecord(key="k", content="c", metadata={ENTRY_KEY: None})
        assert (None, False) == (record.metadata, record.pinned)

    def test_defaults_store_nothing_extra(self) -> None:
        """A record at the defaults writes its metadata unchanged (no schema noise)."""
        assert (None, {"a": 1}) == (
            MemoryRecord(key="k", content="c").stored_metadata,
            MemoryRecord(key="k", content="c", metadata={"a": 1}).stored_metadata,
        )


# -- the fields through the SQL stores ----------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh SQLite or PostgreSQL store."""
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "m.db")
    else:
        from tests.storage._pg_backend import make_postgres_store

        store = make_postgres_store(request.getfixturevalue("pg_dsn"))
    try:
        yield store
    finally:
        store.close()


class TestSqlStores:
    def test_store_and_get_keep_the_fields(self, sql_store: Any) -> None:
        """What ``store`` wrote comes back from ``get`` with every field."""
        seed(sql_store)
        pref, note = sql_store.get("pref"), sql_store.get("note")
        assert (PREF_FIELDS | {"kind": MemoryKind.SEMANTIC_PREFERENCE}, MemoryKind.EPISODIC) == (
            fields_of(pref),
            note.kind,
        )

    def test_recall_returns_the_fields_sync_and_async(self, sql_store: Any) -> None:
        """Keyword and recent recall, sync and async, carry the fields; metadata stays mine."""
        seed(sql_store)

        async def both() -> tuple[Any, Any]:
            return await sql_store.arecall("rust", 5), await sql_store.arecall("*", 5)

        by_query, recent = asyncio.run(both())
        sync = sql_store.recall("rust", 5)
        want = PREF_FIELDS | {"kind": MemoryKind.SEMANTIC_PREFERENCE}
        deploy = next(e for e in recent if e.key == "deploy")
        assert (
            [want],
            [want],
            ["deploy", "note", "pref"],
            [MemoryKind.PROCEDURAL, MemoryKind.EPISODIC, MemoryKind.SEMANTIC_PREFERENCE],
            {"owner": "ops"},
        ) == (
            [fields_of(e) for e in sync],
            [fields_of(e) for e in by_query],
            [e.key for e in recent],
            [e.kind for e in recent],
            deploy.extra["metadata"],
        )

    def test_an_update_back_to_the_defaults_sticks(self, sql_store: Any) -> None:
        """Unpinning a pinned memory is stored (the packed copy does not come back)."""
        seed(sql_store)
        sql_store.upsert(sql_store.get("pref").evolve(pinned=False, kind=None))
        got = sql_store.get("pref")
        assert (False, None, "acme") == (got.pinned, got.kind, got.tenant_id)

    def test_the_fields_live_in_the_metadata_column(self, tmp_path: Path) -> None:
        """SQLite keeps the fields in ``metadata`` (no new column, no migration)."""
        with SQLiteStore(tmp_path / "m.db") as store:
            seed(store)
            raw = store._engine.connections.read(
                lambda c: c.execute("SELECT metadata FROM memories WHERE key = 'pref'").fetchone(),
                "raw",
            )
            columns = store._engine.connections.read(
                lambda c: [r[1] for r in c.execute("PRAGMA table_info(memories)")], "columns"
            )
        assert (PREF_FIELDS, set()) == (
            json.loads(raw[0])[ENTRY_KEY],
            set(PREF_FIELDS) & set(columns),
        )

    def test_the_fast_entry_path_matches_the_record_path(self, tmp_path: Path) -> None:
        """Recall's row decoder builds the same entry as ``row_to_record(...).to_entry``."""
        with SQLiteStore(tmp_path / "m.db") as store:
            seed(store)
            full = store._engine.connections.read(
                lambda c: c.execute(
                    f"SELECT {sqlite_schema.SELECT} FROM memories WHERE key = 'pref'"
                ).fetchone(),
                "full",
            )
            short = store._engine.connections.read(
                lambda c: sqlite_schema.fetch_entries(c, "default", "key = 'pref'", ())[0], "short"
            )
        fast = sqlite_schema.row_to_entry(short, 0.5)
        slow = sqlite_schema.row_to_record(full).to_entry(0.5)
        assert (fast, fast.extra, PREF_FIELDS["agent_id"]) == (slow, slow.extra, fast.agent_id)

    def test_a_damaged_packed_field_costs_the_fields_not_the_recall(self, tmp_path: Path) -> None:
        """A hand-edited ``_entry`` reads as the defaults, keeps the rest, and is reported."""
        with SQLiteStore(tmp_path / "m.db") as store:
            seed(store)
            bad = json.dumps({"owner": "ops", ENTRY_KEY: {"kind": "bogus"}})
            store._engine.write(
                lambda c: c.execute(
                    "UPDATE memories SET metadata = ? WHERE key = 'deploy'", (bad,)
                ),
                "damage",
            )
            answer = store.answer(RecallQuery("migration", 5))
        [entry] = answer.entries
        assert (None, {"owner": "ops"}, True) == (
            entry.kind,
            entry.extra["metadata"],
            any("deploy" in line for line in answer.degraded),
        )


class TestJsonl:
    def test_export_import_round_trips_the_fields(self, tmp_path: Path, pg_dsn: str) -> None:
        """SQLite -> JSONL -> PostgreSQL -> JSONL keeps the fields, as top-level keys."""
        from tests.storage._pg_backend import make_postgres_store

        first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        with SQLiteStore(tmp_path / "m.db") as src:
            seed(src)
            src.export_jsonl(first)
            want = src.get("pref")
        pg = make_postgres_store(pg_dsn)
        try:
            pg.import_jsonl(first)
            pg.export_jsonl(second)
            got = pg.get("pref")
        finally:
            pg.close()
        line = next(json.loads(x) for x in second.read_text().splitlines() if '"pref"' in x)
        assert (want, PREF_FIELDS, {"owner": "ops"}) == (
            got,
            {k: line[k] for k in PREF_FIELDS},
            next(
                json.loads(x)["metadata"] for x in first.read_text().splitlines() if '"deploy"' in x
            ),
        )

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("pinned", "yes", "'pinned' must be true or false"),
            ("kind", "semantic", "'kind' must be one of"),
            ("kind", 3, "'kind' must be a string or null"),
            ("agent_id", 7, "'agent_id' must be a string or null"),
        ],
    )
    def test_a_bad_field_in_a_line_is_named(
        self, tmp_path: Path, field: str, value: Any, message: str
    ) -> None:
        """An import names the line and the field."""
        line = json.dumps({"key": "k", "content": "c", field: value})
        with (
            SQLiteStore(tmp_path / "m.db") as store,
            pytest.raises(ValueError, match=rf"line 1: {re.escape(message)}"),
        ):
            store.import_jsonl(io.StringIO(line + "\n"))

    def test_a_line_without_the_fields_gets_the_defaults(self) -> None:
        """An export written before the fields existed still imports."""
        record = record_from_json({"key": "k", "content": "c"})
        assert dict.fromkeys(PREF_FIELDS) | {"pinned": False} == fields_of(record)


# -- the markdown backend ------------------------------------------------------------------

#: Contract tests that apply to the markdown store, with their parameters. Left out, and
#: why: usage counters (``mark_used``), JSONL import/export and vectors (the store has none
#: of them), ``test_scores_are_in_unit_range_best_first`` and
#: ``test_stemming_matches_word_forms`` (zeroclaw's markdown score is the share of query
#: tokens found as substrings: both rows hold "postgres" and score 1.0, and "publishing"
#: is no substring of "published").
CONTRACT: list[tuple[str, dict[str, str]]] = [
    ("TestWrites.test_store_then_get", {}),
    ("TestWrites.test_store_sets_the_given_fields", {}),
    ("TestWrites.test_store_rejects_an_unknown_field", {}),
    ("TestWrites.test_store_same_key_updates_in_place", {}),
    ("TestWrites.test_upsert_writes_every_field", {}),
    ("TestWrites.test_upsert_refuses_another_namespace", {}),
    ("TestWrites.test_get_missing_is_none", {}),
    ("TestWrites.test_forget_hides_the_row", {}),
    ("TestWrites.test_forget_twice_is_false", {}),
    ("TestWrites.test_store_revives_a_forgotten_key", {}),
    ("TestWrites.test_list_is_newest_first_and_filters", {}),
    ("TestWrites.test_name_is_the_backend", {}),
    ("TestNamespaces.test_same_key_in_two_namespaces", {}),
    ("TestNamespaces.test_recall_sees_only_its_namespace", {}),
    ("TestSupersede.test_supersede_links_both_rows", {}),
    ("TestSupersede.test_superseded_row_is_never_recalled", {}),
    ("TestSupersede.test_supersede_unknown_key", {}),
    *[
        ("TestRecallContract.test_time_only_is_newest_first_without_score", {"query": q})
        for q in ["", "   ", "*", " * "]
    ],
    ("TestRecallContract.test_session_filter_never_crosses_sessions", {}),
    ("TestRecallContract.test_strict_session_filter_when_nothing_is_shared", {}),
    *[
        ("TestRecallContract.test_since_until_are_inclusive", {"query": q})
        for q in ["*", "meeting"]
    ],
    ("TestRecallContract.test_expired_rows_never_come_back", {}),
    ("TestRecallContract.test_status_is_not_filtered", {}),
    *[
        ("TestRecallContract.test_punctuation_heavy_prompts_still_match", {"prompt": p})
        for p in [
            "What's the server? (prod/staging)",
            "server: prod, staging -- which?",
            'the "server" AND NOT (prod*',
            "how should the server work?",
        ]
    ],
    ("TestRecallContract.test_entries_carry_the_record", {}),
    ("TestRecallContract.test_limit_is_respected", {}),
    ("TestRecallContract.test_no_match_is_empty", {}),
    ("TestAsync.test_arecall_matches_recall", {}),
]


def _contract_suite(config: pytest.Config) -> Any:
    """``tests/storage/test_contract.py``, whose ``needs`` marker its conftest registers."""
    config.addinivalue_line(
        "markers", "needs(*protocols): run only on stores that have these capabilities"
    )
    return importlib.import_module("tests.storage.test_contract")


def markdown_factory(tmp_path: Path) -> Callable[..., MarkdownStore]:
    """``store_factory`` for the contract suite: a fresh folder per store."""
    made = iter(range(10_000))

    def factory(same_database_as: MarkdownStore | None = None, **kwargs: Any) -> MarkdownStore:
        if same_database_as is not None:
            return MarkdownStore(same_database_as.path, **kwargs)
        return MarkdownStore(tmp_path / f"agent{next(made)}", **kwargs)

    return factory


class TestMarkdownContract:
    @pytest.mark.parametrize(
        ("name", "params"), CONTRACT, ids=[f"{n}{p}" if p else n for n, p in CONTRACT]
    )
    def test_the_contract_suite_passes(
        self, name: str, params: dict[str, str], tmp_path: Path, pytestconfig: pytest.Config
    ) -> None:
        """Each contract test that applies to the markdown store passes on it."""
        cls, method = name.split(".")
        test = getattr(getattr(_contract_suite(pytestconfig), cls)(), method)
        given = {"store_factory": markdown_factory(tmp_path), "backend": "markdown"}
        given |= {"tmp_path": tmp_path, **params}
        test(**{k: given[k] for k in inspect.signature(test).parameters})


@pytest.fixture
def md(tmp_path: Path) -> MarkdownStore:
    """A markdown store in a fresh folder."""
    return MarkdownStore(tmp_path / "agent")


class TestMarkdownScoring:
    """Spec 7.4: the share of lowercase query tokens found as substrings of the content."""

    @pytest.fixture
    def trio(self, md: MarkdownStore) -> MarkdownStore:
        """zeroclaw's own recall examples."""
        md.store("a", "Rust is fast", timestamp=T0)
        md.store("b", "Python is slow", timestamp=T0 + timedelta(minutes=1))
        md.store("c", "Rust and safety", timestamp=T0 + timedelta(minutes=2))
        return md

    def test_the_share_of_tokens_found(self, trio: MarkdownStore) -> None:
        """'rust safety': c holds both (1.0), a one (0.5), b none (dropped)."""
        got = trio.recall("Rust SAFETY", 10)
        assert [("c", 1.0), ("a", 0.5)] == [(e.key, e.score) for e in got]

    def test_a_token_matches_inside_a_word_and_repeats_count(self, trio: MarkdownStore) -> None:
        """'saf' is a substring of 'safety'; a repeated token counts each time."""
        assert ([("c", 1.0)], [("a", 1.0), ("c", pytest.approx(2 / 3))]) == (
            [(e.key, e.score) for e in trio.recall("saf", 10)],
            [(e.key, e.score) for e in trio.recall("rust rust fast", 10)],
        )

    def test_ties_are_newest_first_and_no_match_is_empty(self, trio: MarkdownStore) -> None:
        """Both Rust rows score 1.0 for 'rust'; the newer comes first; 'javascript' finds none."""
        assert (["c", "a"], []) == (
            [e.key for e in trio.recall("rust", 10)],
            trio.recall("javascript", 10),
        )

    def test_only_the_content_is_scored(self, md: MarkdownStore) -> None:
        """A key that matches the query does not make a hit (zeroclaw scores content only)."""
        md.store("rust-notes", "Python is slow")
        assert [] == md.recall("rust", 5)

    def test_the_score_function(self) -> None:
        """An empty query scores 0; case is ignored on both sides."""
        assert (0.0, 1.0, 0.5) == (
            markdown_score("   ", "anything"),
            markdown_score("RUST", "rust"),
            markdown_score("rust go", "Rust"),
        )

    def test_a_session_sees_no_other_sessions_conversation(self, md: MarkdownStore) -> None:
        """Unlike zeroclaw's markdown, a session id scopes recall (nothing leaks)."""
        md.store("mine", "deploy notes one", "conversation", session_id="one")
        md.store("theirs", "deploy notes two", "conversation", session_id="two")
        assert ["mine"] == [e.key for e in md.recall("deploy", 5, session_id="one")]


class TestMarkdownFiles:
    def test_the_layout_is_zeroclaws(self, md: MarkdownStore) -> None:
        """Core memories go to MEMORY.md; the others to memory/<day of their timestamp>.md."""
        seed(md)
        md.store("chat", "We talked about lunch", "conversation", timestamp=T0 + timedelta(days=1))
        root = Path(md.path)
        core = (root / CORE_FILE).read_text()
        assert (
            True,
            True,
            ["2026-03-01.md", "2026-03-02.md"],
            True,
        ) == (
            core.startswith("# Long-Term Memory\n\n## pref\n"),
            "> User likes Rust\n" in core and "> Always run the migration" in core,
            sorted(p.name for p in (root / DAILY_DIR).iterdir()),
            "> We talked about lunch\n" in (root / DAILY_DIR / "2026-03-02.md").read_text(),
        )

    @pytest.mark.parametrize("saved", ["crlf", "bom", "both"])
    def test_a_file_saved_with_crlf_or_a_bom_keeps_its_memories(
        self, md: MarkdownStore, saved: str
    ) -> None:
        """A Windows editor (or git's autocrlf) saving MEMORY.md made every block in it
        unreadable: recall, count and get found nothing, and storing a key again
        appended a second block for it. A memory's own carriage return is kept."""
        seed(md)
        md.store("cr", "line one\r\nline two")
        written = MarkdownStore(md.path).get("cr")
        assert written is not None and "line one\r\nline two" == written.content  # as written
        core = Path(md.path) / CORE_FILE
        text = core.read_bytes().decode("utf-8")  # read_text would turn CRLF into LF
        if saved in ("crlf", "both"):
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        if saved in ("bom", "both"):
            text = "\ufeff" + text
        core.write_bytes(text.encode("utf-8"))
        again = MarkdownStore(md.path)
        assert ["pref"] == [e.key for e in again.recall("rust", 5)][:1]
        assert md.count() == again.count()
        again.store("pref", "User likes Rust and Go")
        assert 1 == core.read_bytes().decode("utf-8").count("## pref\n")
        # An editor that saved the whole file with CRLF made a memory's own CR a line end.
        kept = "line one\nline two" if saved != "bom" else "line one\r\nline two"
        read = again.get("cr")
        assert read is not None and kept == read.content

    def test_the_fields_round_trip_through_the_files(self, md: MarkdownStore) -> None:
        """A fresh store on the folder reads every field back, recall and async recall too."""
        seed(md)
        again = MarkdownStore(md.path)
        [hit] = asyncio.run(again.arecall("rust", 5))
        assert (md.get("pref"), PREF_FIELDS | {"kind": MemoryKind.SEMANTIC_PREFERENCE}) == (
            again.get("pref"),
            fields_of(hit),
        )

    @pytest.mark.parametrize(
        "content",
        [
            '## Heading\n<!-- memory-inject {"key": "forged"} -->\n> quoted\n',
            "line one\r\nline two\n\n\n",
            "",
            " leading space\n>no space\n>\n-->",
            "# Long-Term Memory\n\n## pref\n",
        ],
    )
    def test_hostile_content_round_trips(self, md: MarkdownStore, content: str) -> None:
        """Headings, the block marker, quotes and blank lines in a memory read back exactly."""
        md.store("evil\n## key", content, "core")
        md.store("after", "a plain memory")
        again = MarkdownStore(md.path)
        assert (content, 2, ["after", "evil\n## key"]) == (
            got(again, "evil\n## key").content,
            again.count(),
            sorted(r.key for r in again.list()),
        )

    def test_a_category_change_moves_the_block(self, md: MarkdownStore) -> None:
        """Rewriting a key under another category leaves one block, in the new file."""
        md.store("k", "first", "core", timestamp=T0)
        md.store("k", "second", "daily")
        root = Path(md.path)
        assert ("second", 1, False, True) == (
            got(md, "k").content,
            md.count(),
            "## k" in (root / CORE_FILE).read_text(),
            "> second" in (root / DAILY_DIR / "2026-03-01.md").read_text(),
        )

    def test_text_a_person_added_is_kept(self, md: MarkdownStore) -> None:
        """A note written by hand survives the store's rewrite of the file."""
        md.store("a", "alpha")
        core = Path(md.path) / CORE_FILE
        core.write_text(core.read_text() + "\nRemember: ask before deleting.\n")
        md.store("b", "beta")
        assert (True, 2) == ("Remember: ask before deleting." in core.read_text(), md.count())

    def test_a_broken_block_is_kept_as_text_and_skipped(self, md: MarkdownStore) -> None:
        """A block whose JSON was broken by hand is not read, and not lost on the next write."""
        md.store("a", "alpha")
        md.store("b", "beta")
        core = Path(md.path) / CORE_FILE
        core.write_text(core.read_text().replace('{"key": "a"', '{"key": "a",,', 1))
        md.store("c", "gamma")
        assert (["b", "c"], True) == (
            sorted(r.key for r in md.list()),
            '{"key": "a",,' in core.read_text() and "> alpha" in core.read_text(),
        )

    def test_a_non_object_comment_is_a_broken_block(self, md: MarkdownStore) -> None:
        """A block comment holding a JSON list is not a memory."""
        core = Path(md.path) / CORE_FILE
        core.parent.mkdir(parents=True)
        core.write_text("## x\n<!-- memory-inject [1] -->\n> text\n")
        assert 0 == md.count()

    def test_writes_leave_no_temporary_files(self, md: MarkdownStore) -> None:
        """Atomic replace: after the writes only the memory files and the lock remain."""
        seed(md)
        md.forget("note")
        root = Path(md.path)
        assert ([".lock", CORE_FILE, DAILY_DIR], ["2026-03-01.md"]) == (
            sorted(p.name for p in root.iterdir()),
            sorted(p.name for p in (root / DAILY_DIR).iterdir()),
        )

    def test_concurrent_writers_lose_nothing(self, tmp_path: Path) -> None:
        """Eight threads on two store objects for one folder: every write is there."""
        stores = [MarkdownStore(tmp_path / "agent"), MarkdownStore(tmp_path / "agent")]
        errors: list[BaseException] = []

        def write(n: int) -> None:
            try:
                for i in range(15):
                    category = "core" if i % 2 else "daily"
                    stores[n % 2].store(f"t{n}-{i}", f"memory {n} {i}", category)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert ([], 120) == (errors, MarkdownStore(tmp_path / "agent").count())

    def test_a_failed_write_keeps_the_old_file(
        self, md: MarkdownStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When the replace fails the file is as before and no temporary file is left."""
        md.store("a", "alpha")
        core = Path(md.path) / CORE_FILE
        before = core.read_text()

        def fail(src: str, dst: Any) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(os, "replace", fail)
        with pytest.raises(StorageError, match=f"{CORE_FILE}: store: disk full"):
            md.store("b", "beta")
        monkeypatch.undo()
        assert (before, [".lock", CORE_FILE], 1) == (
            core.read_text(),
            sorted(p.name for p in Path(md.path).iterdir()),
            md.count(),
        )

    def test_without_fcntl_the_process_lock_still_serialises(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Where ``fcntl`` is missing (Windows) threads still lose nothing."""
        monkeypatch.setattr(markdown_writes, "fcntl", None)
        store = MarkdownStore(tmp_path / "agent")
        threads = [
            threading.Thread(target=store.store, args=(f"k{n}", f"memory {n}")) for n in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 6 == store.count()

    def test_a_file_that_is_not_utf8_is_a_storage_error(self, md: MarkdownStore) -> None:
        """The store refuses to read (and so to rewrite) a file it cannot decode."""
        core = Path(md.path) / CORE_FILE
        core.parent.mkdir(parents=True)
        core.write_bytes(b"# Long-Term Memory\n\xff\xfe\n")
        with pytest.raises(StorageError, match="not UTF-8"):
            md.recall("*", 5)

    def test_a_file_path_is_refused(self, tmp_path: Path) -> None:
        """The markdown backend needs a folder."""
        (tmp_path / "memory.db").write_text("")
        with pytest.raises(ValueError, match="must be a folder"):
            MarkdownStore(tmp_path / "memory.db")

    def test_a_reader_of_a_missing_folder_finds_nothing(self, tmp_path: Path) -> None:
        """Nothing is created until the first write."""
        store = MarkdownStore(tmp_path / "later")
        assert ([], 0, False) == (
            store.recall("*", 5),
            store.count(),
            (tmp_path / "later").exists(),
        )


class TestHandWrittenBlocks:
    def test_a_block_without_a_timestamp_belongs_to_its_files_day(self, md: MarkdownStore) -> None:
        """Its time was the time of each read: always "today", always new (a helper's find).
        A daily file's block is of that day; a MEMORY.md block of the file's last change."""
        root = Path(md.path)
        (root / DAILY_DIR).mkdir(parents=True)
        (root / DAILY_DIR / "2026-03-01.md").write_text(
            "# Daily Log\n\n## standup\n"
            '<!-- memory-inject {"key": "standup", "category": "daily"} -->\n'
            "> We agreed to freeze the billing schema.\n"
        )
        (root / CORE_FILE).write_text(
            "# Long-Term Memory\n\n## tz\n"
            '<!-- memory-inject {"key": "tz", "category": "core"} -->\n'
            "> The team works in CET.\n"
        )
        first, again = md.get("standup"), md.get("standup")
        assert first is not None and again is not None
        assert first.timestamp == again.timestamp == datetime(2026, 3, 1, tzinfo=UTC)
        core = md.get("tz")
        assert core is not None
        changed = datetime.fromtimestamp((root / CORE_FILE).stat().st_mtime, UTC)
        assert core.timestamp == changed

    def test_a_folder_in_a_files_place_is_a_storage_error(self, md: MarkdownStore) -> None:
        """A folder named MEMORY.md hid every core memory behind a successful, empty
        render, and a write raised a bare ``IsADirectoryError`` (a helper's find)."""
        root = Path(md.path)
        (root / CORE_FILE).mkdir(parents=True)
        result = render_memory_context(md, "what do I like?")
        assert isinstance(result.event, MemoryRecall)
        assert not result.event.success
        assert "MEMORY.md: not a file" in (result.event.error or "")
        with pytest.raises(StorageError, match=r"MEMORY\.md: not a file"):
            md.store("pref", "User likes Rust", "core")


class TestMarkdownWrites:
    def test_a_key_of_another_session_is_refused(self, md: MarkdownStore) -> None:
        """As on every store, a write never takes another scope's live memory."""
        md.store("k", "mine", session_id="one")
        with pytest.raises(KeyOwnedError):
            md.store("k", "theirs", session_id="two")
        with pytest.raises(KeyOwnedError):
            md.upsert(MemoryRecord(key="k", content="theirs", session_id="two"))
        md.upsert(MemoryRecord(key="k", content="moved", session_id="two"), move=True)
        assert ("moved", "two") == (got(md, "k").content, got(md, "k").session_id)

    def test_supersede_checks(self, md: MarkdownStore) -> None:
        """Superseding itself is a ValueError; a record that is not one is a TypeError."""
        md.store("a", "alpha")
        with pytest.raises(ValueError, match="cannot supersede itself"):
            md.supersede("a", MemoryRecord(key="a", content="x"))
        with pytest.raises(TypeError, match="must be a MemoryRecord"):
            md.upsert("a")  # type: ignore[arg-type]

    def test_astore_writes_like_store(self, md: MarkdownStore) -> None:
        """The async write lands in the files with its fields."""
        asyncio.run(md.astore("pref", "User likes Rust", **PREF_FIELDS))
        assert PREF_FIELDS["agent_id"] == got(MarkdownStore(md.path), "pref").agent_id

    def test_a_forgotten_tombstone_is_not_counted(self, md: MarkdownStore) -> None:
        """A record upserted already forgotten is invisible, and forgetting it says False."""
        md.upsert(MemoryRecord(key="gone", content="x", deleted_at=T0))
        assert (None, 0, False) == (md.get("gone"), md.count(), md.forget("gone"))

    def test_the_memory_renders_into_a_turn(self, md: MarkdownStore) -> None:
        """End to end: a markdown memory reaches the rendered block."""
        seed(md)
        result = render_memory_context(md, "does the user like rust?")
        assert (True, "markdown") == (
            "User likes Rust" in result.text,
            recall_event(result).backend,
        )


# -- open_store and the YAML --------------------------------------------------------------


def agent_file(tmp_path: Path, backend: str) -> Path:
    """An agent file with this ``memory.backend`` flow mapping."""
    path = tmp_path / "agents" / "alice.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"agent: alice\nmemory:\n  backend: {backend}\n")
    return path


class TestNoneBackend:
    def test_none_from_yaml_recalls_nothing_and_says_why(self, tmp_path: Path) -> None:
        """``kind: none``: the turn has no block, a success, and the event names the backend."""
        store = open_store(load_agent_config(agent_file(tmp_path, "{kind: none}")))
        result = render_memory_context(store, "does the user like rust?")
        later = asyncio.run(arender_memory_context(store, "does the user like rust?"))
        assert (True, "", True, "none", (NOTE,), (NOTE,)) == (
            isinstance(store, NoneStore),
            result.text,
            result.success,
            recall_event(result).backend,
            recall_event(result).degraded,
            recall_event(later).degraded,
        )

    def test_writes_are_checked_then_dropped(self) -> None:
        """A write returns the record it would have been and keeps nothing; bad fields raise."""
        store = NoneStore()
        written = store.store("pref", "User likes Rust", **PREF_FIELDS)
        later = asyncio.run(store.astore("note", "Finished tests", "daily"))
        with pytest.raises(TypeError, match="colour"):
            store.store("k", "v", colour="blue")
        assert (True, "note", None, False, [], 0, [], []) == (
            written.pinned,
            later.key,
            store.get("pref"),
            store.forget("pref"),
            store.list(),
            store.count(),
            store.recall("rust", 5),
            asyncio.run(store.arecall("*", 5)),
        )

    def test_a_semantic_plan_query_gets_no_note(self) -> None:
        """The note rides on the turn's plain query only (a semantic note reads as a failure)."""
        store = NoneStore()
        store.close()
        assert ((), "none", "NoneStore()") == (
            store.answer(RecallQuery("rust", 5, mode="semantic")).degraded,
            asyncio.run(store.aanswer(RecallQuery("rust", 5))).strategy,
            repr(store),
        )


class TestMarkdownBackend:
    def test_markdown_from_yaml_uses_a_folder_beside_the_agent_file(self, tmp_path: Path) -> None:
        """``kind: markdown`` with a path opens that folder, relative to the agent file."""
        store = open_store(load_agent_config(agent_file(tmp_path, "{kind: markdown, path: notes}")))
        assert isinstance(store, MarkdownStore)
        store.store("pref", "User likes Rust")
        store.close()
        assert (True, "MarkdownStore") == (
            (tmp_path / "agents" / "notes" / CORE_FILE).is_file(),
            repr(store).split("(")[0],
        )

    def test_the_default_path_gives_the_memory_folder(self, tmp_path: Path) -> None:
        """Left at the SQLite default, the markdown folder is ``.memory`` beside the agent file."""
        store = open_store(load_agent_config(agent_file(tmp_path, "{kind: markdown}")))
        assert isinstance(store, MarkdownStore)
        assert (str(tmp_path / "agents" / ".memory"), "default") == (store.path, store.namespace)

    def test_an_unknown_kind_names_the_file_the_key_and_the_choices(self, tmp_path: Path) -> None:
        """zeroclaw falls back to markdown with a warning; we refuse, naming file and key."""
        path = agent_file(tmp_path, "{kind: qdrant}")
        with pytest.raises(ConfigError) as info:
            load_agent_config(path)
        message = str(info.value)
        assert (True, True, True) == (
            str(path) in message,
            "'kind' must be one of" in message and "'markdown', 'none'" in message,
            "$.memory.backend" in message,
        )


class TestDocs:
    def test_the_capability_table_lists_the_new_stores(self) -> None:
        """docs/storage.md's markdown and none columns say exactly what the classes have."""
        from tests.storage._capabilities import CAPABILITIES, provides

        text = (ROOT / "docs" / "storage.md").read_text(encoding="utf-8")
        row = re.compile(r"^\| `(Supports\w+)` \|(?:[^|]*\|){4}([^|]*)\|([^|]*)\|", re.MULTILINE)
        documented = {
            m[1]: (m[2].strip() == "yes", m[3].strip() == "yes") for m in row.finditer(text)
        }
        actual = {
            name: (provides(MarkdownStore, proto), provides(NoneStore, proto))
            for name, proto in CAPABILITIES.items()
        }
        assert actual == documented
