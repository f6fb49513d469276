"""``import_jsonl(reembed=True)`` embeds every row again (twenty-eighth round).

Found by a helper: storage.md said to re-import an export after switching to another
model of the same size, but the export carries each row's vector and the import kept
it (the old model's, cosine 1.000 to it, -0.038 to the new one's). There was no way to
embed them again; ``reembed=True`` does.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_inject.embedders import HashingEmbedder
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import make_sqlite_store


class Reversed:
    """Another model of the same size: the hashing vectors, reversed."""

    name = "reversed"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(reversed(list(v))) for v in self.inner.embed(texts)]


def _open(engine: str, tmp_path: Path, dsn: str | None, embedder: Any) -> Any:
    if engine == "sqlite":
        return make_sqlite_store(tmp_path, embedder=embedder)
    assert dsn is not None
    return pgb.make_postgres_store(dsn, embedder=embedder)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
@pytest.mark.parametrize("reembed", [False, True])
def test_a_reembedding_import_takes_the_new_models_vectors(
    engine: str, reembed: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    dsn = request.getfixturevalue("pg_dsn") if engine == "postgres" else None
    old, new = HashingEmbedder(64), Reversed()
    source = _open(engine, tmp_path, dsn, old)
    target = _open(engine, tmp_path, dsn, new)
    try:
        source.store("dog", "My dog is called Biscuit.")
        dump = io.StringIO()
        source.export_jsonl(dump)
        dump.seek(0)
        assert 1 == target.import_jsonl(dump, reembed=reembed)
        stored = target.get("dog").embedding
        want = (new if reembed else old).embed(["My dog is called Biscuit."])[0]
        assert stored == pytest.approx(want, abs=1e-6)
    finally:
        source.close()
        target.close()
