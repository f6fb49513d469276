"""Issue 27, item 6: a PI user's other stores migrate (``memory_inject.storage.pi_import``).

Each against a PI memory directory written from the seeds' own examples (seeds 000 and 002:
the records of ``tests/storage/_pi_seed.py`` in PI's files, the Scratchpad's ``- [ ]`` items,
the Daily Log with ``Sessions today: 3``, the evidence ref ``daily/2026-05-20.md``, the
``project:my-project`` profile and its ``.pi/settings.json``), on SQLite and PostgreSQL.
Before: ``memory-inject import scratchpad.md`` failed on the JSON parser, a directory was
refused, and tombstones, evidence, profiles and settings had no import path at all.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_inject import render_memory_context
from memory_inject.cli import cli
from memory_inject.config import load_agent_config
from memory_inject.storage.pi_import import PiImport, import_pi, is_pi_path
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage._pi_seed import LINES, NOW, PROFILE

ROOT = Path(__file__).resolve().parents[1]
PI_AGENT = ROOT / "config" / "agents" / "pi.yaml"
PROMPT = "how should typecheck run before pushing?"

#: Seed 000's Scratchpad ("- [ ] ...") with the seed store's open item, a closed one and a
#: line PI does not read as an item.
SCRATCHPAD = (
    "# Scratchpad\n\n"
    "- [ ] Add typecheck to the CI workflow\n"
    "- [x] Fix the flaky auth test\n"
    "- [ ] Write the release notes\n"
)
#: The seed store's daily note (three closed sessions: seed 000's "Sessions today: 3").
DAILY = next(line for line in LINES if line.get("id") == "daily_0520")["statement"] + "\n"
#: Seed 002: "Content-free markers for deleted records". mem_echo (the rule-type table's
#: avoid_pattern example) was privacy-purged, mem_commits deleted keeping its audit trail;
#: the L2 file still holds both as they were.
TOMBSTONES = [
    {
        "deleted_record_id": "mem_echo",
        "deletion_mode": "privacy_purge",
        "deletion_reason": "privacy_sensitive",
        "deleted_at": "2026-05-19T12:00:00Z",
        "content_removed": True,
    },
    {
        "deleted_record_id": "mem_commits",
        "deletion_mode": "audit_preserving",
        "deletion_reason": "invalid",
        "deleted_at": "2026-05-19T13:00:00Z",
        "content_hash": "9f2c",
        "content_removed": True,
    },
]
#: Seed 002's evidence (ref daily/2026-05-20.md) as a structured evidence.jsonl line.
EVIDENCE = [
    {
        "id": "ev_bun",
        "profile_id": PROFILE,
        "source_kind": "user_message",
        "source_ref": "daily/2026-05-20.md",
        "source_summary": "User stated this directly.",
        "trust_class": "user_correction",
        "redaction_status": "none",
        "related_memory_ids": ["mem_20260520_abc"],
    },
    {
        "id": "ev_echo",
        "profile_id": PROFILE,
        "source_kind": "user_message",
        "source_summary": "[deleted]",
        "redaction_status": "deleted",
        "related_memory_ids": ["mem_echo"],
    },
]
PROFILES = [
    {
        "profile_id": PROFILE,
        "profile_type": "project",
        "resource_id": "user:local",
        "project_identity": {"project_id": "my-project", "source": "explicit_config"},
        "storage_root": ".pi/pi-memory",
        "created_at": "2026-03-01T09:00:00Z",
        "updated_at": "2026-05-20T09:00:00Z",
    }
]
SETTINGS = {
    "pi-persistent-intelligence": {
        "localPath": ".pi/pi-memory",
        "projectIdentity": {"project_id": "My Project"},
    }
}


def _jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def write_pi_project(project: Path) -> Path:
    """A project with a project-local PI memory, as PI lays it out; returns the memory root."""
    root = project / ".pi" / "pi-memory"
    records = [line for line in LINES if "statement" in line and line.get("layer") != "L3"]
    _jsonl(root / "memory" / "L1.identity.jsonl", [r for r in records if r["layer"] == "L1"])
    _jsonl(root / "memory" / "L2.playbooks.jsonl", [r for r in records if r["layer"] == "L2"])
    _jsonl(root / "memory" / "inquiries.jsonl", [r for r in LINES if "question" in r])
    _jsonl(root / "memory" / "tombstones.jsonl", TOMBSTONES)
    _jsonl(root / "memory" / "evidence.jsonl", EVIDENCE)
    _jsonl(root / "memory" / "profiles.jsonl", PROFILES)
    (root / "scratchpad.md").write_text(SCRATCHPAD, encoding="utf-8")
    day = root / "daily" / "2026-05-20.md"
    day.parent.mkdir()
    day.write_text(DAILY, encoding="utf-8")
    stamp = NOW.timestamp() - 3600  # PI appended to today's log an hour ago
    os.utime(day, (stamp, stamp))
    (project / ".pi" / "settings.json").write_text(json.dumps(SETTINGS), encoding="utf-8")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_pi_project(tmp_path / "proj")
    return tmp_path / "proj"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        opened: Any = SQLiteStore(tmp_path / "pi.db")
    else:
        from tests.storage._pg_backend import make_postgres_store

        opened = make_postgres_store(request.getfixturevalue("pg_dsn"))
    try:
        yield opened
    finally:
        opened.close()


def render(store: Any, prompt: str = PROMPT) -> str:
    memory = load_agent_config(PI_AGENT).memory
    return render_memory_context(store, prompt, config=memory, now=NOW, profile=PROFILE).text


def section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0] if f"## {title}" in text else ""


def export(store: Any) -> list[dict[str, Any]]:
    buffer = io.StringIO()
    store.export_jsonl(buffer)
    return sorted((json.loads(line) for line in buffer.getvalue().splitlines()), key=str)


def pi_cli(*args: str) -> Any:
    return CliRunner().invoke(cli, ["import", *args])


# -- a whole PI directory ---------------------------------------------------------------


def test_a_pi_project_renders_like_pi_after_one_import(store: Any, project: Path) -> None:
    """The project dir's settings lead to its memory; every kind lands where PI shows it."""
    result = import_pi(store, project)
    assert (project / ".pi" / "pi-memory") == result.root
    assert (13, 2, 3, 2, 1) == (
        result.records,
        result.inquiries,
        result.scratchpad,
        result.scratchpad_open,
        result.daily,
    )
    assert (2, 2, 1, 1) == (
        result.tombstones,
        result.forgotten,
        result.evidence,
        result.evidence_dropped,
    )
    assert ((PROFILE,), PROFILE) == (result.profiles, result.profile_id)
    text = render(store)
    assert [
        "- [ ] Add typecheck to the CI workflow",
        "- [ ] Write the release notes",
    ] == section(text, "Scratchpad").strip().splitlines()  # open items, in the file's order
    daily = section(text, "Daily Log (2026-05-20)")
    assert daily.startswith("\nSessions today: 3\n- 14:30 ## Typecheck cleanup")
    assert "Typecheck before a push #decision" in daily
    assert "echo" not in text  # tombstoned mem_echo, a 0.92 AVOID rule, is gone
    assert "Should typecheck run in CI" in section(text, "Open Questions")


