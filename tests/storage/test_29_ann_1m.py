"""The approximate index at scale (issue 29): a graph saved next to the file, search settings."""

from __future__ import annotations

import io
import json
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import vector_ann as _ann
from memory_inject.storage.sqlite.vector_ann import AnnIndex, AnnScope
from memory_inject.storage.sqlite.vector_ann_file import graph_path
from memory_inject.storage.sqlite.vector_matrix import VectorScope
from memory_inject.storage.sqlite.vectors import VectorCache
from tests.storage._sqlite_backend import writable
from tests.storage.test_29_vector_ann import (
    NOW,
    THRESHOLD,
    RandomEmbedder,
    fill,
    scope_of,
    vector,
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    with SQLiteStore(path) as store:
        fill(store)
    return path


def open_ann(path: Path, persist: bool = True, index: str = "auto") -> SQLiteStore:
    """A store whose cache builds (or loads) its graph in the foreground past THRESHOLD rows."""
    store = SQLiteStore(path, embedder=RandomEmbedder(), vector_index=index)
    store._engine._vectors = VectorCache(
        ann_threshold=THRESHOLD, background=False, persist=persist, index=index
    )
    return store


def graph_of(store: SQLiteStore) -> AnnIndex:
    """The store's one graph (after a recall made it)."""
    cache = store._engine._vectors
    assert cache is not None
    (ann,) = cache._indexes.values()
    return ann


def build_once(db: Path) -> list[list[str]]:
    """Open a store on ``db``, recall QUERIES (which builds and saves its graph), close it."""
    store = open_ann(db)
    try:
        return recall_keys(store, QUERIES)
    finally:
        store.close()


def saved(db: Path) -> list[str]:
    """The graph files next to ``db`` (saved or half-written)."""
    return sorted(p.name for p in db.parent.iterdir() if ".usearch" in p.name)


def recall_keys(store: SQLiteStore, queries: list[str]) -> list[list[str]]:
    """The keys each query recalls, in order."""
    return [[e.key for e in store.recall(q, 10)] for q in queries]


QUERIES = [f"row {i}" for i in (3, 50, 177, 420)] + ["question 1", "question 7"]


def saved_file(db: Path) -> Path:
    """Where the default namespace's 16-dimension graph is saved."""
    conn = writable(db)
    try:
        path = graph_path(conn, "default", 16)
    finally:
        conn.close()
    assert path is not None
    return path


class TestSavedGraph:
    def test_a_second_process_loads_the_saved_graph(self, db: Path) -> None:
        """The first store builds and saves the graph; the next loads it and recalls the same."""
        first = open_ann(db)
        want = recall_keys(first, QUERIES)
        assert not graph_of(first).loaded
        first.close()
        path = saved_file(db)
        assert path.exists()
        assert path.with_name(path.name + ".json").exists()
        second = open_ann(db)
        assert want == recall_keys(second, QUERIES)
        assert graph_of(second).loaded
        second.close()

    def test_a_changed_vector_makes_the_saved_graph_stale(self, db: Path) -> None:
        """A row whose vector changed since the save: the graph is built again, not loaded."""
        build_once(db)
        conn = writable(db, isolation_level=None)
        moved = np.asarray(vector("somewhere else"), dtype="<f4").tobytes()
        conn.execute("UPDATE memories SET embedding = ? WHERE key = 'k5'", (moved,))
        conn.close()
        store = open_ann(db)
        store.recall("row 1", 5)
        assert not graph_of(store).loaded
        store.close()
        again = open_ann(db)  # the rebuilt graph was saved in its turn
        again.recall("row 1", 5)
        assert graph_of(again).loaded
        again.close()

    def test_rows_written_since_are_added_to_the_loaded_graph(self, db: Path) -> None:
        """Rows appended after the save: the graph is loaded, the new rows added, saved again."""
        build_once(db)
        lines = [
            json.dumps({"key": f"n{i}", "content": f"new {i}", "embedding": vector(f"new {i}")})
            for i in range(40)
        ]
        with SQLiteStore(db) as writer:
            writer.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
        store = open_ann(db)
        assert "n7" == store.recall("new 7", 3)[0].key
        assert graph_of(store).loaded
        assert 640 == len(graph_of(store))
        store.close()
        stamp = json.loads(saved_file(db).with_name(saved_file(db).name + ".json").read_text())
        assert 640 == stamp["slots"]
        again = open_ann(db)
        again.recall("new 7", 3)
        assert graph_of(again).loaded
        assert 640 == len(graph_of(again))
        again.close()

    def test_a_scope_change_keeps_the_saved_graph(self, db: Path) -> None:
        """A row superseded since the save: the graph still loads; the row is never recalled."""
        build_once(db)
        conn = writable(db, isolation_level=None)
        conn.execute("UPDATE memories SET superseded_by = 'k1' WHERE key = 'k20'")
        conn.close()
        store = open_ann(db)
        assert "k20" not in {e.key for e in store.recall("row 20", 10)}
        assert graph_of(store).loaded
        store.close()

    def test_a_forgotten_row_makes_the_saved_graph_stale(self, db: Path) -> None:
        """A row gone since the save: built again; the forgotten row is never recalled."""
        build_once(db)
        with SQLiteStore(db) as writer:
            assert writer.forget("k3")
        store = open_ann(db)
        assert "k3" not in {e.key for e in store.recall("row 3", 10)}
        assert not graph_of(store).loaded
        store.close()

    @pytest.mark.parametrize("damage", ["truncate", "flip", "stamp", "no stamp", "format"])
    def test_a_damaged_save_is_built_again(self, db: Path, damage: str) -> None:
        """A graph file cut short or altered, or a stamp that is wrong or missing: rebuilt."""
        want = build_once(db)
        path = saved_file(db)
        stamp = path.with_name(path.name + ".json")
        data = bytearray(path.read_bytes())
        if damage == "truncate":
            path.write_bytes(bytes(data[: len(data) // 2]))
        elif damage == "flip":
            data[len(data) // 2] ^= 0xFF
            path.write_bytes(bytes(data))
        elif damage == "stamp":
            body = json.loads(stamp.read_text())
            body["rows"] += 1
            stamp.write_text(json.dumps(body))
        elif damage == "format":
            body = json.loads(stamp.read_text())
            body["format"] = 0
            stamp.write_text(json.dumps(body))
        else:
            stamp.unlink()
        store = open_ann(db)
        assert want == recall_keys(store, QUERIES)
        assert not graph_of(store).loaded
        store.close()

    def test_a_graph_holding_other_slots_is_not_used(self, db: Path) -> None:
        """A saved graph whose keys are not the live slots (stamp forged to match): rebuilt."""
        build_once(db)
        path = saved_file(db)
        index = _ann.usearch_or_none().Index.restore(str(path))
        index.remove(0)
        index.add(10_000, np.asarray(vector("x"), dtype=np.float32))
        stamp = json.loads(path.with_name(path.name + ".json").read_text())
        from memory_inject.storage.sqlite.vector_ann_file import save_graph

        save_graph(index, path, {k: v for k, v in stamp.items() if not k.startswith("graph_")})
        store = open_ann(db)
        store.recall("row 1", 5)
        assert not graph_of(store).loaded
        store.close()

    def test_persist_false_and_memory_databases_write_nothing(self, db: Path) -> None:
        """``persist=False`` saves no file; a ``:memory:`` database has nowhere to save."""
        store = open_ann(db, persist=False)
        store.recall("row 1", 5)
        store.close()
        assert [] == saved(db)
        conn = sqlite3.connect(":memory:")
        assert graph_path(conn, "default", 16) is None
        conn.close()

    def test_vector_index_memory_keeps_the_graph_but_saves_nothing(self, db: Path) -> None:
        """``vector_index="memory"``: the graph answers broad recalls and no file is written,
        and a later ``"auto"`` store builds its own rather than finding one."""
        store = open_ann(db, index="memory")
        assert isinstance(scope_of(store, "row 3", VectorScope(now=NOW)), AnnScope)
        assert all(recall_keys(store, QUERIES))
        store.close()
        assert [] == saved(db)
        store = open_ann(db)
        store.recall("row 1", 5)
        assert not graph_of(store).loaded
        store.close()
        assert saved(db)

    def test_an_unwritable_directory_keeps_the_graph_in_memory(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Saving fails (the directory refuses writes): the graph still answers, no file left."""

        def refuse(*_: Any, **__: Any) -> None:
            raise PermissionError("read-only")

        monkeypatch.setattr(_ann.usearch_or_none().Index, "save", refuse)
        store = open_ann(db)
        assert isinstance(scope_of(store, "row 3", VectorScope(now=NOW)), AnnScope)
        assert all(recall_keys(store, QUERIES))
        assert [] == saved(db)
        store.close()

    def test_namespaces_have_their_own_files(self, db: Path) -> None:
        """Two namespaces of one file save two graphs, each loaded for its own rows."""
        other = SQLiteStore(db, namespace="other")
        fill(other, rows=300)
        other.close()
        for _ in range(2):
            for ns in ("default", "other"):
                store = SQLiteStore(db, embedder=RandomEmbedder(), namespace=ns)
                store._engine._vectors = VectorCache(ann_threshold=THRESHOLD, background=False)
                store.recall("row 1", 5)
                store.close()
        conn = writable(db)
        paths = {graph_path(conn, ns, 16) for ns in ("default", "other")}
        conn.close()
        assert len(paths) == 2
        assert all(p is not None and p.exists() for p in paths)


def build_in_a_process(db: str) -> list[list[str]]:
    """A process of its own opens ``db``, builds (or loads) and saves the graph, recalls."""
    store = open_ann(Path(db))
    try:
        return recall_keys(store, QUERIES)
    finally:
        store.close()


class TestProcesses:
    def test_four_processes_saving_at_once_leave_one_usable_graph(self, db: Path) -> None:
        """Four processes build and save the same graph at once (temporary names, renames):
        each recalls what a lone process does, no temporary file is left, and the pair of
        files left behind is a graph the next process loads, or rebuilds and saves."""
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(4) as pool:
            results = pool.map(build_in_a_process, [str(db)] * 4)
        alone = open_ann(db, persist=False)
        want = recall_keys(alone, QUERIES)
        alone.close()
        assert all(want == got for got in results)
        assert [saved_file(db).name, saved_file(db).name + ".json"] == saved(db)
        after = open_ann(db)
        assert want == recall_keys(after, QUERIES)
        after.close()
        last = open_ann(db)
        assert want == recall_keys(last, QUERIES)
        assert graph_of(last).loaded
        last.close()


def spy_searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Record ``(count, expansion_search)`` of every graph search from now on."""
    calls: list[tuple[int, int]] = []
    search = AnnIndex.search

    def spy(self: AnnIndex, q: Any, count: int, *, wide: int | None = None) -> Any:
        found = search(self, q, count, wide=wide)
        calls.append((count, self._index.expansion_search))
        return found

    monkeypatch.setattr(AnnIndex, "search", spy)
    return calls


class TestSearchSettings:
    def test_expansion_grows_with_the_graph(self) -> None:
        """Below LARGE_ROWS a search keeps EXPANSION_SEARCH candidates, from it the larger."""
        assert _ann.EXPANSION_SEARCH == _ann.expansion_search(_ann.LARGE_ROWS - 1)
        assert _ann.EXPANSION_SEARCH_LARGE == _ann.expansion_search(_ann.LARGE_ROWS)
        assert _ann.EXPANSION_SEARCH_LARGE > _ann.EXPANSION_SEARCH

    def test_large_graphs_get_more_links_and_a_saved_small_graph_is_not_reused(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """From LARGE_ROWS the graph is built with the larger links; the stamp tells them apart."""
        build_once(db)
        monkeypatch.setattr(_ann, "LARGE_ROWS", 100)
        store = open_ann(db)
        store.recall("row 1", 5)
        ann = graph_of(store)
        assert not ann.loaded  # the saved graph has the small graph's links
        assert _ann.CONNECTIVITY_LARGE == ann._index.connectivity
        assert _ann.EXPANSION_ADD_LARGE == ann._index.expansion_add
        store.close()
        stamp = json.loads(saved_file(db).with_name(saved_file(db).name + ".json").read_text())
        assert _ann.CONNECTIVITY_LARGE == stamp["connectivity"]

    def test_a_minmax_recall_searches_twice_the_far_one_narrower(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Top rows and ``high`` share one wide search; ``low`` takes one at the base width."""
        monkeypatch.setattr(_ann, "LARGE_ROWS", 100)
        store = open_ann(db, persist=False)
        store.recall("row 1", 5)  # builds the graph
        calls = spy_searches(monkeypatch)
        found = scope_of(store, "question 4", VectorScope(now=NOW))
        assert isinstance(found, AnnScope)
        top = found.top(20)
        assert found.high == top[0][1]
        assert found.low <= top[-1][1]
        assert [(80, _ann.EXPANSION_SEARCH_LARGE), (32, _ann.EXPANSION_SEARCH)] == calls
        store.close()

    def test_a_patch_between_top_and_bounds_searches_again(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The kept nearest rows are not reused once the matrix moved (or for a larger k)."""
        store = open_ann(db, persist=False)
        store.recall("row 1", 5)
        calls = spy_searches(monkeypatch)
        found = scope_of(store, "question 4", VectorScope(now=NOW))
        found.top(5)
        found.top(20)  # more rows than the kept search asked for: searched again
        graph_of(store).matrix.gen += 1
        assert found.high >= found.low
        assert [32, 80, 32, 32] == [count for count, _ in calls]
        store.close()
