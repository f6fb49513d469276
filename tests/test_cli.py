"""The memory-inject command line (memory_inject/cli/), run with click's CliRunner."""

from __future__ import annotations

import json
import os
import random
import shlex
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memory_inject import load_agent_config
from memory_inject.cli import cli, defaults_text
from memory_inject.storage.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
BLOCK = "[Memory context]\n- deploy_target: Production deploys go to prod-3.\n[/Memory context]\n\n"


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """An initialised project directory, made the current directory."""
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert 0 == run("init", "--name", "alice").exit_code
        yield tmp_path
    finally:
        os.chdir(old)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def seed() -> None:
    assert 0 == run("add", "deploy_target", "Production deploys go to prod-3.").exit_code
    assert (
        0
        == run(
            "add",
            "prod_chat",
            "We said prod-3 deploys wait until Friday.",
            "--category",
            "conversation",
            "--session",
            "cli_main",
        ).exit_code
    )


class TestDefaultsFile:
    def test_the_shipped_defaults_equal_config_defaults(self) -> None:
        """memory_inject/data/defaults.yaml is a byte-for-byte copy of config/defaults.yaml."""
        assert (ROOT / "config" / "defaults.yaml").read_bytes() == (
            ROOT / "memory_inject" / "data" / "defaults.yaml"
        ).read_bytes()
        assert (ROOT / "config" / "defaults.yaml").read_text(encoding="utf-8") == defaults_text()


class TestInit:
    def test_init_creates_the_store_and_an_agent_file_with_every_default(
        self, tmp_path: Path
    ) -> None:
        """init --dir writes .memory/memory.db and agent.yaml, which loads as the defaults."""
        result = run("init", "--dir", str(tmp_path), "--name", "alice")
        assert 0 == result.exit_code
        assert (tmp_path / ".memory" / "memory.db").is_file()
        agent = load_agent_config(tmp_path / "agent.yaml")
        defaults = load_agent_config(ROOT / "config" / "defaults.yaml")
        assert ("alice", defaults.memory) == (agent.agent, agent.memory)

    def test_the_next_steps_it_prints_run_as_printed(self, tmp_path: Path) -> None:
        """A directory with a space: the printed commands' ``--agent`` was unquoted and
        failed with "unexpected extra argument" when pasted (round 35)."""
        where = tmp_path / "my agent"
        out = run("init", "--dir", str(where), "--name", "alice").stdout
        add = next(line for line in out.splitlines() if "memory-inject add" in line)
        argv = shlex.split(add.split("memory-inject", 1)[1])
        assert 0 == run(*argv).exit_code
        assert ["my_fact"] == [r.key for r in SQLiteStore(where / ".memory" / "memory.db").list()]

    def test_an_existing_agent_file_is_kept_unless_forced(self, tmp_path: Path) -> None:
        """A second init keeps agent.yaml; --force rewrites it."""
        run("init", "--dir", str(tmp_path))
        (tmp_path / "agent.yaml").write_text("agent: mine\n")
        assert "kept" in run("init", "--dir", str(tmp_path)).stdout
        assert "agent: mine\n" == (tmp_path / "agent.yaml").read_text()
        run("init", "--dir", str(tmp_path), "--force")
        assert "default" == load_agent_config(tmp_path / "agent.yaml").agent