def test_the_same_directory_imported_again_changes_nothing(store: Any, project: Path) -> None:
    """Upserts by stable keys: a second import writes the same rows, adds none."""
    import_pi(store, project)
    first = export(store)
    again = import_pi(store, project)
    assert first == export(store)
    assert (3, 1, 0) == (again.scratchpad, again.daily, again.scratchpad_removed)


@pytest.mark.parametrize("where", ["project", ".pi", "root", "settings"])
def test_every_way_to_name_the_directory_reads_the_same_root(
    store: Any, project: Path, where: str
) -> None:
    """The project root, its .pi dir, the memory root or the settings file itself."""
    path = {
        "project": project,
        ".pi": project / ".pi",
        "root": project / ".pi" / "pi-memory",
        "settings": project / ".pi" / "settings.json",
    }[where]
    result = import_pi(store, path)
    assert (project / ".pi" / "pi-memory", 13, 3) == (
        result.root,
        result.records,
        result.scratchpad,
    )
    # the settings (profile) are read when the path names the project, not the bare root
    assert (PROFILE if where != "root" else None) == result.profile_id


# -- scratchpad.md ------------------------------------------------------------------


def test_scratchpad_items_import_as_pi_shows_them(store: Any, tmp_path: Path) -> None:
    """One task per item: open ones active, '- [x]' done (never shown), keyed by their text."""
    pad = tmp_path / "scratchpad.md"
    pad.write_text(SCRATCHPAD + "- [] not an item\n", encoding="utf-8")
    result = import_pi(store, pad)
    assert (None, 3, 2) == (result.root, result.scratchpad, result.scratchpad_open)
    assert ["line 6: not a scratchpad item"] == [
        w.split(": ", 1)[1].split(" (")[0] for w in result.warnings
    ]
    rows = {r.content: r for r in store.list(category="scratchpad")}
    assert {"active", "done"} == {r.status for r in rows.values()}
    todo = rows["Add typecheck to the CI workflow"]
    assert ("task", "L3", "active") == (todo.memory_kind, todo.layer, todo.status)
    assert todo.key.startswith("pi-scratchpad:add-typecheck-to-the-ci-workflow:")
    assert "Fix the flaky auth test" not in render(store)


