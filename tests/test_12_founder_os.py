"""founder-os items 7, 8, 10, 11 and 13 of issue 12, each as its user would meet it.

(Item 9 is the storage contract ``tests/storage/test_contract_entities.py``; item 12
and the shipped agent's golden render are ``tests/test_12_founder_golden.py``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import (
    MemoryRecall,
    arender_memory_context,
    load_agent_config,
    render_memory_context,
)
from memory_inject.config import AgentConfig, MemoryInjectConfig, parse_agent_config
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import EmbedderError
from memory_inject.signals import memory_recall
from memory_inject.storage.founder_os import import_founder_os
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite import SQLiteStore

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import AgentDirectAdapter
    from adapters._core import TurnInput
else:
    from memory_inject.adapters import AgentDirectAdapter
    from memory_inject.adapters._core import TurnInput

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 3, 11, 9, 0, tzinfo=UTC)


def founder_config(**memory: Any) -> MemoryInjectConfig:
    """The founder_os preset, as an agent file with these extra ``memory`` keys gives it."""
    return parse_agent_config({"agent": "f", "memory": {"preset": "founder_os", **memory}}).memory


def keys(out: Any) -> list[str]:
    return [e.key for e in out.entries]


class TestStatusInTheQuery:
    """Item 7: query B and C filter status before LIMIT, so candidates never take a slot."""

    def test_three_candidates_at_95_no_longer_fill_the_company_query(self, tmp_path: Path) -> None:
        """The confirmed Acme memory is fetched although three candidates outrank it."""
        with SQLiteStore(tmp_path / "s.db") as s:
            for i in range(3):
                s.store(
                    f"cand-{i}",
                    f"Acme Corp may want thing {i}.",
                    "fact",
                    entity_ids=["company:acme-corp"],
                    confidence=0.95,
                    status="candidate",
                )
            s.store(
                "net30",
                "Acme Corp pays invoices on net-30 terms.",
                "fact",
                entity_ids=["company:acme-corp"],
                confidence=0.90,
                status="confirmed",
            )
            out = render_memory_context(
                s, "invoice for Acme Corp", config=founder_config(), now=NOW
            )
        assert ["net30"] == keys(out)

    def test_the_plugin_query_is_not_filled_by_dismissed_rows(self, tmp_path: Path) -> None:
        """Query C (limit 2) returns the plugin's confirmed row past two dismissed ones."""
        with SQLiteStore(tmp_path / "s.db") as s:
            for i in range(2):
                s.store(f"dis-{i}", f"old P09 habit {i}", "preference", source="P09",
                        confidence=0.99, status="dismissed")  # fmt: skip
            s.store("bullets", "User always wants bullet format for P09 reports.",
                    "preference", source="P09", confidence=0.77, status="confirmed")  # fmt: skip
            out = render_memory_context(
                s, "weekly report", config=founder_config(), source="P09", now=NOW
            )
        assert ["bullets"] == keys(out)


def plugin_store() -> InMemoryStore:
    s = InMemoryStore()
    s.store("bullets", "User always wants bullet format for P09 reports.", "preference",
            source="P09", confidence=0.77, status="confirmed")  # fmt: skip
    return s


class TestPluginThroughAdapters:
    """Item 8: an adapter carries the calling plugin's id to the plan's plugin query."""

    def test_adapter_source_option_reaches_the_plugin_query(self) -> None:
        """``AgentDirectAdapter(..., source="P09")`` renders the plugin's own preference."""
        agent = AgentConfig(agent="f", memory=founder_config())
        adapter = AgentDirectAdapter(plugin_store(), agent, source="P09")
        turn = adapter.request("draft the weekly status")
        assert "- [preference] User always wants bullet format for P09 reports." in turn.block

    def test_async_adapter_carries_it_too(self) -> None:
        """The async twin renders the same block."""
        agent = AgentConfig(agent="f", memory=founder_config())
        adapter = AgentDirectAdapter(plugin_store(), agent, source="P09")
        turn = asyncio.run(adapter.arequest("draft the weekly status"))
        assert "bullet format for P09" in turn.block

    def test_a_request_names_its_own_source(self) -> None:
        """``Request.source`` is the field the adapters fill; it wins over the adapter's."""
        agent = AgentConfig(agent="f", memory=founder_config())
        adapter = AgentDirectAdapter(plugin_store(), agent, source="P01")
        req = TurnInput(origin="agent_direct", query="draft the weekly status", source="P09")
        assert "bullet format for P09" in adapter._serve(req).block


