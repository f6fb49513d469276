"""An approximate nearest-neighbour index next to a large vector matrix (``usearch`` HNSW).

The exact vector stage scores every row of the namespace: about 0.3 ms at
10k rows of 256 dimensions, 2 ms at 50k, 4 ms at 100k and 40 ms (plus 13 ms
for the scope's text columns) at 1M. Past :data:`ANN_THRESHOLD` rows the
cache keeps an HNSW graph over the matrix's live slots (``usearch``, the
optional ``ann`` extra: a wheel with no compiler needed; f16 vectors, 32 links
a node, 48 from :data:`LARGE_ROWS`: at 100k rows 8-bit vectors and 16 links found
0.89 of the exact top 10, these 0.96), and a recall whose scope is broad asks it
for candidates:

* the graph is searched with the query for ``k`` times :data:`OVERSAMPLE`
  candidates divided by the share of rows the scope may keep, and the
  candidates outside the scope (another session, superseded, expired, out of
  the time bounds) are dropped with the matrix's own scope rules, read for
  those rows only; too few left: four times as many, up to
  :data:`MAX_CANDIDATES`, then the exact scan answers;
* the cosines are the exact ones, recomputed from the matrix's float32 rows,
  and the candidates are ranked by them, so fusion and calibration see the
  numbers the exact scan would have given for those rows;
* ``low`` and ``high`` (what ``"minmax"`` fusion rescales by) are the exact
  cosines of the scope's farthest and nearest rows the graph finds: the
  farthest row from ``q`` is the nearest to ``-q`` (one more search), the
  nearest is the best of the top rows' search (no other).

A scope that keeps few rows (a session's, :data:`NARROW_ROWS`) is scanned
exactly over those rows by the cache instead. The graph is built from the
matrix on a daemon thread (7 to 21 minutes at 1M rows: recalls scan exactly
until it is ready), saved next to the database file and loaded by the next process
if it is the graph of the same vectors (:mod:`.vector_ann_file`), and follows
the matrix through the slots its patches touch
(:attr:`~.vector_matrix.VectorMatrix.touched`); a matrix read again gets a
new graph. Without ``usearch`` nothing here runs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memory_inject.embedders import numpy_or_none
from memory_inject.storage.sqlite.vector_ann_file import (
    load_graph,
    save_graph,
    saved_slots,
    vectors_digest,
)
from memory_inject.storage.sqlite.vector_matrix import Scored, VectorMatrix, VectorScope

__all__ = [
    "ANN_THRESHOLD",
    "CONNECTIVITY",
    "CONNECTIVITY_LARGE",
    "DTYPE",
    "EXPANSION_ADD",
    "EXPANSION_ADD_LARGE",
    "EXPANSION_SEARCH",
    "EXPANSION_SEARCH_LARGE",
    "LARGE_ROWS",
    "MAX_CANDIDATES",
    "NARROW_ROWS",
    "OVERSAMPLE",
    "AnnIndex",
    "AnnScope",
    "Scored",
    "expansion_search",
    "usearch_installed",
    "usearch_or_none",
]

#: A matrix with at least this many live rows gets a graph (the exact scan costs
#: about 2 ms at 50k rows of 256 dimensions, and grows with the rows).
ANN_THRESHOLD = 50_000

#: A scope that may keep at most this many rows is scanned exactly over them.
NARROW_ROWS = 8192

#: Candidates asked of the graph per row wanted (before the scope's share).
OVERSAMPLE = 4

#: The most candidates asked of the graph before the exact scan answers instead.
MAX_CANDIDATES = 4096

#: The graph's vector type, links a node and candidates kept adding a node (saved in the stamp).
DTYPE = "f16"
CONNECTIVITY = 32
EXPANSION_ADD = 128
#: From :data:`LARGE_ROWS`: at 1M rows 48 links and 192 found 0.72 of the exact top 10
#: (searching 512 wide), 32 and 128 0.58, for a build 1.6x longer and a graph 16% larger.
CONNECTIVITY_LARGE = 48
EXPANSION_ADD_LARGE = 192

#: The candidates a search of the graph keeps (:func:`expansion_search`); the
#: search for the scope's farthest row (min-max's ``low``) always keeps this many.
EXPANSION_SEARCH = 256

#: From this many rows the graph gets the ``_LARGE`` links and the nearest rows' search
#: keeps :data:`EXPANSION_SEARCH_LARGE`: at 1M rows of hashing vectors (32 links) 256
#: found 0.49 of the exact top 10 in 1.3 ms, 512 0.58 in 2.5 ms, 1024 0.66 in 4.9 ms.
LARGE_ROWS = 500_000
EXPANSION_SEARCH_LARGE = 512

_CHUNK = 4096


def expansion_search(rows: int) -> int:
    """How many candidates a search of a graph of ``rows`` keeps (more: better recall,
    slower; HNSW's recall at a fixed setting falls as the graph grows)."""
    return EXPANSION_SEARCH_LARGE if rows >= LARGE_ROWS else EXPANSION_SEARCH


def usearch_installed() -> bool:
    """True when the ``ann`` extra is installed, without importing it (a store's constructor
    asks; the import waits for the first matrix past :data:`ANN_THRESHOLD`)."""
    try:
        return importlib.util.find_spec("usearch") is not None
    except (ImportError, ValueError):  # a broken or None entry in sys.modules
        return False


def usearch_or_none() -> Any:
    """The ``usearch.index`` module, or None when the ``ann`` extra is not installed.

    onnxruntime (the ``minilm-onnx`` extra) is imported first when it is
    installed: imported after usearch's compiled module, onnxruntime 1.32
    crashes the process (a segmentation fault in its own import; usearch
    2.26), while the other order works.
    """
    if "usearch.compiled" not in sys.modules and importlib.util.find_spec("onnxruntime"):
        with contextlib.suppress(Exception):
            importlib.import_module("onnxruntime")
    try:
        from usearch import index
    except ImportError:
        return None
    return index


class AnnIndex:
    """An HNSW graph over the live slots of one :class:`VectorMatrix` (keys are slots).

    ``ready`` turns true once the graph holds every slot that was live when it
    was started; the slots patched since are taken by :meth:`sync`, under the
    cache's lock, before each search. ``background=False`` builds in the
    constructor (tests, and callers that would rather wait).
    """

    def __init__(
        self,
        m: VectorMatrix,
        *,
        background: bool = True,
        threads: int = 1,
        path: Path | None = None,
    ) -> None:
        """Start building the graph for ``m`` (the caller holds the cache's lock); with
        ``path``, load the graph saved there if it is ``m``'s, else build and save it
        (:mod:`.vector_ann_file`)."""
        _np = numpy_or_none()
        self.matrix = m
        self.ready = False
        #: True when the graph was loaded from ``path`` rather than built.
        self.loaded = False
        self.error: BaseException | None = None
        self._stop = False
        m.touched = set()
        slots = _np.flatnonzero(m.live)
        large = len(slots) >= LARGE_ROWS
        self.links = CONNECTIVITY_LARGE if large else CONNECTIVITY
        self.adding = EXPANSION_ADD_LARGE if large else EXPANSION_ADD
        self._index = usearch_or_none().Index(
            ndim=m.dim,
            metric="cos",
            dtype=DTYPE,
            connectivity=self.links,
            expansion_add=self.adding,
        )
        args = (slots, m.matrix, threads, None if path is None else m.live.copy(), path)
        if background:
            name = "memory-inject-ann"
            threading.Thread(target=self._build, args=args, name=name, daemon=True).start()
        else:
            self._build(*args)

    def __len__(self) -> int:
        """How many slots the graph holds."""
        return len(self._index)

    def _stamp(self, live: Any, vectors: Any) -> dict[str, Any]:
        """What the graph is built from (:func:`~.vector_ann_file.load_graph` compares it)."""
        return {
            "dim": self.matrix.dim,
            "slots": len(live),
            "rows": int(live.sum()),
            "dtype": DTYPE,
            "connectivity": self.links,
            "expansion_add": self.adding,
            "vectors": vectors_digest(live, vectors),
        }

    def _build(
        self, slots: Any, vectors: Any, threads: int, live: Any = None, path: Path | None = None
    ) -> None:
        try:
            stamp = {} if path is None else self._stamp(live, vectors)
            head = None if path is None else saved_slots(path)
            if path is not None and head is not None and head <= len(live):
                # Rows written since the save sit in slots past it: the graph's own
                # slots must be unchanged, and the new ones are added.
                first = stamp if head == len(live) else self._stamp(live[:head], vectors[:head])
                loaded = load_graph(path, first, slots[slots < head], usearch_or_none().Index)
                if loaded is not None:
                    self._index, self.loaded, slots = loaded, True, slots[slots >= head]
            for start in range(0, len(slots), _CHUNK):
                if self._stop:
                    return
                part = slots[start : start + _CHUNK]
                self._index.add(part, vectors[part], threads=threads)
            # Saved only if no patch touched the matrix since the vectors were hashed.
            fresh = len(slots) or not self.loaded
            if path is not None and fresh and not self._stop and not self.matrix.touched:
                save_graph(self._index, path, stamp)
        except Exception as exc:  # noqa: BLE001 - a graph that fails leaves the exact scan
            self.error = exc
            return
        self.ready = True

    def stop(self) -> None:
        """Stop a build still running (the matrix was dropped or read again)."""
        self._stop = True

    def sync(self) -> None:
        """Take the slots the matrix's patches touched since the last call (the caller
        holds the cache's lock; only once ready: a build reads the matrix meanwhile)."""
        _np = numpy_or_none()
        m = self.matrix
        if not m.touched:
            return
        slots = _np.array(sorted(m.touched), dtype=_np.uint64)
        m.touched.clear()
        held = slots[_np.asarray(self._index.contains(slots), dtype=bool)]
        if len(held):
            self._index.remove(held)
        live = slots[m.live[slots.astype(_np.int64)]]
        if len(live):
            self._index.add(live, m.matrix[live.astype(_np.int64)], threads=1)

    def search(self, q: Any, count: int, *, wide: int | None = None) -> Any:
        """Up to ``count`` slots near the unit vector ``q``, nearest first (approximately),
        keeping ``wide`` candidates (None: :func:`expansion_search` of the graph's size)."""
        _np = numpy_or_none()
        index = self._index
        wide = expansion_search(len(index)) if wide is None else wide
        if index.expansion_search != wide:
            index.expansion_search = wide
        found = index.search(q, count, threads=1)
        return _np.asarray(found.keys, dtype=_np.int64)


class AnnScope:
    """One query's best rows of a broad scope through an :class:`AnnIndex`.

    The same face as the exact scan's (:class:`Scored`); ``share`` is about
    what part of the matrix's live rows the scope may keep (how much to
    oversample); ``exact`` makes the exact scan this falls back to.
    """

    __slots__ = (
        "_ann",
        "_exact",
        "_fallback",
        "_lock",
        "_near",
        "_q",
        "_scope",
        "_share",
        "_span",
    )

    def __init__(
        self,
        ann: AnnIndex,
        q: Any,
        scope: VectorScope,
        lock: threading.RLock,
        share: float,
        exact: Callable[[], Scored],
    ) -> None:
        """Nothing is searched until asked (the caller holds ``lock``)."""
        self._ann = ann
        self._q = q
        self._scope = scope
        self._lock = lock
        self._share = max(share, 1e-9)
        self._exact = exact
        self._fallback: Scored | None = None
        self._span: tuple[float, float] | None = None
        # The last search near q: the matrix's generation then, k, and what it found.
        self._near: tuple[int, int, list[tuple[int, float]]] | None = None

    @property
    def skipped(self) -> int:
        """Rows of the scope whose stored vector is not finite (never scored)."""
        return self._ann.matrix.skipped(self._scope)

    def _scan(self) -> Scored:
        if self._fallback is None:
            self._fallback = self._exact()
        return self._fallback

    def _nearest(self, q: Any, k: int, wide: int | None = None) -> list[tuple[int, float]] | None:
        """At least ``k`` ``(slot, exact cosine)`` of the scope near ``q`` (None: too few
        found); ``wide`` is :meth:`AnnIndex.search`'s."""
        _np = numpy_or_none()
        m, ann = self._ann.matrix, self._ann
        ann.sync()
        count = int(min(MAX_CANDIDATES, max(k * OVERSAMPLE / self._share, 4 * k, 32)))
        while True:
            slots = ann.search(q, min(count, max(len(ann), 1)), wide=wide)
            slots = slots[m.live[slots]]
            slots = slots[m.in_scope(self._scope, slots)]
            if len(slots) >= k:
                sims = _np.einsum("ij,j->i", m.matrix[slots], self._q)
                return list(zip(slots.tolist(), sims.tolist(), strict=True))
            if count >= MAX_CANDIDATES or count >= len(ann):
                return None
            count = min(MAX_CANDIDATES, count * 4)

    def _near_q(self, k: int) -> list[tuple[int, float]] | None:
        """:meth:`_nearest` for ``q`` itself, kept while the matrix is unpatched: the
        scope's greatest cosine is the best of what :meth:`top` found (one search
        fewer a recall: the graph's best row does not depend on how many are asked)."""
        gen = self._ann.matrix.gen
        if self._near is not None and self._near[0] == gen and self._near[1] >= k:
            return self._near[2]
        found = self._nearest(self._q, k)
        if found is not None:
            self._near = (gen, k, found)
        return found

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, cosine)`` pairs of the scope, best first, ties by id."""
        if k <= 0:
            return []
        with self._lock:
            found = None if self._fallback is not None else self._near_q(k)
            if found is None:
                return self._scan().top(k)
            ids = self._ann.matrix.ids
            pairs = [(str(ids[slot]), c) for slot, c in found]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs[:k]

    def cosines(self, ids: Iterable[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that is in the scope and embedded."""
        _np = numpy_or_none()
        with self._lock:
            if self._fallback is not None:
                return self._fallback.cosines(ids)
            m = self._ann.matrix
            keys = [key for key in ids if key in m.position]
            slots = _np.array([m.position[key] for key in keys], dtype=_np.int64)
            if not len(slots):
                return {}
            keep = m.live[slots] & m.in_scope(self._scope, slots)
            sims = _np.einsum("ij,j->i", m.matrix[slots], self._q)
            return {key: float(s) for key, s, ok in zip(keys, sims, keep, strict=True) if ok}

    def _bounds(self) -> tuple[float, float]:
        if self._span is None:
            with self._lock:
                near = None if self._fallback is not None else self._near_q(1)
                far = None if near is None else self._nearest(-self._q, 1, EXPANSION_SEARCH)
                if near is None or far is None:
                    scan = self._scan()
                    self._span = (scan.low, scan.high)
                else:
                    self._span = (min(c for _, c in far), max(c for _, c in near))
        return self._span

    @property
    def low(self) -> float:
        """The least cosine the graph finds in the scope (the exact scan's if it finds none)."""
        return self._bounds()[0]

    @property
    def high(self) -> float:
        """The greatest cosine the graph finds in the scope (the exact scan's if it finds none)."""
        return self._bounds()[1]