def test_a_scratchpad_edited_in_pi_is_mirrored_on_the_next_import(
    store: Any, tmp_path: Path
) -> None:
    """An item ticked off becomes done; one PI cleared (clearDone) is forgotten."""
    pad = tmp_path / "scratchpad.md"
    pad.write_text(SCRATCHPAD, encoding="utf-8")
    import_pi(store, pad)
    pad.write_text(
        "# Scratchpad\n\n- [x] Add typecheck to the CI workflow\n- [ ] Write the release notes\n",
        encoding="utf-8",
    )
    result = import_pi(store, pad)
    assert (2, 1, 1) == (result.scratchpad, result.scratchpad_open, result.scratchpad_removed)
    assert {
        "Add typecheck to the CI workflow": "done",
        "Write the release notes": "active",
    } == {r.content: r.status for r in store.list(category="scratchpad")}
    assert ["- [ ] Write the release notes"] == section(
        render(store), "Scratchpad"
    ).strip().splitlines()


def test_two_roots_in_one_store_keep_their_own_items_and_logs(store: Any, tmp_path: Path) -> None:
    """A global root and a project imported into one store: the second import forgot the
    first root's open items as "cleared" (they were not in its scratchpad.md) and replaced
    its daily log of the same day. Each root now clears only its own items, and a day's
    log of another root gets a key of its own."""
    roots = [tmp_path / name / "pi-memory" for name in ("global", "project")]
    for n, root in enumerate(roots):
        (root / "daily").mkdir(parents=True)
        (root / "scratchpad.md").write_text(f"# Scratchpad\n\n- [ ] item of root {n}\n")
        (root / "daily" / "2026-03-01.md").write_text(f"## Session of root {n}\n")
    first, second = (import_pi(store, root) for root in roots)
    assert (0, 0) == (first.scratchpad_removed, second.scratchpad_removed)
    open_items = {r.content for r in store.list(category="scratchpad")}
    assert {"item of root 0", "item of root 1"} == open_items
    logs = {r.content.strip() for r in store.list(category="daily")}
    assert {"## Session of root 0", "## Session of root 1"} == logs
    # Each root's own import still mirrors its edits, and imports again as the same rows.
    (roots[0] / "scratchpad.md").write_text("# Scratchpad\n")
    assert 1 == import_pi(store, roots[0]).scratchpad_removed
    assert {"item of root 1"} == {r.content for r in store.list(category="scratchpad")}
    import_pi(store, roots[1])
    assert 2 == len(store.list(category="daily"))


def test_cli_imports_a_scratchpad_instead_of_parsing_json(tmp_path: Path) -> None:
    """Before: 'Error: scratchpad.md: line 1: Expecting value: line 1 column 1 (char 0)'."""
    pad = tmp_path / "scratchpad.md"
    pad.write_text(SCRATCHPAD, encoding="utf-8")
    result = pi_cli(str(pad), "--db", str(tmp_path / "m.db"))
    assert 0 == result.exit_code, result.output
    assert f"imported from PI {pad}: 3 scratchpad items" in result.output
    with SQLiteStore(tmp_path / "m.db") as db:
        assert 3 == len(db.list(category="scratchpad"))


# -- daily/YYYY-MM-DD.md ----------------------------------------------------------------