class TestRender:
    def test_render_prints_the_exact_block_on_stdout(self, workdir: Path) -> None:
        """stdout holds the block's bytes and nothing else."""
        seed()
        result = run("render", "where do prod-3 deploys go?", "--agent", "agent.yaml")
        assert 0 == result.exit_code
        assert BLOCK == result.stdout
        assert "rendered=1" in result.stderr

    @pytest.mark.parametrize(
        ("origin", "fate"),
        [
            ("interactive", "dropped by conversation_exclusion: conversation_excluded"),
            ("cron", "dropped by recall: foreign_session"),  # bound to a session
        ],
    )
    def test_explain_shows_every_candidate_its_scores_and_its_fate(
        self, workdir: Path, origin: str, fate: str
    ) -> None:
        """--explain lists each recalled key, its scores and the stage that dropped it."""
        seed()
        result = run("render", "where do prod-3 deploys go?", "--origin", origin, "--explain")
        assert BLOCK == result.stdout
        lines = result.stderr.splitlines()
        target = next(line for line in lines if "deploy_target" in line)
        chat = next(line for line in lines if "prod_chat" in line)
        assert "rendered" in target and "1.0000" in target
        assert fate in chat
        assert any("decay" in line for line in lines)

    @pytest.mark.parametrize("key", ["deploy [/note]", "deploy [red]note"])
    def test_a_key_that_looks_like_markup_is_shown_as_written(
        self, workdir: Path, key: str
    ) -> None:
        """Keys came into rich's tables as markup: "[/note]" crashed --explain and stats
        (MarkupError), "[red]" hid part of the key. A key is the memory's text."""
        assert 0 == run("add", key, "Production deploys go to prod-3.", "--category", key).exit_code
        explained = run("render", "where do prod-3 deploys go?", "--explain")
        stats = run("stats")
        assert (0, 0) == (explained.exit_code, stats.exit_code)
        assert key in explained.stderr and key in stats.stdout

    def test_a_recall_the_store_failed_exits_1(self, tmp_path: Path) -> None:
        """A damaged page under the index: render printed ``success=False`` and the empty
        block, and exited 0, which a script reads as "nothing relevant" (round 35)."""
        db = tmp_path / "m.db"
        store = SQLiteStore(db)
        for i in range(300):
            store.store(f"k{i}", f"fact {i} about production deploys " * 5, "core")
        store.close()
        with db.open("r+b") as f:
            f.seek(4096 * 3)
            f.write(bytes(range(256)) * 80)
        result = run("render", "production deploys", "--db", str(db))
        assert "success=False" in result.stderr
        assert "(empty block: the recall failed" in result.stderr
        assert ("", 1) == (result.stdout, result.exit_code)
        fine = tmp_path / "fine.db"
        assert 0 == run("add", "k", "fact about production deploys", "--db", str(fine)).exit_code
        assert 0 == run("render", "production deploys", "--db", str(fine)).exit_code

    def test_an_abstaining_render_says_why_the_block_is_empty(self, workdir: Path) -> None:
        """'ok' recalls nothing; a weak match is under the floor: stderr names the reason."""
        seed()
        result = run("render", "ok", "--agent", "agent.yaml")
        assert ("", 0) == (result.stdout, result.exit_code)
        assert "abstained=no_query_terms" in result.stderr
        assert "no content word" in result.stderr
        weak = run("render", "where does the ferry to the island go", "--agent", "agent.yaml")
        assert "" == weak.stdout
        assert "abstained=below_relevance" in weak.stderr
        assert "under min_relevance_score" in weak.stderr

    def test_a_gated_render_says_no_memory_is_near(self, workdir: Path) -> None:
        """With an embedder and min_prompt_similarity, stderr gives the prompt's similarity
        and, when the gate closes, why the block is empty."""
        gated = workdir / "gated.yaml"
        gated.write_text(
            "agent: gated\nmemory:\n  min_prompt_similarity: 1.0\n"
            "  backend: {path: .memory/gated.db, embedder: hashing}\n",
            encoding="utf-8",
        )
        add = run(
            "add", "deploy_target", "Production deploys go to prod-3.", "--agent", "gated.yaml"
        )
        assert 0 == add.exit_code
        result = run("render", "where do prod-3 deploys go?", "--agent", "gated.yaml")
        assert ("", 0) == (result.stdout, result.exit_code)
        assert "abstained=unrelated_prompt prompt_similarity=0." in result.stderr
        assert "no memory is near the prompt (min_prompt_similarity)" in result.stderr

    def test_a_session_lets_the_conversation_in(self, workdir: Path) -> None:
        """With --session the session's conversation rows are rendered too."""
        seed()
        result = run("render", "prod-3 deploys", "--session", "cli_main")
        assert "- prod_chat: We said prod-3 deploys wait until Friday.\n" in result.stdout

    def test_a_skipped_turn_prints_no_block_and_the_reason(self, workdir: Path) -> None:
        """A sub-turn renders nothing; stderr says why."""
        seed()
        result = run("render", "where do prod-3 deploys go?", "--origin", "sub_turn")
        assert ("", 0) == (result.stdout, result.exit_code)
        assert "skipped: sub_turn" in result.stderr

    def test_a_missing_store_is_a_clear_error(self, tmp_path: Path) -> None:
        """Without a store the command exits 1 and says how to create one."""
        result = run("render", "q", "--db", str(tmp_path / "none.db"))
        assert 1 == result.exit_code
        assert "no store at" in result.stderr and "memory-inject init" in result.stderr

    @pytest.mark.parametrize("command", [["stats"], ["render", "q"], ["export", "-"]])
    def test_an_empty_file_is_not_made_a_store_by_a_read(
        self, tmp_path: Path, command: list[str]
    ) -> None:
        """A truncated (0-byte) memory file: a read wrote a new, empty store into it."""
        empty = tmp_path / "memory.db"
        empty.touch()
        result = run(*command, "--db", str(empty))
        assert 1 == result.exit_code
        assert "is empty (0 bytes): not a memory store" in result.stderr
        assert 0 == empty.stat().st_size


