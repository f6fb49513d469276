"""founder-os as its users know it (issue 12): its own memory.db imported, its agent rendered.

The store is seeded from seed 003's own examples: a real founder-os
``.memory/memory.db`` is built with the schema of its ``memory-store.sql``
(spec section 2.2), holding the injection skill's five example memories plus
the rows its bugs are about (candidates that filled the company query,
dismissed, expired and soft-deleted rows, a 30-day-old hit). It is imported
with ``memory-inject import`` semantics and rendered with the shipped
``config/agents/founder-os.yaml``, sync and async, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_inject import arender_memory_context, load_agent_config, render_memory_context
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.founder_os import import_founder_os, is_founder_os_db, read_founder_os
from memory_inject.storage.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "config" / "agents" / "founder-os.yaml"
NOW = datetime(2026, 3, 11, 9, 0, tzinfo=UTC)
ACME = "1f3a9c2e7b8d4e5fa0b1c2d3e4f5a6b7"  # a Notion Companies page id
NALU = "9e8d7c6b5a4f4e3d2c1b0a9f8e7d6c5b"

# founder-os's memory-store.sql, as spec section 2.2 describes it (tables, checks, indexes).
FOUNDER_OS_SCHEMA = """
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY DEFAULT (lower(hex(randomblob(16)))),
    key TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL
        CHECK (category IN ('preference', 'pattern', 'fact', 'contact', 'workflow')),
    content TEXT NOT NULL,
    source_plugin TEXT,
    confidence INTEGER DEFAULT 0 CHECK (confidence >= 0 AND confidence <= 100),
    status TEXT DEFAULT 'candidate'
        CHECK (status IN ('candidate', 'confirmed', 'applied', 'dismissed')),
    company_id TEXT,
    tags TEXT,
    embedding TEXT,
    times_used INTEGER DEFAULT 0,
    times_confirmed INTEGER DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_used_at INTEGER,
    expires_at INTEGER,
    notion_page_id TEXT,
    last_synced_at INTEGER,
    deleted_at INTEGER
);
CREATE TABLE IF NOT EXISTS observations (
    id TEXT PRIMARY KEY, plugin TEXT NOT NULL, action TEXT NOT NULL, context TEXT,
    observed_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS adaptations (
    id TEXT PRIMARY KEY, memory_id TEXT REFERENCES memories(id), plugin TEXT NOT NULL,
    description TEXT NOT NULL, applied_at INTEGER NOT NULL, reverted_at INTEGER
);
CREATE INDEX IF NOT EXISTS idx_memories_category ON memories(category);
CREATE INDEX IF NOT EXISTS idx_memories_status ON memories(status);
CREATE INDEX IF NOT EXISTS idx_memories_company_id ON memories(company_id)
    WHERE company_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_memories_category_status ON memories(category, status);
CREATE INDEX IF NOT EXISTS idx_memories_expires_at ON memories(expires_at)
    WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_memories_last_used_at ON memories(last_used_at)
    WHERE last_used_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_memories_source_plugin ON memories(source_plugin)
    WHERE source_plugin IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_observations_plugin ON observations(plugin);
CREATE INDEX IF NOT EXISTS idx_observations_plugin_time ON observations(plugin, observed_at);
CREATE INDEX IF NOT EXISTS idx_adaptations_memory_id ON adaptations(memory_id)
    WHERE memory_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_adaptations_active ON adaptations(plugin, reverted_at)
    WHERE reverted_at IS NULL;
"""


def unix(days_ago: float) -> int:
    return int((NOW - timedelta(days=days_ago)).timestamp())


# (key, category, content, source_plugin, confidence, status, company_id, days old, extra)
SEED_ROWS: list[tuple[str, str, str, str | None, int, str, str | None, float, dict[str, Any]]] = [
    # The skill's own example block (Step 4), with the plugins and companies it names.
    (
        "pref-archive-newsletters",
        "preference",
        "Always archive newsletters after drafting.",
        "P02",
        85,
        "confirmed",
        None,
        3,
        {},
    ),
    (
        "acme-net30",
        "fact",
        "Acme Corp pays invoices on net-30 terms.",
        "User",
        90,
        "applied",
        ACME,
        40,
        {"times_confirmed": 4},
    ),
    (
        "acme-billing-contact",
        "contact",
        "Sarah Chen at Acme is the billing decision-maker.",
        "P20",
        72,
        "confirmed",
        ACME,
        30,
        {"notion_page_id": "nt-sarah"},
    ),
    (
        "pattern-invoice-monday",
        "pattern",
        "User batches invoice processing on Monday mornings.",
        "P11",
        68,
        "confirmed",
        None,
        30,
        {},
    ),
    (
        "workflow-weekly-review",
        "workflow",
        "Weekly review always starts with email triage before calendar.",
        "P05",
        80,
        "applied",
        None,
        10,
        {"times_confirmed": 3},
    ),
    # "user always wants bullet format for P09 reports" (query C's own example).
    (
        "pref-p09-bullets",
        "preference",
        "User always wants bullet format for P09 reports.",
        "P09",
        77,
        "confirmed",
        None,
        5,
        {},
    ),
    # Item 7: three candidates at 95 used to fill the company query's 3 slots.
    (
        "acme-cand-1",
        "fact",
        "Acme Corp may move to quarterly invoices.",
        "P11",
        95,
        "candidate",
        ACME,
        1,
        {},
    ),
    (
        "acme-cand-2",
        "contact",
        "John Miller at Acme might own procurement.",
        "P20",
        95,
        "candidate",
        ACME,
        1,
        {},
    ),
    (
        "acme-cand-3",
        "fact",
        "Acme Corp invoices may need a PO number.",
        "P11",
        95,
        "candidate",
        ACME,
        1,
        {},
    ),
    # Never injected: dismissed; and (founder-os bug 2.5.6) expired or soft-deleted.
    (
        "acme-dismissed",
        "fact",
        "Acme Corp pays invoices on net-60 terms.",
        "P11",
        99,
        "dismissed",
        ACME,
        50,
        {},
    ),
    (
        "temporal-p11-9h",
        "pattern",
        "Invoice processing usually runs at 9h.",
        "P11",
        88,
        "confirmed",
        None,
        20,
        {"expires_at": unix(1)},
    ),
    (
        "acme-deleted",
        "fact",
        "Acme Corp invoices go to the old billing address.",
        "P11",
        93,
        "confirmed",
        ACME,
        60,
        {"deleted_at": unix(2)},
    ),
    # Another company, for the company query's precision.
    (
        "nalu-terms",
        "fact",
        "NaluForge pays invoices on receipt.",
        "P11",
        91,
        "confirmed",
        NALU,
        15,
        {},
    ),
]


def build_founder_os_db(path: Path, rows: list[Any] = SEED_ROWS) -> Path:
    """A founder-os ``.memory/memory.db`` with ``rows``, written as founder-os writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(FOUNDER_OS_SCHEMA)
        for key, cat, content, plugin, conf, status, company, days, extra in rows:
            conn.execute(
                "INSERT INTO memories (key, category, content, source_plugin, confidence, status,"
                " company_id, tags, embedding, times_used, times_confirmed, created_at, updated_at,"
                " last_used_at, expires_at, notion_page_id, last_synced_at, deleted_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, NULL, ?, ?, NULL, ?)",
                (
                    key,
                    cat,
                    content,
                    plugin,
                    conf,
                    status,
                    company,
                    '["billing"]' if "invoice" in content.lower() else "[]",
                    "[0.1, 0.2, 0.3]",  # founder-os's own model: another vector space
                    extra.get("times_confirmed", 0),
                    unix(days),
                    unix(days),
                    extra.get("expires_at"),
                    extra.get("notion_page_id"),
                    extra.get("deleted_at"),
                ),
            )
        conn.commit()
    finally:
        conn.close()
    return path


COMPANIES = {ACME: "Acme Corp", NALU: "NaluForge"}
QUERY = "Prepare the invoice follow-up for Acme Corp (sarah@acmecorp.com)"
PLUGIN = "P11"

# Query B brings Acme's confirmed/applied rows (never the three candidates at 95), query C
# the invoice plugin's own rows (NaluForge's terms are P11's too), query A ranks by
# similarity: the P09 preference it adds is under the relevance floor. By confidence.
GOLDEN = (
    "## Relevant Memories\n"
    "- [fact] NaluForge pays invoices on receipt. (confidence: 91)\n"
    "- [fact] Acme Corp pays invoices on net-30 terms. (confidence: 90)\n"
    "- [contact] Sarah Chen at Acme is the billing decision-maker. (confidence: 72)\n"
    "- [pattern] User batches invoice processing on Monday mornings. (confidence: 68)\n"
    "\n"
)


@pytest.fixture(params=["sqlite", "postgres"])
def founder_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The founder-os agent's store, seeded by importing founder-os's own memory.db."""
    db = build_founder_os_db(tmp_path / "founder" / ".memory" / "memory.db")
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "memory-inject.db", embedder=HashingEmbedder())
    else:
        from tests.storage._pg_backend import make_postgres_store

        store = make_postgres_store(request.getfixturevalue("pg_dsn"), embedder=HashingEmbedder())
    try:
        assert len(SEED_ROWS) == import_founder_os(store, db, companies=COMPANIES)
        yield store
    finally:
        store.close()


class TestFounderOsGolden:
    def test_agent_renders_the_seed_block_sync(self, founder_store: Any) -> None:
        """The shipped agent renders founder-os's block for the skill's own example turn."""
        agent = load_agent_config(AGENT)
        out = render_memory_context(
            founder_store, QUERY, config=agent.memory, source=PLUGIN, now=NOW
        )
        assert GOLDEN == out.text
        assert out.success

    def test_agent_renders_the_seed_block_async(self, founder_store: Any) -> None:
        """The async twin renders the same bytes."""
        agent = load_agent_config(AGENT)

        async def go() -> str:
            try:
                out = await arender_memory_context(
                    founder_store, QUERY, config=agent.memory, source=PLUGIN, now=NOW
                )
            finally:
                aclose = getattr(founder_store, "aclose", None)
                if aclose is not None:
                    await aclose()
            return out.text

        assert GOLDEN == asyncio.run(go())

    def test_usage_of_exactly_the_injected_ids_is_counted(self, founder_store: Any) -> None:
        """One render bumps times_used of the injected rows only (founder-os step 6)."""
        agent = load_agent_config(AGENT)
        out = render_memory_context(
            founder_store, QUERY, config=agent.memory, source=PLUGIN, now=NOW
        )
        rows = [founder_store.get(r[0]) for r in SEED_ROWS]
        used = {r.key for r in rows if r is not None and r.times_used}
        assert {e.key for e in out.entries} == used


class TestImportFounderOsDb:
    def test_rows_become_records_with_their_own_fields(self, tmp_path: Path) -> None:
        """Key, id, content, category, status, plugin, company, percent confidence and times."""
        db = build_founder_os_db(tmp_path / "memory.db")
        got = {r.key: r for r in read_founder_os(db, companies=COMPANIES)}
        net30 = got["acme-net30"]
        assert (
            "Acme Corp pays invoices on net-30 terms.",
            "fact",
            "applied",
            "User",
            ("company:acme-corp",),
            0.9,
            ("billing",),
            NOW - timedelta(days=40),
        ) == (
            net30.content,
            net30.category,
            net30.status,
            net30.source,
            net30.entity_ids,
            net30.confidence,
            net30.tags,
            net30.timestamp,
        )
        assert 32 == len(net30.id)
        assert got["acme-deleted"].deleted_at == NOW - timedelta(days=2)
        assert got["temporal-p11-9h"].expires_at == NOW - timedelta(days=1)
        assert got["acme-net30"].embedding is None  # founder-os's vectors are not ours

    def test_a_company_without_a_name_keeps_its_page_id(self, tmp_path: Path) -> None:
        """Without a name for it, a company_id becomes ``company:<page id>``."""
        db = build_founder_os_db(tmp_path / "memory.db")
        got = {r.key: r for r in read_founder_os(db)}
        assert (f"company:{NALU}",) == got["nalu-terms"].entity_ids

    def test_cli_imports_a_founder_os_db_it_used_to_refuse(self, tmp_path: Path) -> None:
        """``memory-inject import .memory/memory.db`` imports founder-os's file."""
        from memory_inject.cli import cli

        db = build_founder_os_db(tmp_path / ".memory" / "memory.db")
        target = tmp_path / "mi.db"
        result = CliRunner().invoke(
            cli, ["import", str(db), "--db", str(target), "--company", f"{ACME}=Acme Corp"]
        )
        assert 0 == result.exit_code, result.output
        assert f"imported {len(SEED_ROWS)} memories from founder-os" in result.output
        with SQLiteStore(target) as s:
            record = s.get("acme-billing-contact")
            assert record is not None
            assert ("company:acme-corp", 0.72) == (record.entity_ids[0], record.confidence)

    def test_not_a_founder_os_db_is_named(self, tmp_path: Path) -> None:
        """Another SQLite file is refused with the file and the columns expected."""
        other = tmp_path / "other.db"
        with sqlite3.connect(other) as conn:
            conn.execute("CREATE TABLE memories (key TEXT, content TEXT)")
        conn.close()
        assert not is_founder_os_db(other)
        with pytest.raises(ValueError, match=r"other\.db: not a founder-os memory\.db"):
            list(read_founder_os(other))

    def test_a_bad_row_is_named_by_file_key_and_column(self, tmp_path: Path) -> None:
        """A row founder-os's CHECK would have refused names its key and column."""
        db = build_founder_os_db(tmp_path / "memory.db", rows=[])
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA ignore_check_constraints = ON")
            conn.execute(
                "INSERT INTO memories (key, category, content, confidence, status, created_at,"
                " updated_at) VALUES ('bad', 'fact', 'x', 150, 'confirmed', 0, 0)"
            )
        conn.close()
        with pytest.raises(
            ValueError, match=r"memory\.db: row 'bad': 'confidence' must be an integer 0\.\.100"
        ):
            list(read_founder_os(db))

    @pytest.mark.parametrize("created_at", [1_772_000_000_000, 10**18, 1e308, -(10**12)])
    def test_a_timestamp_out_of_range_is_named_not_raised(
        self, tmp_path: Path, created_at: float
    ) -> None:
        """Milliseconds (or 1e308, or a year before 1) raised a bare ValueError, OSError or
        OverflowError from ``datetime.fromtimestamp``: a traceback from the CLI."""
        db = build_founder_os_db(tmp_path / "memory.db", rows=[])
        with sqlite3.connect(db) as conn:
            conn.execute(
                "INSERT INTO memories (key, category, content, confidence, status, created_at,"
                " updated_at) VALUES ('ms', 'fact', 'x', 50, 'confirmed', ?, 0)",
                (created_at,),
            )
        conn.close()
        with pytest.raises(ValueError, match=r"row 'ms': 'created_at' must be unix seconds"):
            list(read_founder_os(db))

    @pytest.mark.parametrize(
        ("times_used", "problem"),
        [
            ("many", "must be a whole number (got 'many')"),
            (3.7, "must be a whole number (got 3.7)"),
            (-2, "must be >= 0 (got -2)"),
        ],
    )
    def test_a_bad_usage_count_names_the_row_and_column(
        self, tmp_path: Path, times_used: object, problem: str
    ) -> None:
        """It was ``int()``'s own error, naming neither the row nor the column, and 3.7
        became 3 (a helper's find)."""
        db = build_founder_os_db(tmp_path / "memory.db", rows=[])
        with sqlite3.connect(db) as conn:
            conn.execute(
                "INSERT INTO memories (key, category, content, confidence, status, created_at,"
                " updated_at, times_used) VALUES ('wire', 'fact', 'x', 50, 'confirmed', 0, 0, ?)",
                (times_used,),
            )
        conn.close()
        with pytest.raises(ValueError, match=re.escape(f"row 'wire': 'times_used' {problem}")):
            list(read_founder_os(db))


class TestCliRender:
    def test_render_passes_the_plugin_id(self, tmp_path: Path) -> None:
        """``memory-inject render --source P09`` reaches the plan's plugin query."""
        from memory_inject.cli import cli

        db = build_founder_os_db(tmp_path / ".memory" / "memory.db")
        target = tmp_path / "mi.db"
        runner = CliRunner()
        assert 0 == runner.invoke(cli, ["import", str(db), "--db", str(target)]).exit_code
        args = ["render", "weekly report", "--db", str(target), "--agent", str(AGENT)]
        with_source = runner.invoke(cli, [*args, "--source", "P09"])
        assert 0 == with_source.exit_code, with_source.output
        assert "- [preference] User always wants bullet format for P09 reports." in (
            with_source.stdout
        )
