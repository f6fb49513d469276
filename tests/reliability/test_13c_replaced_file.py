"""Finding F6: a database file deleted or replaced under an open store.

SQLite keeps writing to the inode it opened, so after ``rm`` or a restore over
the path every write "succeeded" into a file nobody will open again. A write
now checks the file at the path is still the one the store holds, and refuses
with StoreMissingError (nothing written) when it is not.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memory_inject.exceptions import StoreMissingError
from memory_inject.storage.sqlite import SQLiteStore


@pytest.mark.parametrize("how", ["deleted", "replaced", "moved away"])
def test_a_write_after_the_file_changed_under_the_store_is_refused(
    tmp_path: Path, how: str
) -> None:
    path = tmp_path / "m.db"
    other = tmp_path / "other.db"
    with SQLiteStore(other) as o:
        o.store("theirs", "the restored copy")
    with SQLiteStore(path) as store:
        store.store("before", "written while the file was there")
        if how == "deleted":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        elif how == "replaced":
            os.replace(other, path)
        else:
            shutil.move(str(path), str(tmp_path / "elsewhere.db"))
        with pytest.raises(StoreMissingError, match="deleted or replaced while the store was open"):
            store.store("after", "would have been lost")


def test_writes_go_on_while_the_file_is_the_same(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        for i in range(3):
            store.store(f"k{i}", f"fact {i}")
        os.utime(path)  # touched, not replaced
        store.store("k3", "fact 3")
    with SQLiteStore(path) as reopened:
        assert 4 == reopened.count()