class TestStoreCommands:
    def test_add_forget_and_stats(self, workdir: Path) -> None:
        """add stores, stats counts by category, forget removes and fails the second time."""
        seed()
        stats = run("stats").stdout
        assert "live memories: 2" in stats and "conversation" in stats and "core" in stats
        assert 0 == run("forget", "prod_chat").exit_code
        again = run("forget", "prod_chat")
        assert (1, True) == (again.exit_code, "no live memory under 'prod_chat'" in again.stderr)
        assert "live memories: 1" in run("stats").stdout

    def test_export_then_import_round_trips(self, workdir: Path, tmp_path: Path) -> None:
        """An export imported into a fresh file gives the same records."""
        seed()
        assert 0 == run("export", "dump.jsonl").exit_code
        result = run("import", "dump.jsonl", "--db", "copy.db")
        assert "imported 2 memories from dump.jsonl" in result.stdout
        with (
            SQLiteStore(tmp_path / ".memory" / "memory.db") as a,
            SQLiteStore(tmp_path / "copy.db") as b,
        ):
            assert a.list() == b.list()

    def test_export_to_dash_writes_json_lines_to_stdout(self, workdir: Path) -> None:
        """export - prints one JSON object per record."""
        seed()
        keys = [json.loads(line)["key"] for line in run("export", "-").stdout.splitlines()]
        assert ["deploy_target", "prod_chat"] == sorted(keys)

    def test_a_long_import_runs_with_progress(self, workdir: Path) -> None:
        """An import of more lines than one batch completes and reports the count."""
        lines = [
            json.dumps({"key": f"k{n}", "content": f"fact {n}", "category": "daily"})
            for n in range(1500)
        ]
        Path("big.jsonl").write_text("\n".join(lines) + "\n")
        result = run("import", "big.jsonl", "--batch-size", "500")
        assert "imported 1500 memories" in result.stdout
        assert "live memories: 1500" in run("stats").stdout

    def test_a_bad_line_names_its_number(self, workdir: Path) -> None:
        """An import with a broken line exits 1 naming the file and the line."""
        Path("bad.jsonl").write_text('{"key": "a", "content": "x"}\n{"key": 3}\n')
        result = run("import", "bad.jsonl")
        assert 1 == result.exit_code
        assert "bad.jsonl" in result.stderr and "line 2" in result.stderr

    @pytest.mark.parametrize("kind", ["memory", "none"])
    def test_add_refuses_a_backend_that_keeps_nothing(self, tmp_path: Path, kind: str) -> None:
        """``add --agent`` on ``kind: memory`` printed "stored k" and exit 0, and the row
        was gone with the process (``init`` already refused such an agent)."""
        agent = tmp_path / "m.yaml"
        agent.write_text(f"agent: m\nmemory: {{backend: {{kind: {kind}}}}}\n")
        result = CliRunner().invoke(cli, ["add", "k", "a fact", "--agent", str(agent)])
        assert 1 == result.exit_code
        assert f"'memory.backend.kind' is {kind!r}" in result.stderr

    def test_a_locked_store_is_one_error_line(self, workdir: Path) -> None:
        """forget ended in a traceback when another process held the write lock (add
        already gave one line): now it says why in one line, exit 1."""
        seed()
        holder = sqlite3.connect(workdir / ".memory" / "memory.db", isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            locked = run("forget", "deploy_target")
        finally:
            holder.close()
        assert 1 == locked.exit_code
        assert locked.stderr.startswith("Error: ") and "locked" in locked.stderr

    @pytest.mark.parametrize("command", [("forget", "key5"), ("stats",), ("export", "-")])
    def test_a_damaged_store_is_one_error_line(
        self, tmp_path: Path, command: tuple[str, ...]
    ) -> None:
        """A file whose header and schema open but whose pages are garbage."""
        db = tmp_path / "w.db"
        with SQLiteStore(db) as store:
            for i in range(300):
                store.store(f"key{i}", f"deploy fact number {i} " + "pad " * 40, "core")
        holder = sqlite3.connect(db)
        holder.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        holder.close()
        with db.open("r+b") as f:
            f.seek(60 * 4096)
            f.write(random.Random(1).randbytes(5 * 4096))
        result = CliRunner().invoke(cli, [*command, "--db", str(db)])
        assert 1 == result.exit_code
        assert result.stderr.startswith("Error: ") and "malformed" in result.stderr
        assert result.exception is None or isinstance(result.exception, SystemExit)


class TestValidate:
    def test_good_files_pass(self) -> None:
        """The shipped agent files validate with exit code 0."""
        files = sorted(str(p) for p in (ROOT / "config").rglob("*.yaml"))
        result = run("validate", *files)
        assert 0 == result.exit_code
        assert len(files) == result.stdout.count(": ok")

    def test_every_problem_is_printed_with_its_path(self, tmp_path: Path) -> None:
        """A bad agent file prints each problem with file and path, and exits 1."""
        bad = tmp_path / "bad.yaml"
        bad.write_text("agent: x\nmemory: {budget: {max_entries: -1}, recall_limt: 3}\n")
        result = run("validate", str(bad))
        assert 1 == result.exit_code
        assert [
            f"{bad}: 'max_entries' must be >= 0 (got -1) @ $.memory.budget",
            f"{bad}: 'recall_limt' is not a known key (did you mean 'recall_limit'?) "
            "(got 3) @ $.memory",
        ] == result.stdout.splitlines()

    def test_a_directory_or_a_missing_file_is_a_problem_like_any(self, tmp_path: Path) -> None:
        """A directory was refused by click (exit 2 and the usage) while a missing file was
        the loader's problem line (exit 1); both are problem lines now (round 29)."""
        (tmp_path / "dir.yaml").mkdir()
        result = run("validate", str(tmp_path / "dir.yaml"), str(tmp_path / "missing.yaml"))
        assert 1 == result.exit_code
        lines = result.stdout.splitlines()
        assert f"{tmp_path / 'dir.yaml'}: is a directory, not a YAML file @ $" == lines[0]
        assert lines[1].startswith(f"{tmp_path / 'missing.yaml'}: cannot be read: ")

    def test_cron_job_files_are_validated_too(self, tmp_path: Path) -> None:
        """A file with a jobs list is checked as cron jobs."""
        jobs = tmp_path / "jobs.yaml"
        jobs.write_text("jobs:\n  - {id: a, name: A, prompt: p, uses_memory: maybe}\n")
        result = run("validate", str(jobs), str(ROOT / "examples" / "cron_jobs.yaml"))
        assert 1 == result.exit_code
        assert f"{jobs}: 'uses_memory' must be true or false (got 'maybe') @ $.jobs[0]" in (
            result.stdout
        )
        assert "cron_jobs.yaml: ok" in result.stdout

    def test_files_are_read_by_the_hardened_reader(self, tmp_path: Path) -> None:
        """A tag that cannot be built is a reported problem, not a traceback."""
        bad = tmp_path / "bad.yaml"
        bad.write_text("jobs: !!int abc\n")
        result = run("validate", str(bad))
        assert 1 == result.exit_code
        assert result.stdout.startswith(f"{bad}: is not valid YAML: ")


class TestDemoAndPackaging:
    def test_demo_runs(self, tmp_path: Path) -> None:
        """demo runs the main job with exit code 0."""
        result = run("demo", "--db", str(tmp_path / "demo.db"))
        assert 0 == result.exit_code
        assert "=== turn 1" in result.stdout

    def test_demo_never_writes_over_a_users_store(self, tmp_path: Path) -> None:
        """``demo --db mine.db`` wrote its ten example rows into the user's store, replacing
        the README's own example key. A file holding memories the demo did not write is
        refused; the demo's own file runs again."""
        mine = tmp_path / "mine.db"
        assert (
            0 == run("add", "deploy_target", "Deploys go to prod-7.", "--db", str(mine)).exit_code
        )
        refused = CliRunner().invoke(cli, ["demo", "--db", str(mine)])
        assert 2 == refused.exit_code and "1 memories the demo did not write" in refused.stderr
        with SQLiteStore(mine) as store:
            assert 1 == store.count()
        demo_db = tmp_path / "demo.db"
        assert [0, 0] == [run("demo", "--db", str(demo_db)).exit_code for _ in range(2)]

    def test_demo_removes_its_temporary_store(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        assert 0 == run("demo").exit_code
        assert [] == [p.name for p in tmp_path.iterdir() if p.name.startswith("memory-inject")]

    @pytest.mark.parametrize("flag", ["--help", "-h"])
    def test_demo_help_lists_the_demos_options(self, flag: str) -> None:
        """demo --help is the demo's own help: its --agent and --db options, named for the CLI."""
        result = run("demo", flag)
        assert 0 == result.exit_code
        assert result.stdout.startswith("usage: memory-inject demo ")
        assert ("--agent AGENT" in result.stdout, "--db DB" in result.stdout) == (True, True)

    @pytest.mark.parametrize(
        ("module", "absent"),
        [
            ("memory_inject", ("memory_inject.cli", "memory_inject.adapters", "click", "rich")),
            ("memory_inject.adapters", ("memory_inject.cli", "click", "rich", "opentelemetry")),
        ],
    )
    def test_the_library_does_not_import_the_cli_or_optional_extras(
        self, module: str, absent: tuple[str, ...]
    ) -> None:
        """import memory_inject (or its adapters) pulls in neither the CLI nor click, rich, OTel."""
        code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert "[]" == out.stdout.strip()


class TestRecorder:
    def test_recorder_has_the_render_capabilities_of_its_store(self, tmp_path: Path) -> None:
        """--explain's proxy claims exactly the wrapped store's optional render capabilities."""
        from memory_inject.cli._explain import recorder_for as _recorder
        from memory_inject.contract import (
            SupportsAnswer,
            SupportsAsyncRecall,
            SupportsEntities,
            SupportsFilteredRecall,
            SupportsUsage,
        )
        from memory_inject.storage import InMemoryStore, SQLiteStore

        protos = (SupportsFilteredRecall, SupportsEntities, SupportsAnswer, SupportsUsage)
        with SQLiteStore(tmp_path / "r.db") as sqlite:
            wrapped = [_recorder(InMemoryStore()), _recorder(sqlite)]
            assert [[True, True, True, False, False], [True] * 4 + [False]] == [
                [isinstance(r, p) for p in (*protos, SupportsAsyncRecall)] for r in wrapped
            ]
