"""A small session's vectors scored over its own rows, below the approximate index too.

A chat server's store holds many short conversations; scoring a turn's session over
the whole matrix cost about 1 ms at 20k rows for a session of ten. Below the graph's
threshold a session keeping less than ``NARROW_SHARE`` of the rows is now scored over
its own rows (and its shared categories' sessionless rows), with the same answers.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.fusion import MODEL_FUSION, Fusion
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import vectors as _vectors
from memory_inject.storage.sqlite.vector_matrix import VectorScope
from memory_inject.storage.sqlite.vectors import ExactScope
from tests.storage._sqlite_backend import writable
from tests.storage.test_29_vector_ann import NOW, RandomEmbedder, scope_of, vector

SESSIONS = 60
SEMANTIC = Fusion(search_mode="embedding")
#: The categories whose sessionless rows a session's recall sees (the store's default).
SHARED = ("core", "daily")


def _fill(path: Path) -> None:
    lines = []
    for i in range(900):
        session = None if i % 50 == 49 else f"chat-{i % SESSIONS}"
        lines.append(
            json.dumps(
                {
                    "key": f"k{i}",
                    "content": f"note {i} about topic {i % 7}",
                    "category": "core" if session is None else "conversation",
                    "session_id": session,
                    "timestamp": f"2024-01-{1 + i % 28:02d}T12:00:00Z",
                    "embedding": vector(f"row {i}"),
                }
            )
        )
    with SQLiteStore(path) as store:
        store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    conn = writable(path, isolation_level=None)
    conn.execute("UPDATE memories SET superseded_by = 'k1' WHERE key IN ('k60', 'k120')")
    conn.execute("UPDATE memories SET expires_at = '2000-01-01T00:00:00Z' WHERE key = 'k180'")
    conn.close()


def _answers(store: SQLiteStore, **scope: Any) -> list[list[tuple[str, float]]]:
    return [
        [(e.key, round(e.score or 0.0, 12)) for e in store.recall(q, 8, **scope)]
        for q in ("row 0", "row 60", "row 180", "row 241", "note topic 3", "row 9")
    ]


@pytest.mark.parametrize("fusion", [SEMANTIC, MODEL_FUSION], ids=["semantic", "minmax"])
@pytest.mark.parametrize(
    "scope",
    [
        {"session_id": "chat-0"},
        {"session_id": "chat-7", "since": "2024-01-10T00:00:00Z"},
        {"session_id": "chat-41", "until": "2024-01-20T00:00:00Z"},
        {"session_id": "nobody"},
    ],
)
def test_a_small_session_scores_as_the_whole_matrix_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fusion: Fusion, scope: dict[str, str]
) -> None:
    path = tmp_path / "m.db"
    _fill(path)
    store = SQLiteStore(path, embedder=RandomEmbedder(), fusion=fusion, vector_index="exact")
    seen = scope_of(store, "row 1", VectorScope(now=NOW, session_id="chat-0", shared=SHARED))
    assert isinstance(seen, ExactScope) and seen._narrow  # the recall's scope, narrowly
    narrow = _answers(store, **scope)
    monkeypatch.setattr(_vectors, "NARROW_SHARE", 0.0)  # the whole matrix, as before
    whole = _answers(store, **scope)
    store.close()
    assert narrow == whole
    if scope["session_id"] != "nobody":
        assert any(narrow)
        keys = {k for answer in narrow for k, _ in answer}
        assert {"k60", "k120", "k180"}.isdisjoint(keys)  # superseded, expired


def test_which_scopes_are_scored_narrowly(tmp_path: Path) -> None:
    """A session with its shared rows under ``NARROW_SHARE`` of the matrix is; a scope
    without a session, or a session holding many of the rows, is scored over all."""
    path = tmp_path / "m.db"
    _fill(path)
    conn = writable(path, isolation_level=None)
    conn.execute("UPDATE memories SET session_id = 'chat-big' WHERE rid % 2 = 0")
    conn.close()
    store = SQLiteStore(path, embedder=RandomEmbedder(), fusion=SEMANTIC, vector_index="exact")
    small = scope_of(store, "row 1", VectorScope(now=NOW, session_id="chat-4", shared=SHARED))
    everyone = scope_of(store, "row 1", VectorScope(now=NOW))
    big = scope_of(store, "row 1", VectorScope(now=NOW, session_id="chat-big", shared=SHARED))
    assert isinstance(small, ExactScope) and small._narrow
    assert isinstance(everyone, ExactScope) and not everyone._narrow
    assert isinstance(big, ExactScope) and not big._narrow
    assert 0 < small.count < big.count < everyone.count
    store.close()
