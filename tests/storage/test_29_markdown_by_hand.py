"""A Markdown store people edit by hand (twenty-ninth round, found by a helper).

- Emacs's lock file (``memory/.#2026-03-01.md``, a dangling symlink) and macOS's
  ``memory/._2026-03-01.md`` were read as daily files: every recall and every write of
  the store failed while one existed.
- A CRLF ``MEMORY.md`` with one line appended with LF hid every block (read as text):
  the render was empty with no reason, and the next write of a key wrote it twice.
- A daily file deleted between the listing and the read failed the recall or the
  write with a bare ``FileNotFoundError``.
"""

from __future__ import annotations

import os
from pathlib import Path

from memory_inject import MemoryRecall, render_memory_context
from memory_inject.storage import MarkdownStore
from memory_inject.storage.markdown import CORE_FILE, DAILY_DIR

QUESTION = "where do production deploys go?"


def _keys(store: MarkdownStore) -> tuple[str, ...]:
    event = render_memory_context(store, QUESTION).event
    assert isinstance(event, MemoryRecall)
    assert (True, None) == (event.success, event.error)
    return event.rendered_keys


def test_an_editors_hidden_files_are_not_memories(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    store.store("deploy_target", "Production deploys go to prod-3.")
    daily = tmp_path / DAILY_DIR
    daily.mkdir(exist_ok=True)
    os.symlink("user@host.1234:1700000000", daily / ".#2026-03-01.md")  # dangling
    (daily / "._2026-03-01.md").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X\xff\xfe")
    assert ("deploy_target",) == _keys(store)
    store.store("deploy_day", "Production deploys happen on Fridays.", "daily")
    assert {"deploy_target", "deploy_day"} == set(_keys(store))


def test_a_crlf_file_with_an_lf_line_appended_keeps_its_blocks(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    store.store("deploy_target", "Production deploys go to prod-3.")
    core = tmp_path / CORE_FILE
    text = core.read_text(encoding="utf-8").replace("\n", "\r\n")
    core.write_bytes((text + "- a note appended from WSL\n").encode())
    assert ("deploy_target",) == _keys(store)
    store.store("deploy_target", "Production deploys go to prod-4.")
    assert 1 == core.read_text(encoding="utf-8").count("## deploy_target")
    assert "prod-4" in render_memory_context(store, QUESTION).text


def test_a_daily_file_deleted_after_the_listing_is_gone_not_an_error(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    store.store("deploy_target", "Production deploys go to prod-3.")
    store.store("old_note", "Production deploys were on Mondays.", "daily")
    [day] = list((tmp_path / DAILY_DIR).glob("*.md"))
    listed = store._files()
    day.unlink()  # by hand, between the store's listing and its read
    store._files = lambda: listed  # type: ignore[method-assign]
    assert ("deploy_target",) == _keys(store)
    store.store("new_note", "Production deploys are on Tuesdays now.", "daily")


def test_a_block_a_hand_edit_broke_is_named_on_the_event(tmp_path: Path) -> None:
    (tmp_path / CORE_FILE).write_text(
        "# Long-Term Memory\n\n"
        "## tea\n"
        '<!-- memory-inject {"key": "tea", "category": "core", "importance": 7} -->\n'
        "> The user's tea preference is oolong.\n\n"
        "## deploy_target\n"
        '<!-- memory-inject {"key": "deploy_target", "category": "core"} -->\n'
        "> Production deploys go to prod-3.\n",
        encoding="utf-8",
    )
    store = MarkdownStore(tmp_path)
    result = render_memory_context(store, QUESTION)
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert ("deploy_target",) == event.rendered_keys
    assert (
        "damaged_blocks: 1 blocks could not be read and are recalled by no one "
        "(MEMORY.md line 3: 'importance' must be between 0 and 1 (got 7))",
    ) == event.degraded
    clean = MarkdownStore(tmp_path / "clean")
    clean.store("deploy_target", "Production deploys go to prod-3.")
    event = render_memory_context(clean, QUESTION).event
    assert isinstance(event, MemoryRecall)
    assert () == event.degraded
