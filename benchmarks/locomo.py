"""Retrieval quality on LoCoMo (dev half): recall@k of evidence, recalled and rendered.

Reads ``../shared/data/locomo-dev`` (or ``--data DIR``); the data is CC BY-NC
and is never copied into this repository. One SQLite store per conversation,
records stamped with their session's date, ``now`` = one day after the last
session. For each question:

* recalled: recall@5 / recall@10 of the evidence ids among the store's top-k;
* rendered: the fraction of evidence among the entries ``render_memory_context``
  puts in the block (at most ``max_entries``), per pipeline arm and category.

Run: ``python benchmarks/locomo.py`` (lexical, hashing-vector and hybrid
recall; add ``--minilm`` to also try all-MiniLM-L6-v2 when the
``sentence-transformers`` extra is installed, ``--minilm-onnx`` for the same
model from the ``minilm-onnx`` extra, ``--only-models`` to skip the hashing rows;
``--backend postgres`` runs the same on PostgreSQL, one table per store, on a
private server unless ``--dsn``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import (
    DEFAULT_DATA,
    backend,
    build_store,
    evaluation_now,
    load,
    mean,
    recall_at,
)
from memory_inject import MemoryInjectConfig, RerankConfig, render_memory_context
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage import MODEL_FUSION, Fusion


def run_mode(
    name: str,
    records: dict[str, list[dict[str, Any]]],
    queries: list[dict[str, Any]],
    embedder: Any,
    fusion: Fusion,
    tmp: Path,
    pipelines: dict[str, Callable[[datetime], MemoryInjectConfig]],
    categories: tuple[str, ...],
) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": name, "recalled": {}, "rendered": {}}
    per_cat_recall: dict[str, list[tuple[float, float]]] = defaultdict(list)
    rendered: dict[tuple[str, str], list[float]] = defaultdict(list)
    rendered_by_qcat: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    t_recall: list[float] = []
    for category in categories:
        for conv, rows in records.items():
            store = build_store(
                tmp / f"{name}-{category}-{conv}.db", rows, category, embedder, fusion
            )
            now = evaluation_now(rows)
            try:
                for q in (q for q in queries if q["conversation"] == conv):
                    if category == categories[0]:
                        t0 = time.perf_counter()
                        found = [e.key for e in store.recall(q["question"], 10)]
                        t_recall.append(time.perf_counter() - t0)
                        per_cat_recall[q["category_name"]].append(
                            (
                                recall_at(found, q["evidence"], 5),
                                recall_at(found, q["evidence"], 10),
                            )
                        )
                    for pname, make in pipelines.items():
                        res = render_memory_context(store, q["question"], config=make(now), now=now)
                        score = recall_at([e.key for e in res.entries], q["evidence"], 10)
                        rendered[(category, pname)].append(score)
                        rendered_by_qcat[(category, pname, q["category_name"])].append(score)
            finally:
                store.close()
    allr = [x for v in per_cat_recall.values() for x in v]
    out["recalled"]["all"] = (mean(a for a, _ in allr), mean(b for _, b in allr))
    for cat, v in sorted(per_cat_recall.items()):
        out["recalled"][cat] = (mean(a for a, _ in v), mean(b for _, b in v))
    out["rendered"] = {k: mean(v) for k, v in rendered.items()}
    out["rendered_by_qcat"] = {k: mean(v) for k, v in rendered_by_qcat.items()}
    t_recall.sort()
    out["recall_p50_ms"] = t_recall[len(t_recall) // 2] * 1e3 if t_recall else 0.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--minilm", action="store_true")
    ap.add_argument("--minilm-onnx", action="store_true", help="the minilm-onnx extra's model")
    ap.add_argument("--only-models", action="store_true", help="skip the hashing rows")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", default=None, help="postgres: an existing server (default: private)")
    args = ap.parse_args()
    with backend(args.backend, args.dsn):
        _main(args)


def _main(args: argparse.Namespace) -> None:
    records, queries = load(args.data)
    print(
        f"LoCoMo dev ({args.backend}): {sum(map(len, records.values()))} records, "
        f"{len(queries)} questions\n"
    )

    pipelines: dict[str, Callable[[datetime], MemoryInjectConfig]] = {
        "decay (default)": lambda now: MemoryInjectConfig(),
        "rerank": lambda now: MemoryInjectConfig(rerank=RerankConfig(enabled=True)),
        "rerank+mmr": lambda now: MemoryInjectConfig(
            rerank=RerankConfig(enabled=True, strategy="mmr")
        ),
    }
    modes: list[tuple[str, Any, Fusion]] = [
        ("lexical (FTS5 bm25)", None, Fusion(search_mode="bm25")),
        ("semantic (hashing n-grams)", HashingEmbedder(), Fusion(search_mode="embedding")),
        ("hybrid (weighted 0.7/0.3, hashing)", HashingEmbedder(), Fusion()),
        ("hybrid (rrf, hashing)", HashingEmbedder(), Fusion(mode="rrf")),
        ("hybrid (minmax 0.5/0.5, hashing)", HashingEmbedder(), MODEL_FUSION),
    ]
    models: list[tuple[str, Any]] = []
    if args.minilm:
        from memory_inject.embedders import SentenceTransformerEmbedder

        models.append(("MiniLM", SentenceTransformerEmbedder()))
    if args.minilm_onnx:
        from memory_inject.embedders import OnnxMiniLMEmbedder

        models.append(("MiniLM int8 ONNX", OnnxMiniLMEmbedder()))
    for label, model in models:
        modes += [
            (f"semantic ({label})", model, Fusion(search_mode="embedding")),
            (f"hybrid (weighted 0.7/0.3, {label})", model, Fusion()),
            (f"hybrid (rrf, {label})", model, Fusion(mode="rrf")),
            (f"hybrid (minmax 0.5/0.5 = MODEL_FUSION, {label})", model, MODEL_FUSION),
        ]
    if args.only_models:
        modes = modes[:1] + modes[5:]
    results = []
    with tempfile.TemporaryDirectory() as d:
        for i, (name, emb, fusion) in enumerate(modes):
            cats = ("core", "daily") if i == 0 else ("core",)
            t0 = time.perf_counter()
            results.append(
                run_mode(
                    f"m{i}",
                    records,
                    queries,
                    emb,
                    fusion,
                    Path(d),
                    pipelines if i == 0 else {"decay (default)": pipelines["decay (default)"]},
                    cats,
                )
            )
            results[-1]["mode"] = name
            print(f"  ran {name} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)

    qcats = [c for c in results[0]["recalled"] if c != "all"]
    print("### Recalled (store top-k)\n")
    print("| recall | R@5 | R@10 | " + " | ".join(f"R@5 {c}" for c in qcats) + " | p50 ms |")
    print("|---|---:|---:|" + "---:|" * len(qcats) + "---:|")
    for r in results:
        rec = r["recalled"]
        print(
            f"| {r['mode']} | {rec['all'][0]:.3f} | {rec['all'][1]:.3f} | "
            + " | ".join(f"{rec[c][0]:.3f}" for c in qcats)
            + f" | {r['recall_p50_ms']:.2f} |"
        )
    print("\n### Rendered (evidence among the <= 4 entries of the default block)\n")
    print("| recall | stored as | pipeline | rendered | " + " | ".join(qcats) + " |")
    print("|---|---|---|---:|" + "---:|" * len(qcats))
    for r in results:
        for (cat, pname), v in sorted(r["rendered"].items()):
            by = r["rendered_by_qcat"]
            print(
                f"| {r['mode']} | {cat} | {pname} | {v:.3f} | "
                + " | ".join(f"{by.get((cat, pname, c), 0.0):.3f}" for c in qcats)
                + " |"
            )


if __name__ == "__main__":
    main()
