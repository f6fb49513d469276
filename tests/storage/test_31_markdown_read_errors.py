"""A Markdown file the store cannot read is a ``StorageError`` naming it, not a raw
``OSError`` (the CLI printed a traceback for it; a helper's note, issue 29, round 31)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from memory_inject.exceptions import StorageError
from memory_inject.storage import MarkdownStore


def test_an_io_error_on_read_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarkdownStore(tmp_path / "notes")
    store.store("a", "hello there", "core")
    real = Path.read_bytes

    def failing(self: Path) -> bytes:
        if self.name == "MEMORY.md":
            raise OSError(errno.EIO, "Input/output error")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", failing)
    with pytest.raises(StorageError, match=r"MEMORY\.md: read: Input/output error"):
        store.list()
