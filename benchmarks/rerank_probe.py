"""How much a reranker of the keyword stage's candidates could add on LoCoMo dev, and what two
cheap ones do (issue 29, eighth round).

Builds the dev stores as ``locomo.py`` does (chat streams, ``core``), takes each question's
top 50 from ``store.recall(q, 50)`` and prints:

* **headroom**: R@k for k = 5, 10, 20, 30, 50, per category (a perfect reranker of the top 30
  could put at most the R@30 share of the evidence into the top 10);
* **answer type**: questions asking "when" / "how many|much" / "where" move the candidates
  holding a time expression / a number / a capitalised word up by ``B`` places (B = 0 is the
  keyword stage as it is);
* with ``--minilm`` (extra ``minilm-onnx``): the top 30 reranked by reciprocal-rank fusion of
  the keyword order with MiniLM's late interaction (each content token of the question
  matched to its most similar token of the row, averaged: ColBERT's MaxSim over MiniLM's
  contextual token vectors) and with the pooled sentence cosine, at several weights.

Reproduce: ``python benchmarks/rerank_probe.py [--minilm]`` (4 s; 35 s with ``--minilm``).
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _locomo_data import DEFAULT_DATA, build_store, load, mean, recall_at

from memory_inject.storage import Fusion

_TIME = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|recently|ago|since|"
    r"last (week|month|year|night|weekend|summer|winter|spring|fall|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"next (week|month|year)|this (week|month|weekend|morning)|"
    r"january|february|march|april|may|june|july|august|september|october|november|"
    r"december|\d{4})\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"(\$|\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|twenty|hundred|thousand)\b)",
    re.IGNORECASE,
)
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")
_STOP = frozenset(
    "a an the is are was were do does did what which who whom when where why how of in on at "
    "to for with by from and or but has have had be been being it its this that these those i "
    "you he she they we my your his her their our me him them us would could should might will "
    "can as about into than then there here so if not no yes".split()
)
_KS = (5, 10, 20, 30, 50)


def question_type(question: str) -> str | None:
    """``when``, ``number``, ``where`` or None, from the question's wording."""
    q = question.lower()
    if q.startswith("when") or "what year" in q or "what month" in q:
        return "when"
    if "how many" in q or "how much" in q or "how long" in q:
        return "number"
    if q.startswith("where") or any(w in q for w in ("which city", "which country", "what state")):
        return "where"
    return None


def answers_type(kind: str, content: str) -> bool:
    """Does ``content`` hold what a ``kind`` question asks for?"""
    if kind == "when":
        return bool(_TIME.search(content))
    if kind == "number":
        return bool(_NUMBER.search(content))
    body = content.split(":", 1)[-1].strip()  # past the "Speaker:" prefix
    return bool(_CAPITALISED.search(body))


