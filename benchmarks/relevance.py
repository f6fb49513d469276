"""Relevance on LoCoMo (dev half): does the block come when it helps, and stay away when not?

Reads ``../shared/data/locomo-dev`` (or ``--data DIR``; CC BY-NC, never copied
into this repository) and builds one SQLite store per conversation exactly as
``locomo.py`` does: records stored as ``core``, ``now`` one day after the last
session. Everything is measured through the public API
(``render_memory_context``, ``store.recall``), so the numbers are whatever the
store's scoring and the stage chain do when this runs. Three kinds of prompt
are rendered against every store:

* the conversation's LoCoMo questions: **block recall**, the fraction of a
  question's evidence ids among the rendered entries (at most
  ``budget.max_entries``, 4 by default), averaged, and per category; plus
  R@5 / R@10 of ``store.recall(question, 10)`` as ``locomo.py`` reports it;
* ``offtopic_prompts.txt`` (git, SQL, tax forms, ...: nothing the chats
  cover): the **false-injection rate**, the fraction of (prompt, store) pairs
  whose render injects at least one entry;
* ``nearmiss_prompts.txt`` (``--nearmiss``; "when is my dentist
  appointment?", "what did my landlord say about the rent?"): personal
  questions that share words with a person's chats but that a store of
  someone else's chats cannot answer: the same false-injection rate, apart;
* ``contentless_prompts.jsonl`` (``""``, ``"ok"``, ``"👍"``, ...): the same
  rate, reported apart.

The default config gives the headline numbers and the p50 time per render.
The **operating curve** sweeps ``min_relevance_score`` (everything else at its
default, ``min_companion_score`` included: a floor decides whether a turn gets
memory, and the entries beside one that reaches it need only the companion
score) and gives the three numbers per floor. ``--companion none`` measures one
floor for every entry (zeroclaw's), ``--companion X`` another companion score.

How the sweep is computed: by filtering, and exact. Each prompt is rendered
once at floor 0; a floor ``f`` then keeps the rendered entries that are
unscored or score ``>= f`` (the pipeline's ``RelevanceFilter`` at ``f``, its
companion score included; with a companion score, a floor that drops a shown
entry of a floor-0 block the budget cut is rendered instead). That equals a
render at ``f`` when both of these hold, and the script checks both:

1. The stage chain of every floor's config is ``session_scope, decay,
   relevance_filter, conversation_exclusion, skip_set`` with the ``bracket``
   renderer (read from ``memory_inject.stages.build_stages``). Then the floor
   is read by ``relevance_filter`` only: the recall (``recall_limit``) does
   not depend on it, ``decay`` leaves core entries' scores as recalled (and
   would not depend on the floor anyway), the two stages after the filter drop
   by the entry alone, and the renderer takes the first ``max_entries`` and
   ends the block at the first line over the character or token budget, so
   what it does with an entry depends only on the entries before it. A chain
   that differs (a new abstention stage, the rerank arm, governance) is
   rendered per floor.
2. Per render, the entries that reached the filter (the ``decay`` trace's
   scores, in order) are in non-increasing score order, unscored counted as
   highest. Then every floor keeps a prefix of them, and the block of a
   prefix is the floor-0 block cut to that prefix. A render where this fails
   is rendered per floor.

Both conditions rest on reading the code, so the script also tests the
result: every prompt's default-config render is compared with the filtered
default floor, and every ``--verify-every``-th prompt (default 10) is
rendered at every floor and compared. Any difference abandons the fast path
and the whole sweep is rendered per floor (``--exact`` does that from the
start); the output says which method produced the numbers.

Run: ``python benchmarks/relevance.py [--data DIR] [--floors 0,0.1,...]
[--json out.json] [--exact] [--embedder hashing|sentence-transformers|minilm-onnx]
[--fusion default|weighted|minmax|max] [--dim N] [--raw-cosine] [--backend postgres]
[--offtopic FILE] [--nearmiss FILE] [--layout stream|none|shuffled]`` (PostgreSQL: one table
per store, on a private server unless ``--dsn``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import (
    DEFAULT_DATA,
    LAYOUTS,
    backend,
    build_store,
    evaluation_now,
    load,
    mean,
    recall_at,
)
from memory_inject import MemoryInjectConfig, RenderResult, render_memory_context
from memory_inject.embedders import HashingEmbedder, make_embedder
from memory_inject.stages import StageContext
from memory_inject.stages.filters import RelevanceFilter
from memory_inject.storage import MODEL_FUSION, WEAK_FUSION, Fusion
from memory_inject.storage._base import PersistentStore
from memory_inject.storage.fusion import default_fusion

HERE = Path(__file__).resolve().parent
#: The config's ``min_companion_score`` (``--companion`` measures another).
DEFAULT_COMPANION = MemoryInjectConfig().min_companion_score
OFFTOPIC = HERE / "offtopic_prompts.txt"
#: Written after the default floor was chosen on OFFTOPIC; only ever used to check it.
HELDOUT = HERE / "offtopic_heldout.txt"
CONTENTLESS = HERE / "contentless_prompts.jsonl"
#: Personal questions sharing words with the chats that the chats cannot answer (issue 29).
NEARMISS = HERE / "nearmiss_prompts.txt"
DEFAULT_FLOORS = tuple(round(0.05 * i, 2) for i in range(21))
#: The chain under which a floor can be applied to a floor-0 render's scores (module docstring).
FILTERABLE_CHAIN = (
    "session_scope",
    "decay",
    "relevance_filter",
    "conversation_exclusion",
    "skip_set",
)

#: A render's entries in block order, each as ``(key, score)``.
Scored = tuple[tuple[str, float | None], ...]
#: What one prompt rendered at each floor: floor -> keys in block order.
Blocks = Mapping[float, tuple[str, ...]]


# -- the prompt files ----------------------------------------------------------------


def read_offtopic(path: Path = OFFTOPIC) -> list[str]:
    """One prompt per line; ``# ``-comment and blank lines skipped."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and line != "#" and not line.startswith("# "):
            out.append(line)
    return out