class TestPresetIsTheWholeBehaviour:
    """Item 10: ``preset: founder_os`` sets renderer, cap 5, no decay and its statuses."""

    def test_preset_sets_renderer_cap_decay_and_statuses(self) -> None:
        """The loaded config is founder-os's, not the bracket block with 4 entries."""
        for memory in ({"preset": "founder_os"}, {"recall_plan": {"preset": "founder_os"}}):
            cfg = parse_agent_config({"agent": "f", "memory": memory}).memory
            assert ("relevant_memories", 5, False, ("confirmed", "applied"), True, True) == (
                cfg.renderer.kind,
                cfg.budget.max_entries,
                cfg.decay.enabled,
                cfg.recall_plan.statuses,
                cfg.recall_plan.enabled,
                cfg.recall_plan.track_usage,
            )

    def test_the_files_own_keys_win(self) -> None:
        """A key the file sets overrides the preset's; the rest stays the preset's."""
        cfg = founder_config(budget={"max_entries": 3})
        assert (3, "relevant_memories") == (cfg.budget.max_entries, cfg.renderer.kind)

    def test_a_30_day_old_semantic_hit_at_090_is_not_decayed_away(self, tmp_path: Path) -> None:
        """founder-os ranks by similarity, never by age: the old hit keeps its score."""
        with SQLiteStore(tmp_path / "s.db", embedder=HashingEmbedder()) as s:
            s.store(
                "old",
                "invoices are batched on Monday mornings",
                "pattern",
                timestamp=NOW - timedelta(days=30),
                confidence=0.9,
                status="confirmed",
            )
            out = render_memory_context(
                s, "invoices are batched on Monday mornings", config=founder_config(), now=NOW
            )
        assert ["old"] == keys(out)
        assert out.text.startswith("## Relevant Memories\n- [pattern] invoices are batched")

    def test_six_hits_render_five_lines(self) -> None:
        """Cap 5, as founder-os (the default budget kept 4)."""
        s = InMemoryStore()
        for i in range(6):
            s.store(f"k{i}", f"invoice rule number {i}", "fact", confidence=0.5 + i / 20,
                    status="confirmed")  # fmt: skip
        out = render_memory_context(s, "invoice rule", config=founder_config(), now=NOW)
        assert 5 == len(out.entries)

    def test_the_shipped_agent_is_the_preset(self) -> None:
        """``config/agents/founder-os.yaml`` loads as founder-os's behaviour."""
        agent = load_agent_config(ROOT / "config" / "agents" / "founder-os.yaml")
        assert ("founder-os", "founder_os", "relevant_memories") == (
            agent.agent,
            agent.memory.preset,
            agent.memory.renderer.kind,
        )


class TestConfidenceScale:
    """Item 11: both scales are accepted at import with one rule."""

    def test_jsonl_import_reads_a_percentage_above_one(self, tmp_path: Path) -> None:
        """85 imports as 0.85, 0.85 stays, 1 stays 1.0; the block shows 85, 85, 100."""
        lines = [
            {"key": "pct", "content": "a", "confidence": 85},
            {"key": "unit", "content": "b", "confidence": 0.85},
            {"key": "one", "content": "c", "confidence": 1},
        ]
        src = io.StringIO("".join(json.dumps(o) + "\n" for o in lines))
        with SQLiteStore(tmp_path / "s.db") as s:
            assert 3 == s.import_jsonl(src)
            got = {k: s.get(k) for k in ("pct", "unit", "one")}
        assert {"pct": 0.85, "unit": 0.85, "one": 1.0} == {
            k: r.confidence for k, r in got.items() if r is not None
        }

    def test_above_100_is_refused_with_the_line(self, tmp_path: Path) -> None:
        """150 is neither scale: the error names the line and the value."""
        src = io.StringIO(json.dumps({"key": "x", "content": "a", "confidence": 150}) + "\n")
        with (
            SQLiteStore(tmp_path / "s.db") as s,
            pytest.raises(ValueError, match=r"line 1: 'confidence' must be between 0 and 1"),
        ):
            s.import_jsonl(src)

    def test_founder_os_confidence_1_is_one_percent(self, tmp_path: Path) -> None:
        """From founder-os's own file the scale is known: its 1 is 0.01, not 100%."""
        from memory_inject.storage.founder_os import read_founder_os
        from tests.test_12_founder_golden import build_founder_os_db

        row: tuple[Any, ...] = ("low", "fact", "barely seen", "P01", 1, "candidate", None, 1, {})
        db = build_founder_os_db(tmp_path / "memory.db", rows=[row])
        [record] = list(read_founder_os(db))
        assert 0.01 == record.confidence


class BrokenEntities(InMemoryStore):
    """Answers recall, but listing the companies fails."""

    def known_entities(self) -> dict[str, str]:
        raise RuntimeError("companies table is gone")