def test_a_daily_log_imports_as_the_days_daily_entry(store: Any, project: Path) -> None:
    """One 'daily' record per day, its time the file's last append that day."""
    day = project / ".pi" / "pi-memory" / "daily" / "2026-05-20.md"
    result = import_pi(store, day)
    assert (1, None) == (result.daily, result.root)
    (row,) = store.list(category="daily")
    assert ("pi-daily:2026-05-20", DAILY.strip(), "L3") == (row.key, row.content, row.layer)
    assert "2026-05-20T14:30:00+00:00" == row.timestamp.isoformat()
    assert "Sessions today: 3" in section(render(store), "Daily Log (2026-05-20)")


def test_a_daily_log_copied_later_is_dated_by_its_name(store: Any, tmp_path: Path) -> None:
    """A file whose modification time is another day (a copy) is put at 00:00 UTC of its day."""
    day = tmp_path / "daily" / "2026-05-18.md"
    day.parent.mkdir()
    day.write_text("## Planning\n- picked bun #decision\n", encoding="utf-8")
    import_pi(store, day)
    (row,) = store.list(category="daily")
    assert "2026-05-18T00:00:00+00:00" == row.timestamp.isoformat()
    assert "Daily Log" not in render(store)  # not today's log


def test_cli_imports_a_daily_log(tmp_path: Path, project: Path) -> None:
    day = project / ".pi" / "pi-memory" / "daily" / "2026-05-20.md"
    result = pi_cli(str(day), "--db", str(tmp_path / "m.db"))
    assert 0 == result.exit_code, result.output
    assert "1 daily log" in result.output


# -- tombstones ---------------------------------------------------------------------


def test_a_tombstoned_record_is_absent_even_though_its_file_holds_it(
    store: Any, project: Path
) -> None:
    """PI's deletion_forgetting: absent from hard rules, search and the block; a privacy
    purge keeps no text, an audit-preserving delete keeps it for the export only."""
    import_pi(store, project)
    for key in ("mem_echo", "mem_commits"):
        assert store.get(key) is None
        assert key not in {e.key for e in store.recall("echo file writes conventional commits", 10)}
    rows = {r["key"]: r for r in export(store)}
    purged, audited = rows["mem_echo"], rows["mem_commits"]
    assert ("[deleted]", [], "deleted") == (purged["content"], purged["tags"], purged["status"])
    assert "evidence" not in json.dumps(purged["metadata"])  # nor its evidence lines
    assert "2026-05-19T12:00:00.000000Z" == purged["deleted_at"]
    assert ("Use conventional commits", "deleted") == (audited["content"], audited["status"])
    assert "audit_preserving" == audited["metadata"]["pi_tombstone"]["deletion_mode"]
    assert "Use conventional commits" not in render(store, "which commits convention do we use?")


def test_tombstones_imported_later_forget_what_an_earlier_import_wrote(
    store: Any, project: Path
) -> None:
    """A PI user who imported before deleting: the tombstones file alone forgets the record."""
    memory = project / ".pi" / "pi-memory" / "memory"
    store.import_jsonl(memory / "L2.playbooks.jsonl")
    assert store.get("mem_echo") is not None
    result = import_pi(store, memory / "tombstones.jsonl")
    assert (2, 2, 0) == (result.tombstones, result.forgotten, result.written)
    assert store.get("mem_echo") is None and store.get("mem_commits") is None
    assert "echo" not in render(store)


# -- evidence.jsonl -----------------------------------------------------------------


def test_evidence_lines_are_kept_with_their_records(store: Any, project: Path) -> None:
    """Each line in its record's metadata; one naming only a purged record is not kept."""
    import_pi(store, project)
    record = store.get("mem_20260520_abc")
    assert record is not None and record.metadata is not None
    (kept,) = record.metadata["evidence_records"]
    assert ("ev_bun", "daily/2026-05-20.md") == (kept["id"], kept["source_ref"])
    assert [{"type": "user_correction", "ref": "daily/2026-05-20.md"}] == [
        {k: e[k] for k in ("type", "ref")} for e in record.metadata["evidence"]
    ]  # the record's own inline evidence stays too