def read_contentless(path: Path = CONTENTLESS) -> list[str]:
    """One JSON string per line; ``#`` lines (a JSON string starts with a quote) skipped."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("#") or not line.strip():
            continue
        value = json.loads(line)
        if not isinstance(value, str):
            raise ValueError(f"{path}:{n}: each line must be a JSON string (got {value!r})")
        out.append(value)
    return out


# -- the pure part: floors, blocks, the curve --------------------------------------------


def parse_companion(text: str) -> float | None:
    """``--companion``: ``none`` or a number 0..1."""
    if text.strip().lower() in ("none", "null"):
        return None
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"--companion must be 0..1 or none (got {text})")
    return value


def keys_at(rendered: Scored, floor: float) -> tuple[str, ...]:
    """The keys ``RelevanceFilter(floor)`` keeps: unscored, or scored ``>= floor``."""
    return tuple(k for k, s in rendered if s is None or s >= floor)


def floor_order_ok(scores: Iterable[float | None]) -> bool:
    """True when every floor keeps a prefix: scores non-increasing, unscored counted highest."""
    prev = float("inf")
    for s in scores:
        v = float("inf") if s is None else s
        if v > prev:
            return False
        prev = v
    return True


def injection_rate(blocks: Iterable[Sequence[str]]) -> float:
    """The fraction of renders that injected at least one entry."""
    return mean(1.0 if b else 0.0 for b in blocks)


def block_recall(keys: Sequence[str], evidence: Sequence[str]) -> float:
    """The fraction of ``evidence`` among the rendered ``keys`` (0 without evidence)."""
    return recall_at(list(keys), list(evidence), len(keys))


def evidence_share(blocks: Sequence[tuple[Sequence[str], Sequence[str]]]) -> float:
    """Of every entry rendered for the questions, the share that is evidence: the blocks'
    precision, which a lower floor for the entries beside the best one trades away."""
    shown = sum(len(k) for k, _ in blocks)
    return sum(len(set(k) & set(ev)) for k, ev in blocks) / shown if shown else 0.0


@frozen
class CurvePoint:
    """The numbers of one floor of the operating curve."""

    floor: float
    block_recall: float
    questions_injected: float
    offtopic_injected: float
    contentless_injected: float
    nearmiss_injected: float = 0.0


def operating_curve(
    questions: Sequence[tuple[Blocks, Sequence[str]]],
    offtopic: Sequence[Blocks],
    contentless: Sequence[Blocks],
    floors: Iterable[float],
    nearmiss: Sequence[Blocks] = (),
) -> list[CurvePoint]:
    """Per floor: mean block recall of ``(blocks, evidence)`` and the injection rates."""
    return [
        CurvePoint(
            f,
            mean(block_recall(b[f], ev) for b, ev in questions),
            injection_rate(b[f] for b, _ in questions),
            injection_rate(b[f] for b in offtopic),
            injection_rate(b[f] for b in contentless),
            injection_rate(b[f] for b in nearmiss),
        )
        for f in floors
    ]


def chain_is_filterable(configs: Iterable[MemoryInjectConfig]) -> bool:
    """True when every config runs the chain under which a floor can be applied by filtering.

    The prompt gate (``min_prompt_similarity``) may come after ``session_scope``: it does
    not depend on the floor, so what it drops at floor 0 it drops at every floor.
    """
    from memory_inject.stages import build_stages

    def chain(c: MemoryInjectConfig) -> tuple[str, ...]:
        return tuple(s.name for s in build_stages(c) if s.name != "prompt_gate")

    return all(chain(c) == FILTERABLE_CHAIN and c.renderer.kind == "bracket" for c in configs)


def filter_input_scores(result: RenderResult) -> list[float | None] | None:
    """The scores of the entries that reached ``relevance_filter``, in order; None if unknown."""
    names = [t.name for t in result.trace]
    if "relevance_filter" not in names:
        return None
    i = names.index("relevance_filter")
    if i == 0 or len(result.trace[i - 1].scores) != result.trace[i].input_count:
        return None
    return list(result.trace[i - 1].scores.values())


# -- rendering -----------------------------------------------------------------------


class SweepMismatchError(Exception):
    """The filtered sweep disagreed with a real render: the sweep must be rendered per floor."""


@frozen
class Prompt:
    """One prompt to render against a store, and what the answer should hold."""

    kind: str  # "question", "offtopic", "nearmiss" or "contentless"
    text: str
    evidence: tuple[str, ...] = ()
    category: str = ""


@attrs.define
class Sweeper:
    """Renders prompts at every floor, by filtering a floor-0 render when that is exact."""

    floors: tuple[float, ...]
    base: MemoryInjectConfig
    fast: bool
    verify_every: int
    configs: dict[float, MemoryInjectConfig] = attrs.field(init=False)
    zero: MemoryInjectConfig = attrs.field(init=False)
    seen: int = 0
    filtered: int = 0
    unordered: int = 0
    partial: int = 0
    verified: int = 0
    failures: int = 0

    def __attrs_post_init__(self) -> None:
        self.configs = {f: attrs.evolve(self.base, min_relevance_score=f) for f in self.floors}
        self.zero = attrs.evolve(self.base, min_relevance_score=0.0)

    def render(
        self, store: PersistentStore, text: str, cfg: MemoryInjectConfig, now: datetime
    ) -> Scored:
        """One render's entries with their scores, counting failed renders."""
        res = render_memory_context(store, text, config=cfg, now=now)
        if not res.success:
            self.failures += 1
        return tuple((e.key, e.score) for e in res.entries)

    def exact(
        self, store: PersistentStore, text: str, now: datetime
    ) -> dict[float, tuple[str, ...]]:
        """A real render per floor."""
        return {
            f: tuple(k for k, _ in self.render(store, text, c, now))
            for f, c in self.configs.items()
        }

    def sweep(
        self, store: PersistentStore, text: str, now: datetime
    ) -> dict[float, tuple[str, ...]]:
        """The block at every floor; ``SweepMismatchError`` if filtering disagrees with a render."""
        self.seen += 1
        if not self.fast:
            return self.exact(store, text, now)
        res = render_memory_context(store, text, config=self.zero, now=now)
        if not res.success:
            self.failures += 1
        scores = filter_input_scores(res)
        if scores is None or not floor_order_ok(scores):
            self.unordered += 1
            return self.exact(store, text, now)
        self.filtered += 1
        # The pipeline's own filter over the floor-0 block (its companion score included).
        ctx = StageContext(self.base, now)
        companion = self.base.min_companion_score
        blocks = {
            f: tuple(e.key for e in RelevanceFilter(f, companion)(ctx, res.entries).survivors)
            for f in self.floors
        }
        # Entries the floor-0 block lost after the floor (the budget) are lower than every
        # shown one, so no floor keeps them, but a companion score may: where a floor drops
        # a shown entry, one of them could take its place, so that floor is rendered.
        cut = companion is not None and len(scores) > len(res.entries)
        for f, kept in blocks.items():
            if cut and len(kept) < len(res.entries):
                self.partial += 1
                blocks[f] = tuple(k for k, _ in self.render(store, text, self.configs[f], now))
        if self.verify_every and self.seen % self.verify_every == 0:
            self.verified += 1
            rendered = self.exact(store, text, now)
            if rendered != blocks:
                raise SweepMismatchError(f"{text!r}: filtered {blocks} != rendered {rendered}")
        return blocks


