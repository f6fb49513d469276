"""The SQLite store's approximate vector index (issue 29): same rows as the exact scan, in scope."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_inject.storage.fusion import MODEL_FUSION, Fusion
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import vectors as _vectors
from memory_inject.storage.sqlite.vector_ann import AnnIndex, AnnScope
from memory_inject.storage.sqlite.vector_matrix import VectorScope
from memory_inject.storage.sqlite.vectors import (
    ANN_MAX_BYTES,
    MAX_MATRIX_BYTES,
    ExactScope,
    VectorCache,
)
from tests.storage._sqlite_backend import writable

DIM = 16
ROWS = 600
THRESHOLD = 200
SEMANTIC = Fusion(search_mode="embedding")
NOW = "2099-01-01T00:00:00.000000Z"


def vector(text: str) -> list[float]:
    """A deterministic vector near one of eight centres, so neighbours are meaningful."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    centre = np.random.default_rng(seed % 8).standard_normal(DIM)
    return [float(x) for x in centre + 0.6 * rng.standard_normal(DIM)]


class RandomEmbedder:
    """:func:`vector` of each text."""

    name = "random-16"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text."""
        return [vector(t) for t in texts]


def fill(store: SQLiteStore, rows: int = ROWS, **fields: Any) -> None:
    """``rows`` records with their vectors, sessions s0..s2 and shared ``core`` rows."""
    lines = []
    for i in range(rows):
        session = None if i % 4 == 3 else f"s{i % 3}"
        record = {
            "key": f"k{i}",
            "content": f"note {i}",
            "category": "core" if session is None else "conversation",
            "session_id": session,
            "timestamp": f"2024-01-{1 + i % 28:02d}T12:00:00Z",
            "embedding": vector(f"row {i}"),
            **fields,
        }
        lines.append(json.dumps(record))
    store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))


def ann_store(
    path: Path | str, fusion: Fusion = SEMANTIC, threshold: int = THRESHOLD, **kw: Any
) -> SQLiteStore:
    """A store whose cache builds its index in the foreground past ``threshold`` rows."""
    store = SQLiteStore(path, embedder=RandomEmbedder(), fusion=fusion, **kw)
    store._engine._vectors = VectorCache(ann_threshold=threshold, background=False)
    return store


def exact_store(path: Path | str, fusion: Fusion = SEMANTIC) -> SQLiteStore:
    """The same file scanned exactly."""
    return SQLiteStore(path, embedder=RandomEmbedder(), fusion=fusion, vector_index="exact")


def scope_of(store: SQLiteStore, query: str, scope: VectorScope) -> Any:
    """The cache's scored scope for ``query`` on a read connection of ``store``."""
    cache = store._engine._vectors
    assert cache is not None
    return store._engine.connections.read(
        lambda c: cache.scope(c, "default", scope, vector(query)), "test"
    )


def _allowed(
    db: Path, session_id: str | None = None, since: str | None = None, until: str | None = None
) -> set[str]:
    """The keys the SQL scope keeps, read straight from the file."""
    sql = (
        "SELECT key FROM memories WHERE namespace = 'default' AND deleted_at IS NULL "
        "AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > ?) "
        "AND (? IS NULL OR session_id = ? "
        "OR (session_id IS NULL AND category IN ('core', 'daily'))) "
        "AND (? IS NULL OR timestamp >= ?) AND (? IS NULL OR timestamp <= ?)"
    )
    conn = writable(db)
    try:
        args = (NOW, session_id, session_id, since, since, until, until)
        return {r[0] for r in conn.execute(sql, args)}
    finally:
        conn.close()


QUERIES = [f"row {i}" for i in range(0, ROWS, 20)] + [f"question {i}" for i in range(10)]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    with SQLiteStore(path) as store:
        fill(store)
    return path