def test_an_evidence_file_alone_reaches_records_already_imported(store: Any, project: Path) -> None:
    memory = project / ".pi" / "pi-memory" / "memory"
    store.import_jsonl(memory / "L2.playbooks.jsonl")
    result = import_pi(store, memory / "evidence.jsonl")
    assert (2, 2, 2) == (result.evidence, result.updated, result.written)  # no tombstone read
    record = store.get("mem_20260520_abc")
    assert record is not None and record.metadata is not None
    assert ["ev_bun"] == [e["id"] for e in record.metadata["evidence_records"]]
    assert 0.92 == record.confidence  # nothing else of the record changed
    echo = store.get("mem_echo")
    assert echo is not None and echo.metadata is not None
    assert ["deleted"] == [e["redaction_status"] for e in echo.metadata["evidence_records"]]


# -- profiles.jsonl and .pi/settings.json -------------------------------------------


def test_profiles_are_listed_not_stored(store: Any, project: Path) -> None:
    """Profiles are resolved per turn here (memory_inject.profile): nothing is written."""
    result = import_pi(store, project / ".pi" / "pi-memory" / "memory" / "profiles.jsonl")
    assert ((PROFILE,), 0, 0) == (result.profiles, result.written, store.count())


def test_settings_name_the_profile_and_the_root(store: Any, tmp_path: Path) -> None:
    """projectIdentity.project_id is slugged as PI does; a settings file with no localPath
    imports nothing (not even a memory/ folder of the project) and says where PI keeps that
    project's memory."""
    settings = tmp_path / "proj" / ".pi" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps(
            {"pi-persistent-intelligence": {"projectIdentity": {"project_id": "My Project"}}}
        ),
        encoding="utf-8",
    )
    _jsonl(tmp_path / "proj" / "memory" / "notes.jsonl", [{"key": "k", "content": "code"}])
    result = import_pi(store, tmp_path / "proj")  # the project's own memory/ is not PI's
    assert (PROFILE, None, 0) == (result.profile_id, result.root, result.written)
    assert "no localPath" in result.warnings[0]
    # "pi-pi".localPath (PI's short alias) + /pi-memory
    write_pi_project(tmp_path / "other")
    alias = tmp_path / "other" / ".pi" / "settings.json"
    alias.write_text(json.dumps({"pi-pi": {"localPath": ".pi"}}), encoding="utf-8")
    assert tmp_path / "other" / ".pi" / "pi-memory" == import_pi(store, alias).root


def test_cli_imports_a_pi_project_and_says_which_profile_to_set(
    tmp_path: Path, project: Path
) -> None:
    """Before: "Error: Invalid value for 'FILE': File '...' is a directory."."""
    db = tmp_path / "m.db"
    result = pi_cli(str(project), "--db", str(db))
    assert 0 == result.exit_code, result.output
    assert (
        f"imported from PI {project / '.pi' / 'pi-memory'}: 13 records, 2 inquiries, "
        "3 scratchpad items, 1 daily log, 2 tombstones, 2 records forgotten, 1 evidence line, "
        "1 profile listed"
    ) in result.output
    assert 'set governance: {profile_id: "project:my-project"}' in result.output
    # config/agents/pi.yaml already sets that profile: no note
    again = pi_cli(str(project), "--db", str(db), "--agent", str(PI_AGENT))
    assert 0 == again.exit_code, again.output
    assert "profile_id" not in again.output


def test_cli_imports_a_pi_project_into_postgres(tmp_path: Path, project: Path, pg_dsn: str) -> None:
    """The agent's PostgreSQL backend, as the CLI opens it."""
    from memory_inject.storage.postgres import PostgresStore
    from tests.storage._pg_backend import scratch_database

    with scratch_database(pg_dsn) as dsn:
        agent = tmp_path / "agent.yaml"
        agent.write_text(
            PI_AGENT.read_text(encoding="utf-8").replace(
                "backend: {kind: sqlite, path: .memory/pi.db}",
                f"backend: {{kind: postgres, dsn: {json.dumps(dsn)}}}",
            ),
            encoding="utf-8",
        )
        for _ in range(2):
            result = pi_cli(str(project), "--agent", str(agent))
            assert 0 == result.exit_code, result.output
        with PostgresStore(dsn) as pg:
            assert "- [ ] Write the release notes" in render(pg)
            assert 3 == len(pg.list(category="scratchpad"))  # twice imported, once written


