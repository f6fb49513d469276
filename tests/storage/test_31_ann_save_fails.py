"""The ANN graph's save on a full disk (thirty-first round, found by a tester).

usearch reports a full disk as ``RuntimeError('Failed to serialize into stream')``,
not ``OSError``: the save caught only ``OSError``, so its half-written temporary file
stayed and the finished graph was thrown away for the life of the process (every
recall scanned exactly). A failed save now removes its temporary files and keeps the
graph in memory, and the temporary files of dead writers go at the next save or load.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import vector_ann as _ann
from memory_inject.storage.sqlite.vector_ann import AnnScope
from memory_inject.storage.sqlite.vector_ann_file import remove_stale_temps
from memory_inject.storage.sqlite.vector_matrix import VectorScope
from tests.storage.test_29_ann_1m import (
    QUERIES,
    build_once,
    graph_of,
    open_ann,
    recall_keys,
    saved,
    saved_file,
)
from tests.storage.test_29_vector_ann import NOW, fill, scope_of

# Not importorskip("usearch"): imported before onnxruntime, usearch crashes onnxruntime's
# import (test_29_vector_ann); the store's loader imports them in the safe order.
pytestmark = pytest.mark.skipif(_ann.usearch_or_none() is None, reason="no usearch")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    with SQLiteStore(path) as store:
        fill(store)
    return path


def test_a_full_disk_keeps_the_graph_in_memory_and_no_file(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: Any, path: str, *_: Any, **__: Any) -> None:
        Path(path).write_bytes(b"\0" * 4096)  # what the serializer wrote before the disk filled
        raise RuntimeError("Failed to serialize into stream")

    monkeypatch.setattr(_ann.usearch_or_none().Index, "save", full)
    store = open_ann(db)
    try:
        assert isinstance(scope_of(store, "row 3", VectorScope(now=NOW)), AnnScope)
        graph = graph_of(store)
        assert (True, None) == (graph.ready, graph.error)
        assert all(recall_keys(store, QUERIES))
        assert [] == saved(db)
    finally:
        store.close()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _temp(graph: Path, pid: int, idle_s: float, tail: str = "", tag: str = "0123abcd") -> Path:
    temp = graph.with_name(f"{graph.name}.{pid}-{tag}.tmp{tail}")
    temp.write_bytes(b"partial")
    when = time.time() - idle_s
    os.utime(temp, (when, when))
    return temp


def test_dead_writers_temporary_files_go_at_the_next_save(db: Path) -> None:
    graph, dead, live = saved_file(db), _dead_pid(), os.getppid()
    gone = [_temp(graph, dead, 700), _temp(graph, dead, 700, ".json"), _temp(graph, live, 9e4)]
    # alive, or maybe still writing (a pid of another container)
    kept = [_temp(graph, live, 700, tag="4567cdef"), _temp(graph, dead, 5, tag="89abcdef")]
    build_once(db)
    assert ([False] * 3, [True] * 2) == ([p.exists() for p in gone], [p.exists() for p in kept])
    assert {graph.name, graph.name + ".json"} <= set(saved(db))


def test_dead_writers_temporary_files_go_at_the_next_load(db: Path) -> None:
    build_once(db)
    graph = saved_file(db)
    stale = _temp(graph, _dead_pid(), 700)
    store = open_ann(db)
    try:
        recall_keys(store, QUERIES)
        assert (True, False) == (graph_of(store).loaded, stale.exists())
    finally:
        store.close()


def test_only_the_graphs_own_temporary_files_are_touched(tmp_path: Path) -> None:
    graph = tmp_path / "memory.db.abc-16.usearch"
    other = tmp_path / "notes.12-0123abcd.tmp"
    other.write_text("")
    os.utime(other, (0, 0))
    assert (0, True) == (remove_stale_temps(graph), other.exists())
