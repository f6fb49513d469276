"""Issue 27, the seed behaviours, round three: each against a store seeded from the seed's own
examples (PI's JSONL records, founder-os's memory.db), on SQLite and PostgreSQL, sync and async.

Items so far: 3 (a standing-only turn is a success), 4 (the CLI preview shows the standing
context and changes nothing), 13 (the skip signal reaches the bridges; a metrics bridge).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from memory_inject import AgentConfig, arender_memory_context, render_memory_context
from memory_inject.cli import cli
from memory_inject.config import load_agent_config
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.founder_os import import_founder_os
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._frameworks import events
from tests.storage._pi_seed import NOW, PROFILE, jsonl
from tests.test_12_founder_golden import (
    AGENT as FOUNDER_AGENT,
)
from tests.test_12_founder_golden import (
    COMPANIES,
    GOLDEN,
    PLUGIN,
    QUERY,
    SEED_ROWS,
    build_founder_os_db,
)
from tests.test_12_founder_golden import (
    NOW as FOUNDER_NOW,
)

if TYPE_CHECKING:
    from adapters.loop import MemoryLoop
    from adapters.observability import LoggingBridge, OpenTelemetryBridge, PrometheusBridge
else:
    from memory_inject.adapters.loop import MemoryLoop
    from memory_inject.adapters.observability import (
        LoggingBridge,
        OpenTelemetryBridge,
        PrometheusBridge,
    )

ROOT = Path(__file__).resolve().parents[1]
PI_AGENT = ROOT / "config" / "agents" / "pi.yaml"


@pytest.fixture(params=["sqlite", "postgres"])
def pi_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store holding PI's own records (seeds 000 and 002)."""
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "pi.db")
    else:
        from tests.storage._pg_backend import make_postgres_store

        store = make_postgres_store(request.getfixturevalue("pg_dsn"))
    try:
        store.import_jsonl(jsonl())
        yield store
    finally:
        store.close()


# -- item 3: a turn with only the standing context is a success ---------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_contentless_prompt_renders_the_standing_block_as_a_success(
    pi_store: Any, mode: str
) -> None:
    """ "do that again" has no content word: no recall, but the hard rules and L1 are shown,
    and the event says success (before: success=False, so the bridges warned)."""
    memory = load_agent_config(PI_AGENT).memory

    async def arender() -> Any:
        return await arender_memory_context(
            pi_store, "do that again", config=memory, now=NOW, profile=PROFILE
        )

    with recording() as rec:
        if mode == "sync":
            out = render_memory_context(
                pi_store, "do that again", config=memory, now=NOW, profile=PROFILE
            )
        else:
            out = asyncio.run(arender())
    (event,) = rec.events
    assert "## Hard Rules" in out.text
    assert (True, None) == (event.success, event.error)
    assert out.success


# -- item 4: the preview shows what the turn gets, and changes nothing --------------


def test_the_cli_preview_shows_the_standing_context(tmp_path: Path) -> None:
    db = tmp_path / "pi.db"
    with SQLiteStore(db) as store:
        store.import_jsonl(jsonl())
    result = CliRunner().invoke(
        cli, ["render", "do that again", "--agent", str(PI_AGENT), "--db", str(db)]
    )
    assert 0 == result.exit_code, result.output
    assert "## Hard Rules" in result.output  # before: no standing context in the preview
    assert "Prefer TypeScript over JavaScript" in result.output  # an L1 record


def test_a_founder_os_preview_counts_no_use(tmp_path: Path) -> None:
    """founder-os counts each injected memory's use; a preview must not."""
    db = tmp_path / "memory-inject.db"
    with SQLiteStore(db, embedder=HashingEmbedder()) as store:
        founder = build_founder_os_db(tmp_path / "founder" / "memory.db")
        assert len(SEED_ROWS) == import_founder_os(store, founder, companies=COMPANIES)
        before = {r.key: r.times_used for r in store.list()}
    result = CliRunner().invoke(
        cli,
        ["render", QUERY, "--agent", str(FOUNDER_AGENT), "--db", str(db), "--source", PLUGIN],
    )
    assert 0 == result.exit_code, result.output
    assert "## Relevant Memories" in result.output
    with SQLiteStore(db, embedder=HashingEmbedder()) as store:
        after = {r.key: r.times_used for r in store.list()}
    assert before == after  # before the fix: the rendered rows' times_used went up by one


