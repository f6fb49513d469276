"""Issue 11, paths: a relative backend.path is relative to its agent file, for every caller."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memory_inject import load_agent_config, open_store
from memory_inject.cli import cli
from memory_inject.storage.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[Path]:
    """A current directory that is not the agent file's."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        yield tmp_path
    finally:
        os.chdir(old)


class TestOpenStore:
    def test_a_relative_path_is_relative_to_the_agent_file(self, elsewhere: Path) -> None:
        """open_store(load_agent_config(file)) opens the file's store from any directory."""
        agents = elsewhere / "project" / "agents"
        agents.mkdir(parents=True)
        (agents / "bob.yaml").write_text("agent: bob\nmemory: {backend: {path: data/bob.db}}\n")
        store = open_store(load_agent_config(agents / "bob.yaml"))
        assert isinstance(store, SQLiteStore)
        store.close()
        assert (agents / "data" / "bob.db").is_file()
        assert not (elsewhere / "cwd" / "data").exists()

    def test_a_file_loaded_by_a_relative_name_opens_its_store_after_a_chdir(
        self, elsewhere: Path
    ) -> None:
        """A daemon loads "agents/bob.yaml" and then changes directory: its store is still
        the file's (the agent's source was kept relative, and a second, empty database
        was made next to the new directory)."""
        agents = elsewhere / "cwd" / "agents"
        agents.mkdir()
        (agents / "bob.yaml").write_text("agent: bob\nmemory: {backend: {path: data/bob.db}}\n")
        agent = load_agent_config("agents/bob.yaml")
        first = open_store(agent)
        assert isinstance(first, SQLiteStore)
        first.store("deploy", "Deploys go to prod-3.")
        first.close()
        os.chdir(elsewhere)
        second = open_store(agent)
        assert isinstance(second, SQLiteStore)
        assert 1 == second.count()
        second.close()
        assert not (elsewhere / "agents").exists()

    def test_a_path_under_the_home_folder_is_expanded(
        self, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ "~/..." is the home folder, not a folder named "~" beside the agent file."""
        home = elsewhere / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        (elsewhere / "bob.yaml").write_text("agent: bob\nmemory: {backend: {path: ~/m/bob.db}}\n")
        store = open_store(load_agent_config(elsewhere / "bob.yaml"))
        assert isinstance(store, SQLiteStore)
        store.store("deploy", "Deploys go to prod-3.")
        store.close()
        assert (home / "m" / "bob.db").is_file()
        assert not (elsewhere / "~").exists()


class TestCli:
    def test_init_dir_then_add_and_render_with_its_agent_use_one_store(
        self, elsewhere: Path
    ) -> None:
        """init --dir D, then add/render --agent D/agent.yaml without cd: one store, D's."""
        assert 0 == run("init", "--dir", "myagent", "--name", "alice").exit_code
        add = run("add", "deploy_target", "Deploys go to prod-3.", "--agent", "myagent/agent.yaml")
        render = run("render", "where do deploys go?", "--agent", "myagent/agent.yaml")
        assert (0, 0) == (add.exit_code, render.exit_code)
        assert "- deploy_target: Deploys go to prod-3." in render.stdout
        assert not (elsewhere / "cwd" / ".memory").exists()
        store = SQLiteStore(elsewhere / "cwd" / "myagent" / ".memory" / "memory.db")
        assert 1 == store.count()
        store.close()

    def test_init_prints_next_steps_that_work_from_here(self, elsewhere: Path) -> None:
        """The commands init suggests name the agent file, so they run from this directory."""
        out = run("init", "--dir", "myagent").stdout
        steps = [
            line[line.index("memory-inject") :]
            for line in out.splitlines()
            if "memory-inject" in line
        ]
        results = [run(*shlex.split(step)[1:]) for step in steps]
        assert [0, 0] == [r.exit_code for r in results]
        store = SQLiteStore(elsewhere / "cwd" / "myagent" / ".memory" / "memory.db")
        assert ["my_fact"] == [r.key for r in store.list()]
        store.close()

    def test_init_agent_creates_the_store_an_agent_file_names(self, elsewhere: Path) -> None:
        """init --agent FILE creates FILE's store (relative to FILE) and writes no agent.yaml."""
        agents = elsewhere / "agents"
        agents.mkdir()
        (agents / "a.yaml").write_text("agent: a\nmemory: {backend: {path: .memory/a.db}}\n")
        result = run("init", "--agent", str(agents / "a.yaml"))
        assert 0 == result.exit_code
        assert (agents / ".memory" / "a.db").is_file()
        assert not (elsewhere / "cwd" / "agent.yaml").exists()
        assert 0 == run("stats", "--agent", str(agents / "a.yaml")).exit_code


class TestReadme:
    def test_the_readmes_commands_run_in_order_in_a_fresh_clone(self, elsewhere: Path) -> None:
        """Every memory-inject command of README.md's bash blocks (bar the demo) exits 0 in a
        copy of the repository's config/, in the order written."""
        clone = elsewhere / "clone"
        shutil.copytree(ROOT / "config", clone / "config")
        os.chdir(clone)
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
        commands = [
            line.strip()
            for block in blocks
            for line in block.splitlines()
            if line.strip().startswith("memory-inject ")
        ]
        assert len(commands) >= 2
        results = [run(*shlex.split(c)[1:]) for c in commands]
        assert [0] * len(commands) == [r.exit_code for r in results], [r.output for r in results]
        assert results[-1].stdout.startswith("[Memory context]\n")