def measure(
    data: Path,
    floors: tuple[float, ...],
    *,
    exact: bool = False,
    verify_every: int = 10,
    embedder: str = "none",
    layout: str = "stream",
    offtopic_file: Path = OFFTOPIC,
    fusion: str = "default",
    nearmiss_file: Path = NEARMISS,
    dim: int | None = None,
    raw_cosine: bool = False,
    gate: float | None = None,
    bypass: float | None = None,
    companion: float | None = DEFAULT_COMPANION,
) -> dict[str, Any]:
    """Every number of the report, as a JSON-ready dict (see the module docstring)."""
    records, queries = load(data)
    offtopic, contentless = read_offtopic(offtopic_file), read_contentless()
    nearmiss = read_offtopic(nearmiss_file)
    base = MemoryInjectConfig(min_prompt_similarity=gate, prompt_gate_bypass_score=bypass)
    base = attrs.evolve(base, min_companion_score=companion)
    floors = tuple(sorted({*floors, base.min_relevance_score}))
    sweeper = Sweeper(floors, base, fast=False, verify_every=verify_every)
    sweeper.fast = not exact and chain_is_filterable([sweeper.zero, *sweeper.configs.values()])
    method = "filtered" if sweeper.fast else "rendered per floor"
    mismatch: str | None = None

    def run(sw: Sweeper) -> dict[str, Any]:
        # The sweeper is the one argument a mismatch replaces.
        return _run(
            records,
            queries,
            offtopic,
            contentless,
            sw,
            embedder,
            fusion,
            layout,
            nearmiss,
            dim,
            raw_cosine,
        )

    try:
        raw = run(sweeper)
    except SweepMismatchError as exc:
        print(
            f"filtered sweep disagreed with a render, rendering per floor: {exc}", file=sys.stderr
        )
        method = "rendered per floor (filtering disagreed with a render: see 'mismatch')"
        mismatch = str(exc)
        sweeper = Sweeper(floors, base, fast=False, verify_every=0)
        raw = run(sweeper)
    rep = _summarise(raw, floors, base, sweeper, method, records, queries, offtopic, contentless)
    rep["nearmiss_prompts"] = len(nearmiss)
    rep["sweep"]["mismatch"] = mismatch
    return rep


