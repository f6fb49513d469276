"""Issue 29, thirty-second round: PI's block after an import shows what PI showed.

A PI user imports the memory root (``import_pi``, the documented import API) and keeps
``preset: pi``. Two promises of docs/governance.md's import table were broken:

* "only today's log is shown, as in PI": the daily logs of past days were listed under
  Selected Memory, raw (PI's ``<!-- -->`` comments, its session-end boilerplate, ``## Session
  ended``), and took the L2 slots of the playbooks the prompt asked about; with enough of
  them the recall returned logs only and no playbook at all. PI's Selected Memory holds
  records (L1, L2) and it reads today's log only (spec 1.2, 1.3), so the preset's
  ``daily_today_only`` leaves past days out, named ``daily:not_today`` on the event.
* Scratchpad items "in the file's order": a turn without a session (cron, daemon, a
  sessionless interactive call) listed them in recall order, the item the prompt matched
  first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject import render_memory_context
from memory_inject.config import load_agent_config, parse_agent_config
from memory_inject.models import MemoryEntry
from memory_inject.render import SectionedRenderer
from memory_inject.stages import StageContext
from memory_inject.storage.pi_import import import_pi
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import parse_sectioned
from tests.storage._pi_seed import NOW, PROFILE
from tests.test_27_pi_import import PI_AGENT, PROMPT, write_pi_project

#: A past day's log as PI writes it: a comment, PI's capture line, session-end markers, and
#: the words of the prompt (so the recall ranks it with the playbook the prompt asks about).
PAST_LOG = (
    "<!-- PI daily log -->\n## Typecheck before pushing\n"
    "- typecheck run before pushing, typecheck before pushing again\n"
    "- Persistent Intelligence captured session end marker\n## Session ended\n"
)
#: Seed 000's Scratchpad, three open items; the prompts below match the last two.
SCRATCHPAD = (
    "# Scratchpad\n\n"
    "- [ ] Write the release notes\n"
    "- [x] Fix the flaky auth test\n"
    "- [ ] Ask billing about invoice gaps\n"
    "- [ ] Add typecheck to the CI workflow\n"
)
FILE_ORDER = [
    "- [ ] Write the release notes",
    "- [ ] Ask billing about invoice gaps",
    "- [ ] Add typecheck to the CI workflow",
]


def pi_root(project: Path, past_days: int) -> Path:
    """The seeds' PI project with ``past_days`` logs of the days before today."""
    root = write_pi_project(project)
    (root / "scratchpad.md").write_text(SCRATCHPAD, encoding="utf-8")
    for n in range(1, past_days + 1):
        day = NOW - timedelta(days=n)
        path = root / "daily" / f"{day:%Y-%m-%d}.md"
        path.write_text(PAST_LOG, encoding="utf-8")
        stamp = day.replace(hour=18).timestamp()  # written during its own day
        os.utime(path, (stamp, stamp))
    return root


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "pi.db")
    try:
        yield opened
    finally:
        opened.close()


def render(store: Any, prompt: str = PROMPT, **kw: Any) -> Any:
    memory = load_agent_config(PI_AGENT).memory
    return render_memory_context(store, prompt, config=memory, now=NOW, profile=PROFILE, **kw)


class TestPastDailyLogs:
    def test_past_logs_leave_selected_memory_to_the_playbooks(
        self, store: SQLiteStore, tmp_path: Path
    ) -> None:
        """Ten past logs: none is listed, the playbook is, today's log is the Daily Log."""
        assert 11 == import_pi(store, pi_root(tmp_path / "proj", 10)).daily
        out = render(store)
        sections = parse_sectioned(out.text)
        selected = "\n".join(sections["Selected Memory"])
        assert ("pi-daily:" in selected, "mem_def" in selected) == (False, True)
        assert ("PI daily log" in out.text, "captured session end" in out.text) == (False, False)
        assert any("Typecheck before a push #decision" in x for x in sections["Daily Log"])
        past = {k: v for k, v in out.event.dropped.items() if k.startswith("pi-daily:")}
        assert past and set(past.values()) == {"daily:not_today"}
        assert "pi-daily:2026-05-20" in out.event.rendered_keys

    def test_a_recall_of_past_logs_only_is_asked_again(
        self, store: SQLiteStore, tmp_path: Path
    ) -> None:
        """Forty past logs outrank the playbook for all 24 recall slots; the turn still
        shows it, because the rows the renderer leaves out ask the store for more."""
        import_pi(store, pi_root(tmp_path / "proj", 40))
        for origin, sessions in (("channel", ("dm",)), ("cron", ()), (None, ())):
            out = render(store, origin=origin, sessions=sessions)
            selected = "\n".join(parse_sectioned(out.text).get("Selected Memory", []))
            assert ("mem_def" in selected, "pi-daily:" in selected) == (True, False), origin
            assert "daily:not_today" in out.event.dropped.values()

    def test_only_the_preset_leaves_past_days_out(self) -> None:
        """Without ``daily_today_only`` an older daily note stays an ordinary memory."""
        old = MemoryEntry(
            key="d_old", content="Old note", category="daily", timestamp=NOW - timedelta(days=3)
        )
        cfg = parse_agent_config({"agent": "a", "memory": {"renderer": "sectioned"}}).memory
        ctx = StageContext(query="old note", config=cfg, now=NOW)
        plain = parse_sectioned(SectionedRenderer()(ctx, [old]).text)
        assert ["Selected Memory"] == list(plain)
        pi = load_agent_config(PI_AGENT).memory.renderer
        assert (True, False) == (pi.daily_today_only, cfg.renderer.daily_today_only)
        assert "" == SectionedRenderer(daily_today_only=True)(ctx, [old]).text


class TestScratchpadOrder:
    @pytest.mark.parametrize(
        ("origin", "sessions"),
        [("cron", ()), ("daemon", ()), ("interactive", ()), ("interactive", ("s",)), (None, ())],
    )
    def test_items_keep_the_files_order_whatever_the_prompt_matched(
        self, store: SQLiteStore, tmp_path: Path, origin: str | None, sessions: tuple[str, ...]
    ) -> None:
        """The prompt names the second and third items; the file's order stands."""
        import_pi(store, pi_root(tmp_path / "proj", 0))
        for prompt in ("add typecheck to the CI workflow", "summarise the billing invoice gaps"):
            out = render(store, prompt, origin=origin, sessions=sessions)
            assert FILE_ORDER == parse_sectioned(out.text)["Scratchpad"], prompt

    def test_the_renderer_lists_items_newest_first(self) -> None:
        """Handed in recall order, the items come out newest first (the file's first)."""
        items = [
            MemoryEntry(
                key=f"t{n}",
                content=text[6:],
                category="scratchpad",
                timestamp=datetime(2026, 5, 20, 9, tzinfo=UTC) - timedelta(milliseconds=n),
            )
            for n, text in enumerate(FILE_ORDER)
        ]
        cfg = parse_agent_config({"agent": "a", "memory": {"renderer": "sectioned"}}).memory
        ctx = StageContext(query="typecheck", config=cfg, now=NOW)
        got = parse_sectioned(SectionedRenderer()(ctx, items[::-1]).text)["Scratchpad"]
        assert FILE_ORDER == got