# -- item 13: the skip signal reaches the bridges, and a metrics bridge ships --------


def _turns(store: Any) -> None:
    """A rendered turn, a skipped one (a sub-agent) and a failure skip (an unreadable list)."""
    loop = MemoryLoop(store, AgentConfig(agent="obs"))
    with loop.turn(sessions=["s"]):
        loop.prepare([{"role": "user", "content": "where do deploys go?"}])
        loop.prepare([{"role": "user", "content": "a sub-agent's own question"}])
    loop.prepare([object()])


@pytest.fixture
def obs_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "m.db") as s:
        s.store("deploys", "deploys go to prod-3", "core")
        yield s


def test_the_logging_bridge_logs_skipped_turns(
    obs_store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memory_inject.recall"), LoggingBridge():
        _turns(obs_store)
    lines = [(r.levelno, r.getMessage().split(" ")[0]) for r in caplog.records]
    assert [
        (logging.INFO, "memory_recall"),
        (logging.INFO, "memory_skipped"),
        (logging.WARNING, "memory_skipped"),
    ] == lines
    assert "unreadable_message" == caplog.records[2].reason  # type: ignore[attr-defined]


def test_the_opentelemetry_bridge_spans_skipped_turns(obs_store: SQLiteStore) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with OpenTelemetryBridge(provider.get_tracer("t")):
        _turns(obs_store)
    spans = exporter.get_finished_spans()
    assert ["memory.recall", "memory.skipped", "memory.skipped"] == [s.name for s in spans]
    assert "sub_turn" == (spans[1].attributes or {}).get("memory_inject.reason")
    assert StatusCode.ERROR == spans[2].status.status_code
    assert StatusCode.UNSET == spans[1].status.status_code


def test_the_prometheus_bridge_counts_every_turn(obs_store: SQLiteStore) -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    with PrometheusBridge(registry):
        _turns(obs_store)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert 1.0 == value("memory_inject_renders_total", origin="interactive", success="true")
    assert 1.0 == value("memory_inject_skips_total", origin="sub_turn", reason="sub_turn")
    assert 1.0 == value(
        "memory_inject_skips_total", origin="interactive", reason="unreadable_message"
    )
    assert 1.0 == value("memory_inject_recall_seconds_count", backend="sqlite")
    assert 1.0 == value("memory_inject_rendered_entries_sum")


# -- item 12: an unstamped loop turn is interactive (a documented difference) --------


def test_an_unstamped_loop_turn_is_interactive_and_sub_turn_is_one_keyword_away(
    obs_store: SQLiteStore,
) -> None:
    """docs/adapters.md: zeroclaw makes an unstamped envelope SubTurn (no memory); the loop
    adapter keeps interactive for a host's own turns, and origin="sub_turn" opts in."""
    loop = MemoryLoop(obs_store, AgentConfig(agent="a"))
    msgs = [{"role": "user", "content": "where do deploys go?"}]
    with events() as rec:
        placed = loop.prepare(msgs)
        skipped = loop.prepare(msgs, origin="sub_turn")
    assert "prod-3" in placed[0]["content"] and msgs == skipped
    assert [("MemoryRecall", "interactive"), ("MemorySkipped", "sub_turn")] == [
        (type(e).__name__, e.origin) for e in rec.all
    ]


# -- item 8: founder-os from the command line ---------------------------------------


def test_founder_os_from_the_command_line(tmp_path: Path) -> None:
    """add sets status, confidence and source (so the memory injects under the preset, and a
    default status says it will not); stats breaks down by status and use; a --session
    preview that hides agent-wide rows says why; --db keeps the agent's embedder."""
    db = tmp_path / "memory-inject.db"
    with SQLiteStore(db, embedder=HashingEmbedder()) as store:
        founder = build_founder_os_db(tmp_path / "founder" / "memory.db")
        import_founder_os(store, founder, companies=COMPANIES)
    run = CliRunner().invoke
    common = ["--agent", str(FOUNDER_AGENT), "--db", str(db)]
    fields = ["--category", "fact", "--status", "confirmed", "--confidence", "0.9"]
    wire = "Acme Corp now pays invoices by wire transfer."
    added = run(cli, ["add", "wire", wire, *fields, "--source", PLUGIN, *common])
    assert 0 == added.exit_code, added.output
    quiet = run(cli, ["add", "draft", "Acme Corp might switch banks.", *common])
    assert "will not be shown (pass --status confirmed)" in quiet.output
    preview = run(cli, ["render", QUERY, *common, "--source", PLUGIN])
    assert "wire transfer" in preview.output and "might switch" not in preview.output
    assert "embedder_failed" not in preview.output  # before: --db dropped the agent's embedder
    scoped = run(cli, ["render", QUERY, *common, "--source", PLUGIN, "--session", "s1"])
    assert "agent-wide memories (no session)" in scoped.output
    stats = run(cli, ["stats", *common])
    assert "confirmed" in stats.output and "status" in stats.output
    assert "used: 0 memories, 0 uses" in stats.output  # the previews counted nothing


# -- item 2: Selected Memory has no relevance floor under the PI preset -------------

PLAYBOOKS = [
    (
        "pb_rollback",
        "Rollback playbook: revert the release tag, redeploy the previous build; "
        "deployments pause meanwhile.",
    ),
    (
        "pb_canary",
        "Canary playbook: ship to five percent first; deployments widen after an hour "
        "of clean metrics.",
    ),
    (
        "pb_freeze",
        "Freeze playbook: no deployments on Fridays after noon or during the holiday freeze.",
    ),
    (
        "pb_hotfix",
        "Hotfix playbook: branch from the release tag; deployments of hotfixes skip the canary.",
    ),
    (
        "pb_secrets",
        "Secrets playbook: rotate keys quarterly; deployments read them from the vault.",
    ),
    ("pb_migrate", "Migration playbook: run schema migrations before deployments, never after."),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_pi_selected_memory_keeps_weak_but_matching_records(pi_store: Any, mode: str) -> None:
    """Six active L2 playbooks sharing one word with the prompt: PI shows them all (no floor,
    no decay in its selection); before, the 0.4 floor and decay dropped every one."""
    for key, text in PLAYBOOKS:
        pi_store.store(
            key, text, layer="L2", rule_type="workflow", confidence=0.8, profile_id=PROFILE
        )
    memory = load_agent_config(PI_AGENT).memory
    prompt = "how do deployments work here?"

    async def arender() -> Any:
        return await arender_memory_context(
            pi_store, prompt, config=memory, now=NOW, profile=PROFILE
        )

    if mode == "sync":
        out = render_memory_context(pi_store, prompt, config=memory, now=NOW, profile=PROFILE)
    else:
        out = asyncio.run(arender())
    selected = out.text.split("## Selected Memory", 1)[1].split("\n## ", 1)[0]
    assert [k for k, _ in PLAYBOOKS if k in selected] == [k for k, _ in PLAYBOOKS]


# -- item 5: the Daily Log's raw fallback shows the tail, as PI does ---------------


def test_a_long_daily_note_without_notable_lines_shows_its_tail(pi_store: Any) -> None:
    """PI's buildDailyDigest: no notable line, no closed session -> content[-maxChars:]."""
    from datetime import timedelta

    body = "START of the day. " + "plain words about the day " * 400 + "the END-MARKER line"
    for key in [r.key for r in pi_store.list() if str(r.category) == "daily"]:
        pi_store.forget(key)
    pi_store.store("today_log", body, "daily", timestamp=NOW - timedelta(hours=1))
    memory = load_agent_config(PI_AGENT).memory
    out = render_memory_context(
        pi_store, "what happened today?", config=memory, now=NOW, profile=PROFILE
    )
    daily = out.text.split("## Daily Log", 1)[1].split("\n## ", 1)[0]
    assert "END-MARKER" in daily and "START" not in daily  # before: the head, cut
    assert len(daily) <= memory.renderer.section_caps.daily_log + 40


# -- item 9: degradation at open ----------------------------------------------------


def _founder_agent(tmp_path: Path, path: str) -> Any:
    text = FOUNDER_AGENT.read_text(encoding="utf-8").replace(
        "path: .memory/memory-inject.db", f"path: {path}"
    )
    (tmp_path / "agent.yaml").write_text(text, encoding="utf-8")
    return load_agent_config(tmp_path / "agent.yaml")


@pytest.mark.parametrize(
    "shape", ["missing file", "an empty file", "a directory", "not a database"]
)
def test_founder_os_degrades_at_open_with_a_status(tmp_path: Path, shape: str) -> None:
    """founder-os goes on without memory when its file is missing or unreadable: no error
    into the host, no file created, the status on every turn's event (sync and async)."""
    from memory_inject import open_store
    from memory_inject.exceptions import StoreMissingError
    from memory_inject.storage.unavailable import UnavailableStore

    target = tmp_path / "data" / "memory.db"
    if shape == "a directory":
        target.mkdir(parents=True)
    elif shape == "not a database":
        target.parent.mkdir(parents=True)
        target.write_bytes(b"this is not a sqlite file" * 100)
    elif shape == "an empty file":  # a schema was written into it (round 35)
        target.parent.mkdir(parents=True)
        target.touch()
    agent = _founder_agent(tmp_path, str(target))
    store = open_store(agent)  # before: StoreMissingError / StoreCorruptError into the host
    assert isinstance(store, UnavailableStore) and not store.available
    assert store.status.startswith("store_unavailable: ")
    with recording() as rec:
        out = render_memory_context(store, QUERY, config=agent.memory, source=PLUGIN)
        asyncio.run(arender_memory_context(store, QUERY, config=agent.memory, source=PLUGIN))
    assert "" == out.text
    assert all(store.status in e.degraded for e in rec.events) and 2 == len(rec.events)
    with pytest.raises(StoreMissingError):
        store.store("k", "v")
    assert (shape == "missing file") == (not target.exists())
    assert shape != "an empty file" or 0 == target.stat().st_size
    assert shape != "a directory" or "directory" in store.status


def test_missing_error_and_the_default_create(tmp_path: Path) -> None:
    from memory_inject import AgentConfig, open_store
    from memory_inject.config import MemoryInjectConfig
    from memory_inject.config.schema import BackendConfig
    from memory_inject.exceptions import StoreMissingError

    def agent(missing: str, name: str) -> AgentConfig:
        backend = BackendConfig(path=str(tmp_path / name), missing=missing)
        return AgentConfig(agent="a", memory=MemoryInjectConfig(backend=backend))

    with pytest.raises(StoreMissingError, match="no memory file"):
        open_store(agent("error", "e.db"))
    (tmp_path / "empty.db").touch()
    with pytest.raises(StoreMissingError, match="an empty memory file"):
        open_store(agent("error", "empty.db"))
    assert 0 == (tmp_path / "empty.db").stat().st_size
    store = open_store(agent("create", "c.db"))
    assert isinstance(store, SQLiteStore)
    store.close()
    assert (tmp_path / "c.db").exists()


# -- item 7 (in part): every company the input names is queried ----------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_matched_company_is_queried(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    """ "Acme Corp" matches both ``company:acme`` and ``company:acme-corp``: the rows of both
    reach the block (before: only the first id was queried)."""
    if backend == "sqlite":
        store: Any = SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder())
    else:
        from tests.storage._pg_backend import make_postgres_store

        store = make_postgres_store(request.getfixturevalue("pg_dsn"), embedder=HashingEmbedder())
    try:
        rows = [
            ("a1", "Invoices go to the finance inbox.", "company:acme", 0.9),
            ("b1", "Their CFO signs every contract over 10k.", "company:acme-corp", 0.95),
        ]
        for key, text, entity, conf in rows:
            store.store(key, text, "fact", entity_ids=[entity], status="confirmed", confidence=conf)
        memory = load_agent_config(FOUNDER_AGENT).memory
        out = render_memory_context(store, "Draft a note to Acme Corp", config=memory)
    finally:
        store.close()
    assert "CFO signs" in out.text and "finance inbox" in out.text


# -- item 1: PI filters first (status, profile), then ranks -----------------------

OWN_ACTIVE = [
    ("own_migrations", "Database migrations run before the deploy step, never after it."),
    ("own_staging", "Staging deploy goes first; the production deploy waits for its smoke test."),
    ("own_secrets", "Deploy secrets live in the vault, never in the deploy scripts."),
]


def _crowd(store: Any) -> None:
    """30 better-matching rows of another profile and 30 deprecated rows of this profile."""
    words = "deploy deploy pipeline production staging migrations rollout deploy"
    for i in range(30):
        store.store(
            f"other_{i:02d}",
            f"Other team deploy note {i}: {words}.",
            layer="L2",
            confidence=0.9,
            profile_id="project:other-team",
        )
        store.store(
            f"old_{i:02d}",
            f"Old deploy rule {i}: {words}.",
            layer="L2",
            confidence=0.9,
            status="deprecated",
            profile_id=PROFILE,
        )
    for key, text in OWN_ACTIVE:
        store.store(key, text, layer="L2", confidence=0.8, profile_id=PROFILE)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_pi_filters_by_status_and_profile_before_the_recall_limit(pi_store: Any, mode: str) -> None:
    """PI keeps the turn's profile's active records first and ranks only them: 60 better
    matches of another profile or deprecated never push the own active rows out (before:
    ``profile_scope 24 -> 0`` and an empty Selected Memory)."""
    _crowd(pi_store)
    memory = load_agent_config(PI_AGENT).memory
    prompt = "how do we deploy to production?"
    with recording() as rec:
        if mode == "sync":
            out = render_memory_context(pi_store, prompt, config=memory, now=NOW, profile=PROFILE)
        else:
            out = asyncio.run(
                arender_memory_context(pi_store, prompt, config=memory, now=NOW, profile=PROFILE)
            )
    selected = out.text.split("## Selected Memory", 1)[1].split("\n## ", 1)[0]
    assert [k for k, _ in OWN_ACTIVE if k in selected] == [k for k, _ in OWN_ACTIVE]
    assert "other_" not in out.text and "old_" not in out.text
    (event,) = rec.events
    assert event.success
    # The rows passed over are still named, by the stage and with the reason PI gives.
    by_stage = {t.name: t.dropped for t in event.trace}
    assert {r for k, r in by_stage["status_filter"].items() if k.startswith("old_")} == {
        "status:deprecated"
    }
    assert {r for k, r in by_stage["profile_scope"].items() if k.startswith("other_")} == {
        "profile_mismatch:project:other-team"
    }


# -- item 7: a company named in the input resolves by content, without a name map -----


@pytest.fixture(params=["sqlite", "postgres"])
def founder_unmapped(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """founder-os's memory.db imported with no ``--company`` map: entity ids are page ids."""
    db = build_founder_os_db(tmp_path / "founder" / ".memory" / "memory.db")
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder())
    else:
        from tests.storage._pg_backend import make_postgres_store

        store = make_postgres_store(request.getfixturevalue("pg_dsn"), embedder=HashingEmbedder())
    try:
        assert len(SEED_ROWS) == import_founder_os(store, db)
        yield store
    finally:
        store.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_company_resolves_by_content_without_a_name_map(founder_unmapped: Any, mode: str) -> None:
    """ "Acme Corp" in the input finds the company whose rows say "Acme Corp", as founder-os's
    ``content LIKE '%Acme Corp%'`` does: the seed's golden block, with no ``--company`` map
    (before: the company query found nothing and Acme's net-30 terms were missing)."""
    memory = load_agent_config(FOUNDER_AGENT).memory
    if mode == "sync":
        out = render_memory_context(
            founder_unmapped, QUERY, config=memory, source=PLUGIN, now=FOUNDER_NOW
        )
    else:
        out = asyncio.run(
            arender_memory_context(
                founder_unmapped, QUERY, config=memory, source=PLUGIN, now=FOUNDER_NOW
            )
        )
    assert GOLDEN == out.text


def test_an_unknown_or_ambiguous_mention_resolves_to_no_company(founder_unmapped: Any) -> None:
    """A capitalised word no company's rows mention, or one that rows of several companies
    share about equally, resolves to nothing (founder-os's ``LIMIT 1`` picks one at random)."""
    from memory_inject.contract import SupportsMentions

    assert isinstance(founder_unmapped, SupportsMentions)
    found = founder_unmapped.entities_mentioned(["Globex", "Acme Corp", "Invoices", "NaluForge"])
    assert {"Acme Corp", "NaluForge"} == set(found)
    assert found["Acme Corp"] != found["NaluForge"]
    assert all(v.startswith("company:") for v in found.values())


def test_company_mentions_and_their_resolution_rules() -> None:
    """Names are capitalised runs and domain stems; a row must name the mention as whole
    words with its capitals, one company must hold most of those rows, and LIKE's
    wildcards in a mention match only themselves."""
    from memory_inject import InMemoryStore
    from memory_inject.plan import company_mentions, extract_entities
    from memory_inject.records import MemoryRecord
    from memory_inject.storage._plan_rows import like_pattern, mentioned_entity

    text = "Ask Jane Roe (jane@gmail.com) and bob@globex.io about The Initech deal, please"
    found = company_mentions(text, extract_entities(text, ["initech"]))
    # A run opening a sentence is tried without its first word; no gmail; Initech is known.
    assert ("Ask Jane Roe", "Jane Roe", "The Initech", "globex") == found
    assert "%50\\% off\\_now%" == like_pattern("50% off_now")
    pairs = [
        ("company:a", "Acme Corp pays on net-30."),
        ("company:a", "Ask Acme Corp for a PO."),
        ("company:b", "Acme Corporation is another firm."),
        ("company:b", "acme corp in lower case is not the name"),
        ("contact:x", "Acme Corp's contact"),
    ]
    assert "company:a" == mentioned_entity("Acme Corp", pairs, "company:")
    assert "company:a" == mentioned_entity("Acme", pairs, "company:")  # a: 2 of 3 rows
    tie = [("company:a", "Globex here"), ("company:b", "Globex there")]
    assert mentioned_entity("Globex", tie, "company:") is None
    store = InMemoryStore(
        [
            MemoryRecord("r1", "Acme Corp pays on net-30.", entity_ids=("company:a",)),
            MemoryRecord("r2", "100% of Acme_Corp invoices", entity_ids=("company:b",)),
        ]
    )
    assert {"Acme Corp": "company:a"} == store.entities_mentioned(["Acme Corp", " ", "%", "_"])


# -- docs/seeds.md: the table matches the tests -------------------------------------


def _seed_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "seeds.md").read_text(encoding="utf-8")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ")]
    return [r for r in rows if r[0].strip("| ").isdigit()]


def test_every_test_the_seeds_table_names_exists() -> None:
    """Each test or test file a row of docs/seeds.md cites is in tests/ (a ``*`` in a name
    matches any run of characters), and each row says kept, fixed or left out: none is open."""
    import fnmatch
    import re

    sources = {p: p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py")}
    defined = {m for text in sources.values() for m in re.findall(r"def (test_\w+)", text)}
    rows = _seed_rows()
    assert len(rows) >= 13
    for row in rows:
        status, cited = row[3], row[4]
        assert status.startswith(("fixed", "kept", "left out")), row
        for name in re.findall(r"`([^`]+)`", cited):
            if name.startswith("tests/"):
                assert (ROOT / name).is_file(), name
            else:
                assert fnmatch.filter(defined, name.split("::")[-1]), name