class _Memo:
    """The embedder with a cache of single-text calls (one prompt is rendered once per floor)."""

    def __init__(self, inner: Any, raw_cosine: bool = False) -> None:
        self._inner = inner
        self._seen: dict[str, list[float]] = {}
        self.name, self.dim = inner.name, inner.dim
        # --raw-cosine: the vector score is the cosine itself (HashingEmbedder's before issue
        # 29's ninth round gave it a calibration).
        self.calibration = (0.0, 1.0) if raw_cosine else getattr(inner, "calibration", (0.0, 1.0))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if len(texts) != 1:
            return list(self._inner.embed(texts))
        if texts[0] not in self._seen:
            self._seen[texts[0]] = self._inner.embed(texts)[0]
        return [self._seen[texts[0]]]


def _run(
    records: dict[str, list[dict[str, Any]]],
    queries: list[dict[str, Any]],
    offtopic: list[str],
    contentless: list[str],
    sweeper: Sweeper,
    embedder: str,
    fusion_name: str = "default",
    layout: str = "stream",
    nearmiss: Sequence[str] = (),
    dim: int | None = None,
    raw_cosine: bool = False,
) -> dict[str, Any]:
    model = HashingEmbedder(dim) if embedder == "hashing" and dim else make_embedder(embedder)
    # The store's default for that embedder: Fusion() (keyword-only without an
    # embedder), MODEL_FUSION for a model; --fusion overrides it.
    fusion = {
        "weighted": Fusion(),
        "minmax": MODEL_FUSION,
        "max": WEAK_FUSION,
        # The keyword stage's scores and order alone; the vector stage still tells how
        # near the nearest row is (for --gate).
        "keyword": Fusion(vector_weight=0.0, keyword_weight=1.0),
    }.get(fusion_name) or default_fusion(model)
    emb = None if model is None else _Memo(model, raw_cosine)
    default_floor = sweeper.base.min_relevance_score
    rows_out: list[dict[str, Any]] = []
    recalled: dict[str, list[tuple[float, float]]] = defaultdict(list)
    timings: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as d:
        for conv, rows in records.items():
            store = build_store(Path(d) / f"{conv}.db", rows, "core", emb, fusion, layout)
            now = evaluation_now(rows)
            prompts = [
                Prompt("question", q["question"], tuple(q["evidence"]), q["category_name"])
                for q in queries
                if q["conversation"] == conv
            ]
            prompts += [Prompt("offtopic", t) for t in offtopic]
            prompts += [Prompt("nearmiss", t) for t in nearmiss]
            prompts += [Prompt("contentless", t) for t in contentless]
            try:
                for p in prompts:
                    if p.kind == "question":
                        found = [e.key for e in store.recall(p.text, 10)]
                        recalled[p.category].append(
                            (
                                recall_at(found, list(p.evidence), 5),
                                recall_at(found, list(p.evidence), 10),
                            )
                        )
                    t0 = time.perf_counter()
                    default = sweeper.render(store, p.text, sweeper.base, now)
                    timings[p.kind].append(time.perf_counter() - t0)
                    blocks = sweeper.sweep(store, p.text, now)
                    keys = tuple(k for k, _ in default)
                    if keys != blocks[default_floor]:
                        if sweeper.fast:
                            raise SweepMismatchError(
                                f"{p.text!r}: default config {keys} != floor "
                                f"{default_floor} {blocks[default_floor]}"
                            )
                        raise AssertionError(f"{p.text!r}: the default render is not reproducible")
                    rows_out.append(
                        {"store": conv, "prompt": p, "default": default, "blocks": blocks}
                    )
            finally:
                store.close()
    return {"rows": rows_out, "recalled": recalled, "timings": timings}