class TestAnnPath:
    def test_recall_at_10_matches_the_exact_scan(self, db: Path) -> None:
        """The index's top 10 overlap the exact scan's by at least 0.9 on average."""
        ann, exact = ann_store(db), exact_store(db)
        overlaps = []
        for q in QUERIES:
            got = {e.key for e in ann.recall(q, 10)}
            want = {e.key for e in exact.recall(q, 10)}
            overlaps.append(len(got & want) / len(want))
        assert isinstance(scope_of(ann, "row 3", VectorScope(now=NOW)), AnnScope)
        assert sum(overlaps) / len(overlaps) >= 0.9
        ann.close()
        exact.close()

    def test_cosines_are_the_exact_ones(self, db: Path) -> None:
        """Each returned cosine is the row's exact cosine with the query (float64 check)."""
        store = ann_store(db)
        found = scope_of(store, "question 1", VectorScope(now=NOW))
        assert isinstance(found, AnnScope)
        top = found.top(10)
        assert len(top) == 10
        q = np.asarray(vector("question 1"))
        q /= np.linalg.norm(q)
        for key, cos in top:
            v = np.asarray(vector(f"row {key[1:]}"))
            assert pytest.approx(float(v @ q / np.linalg.norm(v)), abs=1e-5) == cos
        assert [c for _, c in top] == sorted((c for _, c in top), reverse=True)
        asked = found.cosines([top[0][0], "nope"])
        assert {top[0][0]: top[0][1]} == asked
        store.close()

    def test_minmax_fusion_sees_the_exact_low_and_high(self, db: Path) -> None:
        """The scope's least and greatest cosine match the exact scan's, and so do the scores."""
        store = ann_store(db, fusion=MODEL_FUSION)
        found = scope_of(store, "question 2", VectorScope(now=NOW))
        store._engine._vectors = VectorCache(index="exact")
        exact = scope_of(store, "question 2", VectorScope(now=NOW))
        assert isinstance(found, AnnScope)
        assert isinstance(exact, ExactScope)
        assert pytest.approx(exact.high, abs=1e-6) == found.high
        assert pytest.approx(exact.low, abs=1e-6) == found.low
        store.close()

    @pytest.mark.parametrize(
        "scope",
        [
            {"session_id": "s1"},
            {"since": "2024-01-10T00:00:00Z"},
            {"session_id": "s2", "until": "2024-01-20T00:00:00Z"},
        ],
    )
    def test_scopes_are_respected(
        self, db: Path, monkeypatch: pytest.MonkeyPatch, scope: dict[str, str]
    ) -> None:
        """Every row the index returns is one the SQL scope keeps, through the graph too."""
        monkeypatch.setattr(_vectors, "NARROW_ROWS", 0)
        other = SQLiteStore(db, namespace="other")
        fill(other)  # the same vectors in another namespace
        other.close()
        conn = writable(db, isolation_level=None)
        conn.execute("UPDATE memories SET superseded_by = 'k1' WHERE key IN ('k20', 'k40')")
        conn.execute("UPDATE memories SET expires_at = '2000-01-01T00:00:00Z' WHERE key = 'k60'")
        conn.close()
        ann, exact = ann_store(db), exact_store(db)
        for key in ("k80", "k100"):
            assert ann.forget(key)
        allowed = _allowed(db, **scope)
        assert {"k20", "k40", "k60", "k80", "k100"}.isdisjoint(allowed)
        for q in [f"row {i}" for i in (20, 40, 60, 80, 100, 7, 5)]:
            got = [e.key for e in ann.recall(q, 10, **scope)]
            assert got
            assert set(got) <= allowed
        ann.close()
        exact.close()

    def test_a_narrow_session_is_scanned_over_its_rows(self, db: Path) -> None:
        """A session scope with few rows is scored exactly, over its own rows only."""
        store = ann_store(db, fusion=MODEL_FUSION)
        exact = exact_store(db, fusion=MODEL_FUSION)
        scope = VectorScope(now=NOW, session_id="s0", shared=("core",))
        found = scope_of(store, "row 4", scope)
        assert isinstance(found, ExactScope)
        assert found._rows is not None
        for q in ("row 4", "question 3"):
            got = [(e.key, e.score) for e in store.recall(q, 10, session_id="s0")]
            want = [(e.key, e.score) for e in exact.recall(q, 10, session_id="s0")]
            assert pytest.approx(dict(want), abs=1e-6) == dict(got)
        assert {} == found.cosines(["k1"])  # a row of another session
        assert "k0" in found.cosines(["k0", "k3"])
        empty = scope_of(store, "row 4", VectorScope(now=NOW, session_id="nobody"))
        assert [] == empty.top(5)
        m = found._m
        assert np.flatnonzero(m.live).tolist() == m.session_rows(VectorScope(now=NOW)).tolist()
        store.close()
        exact.close()

    def test_too_few_in_scope_falls_back_to_the_exact_scan(self, db: Path) -> None:
        """A broad-looking scope that keeps few rows gets the exact scan's answer."""
        store = ann_store(db, fusion=MODEL_FUSION)
        exact = exact_store(db, fusion=MODEL_FUSION)
        since = "2024-01-28T00:00:00Z"
        found = scope_of(store, "row 27", VectorScope(now=NOW, since=since))
        assert isinstance(found, AnnScope)
        assert len(found.top(30)) == len(range(27, ROWS, 28))
        assert found._fallback is not None
        assert found.low <= found.high
        assert "k27" in found.cosines(["k27"])
        got = [(e.key, e.score) for e in store.recall("row 27", 10, since=since)]
        want = [(e.key, e.score) for e in exact.recall("row 27", 10, since=since)]
        assert pytest.approx(dict(want), abs=1e-6) == dict(got)
        assert [] == found.top(0)
        store.close()
        exact.close()


