"""Every script in examples/ runs on its own and exits 0 (each uses a temporary store)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = (
    "loop_openai.py",
    "loop_anthropic.py",
    "channel_bot.py",
    "cron_jobs.py",
    "daemon_heartbeat.py",
    "agent_direct.py",
    "observability.py",
)


class TestExamples:
    def test_every_example_is_listed(self) -> None:
        """The list below covers every script in examples/."""
        assert sorted(SCRIPTS) == sorted(p.name for p in EXAMPLES.glob("*.py"))

    @pytest.mark.parametrize("script", SCRIPTS)
    def test_the_example_runs_and_exits_0(self, script: str, tmp_path: Path) -> None:
        """The script exits 0, prints what it did and ends with ok."""
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / script)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert (0, "") == (done.returncode, done.stderr)
        assert "ok" == done.stdout.splitlines()[-1]