def _summarise(
    raw: dict[str, Any],
    floors: tuple[float, ...],
    base: MemoryInjectConfig,
    sweeper: Sweeper,
    method: str,
    records: dict[str, list[dict[str, Any]]],
    queries: list[dict[str, Any]],
    offtopic: list[str],
    contentless: list[str],
) -> dict[str, Any]:
    rows: list[dict[str, Any]] = raw["rows"]
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_kind[r["prompt"].kind].append(r)
    qs = by_kind["question"]

    def keys(r: dict[str, Any]) -> tuple[str, ...]:
        return tuple(k for k, _ in r["default"])

    by_cat: dict[str, list[float]] = defaultdict(list)
    for r in qs:
        by_cat[r["prompt"].category].append(block_recall(keys(r), r["prompt"].evidence))
    recalled: dict[str, list[tuple[float, float]]] = raw["recalled"]
    all_rec = [x for v in recalled.values() for x in v]
    categories: dict[str, dict[str, float]] = {
        c: {
            "n": len(by_cat[c]),
            "block_recall": mean(by_cat[c]),
            "r5": mean(a for a, _ in recalled[c]),
            "r10": mean(b for _, b in recalled[c]),
        }
        for c in sorted(by_cat)
    }
    contentless_hits: dict[str, int] = defaultdict(int)
    for r in by_kind["contentless"]:
        contentless_hits[r["prompt"].text] += 1 if r["default"] else 0
    timings: dict[str, list[float]] = raw["timings"]
    curve = operating_curve(
        [(r["blocks"], r["prompt"].evidence) for r in qs],
        [r["blocks"] for r in by_kind["offtopic"]],
        [r["blocks"] for r in by_kind["contentless"]],
        floors,
        [r["blocks"] for r in by_kind["nearmiss"]],
    )
    return {
        "stores": len(records),
        "records": sum(map(len, records.values())),
        "questions": len(queries),
        "offtopic_prompts": len(offtopic),
        "contentless_prompts": len(contentless),
        "default": {
            "min_relevance_score": base.min_relevance_score,
            "min_companion_score": base.min_companion_score,
            "max_entries": base.budget.max_entries,
            "recall_limit": base.recall_limit,
            "block_recall": mean(block_recall(keys(r), r["prompt"].evidence) for r in qs),
            "questions_injected": injection_rate(keys(r) for r in qs),
            "question_mean_entries": mean(len(keys(r)) for r in qs if keys(r)),
            "question_entries_evidence": evidence_share(
                [(keys(r), r["prompt"].evidence) for r in qs]
            ),
            "offtopic_injected": injection_rate(keys(r) for r in by_kind["offtopic"]),
            "offtopic_renders": len(by_kind["offtopic"]),
            "offtopic_mean_entries": mean(len(r["default"]) for r in by_kind["offtopic"]),
            "nearmiss_injected": injection_rate(keys(r) for r in by_kind["nearmiss"]),
            "nearmiss_renders": len(by_kind["nearmiss"]),
            "nearmiss_mean_entries": mean(len(r["default"]) for r in by_kind["nearmiss"]),
            "contentless_injected": injection_rate(keys(r) for r in by_kind["contentless"]),
            "contentless_renders": len(by_kind["contentless"]),
            "contentless_injecting": {t: n for t, n in contentless_hits.items() if n},
            "by_category": categories,
        },
        "recalled": {
            "r5": mean(a for a, _ in all_rec),
            "r10": mean(b for _, b in all_rec),
        },
        "p50_render_ms": {
            **{k: statistics.median(v) * 1e3 for k, v in sorted(timings.items())},
            "all": statistics.median([t for v in timings.values() for t in v]) * 1e3,
        },
        "curve": [attrs.asdict(p) for p in curve],
        "sweep": {
            "method": method,
            "prompts": sweeper.seen,
            "filtered": sweeper.filtered,
            "rendered_per_floor_unordered": sweeper.unordered,
            "floors_rendered_companions": sweeper.partial,
            "verified_at_every_floor": sweeper.verified,
            "failed_renders": sweeper.failures,
        },
    }