class TestAnnFollowsWrites:
    def test_writes_and_forgets_are_seen(self, db: Path) -> None:
        """A row written after the graph was built is found; a forgotten one never again."""
        store = ann_store(db)
        store.recall("row 1", 10)
        ann = next(iter(store._engine._vectors._indexes.values()))  # type: ignore[union-attr]
        size = len(ann)
        store.store("fresh", "brand new words")
        assert "fresh" == store.recall("brand new words", 1)[0].key
        assert size + 1 == len(ann)
        assert store.forget("fresh")
        assert "fresh" not in {e.key for e in store.recall("brand new words", 10)}
        assert store.forget("k5")
        assert "k5" not in {e.key for e in store.recall("row 5", 10)}
        assert size - 1 == len(ann)
        assert ann is next(iter(store._engine._vectors._indexes.values()))  # type: ignore[union-attr]
        store.close()

    def test_a_vector_changed_by_another_connection(self, db: Path) -> None:
        """A vector rewritten outside the store is searched with its new value."""
        store = ann_store(db)
        assert "k9" not in {e.key for e in store.recall("far away", 5)}
        conn = writable(db, isolation_level=None)
        blob = np.asarray(vector("far away"), dtype="<f4").tobytes()
        conn.execute("UPDATE memories SET embedding = ? WHERE key = 'k9'", (blob,))
        conn.close()
        assert "k9" == store.recall("far away", 5)[0].key
        store.close()

    def test_a_matrix_read_again_gets_a_new_graph(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past the patch bound the matrix is read again, and its graph built again."""
        monkeypatch.setattr(_vectors, "PATCH_MAX", 2)
        store = ann_store(db)
        store.recall("row 1", 10)
        cache = store._engine._vectors
        assert cache is not None
        first = next(iter(cache._indexes.values()))
        for i in range(5):
            store.store(f"new{i}", f"new text {i}")
        assert "new3" == store.recall("new text 3", 1)[0].key
        second = next(iter(cache._indexes.values()))
        assert second is not first
        assert first._stop
        cache.clear()
        assert second._stop
        assert {} == cache._indexes
        store.close()

    def test_a_matrix_grown_past_its_bound_drops_its_graph(self, db: Path) -> None:
        """When the matrix is no longer kept, neither is its graph."""
        store = ann_store(db)
        cache = VectorCache(max_bytes=ROWS * _vectors.row_bytes(DIM) + 10, ann_threshold=10)
        cache.background = False
        store._engine._vectors = cache
        store.recall("row 1", 10)
        assert len(cache._indexes) == 1
        for i in range(3):
            store.store(f"more{i}", f"more {i}")
        assert store.recall("more 1", 1)
        assert {} == cache._indexes
        store.close()


class TestChoosingTheIndex:
    def test_without_usearch_nothing_changes(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With usearch not importable the cache keeps today's bound and exact scan."""
        monkeypatch.setitem(sys.modules, "usearch", None)
        cache = VectorCache(ann_threshold=10, background=False)
        assert not cache.ann
        assert MAX_MATRIX_BYTES == cache.max_bytes
        store = SQLiteStore(db, embedder=RandomEmbedder(), fusion=SEMANTIC)
        store._engine._vectors = cache
        assert isinstance(scope_of(store, "row 1", VectorScope(now=NOW)), ExactScope)
        assert {} == cache._indexes
        store.close()

    def test_installed_but_not_importable_scans_exactly(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """usearch found on disk but failing to import: the cache falls back to the exact
        scan for good, and the recall still answers."""
        cache = VectorCache(ann_threshold=10, background=False)
        assert cache.ann
        monkeypatch.setattr(_vectors, "usearch_or_none", lambda: None)
        store = SQLiteStore(db, embedder=RandomEmbedder(), fusion=SEMANTIC)
        store._engine._vectors = cache
        assert isinstance(scope_of(store, "row 1", VectorScope(now=NOW)), ExactScope)
        assert (False, {}) == (cache.ann, cache._indexes)
        assert store.recall("row 1", 3)
        store.close()

    def test_exact_setting_and_bounds(self, db: Path) -> None:
        """``vector_index="exact"`` never builds a graph; ``"auto"`` raises the matrix bound."""
        assert ANN_MAX_BYTES == VectorCache().max_bytes
        assert MAX_MATRIX_BYTES == VectorCache(index="exact").max_bytes
        store = exact_store(db)
        store.recall("row 1", 10)
        assert store._engine._vectors is not None
        assert {} == store._engine._vectors._indexes
        store.close()
        with pytest.raises(ValueError, match="'vector_index' must be one of"):
            SQLiteStore(db, vector_index="hnsw")
        with pytest.raises(ValueError, match="'vector_index' must be one of"):
            VectorCache(index="hnsw")

    def test_below_the_threshold_no_graph(self, db: Path) -> None:
        """A namespace with fewer live rows than the threshold is scanned exactly."""
        store = ann_store(db, threshold=ROWS + 1)
        assert isinstance(scope_of(store, "row 1", VectorScope(now=NOW)), ExactScope)
        assert {} == store._engine._vectors._indexes  # type: ignore[union-attr]
        store.close()

    def test_background_build_scans_exactly_until_ready(self, db: Path) -> None:
        """Until the daemon thread's graph is ready recalls scan exactly; then they use it."""
        store = SQLiteStore(db, embedder=RandomEmbedder(), fusion=SEMANTIC)
        cache = store._engine._vectors
        assert cache is not None
        cache.ann_threshold = THRESHOLD
        scope_of(store, "row 1", VectorScope(now=NOW))
        ann = next(iter(cache._indexes.values()))
        for _ in range(600):
            if ann.ready:
                break
            time.sleep(0.05)
        assert isinstance(scope_of(store, "row 1", VectorScope(now=NOW)), AnnScope)
        store.close()

    def test_a_failed_build_leaves_the_exact_scan(self, db: Path) -> None:
        """A graph whose build raised is never used; a stopped one stops adding."""
        store = ann_store(db)
        store.recall("row 1", 10)
        cache = store._engine._vectors
        assert cache is not None
        m = next(iter(cache._matrices.values()))
        broken = AnnIndex(m, background=False)
        broken.ready = False
        broken._build(np.arange(3), None, 1)
        assert broken.error is not None
        assert not broken.ready
        stopped = AnnIndex.__new__(AnnIndex)
        stopped._stop, stopped.ready = True, False
        stopped._build(np.arange(3), None, 1)
        assert not stopped.ready
        cache._indexes[next(iter(cache._indexes))] = broken
        broken.matrix = m
        assert isinstance(scope_of(store, "row 1", VectorScope(now=NOW)), ExactScope)
        store.close()


def test_the_graph_module_loads_onnxruntime_first_so_the_embedder_still_imports() -> None:
    """usearch's compiled module imported before onnxruntime crashes onnxruntime's import
    (a segmentation fault); the store's loader imports onnxruntime first, so a process that
    builds a graph can still load the minilm-onnx embedder. Run in a fresh interpreter."""
    script = (
        "from memory_inject.storage.sqlite.vector_ann import usearch_or_none\n"
        "assert usearch_or_none() is not None\n"
        "import onnxruntime\n"
        "print('both loaded')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert (0, "both loaded") == (done.returncode, done.stdout.strip()), done.stderr[-2000:]


@pytest.mark.parametrize("choice", ["auto", "memory", "exact"])
def test_the_agent_file_chooses_the_vector_index(tmp_path: Path, choice: str) -> None:
    """``memory.backend.vector_index`` reaches the store an agent file opens; a wrong value
    is a config error naming the file and the key."""
    from memory_inject import load_agent_config, open_store
    from memory_inject.exceptions import ConfigError

    agent = tmp_path / "agent.yaml"
    agent.write_text(
        f"agent: a\nmemory:\n  backend:\n    kind: sqlite\n    vector_index: {choice}\n",
        encoding="utf-8",
    )
    store = open_store(load_agent_config(agent), tmp_path)
    assert isinstance(store, SQLiteStore)
    try:
        assert store._engine._vectors is not None
        assert choice == store._engine._vectors.index
        assert (choice == "auto") == store._engine._vectors.persist
    finally:
        store.close()
    agent.write_text("agent: a\nmemory:\n  backend:\n    vector_index: hnsw\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_agent_config(agent)
    assert "vector_index" in str(caught.value) and str(agent) in str(caught.value)


def test_32_turns_at_once_while_the_graph_builds_and_rows_arrive(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """32 threads recall on one store (three sessions and none) while the graph builds on
    its thread and a writer adds rows: every turn gets its 5 rows, none from another
    session, and the graph ends ready and current."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(_vectors, "NARROW_ROWS", 0)  # session scopes use the graph too
    store = SQLiteStore(db, embedder=RandomEmbedder(), fusion=SEMANTIC)
    cache = VectorCache(ann_threshold=THRESHOLD, background=True)
    store._engine._vectors = cache
    done = threading.Event()

    def writer() -> None:
        for i in range(40):
            store.store(f"new{i}", f"fresh note {i}", "conversation", session_id="s0")
        done.set()

    def turn(t: int) -> list[tuple[str | None, list[str]]]:
        out = []
        for j in range(8):
            session = None if t % 4 == 3 else f"s{t % 3}"
            got = store.recall_where(QUERIES[(t + j) % len(QUERIES)], 5, session_id=session)
            out.append((session, [e.key for e in got]))
        return out

    try:
        with ThreadPoolExecutor(33) as pool:
            wrote = pool.submit(writer)
            results = [r for f in [pool.submit(turn, t) for t in range(32)] for r in f.result()]
            wrote.result()
        assert done.is_set() and 256 == len(results)
        allowed = {s: _allowed(db, s) for s in (None, "s0", "s1", "s2")}
        assert [] == [(s, keys) for s, keys in results if len(keys) != 5]
        assert [] == [(s, k) for s, keys in results for k in keys if k not in allowed[s]]
        deadline = time.monotonic() + 60
        while not any(a.ready for a in cache._indexes.values()) and time.monotonic() < deadline:
            store.recall_where("row 1", 5)
            time.sleep(0.05)
        assert any(a.ready for a in cache._indexes.values())
        latest = {e.key for e in store.recall_where("fresh note 3", 50, session_id="s0")}
        assert latest <= allowed["s0"]
    finally:
        store.close()
