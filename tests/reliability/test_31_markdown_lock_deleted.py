"""A Markdown folder's ``.lock`` deleted while a writer holds it (thirty-first round).

``git clean -fdx`` on a notes repository deletes the untracked ``.lock``. The next
writer created a new one, locked it at once and wrote alongside the writer still
holding the old one: 84 of 300 acknowledged writes were lost. A write now locks the
folder too (a cleanup cannot delete it under a writer), and each lock is checked to be
the file at its path once it is held.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory_inject.storage import MarkdownStore

fcntl = pytest.importorskip("fcntl", reason="no fcntl: the process lock only")

_HOLDER = r"""
import os, sys, time
from memory_inject.storage import MarkdownStore
root = sys.argv[1]
store = MarkdownStore(root)
draft = MarkdownStore(root + "-draft").store("held", "written by the holder")
with store._writing() as docs:
    open(os.path.join(root, "inside"), "w").close()
    while not os.path.exists(os.path.join(root, "release")):
        time.sleep(0.01)
    store._put(docs, draft)
"""


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_a_lock_file_deleted_under_a_writer_still_excludes_the_next(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    MarkdownStore(root).store("seed", "seed")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root)])
    try:
        _wait_for(root / "inside")
        (root / ".lock").unlink()  # git clean -fdx
        wrote = threading.Event()

        def write() -> None:
            MarkdownStore(root).store("mine", "written meanwhile")
            wrote.set()

        thread = threading.Thread(target=write)
        thread.start()
        blocked = not wrote.wait(0.5)  # the holder still has the folder
        (root / "release").touch()
        assert 0 == holder.wait(60)
        thread.join(60)
    finally:
        (root / "release").touch()
        holder.wait(60)
    assert blocked
    assert {"seed", "held", "mine"} == {r.key for r in MarkdownStore(root).list()}


def test_a_lock_file_replaced_while_waiting_is_locked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Locked, then found not to be the file at the path: the new file is locked."""
    real = fcntl.flock
    seen: list[int] = []

    def flock(fd: int, op: int) -> None:
        real(fd, op)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            return
        if not seen:
            os.replace(tmp_path / "other", tmp_path / ".lock")  # replaced meanwhile
        seen.append(os.fstat(fd).st_ino)

    (tmp_path / "other").write_text("")
    monkeypatch.setattr(fcntl, "flock", flock)
    MarkdownStore(tmp_path).store("k", "v")
    assert os.stat(tmp_path / ".lock").st_ino == seen[-1] != seen[-2]


def test_a_folder_whose_file_system_refuses_its_lock_uses_the_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NFS emulates ``flock`` with byte-range locks, which a folder cannot take."""
    real = fcntl.flock

    def flock(fd: int, op: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    MarkdownStore(tmp_path).store("k", "v")
    assert ["k"] == [r.key for r in MarkdownStore(tmp_path).list()]