# -- output --------------------------------------------------------------------------


def print_report(rep: dict[str, Any]) -> None:
    """The report as markdown tables."""
    d = rep["default"]
    print(
        f"LoCoMo dev ({rep.get('backend', 'sqlite')}): {rep['records']} records in "
        f"{rep['stores']} stores, "
        f"{rep['questions']} questions; {rep['offtopic_prompts']} off-topic, "
        f"{rep.get('nearmiss_prompts', 0)} near-miss and "
        f"{rep['contentless_prompts']} contentless prompts, each against every store "
        f"(layout {rep.get('layout', 'stream')})\n"
    )
    print(
        f"### Default config (min_relevance_score {d['min_relevance_score']}, "
        f"min_companion_score {d.get('min_companion_score')}, "
        f"recall_limit {d['recall_limit']}, max_entries {d['max_entries']}"
        + (f", min_prompt_similarity {rep['gate']}" if rep.get("gate") is not None else "")
        + (f", prompt_gate_bypass_score {rep['bypass']}" if rep.get("bypass") is not None else "")
        + ")\n"
    )
    p50 = rep["p50_render_ms"]
    print("| measure | value |\n|---|---:|")
    print(f"| block recall (evidence among rendered entries) | {d['block_recall']:.3f} |")
    if "question_mean_entries" in d:
        print(f"| entries per question block | {d['question_mean_entries']:.2f} |")
        print(f"| evidence share of those entries | {d['question_entries_evidence']:.3f} |")
    print(f"| questions with a block | {d['questions_injected']:.3f} |")
    print(
        f"| off-topic false-injection rate | {d['offtopic_injected']:.3f} "
        f"(of {d['offtopic_renders']}) |"
    )
    print(f"| off-topic mean entries injected | {d['offtopic_mean_entries']:.2f} |")
    print(
        f"| near-miss false-injection rate | {d['nearmiss_injected']:.3f} "
        f"(of {d['nearmiss_renders']}) |"
    )
    print(f"| near-miss mean entries injected | {d['nearmiss_mean_entries']:.2f} |")
    print(
        f"| contentless injection rate | {d['contentless_injected']:.3f} "
        f"(of {d['contentless_renders']}) |"
    )
    print(
        f"| recall R@5 / R@10 (store.recall(q, 10)) | {rep['recalled']['r5']:.3f} / "
        f"{rep['recalled']['r10']:.3f} |"
    )
    print(
        "| p50 ms per render (all; questions, off-topic, contentless) | "
        f"{p50['all']:.2f}; {p50.get('question', 0):.2f}, {p50.get('offtopic', 0):.2f}, "
        f"{p50.get('contentless', 0):.2f} |"
    )
    print("\n### By question category (default config)\n")
    print("| category | n | block recall | R@5 | R@10 |\n|---|---:|---:|---:|---:|")
    for c, v in d["by_category"].items():
        print(f"| {c} | {v['n']} | {v['block_recall']:.3f} | {v['r5']:.3f} | {v['r10']:.3f} |")
    print("\n### Operating curve (min_relevance_score swept, everything else default)\n")
    print(
        "| floor | block recall | questions with a block | off-topic false injection "
        "| near-miss false injection | contentless injection |\n|---:|---:|---:|---:|---:|---:|"
    )
    for p in rep["curve"]:
        mark = " (default)" if p["floor"] == d["min_relevance_score"] else ""
        print(
            f"| {p['floor']:.2f}{mark} | {p['block_recall']:.3f} | {p['questions_injected']:.3f} "
            f"| {p['offtopic_injected']:.3f} | {p['nearmiss_injected']:.3f} "
            f"| {p['contentless_injected']:.3f} |"
        )
    inj = d["contentless_injecting"]
    stores = rep["stores"]
    print(
        f"\nContentless prompts injecting at the default config (stores of {stores}): "
        + (", ".join(f"{json.dumps(t, ensure_ascii=False)} {n}" for t, n in inj.items()) or "none")
    )
    s = rep["sweep"]
    print(
        f"\nSweep {s['method']}: {s['filtered']} of {s['prompts']} prompts filtered from one "
        f"floor-0 render, {s['rendered_per_floor_unordered']} rendered per floor (scores out of "
        f"order), {s.get('floors_rendered_companions', 0)} floors rendered (a companion "
        f"score may take an entry the floor-0 budget cut), {s['verified_at_every_floor']} "
        f"filtered ones checked against a render at every floor; {s['failed_renders']} failed "
        "renders."
    )