# -- bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "text", "message"),
    [
        (
            "memory/tombstones.jsonl",
            '{"deleted_record_id": "mem_echo"}\n{"deleted_record_id": ""}\n',
            "tombstones.jsonl: line 2: 'deleted_record_id' must be a non-empty string",
        ),
        (
            "memory/tombstones.jsonl",
            '{"deleted_record_id": "mem_echo", "deleted_at": "yesterday"}\n',
            "tombstones.jsonl: line 1: 'deleted_at' must be an RFC 3339 date-time",
        ),
        (
            "memory/evidence.jsonl",
            '{"id": "e"}\n\n{"related_memory_ids": "mem_abc"}\n',
            "evidence.jsonl: line 3: 'related_memory_ids' must be a list of strings",
        ),
        ("memory/profiles.jsonl", "{not json}\n", "profiles.jsonl: line 1: not a JSON line"),
        (
            "memory/L2.playbooks.jsonl",
            json.dumps({**LINES[0], "confidence": 92}) + "\n",
            "L2.playbooks.jsonl: line 1: PI record 'mem_20260520_abc'",
        ),
        ("scratchpad.md", "- [ ] fine\n- [ ] caf\xe9\n", "scratchpad.md: line 2: not UTF-8"),
        ("daily/2026-02-30.md", "## notes\n", "2026-02-30.md: '2026-02-30' is not a date"),
    ],
)
def test_bad_input_names_the_file_and_line_and_writes_nothing(
    store: Any, project: Path, rel: str, text: str, message: str
) -> None:
    root = project / ".pi" / "pi-memory"
    path = root / rel
    path.write_bytes(text.encode("latin-1") if "\xe9" in text else text.encode("utf-8"))
    for target in (root, path):
        with pytest.raises(ValueError, match=r"PI record|line|date") as err:
            import_pi(store, target)
        assert str(path) in str(err.value) and message in str(err.value)
    assert 0 == store.count()


def test_bad_settings_and_unknown_paths_are_named(store: Any, tmp_path: Path) -> None:
    settings = tmp_path / "proj" / ".pi" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{\n  "pi-persistent-intelligence": {,}\n}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"settings.json: line 2: not valid JSON"):
        import_pi(store, tmp_path / "proj")
    settings.write_text(json.dumps({"pi-persistent-intelligence": {"localPath": "gone"}}))
    with pytest.raises(ValueError, match=r"localPath 'gone' is not a directory"):
        import_pi(store, settings)
    with pytest.raises(ValueError, match="no PI memory here"):
        import_pi(store, tmp_path)
    notes = tmp_path / "notes.md"
    notes.write_text("# notes\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"imports as PI's scratchpad\.md or a daily log"):
        import_pi(store, notes)


def test_cli_errors_name_the_file_and_line(tmp_path: Path) -> None:
    pad = tmp_path / "scratchpad.md"
    pad.write_bytes(b"- [ ] ok\n- [ ] \xff\n")
    result = pi_cli(str(pad), "--db", str(tmp_path / "m.db"))
    assert 1 == result.exit_code
    assert f"Error: {pad}: line 2: not UTF-8 text" in result.output


def test_what_has_no_home_is_reported_not_imported(store: Any, project: Path) -> None:
    root = project / ".pi" / "pi-memory"
    _jsonl(root / "inbox" / "captured.jsonl", [{"id": "cand_1", "text": "maybe use pnpm"}])
    _jsonl(root / "memory" / "reinforcement.jsonl", [{"memory_id": "mem_abc", "outcome": "used"}])
    (root / "daily" / "notes.txt").write_text("scratch\n", encoding="utf-8")
    result = import_pi(store, project)
    assert 13 == result.records
    reported = "\n".join(result.warnings)
    for name in ("inbox: not imported", "reinforcement.jsonl: not imported", "notes.txt"):
        assert name in reported
    assert "maybe use pnpm" not in json.dumps(export(store))


def test_is_pi_path_leaves_json_lines_and_founder_os_to_the_old_import(tmp_path: Path) -> None:
    (tmp_path / "dump.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "memory.db").write_text("", encoding="utf-8")
    assert not is_pi_path(tmp_path / "dump.jsonl") and not is_pi_path(tmp_path / "memory.db")
    assert is_pi_path(tmp_path) and is_pi_path(tmp_path / "scratchpad.md")
    assert "nothing" == PiImport().summary()
