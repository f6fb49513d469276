"""A cron run whose memory is off hands out no store (issue 29, thirty-first round).

docs/adapters.md's cron example binds the model's tools with ``memory_tools(run.store,
agent)`` whenever ``run.store`` is not None. With ``origins: {cron: {enabled: false}}``
the run skipped (``origin_disabled``) but ``run.store`` was still the store (only
``uses_memory: false`` gave None), so the model's ``memory_recall`` returned a full block
in a run whose memory was off, on an event that said ``origin: interactive`` (the
example passed no origin). A run the policy gives no memory now has ``store`` None, and
the example binds the tools with the run's origin and turn id.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig
from memory_inject.config import parse_agent_config
from memory_inject.storage import InMemoryStore
from memory_inject.testing import recording

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import CronAdapter, CronJob, CronTurn, load_cron_jobs, memory_tools
else:
    from memory_inject.adapters import CronAdapter, CronJob, CronTurn, load_cron_jobs, memory_tools

ROOT = Path(__file__).resolve().parent.parent
DIGEST = CronJob(id="nightly", name="Deploy digest", prompt="Where do production deploys go?")
CRON_OFF = parse_agent_config({"agent": "bot", "memory": {"origins": {"cron": {"enabled": False}}}})


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.store("deploy_target", "Production deploys go to prod-3.", "core")
    return store


def _run(adapter: CronAdapter, job: CronJob, mode: str) -> CronTurn:
    return asyncio.run(adapter.arun(job)) if mode == "async" else adapter.run(job)


def _docs_example() -> str:
    """The first python block of docs/adapters.md's "Scheduled jobs" section, as written."""
    page = (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")
    section = page.split("## Scheduled jobs: `CronAdapter`", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("mode", ["sync", "async"])
class TestACronRunWithoutMemoryHasNoStore:
    def test_a_disabled_origin_hands_out_no_store(self, mode: str) -> None:
        """``enabled: false`` for cron: the run skips and ``run.store`` is None."""
        run = _run(CronAdapter(_store(), CRON_OFF), DIGEST, mode)
        assert ("origin_disabled", "", None) == (run.policy.reason, run.block, run.store)

    def test_an_enabled_run_still_hands_out_its_store(self, mode: str) -> None:
        """Control: a cron run with memory gets its block and the store."""
        store = _store()
        run = _run(CronAdapter(store, AgentConfig(agent="bot")), DIGEST, mode)
        assert "prod-3" in run.block
        assert run.store is store


class TestTheDocsExample:
    def _exec(self, agent: AgentConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
        monkeypatch.chdir(tmp_path)
        (tmp_path / "cron_jobs.yaml").write_text(
            "jobs:\n  - {id: nightly, name: Deploy digest, prompt: 'Where do deploys go?'}\n"
        )
        scope: dict[str, Any] = {
            "store": _store(),
            "agent": agent,
            "CronAdapter": CronAdapter,
            "memory_tools": memory_tools,
            "load_cron_jobs": load_cron_jobs,
        }
        exec(compile(_docs_example(), "docs/adapters.md", "exec"), scope)  # noqa: S102
        return scope

    def test_with_cron_memory_off_the_example_binds_no_tools(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Run as written with ``origins: {cron: {enabled: false}}``: no tools at all."""
        scope = self._exec(CRON_OFF, tmp_path, monkeypatch)
        assert (None, []) == (scope["tools"], scope["openai_tools"])

    def test_the_example_binds_the_cron_turns_tools(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With cron memory on, the tools are the cron turn's: their recall's event has the
        run's origin and turn id, not an interactive turn's."""
        scope = self._exec(AgentConfig(agent="bot"), tmp_path, monkeypatch)
        run, tools = scope["run"], scope["tools"]
        with recording() as rec:
            said = tools.call("memory_recall", {"query": "where do production deploys go?"})
        assert "prod-3" in said
        [event] = rec.events
        assert ("cron", run.turn.turn_id) == (event.origin, event.turn_id)