def parse_floors(text: str) -> tuple[float, ...]:
    """``"0,0.1,0.25"`` -> ``(0.0, 0.1, 0.25)``; each must be in 0..1."""
    floors = tuple(float(x) for x in text.split(",") if x.strip())
    bad = [f for f in floors if not 0.0 <= f <= 1.0]
    if not floors or bad:
        raise argparse.ArgumentTypeError(f"floors must be in 0..1 (got {text!r})")
    return floors


def main() -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--floors", type=parse_floors, default=DEFAULT_FLOORS)
    ap.add_argument("--json", type=Path, help="also write every number to this file")
    ap.add_argument("--exact", action="store_true", help="render every floor; no filtering")
    ap.add_argument("--verify-every", type=int, default=10, help="0 turns the check off")
    ap.add_argument(
        "--embedder",
        choices=("none", "hashing", "sentence-transformers", "minilm-onnx"),
        default="none",
        help="sentence-transformers is all-MiniLM-L6-v2 (fp32, torch); minilm-onnx the int8 one",
    )
    ap.add_argument(
        "--fusion",
        choices=("default", "weighted", "minmax", "max", "keyword"),
        default="default",
        help="default: the store's for that embedder (MODEL_FUSION for a model, WEAK_FUSION "
        "for hashing)",
    )
    ap.add_argument("--dim", type=int, default=None, help="hashing: vector size (default 256)")
    ap.add_argument(
        "--raw-cosine",
        action="store_true",
        help="score vectors by the raw cosine, ignoring the embedder's calibration",
    )
    ap.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="stream",
        help="how records are written: one session stream per chat (default), no session "
        "ids, or one session in random order (context expansion fed unrelated neighbours)",
    )
    ap.add_argument(
        "--gate",
        type=float,
        default=None,
        help="min_prompt_similarity of the config (needs --embedder; default: none)",
    )
    ap.add_argument(
        "--bypass", type=float, default=None, help="prompt_gate_bypass_score (with --gate)"
    )
    ap.add_argument(
        "--companion",
        type=parse_companion,
        default=DEFAULT_COMPANION,
        help="min_companion_score: a number, or none (one floor for every entry, as zeroclaw)",
    )
    ap.add_argument("--offtopic", type=Path, default=OFFTOPIC, help="off-topic prompts file")
    ap.add_argument("--nearmiss", type=Path, default=NEARMISS, help="near-miss prompts file")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", default=None, help="postgres: an existing server (default: private)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    with backend(args.backend, args.dsn):
        rep = measure(
            args.data,
            args.floors,
            exact=args.exact,
            verify_every=args.verify_every,
            embedder=args.embedder,
            layout=args.layout,
            offtopic_file=args.offtopic,
            fusion=args.fusion,
            nearmiss_file=args.nearmiss,
            dim=args.dim,
            raw_cosine=args.raw_cosine,
            gate=args.gate,
            bypass=args.bypass,
            companion=args.companion,
        )
    rep["backend"] = args.backend
    rep["layout"] = args.layout
    rep["seconds"] = time.perf_counter() - t0
    rep["embedder"] = args.embedder
    rep["fusion"] = args.fusion
    rep["dim"] = args.dim
    rep["raw_cosine"] = args.raw_cosine
    rep["gate"] = args.gate
    rep["bypass"] = args.bypass
    print_report(rep)
    print(f"\n(ran in {rep['seconds']:.1f}s)", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps(rep, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
