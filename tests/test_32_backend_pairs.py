"""A dsn without ``kind: postgres`` is refused, not ignored.

A hunter moved an agent to the shared PostgreSQL server by writing its dsn and forgot
``kind: postgres``: the file validated, and ``open_store`` opened a local SQLite file
next to the YAML, so each host kept a memory of its own. A ``path`` under postgres was
ignored the same way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memory_inject import load_agent_config
from memory_inject.exceptions import ConfigError

DSN = "user=postgres dbname=memory host=/tmp/nowhere"


def _load(tmp_path: Path, backend: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(f"agent: ops\nmemory:\n  backend: {backend}\n")
    return path


@pytest.mark.parametrize("kind", ["", "kind: sqlite, ", "kind: markdown, ", "kind: memory, "])
def test_a_dsn_under_another_kind_is_refused(tmp_path: Path, kind: str) -> None:
    path = _load(tmp_path, f"{{{kind}dsn: '{DSN}'}}")
    with pytest.raises(ConfigError) as info:
        load_agent_config(path)
    (problem,) = info.value.problems
    assert str(path) in problem
    assert "'dsn' is read only when 'kind' is postgres" in problem
    assert problem.endswith("@ $.memory.backend.dsn")
    assert not (tmp_path / ".memory").exists()


def test_a_path_under_postgres_is_refused(tmp_path: Path) -> None:
    path = _load(tmp_path, f"{{kind: postgres, dsn: '{DSN}', path: m.db}}")
    with pytest.raises(ConfigError) as info:
        load_agent_config(path)
    assert [p for p in info.value.problems if p.endswith("@ $.memory.backend.path")]


@pytest.mark.parametrize(
    "backend",
    [
        f"{{kind: postgres, dsn: '{DSN}'}}",
        "{kind: sqlite, dsn: null}",
        f"{{kind: none, dsn: '{DSN}'}}",
        "{kind: sqlite, path: m.db}",
    ],
)
def test_the_pairs_that_are_read_still_load(tmp_path: Path, backend: str) -> None:
    assert load_agent_config(_load(tmp_path, backend)).agent == "ops"


def test_validate_says_so(tmp_path: Path) -> None:
    path = _load(tmp_path, f"{{dsn: '{DSN}'}}")
    out = subprocess.run(
        [sys.executable, "-m", "memory_inject.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "'dsn' is read only when 'kind' is postgres" in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_a_bad_dsn_under_another_kind_is_one_problem(tmp_path: Path) -> None:
    """docs/configuration.md: a key with a problem of its own is reported once, and not
    compared (a malformed dsn under ``kind: sqlite`` was two lines, round 35)."""
    path = _load(tmp_path, "{kind: sqlite, dsn: 'x'}")
    with pytest.raises(ConfigError) as info:
        load_agent_config(path)
    (problem,) = info.value.problems
    assert "'dsn' is not a PostgreSQL connection string" in problem


def test_a_memory_section_with_nothing_under_it_is_the_defaults(tmp_path: Path) -> None:
    """Every key under ``memory:`` commented out: the defaults, as without the key."""
    path = tmp_path / "agent.yaml"
    path.write_text("agent: ops\nmemory:\n  # budget: {max_entries: 2}\n")
    bare = tmp_path / "bare.yaml"
    bare.write_text("agent: ops\n")
    assert load_agent_config(path).memory == load_agent_config(bare).memory
    path.write_text("agent: ops\nmemory: []\n")
    with pytest.raises(ConfigError, match="'memory' must be a mapping"):
        load_agent_config(path)