def candidates(data: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every question with its top 50 keys, and every record's stored content by key."""
    records, queries = load(data)
    contents: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for conv, rows in records.items():
            store = build_store(Path(tmp) / f"{conv}.db", rows, "core", None, Fusion())
            try:
                for q in (q for q in queries if q["conversation"] == conv):
                    found = [e.key for e in store.recall(q["question"], 50)]
                    out.append({**q, "found": found})
                for r in rows:
                    caption = r.get("image_caption")
                    contents[r["id"]] = r["content"] + (
                        f" [shared an image: {caption}]" if caption else ""
                    )
            finally:
                store.close()
    return out, contents


def report(label: str, questions: list[dict[str, Any]], order: Callable[[dict], list[str]]) -> None:
    """R@5 / R@10 overall and per category, with the keys ``order`` gives each question."""
    by: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for q in questions:
        keys = order(q)
        pair = (recall_at(keys, q["evidence"], 5), recall_at(keys, q["evidence"], 10))
        by["all"].append(pair)
        by[q["category_name"]].append(pair)
    cells = [
        f"{c} {mean(a for a, _ in v):.3f}/{mean(b for _, b in v):.3f}"
        for c, v in sorted(by.items(), key=lambda kv: (kv[0] != "all", kv[0]))
    ]
    print(f"{label:<28} " + "  ".join(cells))


def rrf(parts: Sequence[tuple[float, Sequence[float]]], n: int) -> list[int]:
    """Positions 0..n-1 ordered by sum of ``weight / (rank + 10)`` over ``(weight, scores)``."""
    total = [0.0] * n
    for weight, scores in parts:
        ranked = sorted(range(n), key=lambda i: -scores[i])
        for rank, i in enumerate(ranked):
            total[i] += weight / (rank + 10)
    return sorted(range(n), key=lambda i: -total[i])


class _MiniLM:
    """all-MiniLM-L6-v2 int8: token vectors (for MaxSim) and the pooled sentence vector."""

    def __init__(self) -> None:
        import numpy as np

        from memory_inject._onnx_embedder import OnnxMiniLMEmbedder

        self.np = np
        self.model = OnnxMiniLMEmbedder()
        self.cache: dict[str, tuple[Any, Any]] = {}

    def vectors(self, text: str) -> tuple[Any, Any]:
        """``(content token vectors, pooled vector)``, both L2-normalised."""
        if text in self.cache:
            return self.cache[text]
        np = self.np
        enc = self.model._tokenizer.encode(text)
        ids = np.array([enc.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self.model._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.model._session.run(None, feeds)[0][0]
        pooled = hidden.mean(0)
        pooled /= np.linalg.norm(pooled)
        tokens = hidden / np.linalg.norm(hidden, axis=1, keepdims=True)
        keep = [
            i
            for i, t in enumerate(enc.tokens)
            if t not in ("[CLS]", "[SEP]") and t.lstrip("#").lower() not in _STOP
        ]
        out = (tokens[keep] if keep else tokens, pooled)
        self.cache[text] = out
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--minilm", action="store_true", help="also the MiniLM rerankers")
    args = ap.parse_args()
    questions, contents = candidates(args.data)

    print("headroom: R@k of the keyword stage's top 50 (k = " + ", ".join(map(str, _KS)) + ")")
    by: dict[str, list[list[float]]] = defaultdict(list)
    for q in questions:
        row = [recall_at(q["found"], q["evidence"], k) for k in _KS]
        by["all"].append(row)
        by[q["category_name"]].append(row)
    for c, rows in sorted(by.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        figures = " ".join(f"{mean(r[i] for r in rows):.3f}" for i in range(len(_KS)))
        print(f"  {c:<12} n={len(rows):<4} {figures}")

    print("answer type: R@5/R@10 with candidates of the asked type moved up B places")
    for b in (0, 2, 3, 5, 8):

        def moved(q: dict[str, Any], b: int = b) -> list[str]:
            kind = question_type(q["question"])
            top = q["found"][:30]
            if kind is None:
                return top
            pos = {k: i - b * answers_type(kind, contents[k]) for i, k in enumerate(top)}
            return sorted(top, key=lambda k: pos[k])

        report(f"  B = {b}", questions, moved)

    if not args.minilm:
        return
    model = _MiniLM()
    print("MiniLM over the top 30, rank fusion (keyword / MaxSim / pooled cosine weights)")
    for w_max, w_cos in ((0, 0), (0.3, 0), (0.5, 0), (1.0, 0), (0, 0.35), (0, 0.5), (0.3, 0.2)):

        def fused(q: dict[str, Any], w_max: float = w_max, w_cos: float = w_cos) -> list[str]:
            top = q["found"][:30]
            q_tokens, q_pooled = model.vectors(q["question"])
            maxsim, cosine = [], []
            for key in top:
                d_tokens, d_pooled = model.vectors(contents[key])
                maxsim.append(float((q_tokens @ d_tokens.T).max(1).mean()))
                cosine.append(float(q_pooled @ d_pooled))
            keyword = [-float(i) for i in range(len(top))]
            parts = [(1 - w_max - w_cos, keyword), (w_max, maxsim), (w_cos, cosine)]
            return [top[i] for i in rrf(parts, len(top))]

        report(f"  {1 - w_max - w_cos:.2f} / {w_max:.2f} / {w_cos:.2f}", questions, fused)


if __name__ == "__main__":
    main()