class TestDegradation:
    """Item 13: a failure while listing companies keeps the one-event promise."""

    def test_render_reports_instead_of_raising(self) -> None:
        """No exception escapes; one event says the entity query failed; the rest renders."""
        s = BrokenEntities()
        s.store("net30", "Acme Corp pays invoices on net-30 terms.", "fact",
                confidence=0.9, status="confirmed")  # fmt: skip
        seen: list[MemoryRecall] = []

        def on_recall(_sender: Any, *, event: MemoryRecall) -> None:
            seen.append(event)

        memory_recall.connect(on_recall)
        try:
            out = render_memory_context(s, "Acme Corp invoices", config=founder_config())
            aout = asyncio.run(
                arender_memory_context(s, "Acme Corp invoices", config=founder_config())
            )
        finally:
            memory_recall.disconnect(on_recall)
        assert 2 == len(seen)
        for result in (out, aout):
            assert ["net30"] == keys(result)
            assert isinstance(result.event, MemoryRecall)
            assert "(entity): RuntimeError: companies table is gone" in (result.event.error or "")

    def test_through_an_adapter_the_turn_gets_an_event(self) -> None:
        """The adapter's turn carries the event rather than a swallowed exception."""
        agent = AgentConfig(agent="f", memory=founder_config())
        turn = AgentDirectAdapter(BrokenEntities(), agent).request("Acme Corp invoices")
        assert turn.event is not None
        assert "companies table is gone" in (turn.event.error or "")

    def test_a_failed_semantic_query_is_dropped_in_both_twins(self, tmp_path: Path) -> None:
        """The embedder fails: sync and async both drop its lexical fallback, keep B and C."""

        class Flaky(HashingEmbedder):
            down = False

            def embed(self, texts: Any) -> Any:
                if self.down:
                    raise EmbedderError("model not loaded")
                return super().embed(texts)

        emb = Flaky()
        with SQLiteStore(tmp_path / "s.db", embedder=emb) as s:
            s.store("sem", "invoices are processed on Monday", "pattern", confidence=0.8,
                    status="confirmed")  # fmt: skip
            s.store("plug", "P11 invoices use the blue template", "preference", source="P11",
                    confidence=0.7, status="confirmed")  # fmt: skip
            emb.down = True
            cfg = founder_config()
            q = "invoices are processed on Monday"
            sync = render_memory_context(s, q, config=cfg, source="P11", now=NOW)
            asyn = asyncio.run(arender_memory_context(s, q, config=cfg, source="P11", now=NOW))
        assert (["plug"], ["plug"]) == (keys(sync), keys(asyn))
        assert sync.text == asyn.text


class TestImportLeavesNothingBeside:
    """``import_founder_os`` reads founder-os's file read-only: a ``mode=ro`` open of its
    WAL-mode file left ``-shm`` and ``-wal`` beside it (round 35)."""

    @staticmethod
    def _founder_file(path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE memories (id TEXT PRIMARY KEY, key TEXT UNIQUE NOT NULL, category "
            "TEXT NOT NULL, content TEXT NOT NULL, source_plugin TEXT, confidence INTEGER, "
            "status TEXT, company_id TEXT, tags TEXT, created_at INTEGER NOT NULL, "
            "updated_at INTEGER NOT NULL)"
        )
        conn.execute(
            "INSERT INTO memories VALUES ('1', 'terms', 'fact', 'Acme pays net-30', 'P11', 90,"
            " 'confirmed', NULL, '[]', 1700000000, 1700000000)"
        )
        conn.commit()
        return conn

    def test_a_closed_file_is_read_with_nothing_left_beside_it(self, tmp_path: Path) -> None:
        theirs = tmp_path / "fos" / "memory.db"
        theirs.parent.mkdir()
        self._founder_file(theirs).close()
        assert ["memory.db"] == sorted(p.name for p in theirs.parent.iterdir())
        import_founder_os(SQLiteStore(tmp_path / "mine.db"), theirs)
        assert ["memory.db"] == sorted(p.name for p in theirs.parent.iterdir())

    def test_a_hot_journal_is_never_read_half_written(self, tmp_path: Path) -> None:
        """A rollback-journal file whose writer died mid-transaction (a hot ``-journal``):
        an ``immutable`` open read the uncommitted pages (round 35's attack)."""
        theirs = tmp_path / "memory.db"
        conn = self._founder_file(theirs)
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executemany(
            "INSERT INTO memories VALUES (?, ?, 'fact', ?, 'P11', 90, 'confirmed', NULL, '[]',"
            " 1700000000, 1700000000)",
            [(f"r{i}", f"k{i}", f"committed fact {i} " + "x" * 200) for i in range(2000)],
        )
        conn.commit()
        conn.close()
        writer = (
            "import sqlite3, os\n"
            f"c = sqlite3.connect({str(theirs)!r}, isolation_level=None)\n"
            "c.execute('PRAGMA cache_size=1')\nc.execute('BEGIN')\n"
            "c.execute(\"UPDATE memories SET content = 'UNCOMMITTED ' || key\")\nos._exit(0)\n"
        )
        subprocess.run([sys.executable, "-c", writer], check=True)
        assert (tmp_path / "memory.db-journal").exists()
        mine = SQLiteStore(tmp_path / "mine.db")
        with contextlib.suppress(ValueError):  # refused: it cannot be read as it stands
            import_founder_os(mine, theirs)
        assert not [r for r in mine.list() if "UNCOMMITTED" in r.content]

    def test_a_file_founder_os_holds_open_is_read_with_its_wal(self, tmp_path: Path) -> None:
        theirs = tmp_path / "memory.db"
        live = self._founder_file(theirs)  # its row is in the -wal, not yet checkpointed
        try:
            mine = SQLiteStore(tmp_path / "mine.db")
            import_founder_os(mine, theirs)
            assert ["Acme pays net-30"] == [r.content for r in mine.list()]
        finally:
            live.close()
