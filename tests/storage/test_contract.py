"""The storage contract: every store passes the same suite (in memory, SQLite, PostgreSQL).

``store_factory(**kwargs)`` opens a fresh, empty store of the current backend;
``same_database_as=store`` opens another store on that store's database. A test
that needs an optional capability says so with ``@needs(SupportsX)`` and runs
on exactly the stores that have it (see ``conftest.py``).
"""

from __future__ import annotations

import asyncio
import io
import json
import struct
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject.contract import (
    RecallQuery,
    SupportsAnswer,
    SupportsAsyncRecall,
    SupportsJsonl,
    SupportsNamespaces,
    SupportsRecords,
    SupportsUsage,
    SupportsVectors,
)
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import EmbedderError
from memory_inject.models import MemoryCategory
from memory_inject.storage._jsonl import record_to_json
from memory_inject.storage.fusion import Fusion
from memory_inject.storage.records import MemoryRecord

Factory = Callable[..., Any]


def needs(*protocols: type) -> pytest.MarkDecorator:
    """Run the test only on stores that have every one of these capabilities."""
    return pytest.mark.needs.with_args(*protocols)


T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def keys(entries: Sequence[Any]) -> list[str]:
    return [e.key for e in entries]


def full_record(key: str = "k-full", namespace: str = "default") -> MemoryRecord:
    """A record with every field set to a non-default value."""
    return MemoryRecord(
        key=key,
        content="The release checklist lives in docs/release.md",
        category="runbook",
        timestamp=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        id=f"id-{key}",
        updated_at=datetime(2026, 1, 3, 3, 4, 5, 1, tzinfo=UTC),
        session_id="sess-1",
        namespace=namespace,
        importance=0.75,
        confidence=0.5,
        status="candidate",
        tags=("release", "docs"),
        source="P01",
        entity_ids=("acme", "bob"),
        profile_id="alice",
        scope={"project": "memory-inject", "paths": ["docs/"]},
        applies_when=("releasing",),
        does_not_apply_when=("hotfix",),
        known_exceptions=("dry runs",),
        rule_type="convention",
        memory_kind="procedural",
        layer="L2",
        supersedes=("id-older",),
        superseded_by=None,
        times_used=7,
        last_used_at=datetime(2026, 1, 4, tzinfo=UTC),
        expires_at=datetime(2099, 1, 1, tzinfo=UTC),
        deleted_at=None,
        embedding=(0.5, -0.25, 1.0, 0.0),
    )


class FlakyEmbedder:
    """A HashingEmbedder that can be told to fail, as a remote model would."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.failing = False

    @property
    def name(self) -> str:
        return "flaky"

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.failing:
            raise EmbedderError("model server unreachable")
        return self.inner.embed(texts)


class NanEmbedder(FlakyEmbedder):
    """A HashingEmbedder that can be told to return NaN vectors, as a broken model might."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.failing:
            return [[float("nan")] * self.dim for _ in texts]
        return self.inner.embed(texts)


class OverflowEmbedder(FlakyEmbedder):
    """One that can be told to return 1e39: a finite float, and past float32's range."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.failing:
            return [[1e39] + [0.5] * (self.dim - 1) for _ in texts]
        return self.inner.embed(texts)


def as_float32(vector: Sequence[float]) -> tuple[float, ...]:
    return struct.unpack(f"<{len(vector)}f", struct.pack(f"<{len(vector)}f", *vector))


class TestWrites:
    def test_store_then_get(self, store_factory: Factory) -> None:
        """What store() returns is what get() reads back."""
        s = store_factory()
        written = s.store("editor", "User prefers vim", "core", session_id="s1", importance=0.4)
        assert written == s.get("editor")

    def test_store_sets_the_given_fields(self, store_factory: Factory) -> None:
        """Keyword fields land on the stored record."""
        s = store_factory()
        s.store("rule", "Never force-push main", tags=["git"], confidence=0.9, status="confirmed")
        got = s.get("rule")
        assert (("git",), 0.9, "confirmed") == (got.tags, got.confidence, got.status)

    def test_store_rejects_an_unknown_field(self, store_factory: Factory) -> None:
        """A field the record does not have is a TypeError naming it."""
        s = store_factory()
        with pytest.raises(TypeError, match="colour"):
            s.store("k", "v", colour="blue")

    def test_store_same_key_updates_in_place(self, store_factory: Factory) -> None:
        """Writing a key again replaces its content but keeps id and creation time."""
        s = store_factory()
        first = s.store("city", "User lives in Paris", timestamp=at(0))
        s.store("city", "User lives in Lyon")
        got = s.get("city")
        assert (1, "User lives in Lyon", first.id, first.timestamp) == (
            s.count(),
            got.content,
            got.id,
            got.timestamp,
        )

    @needs(SupportsUsage)
    def test_store_again_keeps_usage_counters(self, store_factory: Factory) -> None:
        """Rewriting a memory does not reset how often it was used."""
        s = store_factory()
        s.store("k", "first")
        s.mark_used(["k"])
        s.store("k", "second")
        assert 1 == s.get("k").times_used

    @needs(SupportsRecords)
    def test_upsert_writes_every_field(self, store_factory: Factory) -> None:
        """upsert() stores a record with every field set exactly."""
        s = store_factory()
        record = full_record()
        s.upsert(record)
        assert record == s.get(record.key)

    @needs(SupportsRecords, SupportsNamespaces)
    def test_upsert_refuses_another_namespace(self, store_factory: Factory) -> None:
        """A record of another namespace is a ValueError, not a silent move."""
        s = store_factory()
        with pytest.raises(ValueError, match="namespace"):
            s.upsert(MemoryRecord(key="k", content="v", namespace="elsewhere"))

    def test_get_missing_is_none(self, store_factory: Factory) -> None:
        """An unknown key reads as None."""
        assert None is store_factory().get("nope")

    def test_forget_hides_the_row(self, store_factory: Factory) -> None:
        """A forgotten key is not got, listed, counted or recalled."""
        s = store_factory()
        s.store("a", "alpha particle")
        s.store("b", "beta particle")
        forgot = s.forget("a")
        assert (True, None, ["b"], 1, ["b"], ["b"]) == (
            forgot,
            s.get("a"),
            [r.key for r in s.list()],
            s.count(),
            keys(s.recall("particle", 5)),
            keys(s.recall("*", 5)),
        )

    def test_forget_twice_is_false(self, store_factory: Factory) -> None:
        """Forgetting a missing or already forgotten key reports False."""
        s = store_factory()
        s.store("a", "alpha")
        s.forget("a")
        assert (False, False) == (s.forget("a"), s.forget("never"))

    def test_store_revives_a_forgotten_key(self, store_factory: Factory) -> None:
        """Writing a forgotten key brings it back."""
        s = store_factory()
        s.store("a", "alpha")
        s.forget("a")
        s.store("a", "alpha again")
        assert ("alpha again", 1) == (s.get("a").content, s.count())

    def test_list_is_newest_first_and_filters(self, store_factory: Factory) -> None:
        """list() orders by creation time and filters by category and session."""
        s = store_factory()
        s.store("old", "o", "core", session_id="s1", timestamp=at(0))
        s.store("mid", "m", "daily", session_id="s2", timestamp=at(1))
        s.store("new", "n", "core", session_id="s1", timestamp=at(2))
        assert (["new", "mid", "old"], ["new", "old"], ["mid"], ["new"]) == (
            [r.key for r in s.list()],
            [r.key for r in s.list(category=MemoryCategory.CORE)],
            [r.key for r in s.list(session_id="s2")],
            [r.key for r in s.list(limit=1)],
        )

    def test_name_is_the_backend(self, store_factory: Factory, backend: str) -> None:
        """The store names its engine."""
        assert backend == store_factory().name


@needs(SupportsNamespaces)
class TestNamespaces:
    def test_same_key_in_two_namespaces(self, store_factory: Factory) -> None:
        """One key can exist once per namespace without the two touching."""
        a = store_factory(namespace="alice")
        b = store_factory(namespace="bob", same_database_as=a)
        a.store("city", "Alice lives in Paris")
        b.store("city", "Bob lives in Rome")
        assert ("Alice lives in Paris", "Bob lives in Rome", 1, 1) == (
            a.get("city").content,
            b.get("city").content,
            a.count(),
            b.count(),
        )

    def test_recall_sees_only_its_namespace(self, store_factory: Factory) -> None:
        """Recall never crosses namespaces, for keyword or recent queries."""
        a = store_factory(namespace="alice")
        b = store_factory(namespace="bob", same_database_as=a)
        a.store("a1", "deploy with terraform")
        b.store("b1", "deploy with ansible")
        assert (["a1"], ["b1"], ["a1"]) == (
            keys(a.recall("deploy", 5)),
            keys(b.recall("deploy", 5)),
            keys(a.recall("*", 5)),
        )


@needs(SupportsRecords)
class TestSupersede:
    def test_supersede_links_both_rows(self, store_factory: Factory) -> None:
        """The new row lists the old id; the old row points at the new id."""
        s = store_factory()
        old = s.store("tz-1", "User is in UTC+1")
        new = s.supersede("tz-1", MemoryRecord(key="tz-2", content="User is in UTC+2"))
        assert ((old.id,), new.id, new) == (
            new.supersedes,
            s.get("tz-1").superseded_by,
            s.get("tz-2"),
        )

    def test_superseded_row_is_never_recalled(self, store_factory: Factory) -> None:
        """Only the replacement comes back from recall."""
        s = store_factory()
        s.store("tz-1", "User timezone is UTC+1")
        s.supersede("tz-1", MemoryRecord(key="tz-2", content="User timezone is UTC+2"))
        assert (["tz-2"], ["tz-2"]) == (
            keys(s.recall("timezone", 5)),
            keys(s.recall("*", 5)),
        )

    def test_supersede_unknown_key(self, store_factory: Factory) -> None:
        """Superseding a key that does not exist is a KeyError and writes nothing."""
        s = store_factory()
        with pytest.raises(KeyError):
            s.supersede("ghost", MemoryRecord(key="new", content="x"))
        assert 0 == s.count()


@needs(SupportsUsage)
class TestMarkUsed:
    def test_counts_each_id_once(self, store_factory: Factory) -> None:
        """Each listed id gains one use and a last-used time; unknown ids are ignored."""
        s = store_factory()
        s.store("a", "alpha")
        s.store("b", "beta")
        before = datetime.now(UTC)
        touched = s.mark_used(["a", "b", "a", "ghost"])
        a, b = s.get("a"), s.get("b")
        assert (2, 1, 1, True) == (
            touched,
            a.times_used,
            b.times_used,
            a.last_used_at is not None and a.last_used_at >= before - timedelta(seconds=1),
        )

    def test_nothing_to_mark(self, store_factory: Factory) -> None:
        """An empty id list touches nothing."""
        assert 0 == store_factory().mark_used([])

    def test_marking_does_not_reorder_recent(self, store_factory: Factory) -> None:
        """Usage is not an edit: the most-recent order stays by update time."""
        s = store_factory()
        s.store("old", "o", timestamp=at(0), updated_at=at(0))
        s.store("new", "n", timestamp=at(1), updated_at=at(1))
        s.mark_used(["old"])
        assert ["new", "old"] == keys(s.recall("*", 5))


@needs(SupportsJsonl)
class TestJsonl:
    @needs(SupportsRecords)
    def test_round_trip_keeps_every_field(self, store_factory: Factory, tmp_path: Any) -> None:
        """export -> import -> export loses nothing, forgotten rows and embeddings included."""
        a = store_factory()
        records = [
            full_record("k1"),
            full_record("k2").evolve(deleted_at=at(5)),
            MemoryRecord(key="plain", content="just text", timestamp=at(1)),
        ]
        for r in records:
            a.upsert(r)
        first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
        exported = a.export_jsonl(first)
        b = store_factory()
        imported = b.import_jsonl(first)
        b.export_jsonl(second)
        assert (3, 3, {r.key: record_to_json(r) for r in records}, records[0]) == (
            exported,
            imported,
            {row["key"]: row for row in map(json.loads, second.read_text().splitlines())},
            b.get("k1"),
        )

    def test_import_from_a_file_object_reports_progress(self, store_factory: Factory) -> None:
        """A text stream imports too, and progress counts up to the total."""
        s = store_factory()
        lines = "\n".join(
            json.dumps({"key": f"k{i}", "content": f"memory number {i}"}) for i in range(1500)
        )
        seen: list[int] = []
        n = s.import_jsonl(io.StringIO(lines + "\n\n"), progress=seen.append)
        assert (1500, 1500, 1500, True) == (
            n,
            s.count(),
            seen[-1],
            seen == sorted(seen),
        )

    def test_bad_line_names_its_number(self, store_factory: Factory) -> None:
        """A line that is not a record is a ValueError naming the line."""
        s = store_factory()
        text = '{"key": "a", "content": "x"}\n{"key": "b", "colour": "red"}\n'
        with pytest.raises(ValueError, match=r"line 2\b.*colour"):
            s.import_jsonl(io.StringIO(text))

    def test_a_duplicate_id_names_its_line_and_the_key_holding_it(
        self, store_factory: Factory
    ) -> None:
        """Issue 25: an id another key holds is refused naming its own line, not the batch's."""
        s = store_factory()
        text = "".join(
            json.dumps({"id": "dup" if i in (4, 1501) else f"i{i}", "key": f"k{i}", "content": ""})
            + "\n"
            for i in range(1, 1601)
        )
        with pytest.raises(ValueError, match=r"line 1501: id 'dup' is already the id of key 'k4'"):
            s.import_jsonl(io.StringIO(text))

    def test_invalid_json_names_its_number(self, store_factory: Factory) -> None:
        """Broken JSON is reported with its line number too."""
        s = store_factory()
        with pytest.raises(ValueError, match=r"line 3\b"):
            s.import_jsonl(io.StringIO('{"key": "a", "content": "x"}\n\n{oops\n'))


class TestRecallContract:
    @pytest.mark.parametrize("query", ["", "   ", "*", " * "])
    def test_time_only_is_newest_first_without_score(
        self, store_factory: Factory, query: str
    ) -> None:
        """Empty, blank and '*' queries return the most recently updated first, score None."""
        s = store_factory()
        for i, k in enumerate(["a", "b", "c"]):
            s.store(k, f"entry {k}", timestamp=at(i), updated_at=at(i))
        got = s.recall(query, 2)
        assert (["c", "b"], [None, None]) == (keys(got), [e.score for e in got])

    def test_session_filter_never_crosses_sessions(self, store_factory: Factory) -> None:
        """A session sees its rows and sessionless core/daily rows; never another session's."""
        s = store_factory()
        s.store("s1", "deploy notes one", "conversation", session_id="one")
        s.store("s2", "deploy notes two", "conversation", session_id="two")
        s.store("g", "deploy notes global", "core")
        s.store("gc", "deploy notes chat", "conversation")
        assert (["g", "s1"], ["g", "s1"], ["g", "gc", "s1", "s2"]) == (
            sorted(keys(s.recall("deploy", 5, session_id="one"))),
            sorted(keys(s.recall("*", 5, session_id="one"))),
            sorted(keys(s.recall("deploy", 5))),
        )

    def test_strict_session_filter_when_nothing_is_shared(self, store_factory: Factory) -> None:
        """With shared_categories=() a session id returns only that session's rows."""
        s = store_factory(shared_categories=())
        s.store("s1", "deploy notes one", session_id="one")
        s.store("g", "deploy notes global", "core")
        assert ["s1"] == keys(s.recall("deploy", 5, session_id="one"))

    @pytest.mark.parametrize("query", ["*", "meeting"])
    def test_since_until_are_inclusive(self, store_factory: Factory, query: str) -> None:
        """Both bounds include a row written exactly at them."""
        s = store_factory()
        for i in range(3):
            s.store(f"m{i}", f"meeting minutes {i}", timestamp=at(i))
        assert (["m1", "m2"], ["m0", "m1"], ["m1"], ["m1"]) == (
            sorted(keys(s.recall(query, 5, since=at(1)))),
            sorted(keys(s.recall(query, 5, until=at(1)))),
            keys(s.recall(query, 5, since=at(1), until=at(1))),
            keys(s.recall(query, 5, since=at(1).isoformat(), until=at(1).isoformat())),
        )

    def test_scores_are_in_unit_range_best_first(self, store_factory: Factory) -> None:
        """Keyword scores lie in 0..1, the best is 1 and they never increase."""
        s = store_factory()
        s.store("a", "postgres postgres postgres tuning guide")
        s.store("b", "postgres backup notes and a long tail of other words entirely")
        s.store("c", "mysql notes")
        got = s.recall("postgres", 5)
        scores = [e.score for e in got]
        assert (["a", "b"], 1.0, True, True) == (
            keys(got),
            scores[0],
            all(0.0 <= x <= 1.0 for x in scores),
            scores == sorted(scores, reverse=True),
        )

    def test_expired_rows_never_come_back(self, store_factory: Factory) -> None:
        """A row whose expiry has passed is not recalled; a future expiry is."""
        s = store_factory()
        now = datetime.now(UTC)
        s.store("gone", "ticket price expired", expires_at=now - timedelta(minutes=1))
        s.store("live", "ticket price valid", expires_at=now + timedelta(days=1))
        assert (["live"], ["live"]) == (keys(s.recall("ticket", 5)), keys(s.recall("*", 5)))

    def test_status_is_not_filtered(self, store_factory: Factory) -> None:
        """Governance decides on status; the store returns candidates too."""
        s = store_factory()
        s.store("c", "candidate rule about tabs", status="candidate")
        assert ["c"] == keys(s.recall("tabs", 5))

    def test_stemming_matches_word_forms(self, store_factory: Factory) -> None:
        """'publishing' finds a memory that says 'published'."""
        s = store_factory()
        s.store("npm", "We published the package to the npm registry")
        s.store("other", "Lunch is at noon")
        assert ["npm"] == keys(s.recall("publishing", 5))

    @pytest.mark.parametrize(
        "prompt",
        [
            "What's the server? (prod/staging)",
            "server: prod, staging -- which?",
            'the "server" AND NOT (prod*',
            "how should the server work?",
        ],
    )
    def test_punctuation_heavy_prompts_still_match(
        self, store_factory: Factory, prompt: str
    ) -> None:
        """Prompts full of FTS syntax characters match instead of erroring (PI's bug)."""
        s = store_factory()
        s.store("srv", "The prod server is db01; staging is stg01")
        s.store("other", "Lunch is at noon")
        assert ["srv"] == keys(s.recall(prompt, 5))

    @needs(SupportsRecords)
    def test_entries_carry_the_record(self, store_factory: Factory) -> None:
        """Recalled entries carry id, namespace and governance fields in extra."""
        s = store_factory()
        rec = s.upsert(full_record())
        [entry] = s.recall("release checklist", 5)
        assert (rec.id, rec.namespace, rec.tags, rec.status, rec.timestamp) == (
            entry.id,
            entry.namespace,
            entry.extra["tags"],
            entry.extra["status"],
            entry.timestamp,
        )

    def test_limit_is_respected(self, store_factory: Factory) -> None:
        """No more than ``limit`` entries; zero gives none."""
        s = store_factory()
        for i in range(6):
            s.store(f"k{i}", f"backup job {i}")
        assert (3, 3, 0) == (
            len(s.recall("backup", 3)),
            len(s.recall("*", 3)),
            len(s.recall("backup", 0)),
        )

    def test_no_match_is_empty(self, store_factory: Factory) -> None:
        """A query that matches nothing returns an empty list."""
        s = store_factory()
        s.store("k", "alpha beta")
        assert [] == s.recall("zyxwvut", 5)


@needs(SupportsVectors, SupportsAnswer)
class TestHybridRecall:
    def test_typo_finds_the_right_row(self, store_factory: Factory) -> None:
        """With the hashing embedder a misspelt query still finds its memory."""
        s = store_factory(embedder=HashingEmbedder())
        s.store("db", "The production database is PostgreSQL on host db01")
        s.store("editor", "User prefers the vim editor with relative numbers")
        s.store("lunch", "The team has lunch at noon on Fridays")
        got = s.answer(RecallQuery("postgressql databse", 3))
        assert ("db", "vector") == (got.entries[0].key, got.strategy)

    def test_hybrid_scores_are_in_unit_range(self, store_factory: Factory) -> None:
        """Fused scores lie in 0..1, best first."""
        s = store_factory(embedder=HashingEmbedder())
        s.store("a", "kubernetes cluster upgrade runbook")
        s.store("b", "kubernetes pod restarts")
        s.store("c", "holiday schedule")
        answer = s.answer(RecallQuery("kubernetes upgrade", 5))
        got = answer.entries
        scores = [e.score for e in got]
        assert ("a", "hybrid", True, True) == (
            got[0].key,
            answer.strategy,
            all(0.0 <= x <= 1.0 for x in scores),
            scores == sorted(scores, reverse=True),
        )

    def test_rrf_fusion(self, store_factory: Factory) -> None:
        """Reciprocal rank fusion ranks a row first in both lists at the top; scores stay 0..1."""
        s = store_factory(embedder=HashingEmbedder(), fusion=Fusion(mode="rrf"))
        s.store("a", "kubernetes cluster upgrade runbook")
        s.store("b", "kubernetes pod restarts")
        got = s.recall("kubernetes cluster upgrade", 5)
        assert ("a", True) == (got[0].key, all(0.0 <= (e.score or 0.0) <= 1.0 for e in got))

    def test_bm25_mode_skips_vectors(self, store_factory: Factory) -> None:
        """search_mode='bm25' never runs the vector stage, even with an embedder."""
        s = store_factory(embedder=HashingEmbedder(), fusion=Fusion(search_mode="bm25"))
        s.store("db", "The production database is PostgreSQL")
        got = s.answer(RecallQuery("postgressql databse", 3))
        assert ([], 0) == (list(got.entries), got.vector_hits)

    def test_embedder_failure_falls_back_to_lexical(self, store_factory: Factory) -> None:
        """When the embedder fails at recall, keyword results come back and say why."""
        emb = FlakyEmbedder()
        s = store_factory(embedder=emb)
        s.store("db", "The production database is PostgreSQL")
        emb.failing = True
        info = s.answer(RecallQuery("database", 3))
        assert (["db"], "keyword", True) == (
            keys(info.entries),
            info.strategy,
            "; ".join(info.degraded).startswith("embedder_failed"),
        )

    def test_embedding_mode_falls_back_to_keyword(self, store_factory: Factory) -> None:
        """In embedding-only mode a failed embedder still yields keyword results."""
        emb = FlakyEmbedder()
        s = store_factory(embedder=emb, fusion=Fusion(search_mode="embedding"))
        s.store("db", "The production database is PostgreSQL")
        emb.failing = True
        assert ["db"] == keys(s.recall("database", 3))

    def test_failing_embedder_fails_the_write(self, store_factory: Factory) -> None:
        """A write whose embedding cannot be computed raises and stores nothing."""
        emb = FlakyEmbedder()
        emb.failing = True
        s = store_factory(embedder=emb)
        with pytest.raises(EmbedderError):
            s.store("db", "The production database is PostgreSQL")
        assert 0 == s.count()


@needs(SupportsVectors)
class TestEmbeddingChecks:
    def test_nan_vector_fails_the_write(self, store_factory: Factory) -> None:
        """An embedder that returns NaN fails the write with EmbedderError and stores nothing."""
        emb = NanEmbedder()
        emb.failing = True
        s = store_factory(embedder=emb)
        with pytest.raises(EmbedderError, match="NaN"):
            s.store("db", "The production database is PostgreSQL")
        assert 0 == s.count()

    @needs(SupportsAnswer)
    def test_nan_vector_at_recall_falls_back_to_lexical(self, store_factory: Factory) -> None:
        """A NaN query vector degrades the recall to keywords and says why."""
        emb = NanEmbedder()
        s = store_factory(embedder=emb)
        s.store("db", "The production database is PostgreSQL")
        emb.failing = True
        info = s.answer(RecallQuery("database", 3))
        degraded = "; ".join(info.degraded)
        assert (["db"], True, True) == (
            keys(info.entries),
            degraded.startswith("embedder_failed"),
            "NaN" in degraded,
        )

    @needs(SupportsAnswer)
    def test_a_vector_past_float32_fails_the_write_and_degrades_the_recall(
        self, store_factory: Factory
    ) -> None:
        """1e39 is finite but no float32: an EmbedderError on write (it was an
        OverflowError) and keywords with the reason on recall (it was a failed recall)."""
        emb = OverflowEmbedder()
        s = store_factory(embedder=emb)
        s.store("db", "The production database is PostgreSQL")
        emb.failing = True
        with pytest.raises(EmbedderError, match="float32"):
            s.store("cache", "The cache is Redis")
        info = s.answer(RecallQuery("database", 3))
        assert (["db"], 1) == (keys(info.entries), s.count())
        assert "float32" in "; ".join(info.degraded)

    def test_a_given_vector_of_another_dimension_is_refused(self, store_factory: Factory) -> None:
        """A vector the store's embedder could never be compared with (another model's, or
        empty) was kept, and its row was never found by the vector stage."""
        s = store_factory(embedder=HashingEmbedder(dim=64))
        for vector in ([0.1] * 10, []):
            with pytest.raises(EmbedderError, match=f"has {len(vector)} dimensions.* gives 64"):
                s.store("k", "The production database is PostgreSQL", embedding=vector)
        assert 0 == s.count()
        s.store("k", "The production database is PostgreSQL", embedding=[0.5] * 64)
        assert 64 == len(s.get("k").embedding)

    @needs(SupportsRecords, SupportsJsonl)
    def test_an_import_of_another_models_vectors_is_embedded_again(
        self, store_factory: Factory, tmp_path: Path
    ) -> None:
        """An export of a 256-dimension store imported into a 64-dimension one: the rows are
        embedded by this store's embedder (their vectors were kept, and never searched)."""
        wide = store_factory(embedder=HashingEmbedder(dim=256))
        wide.store("pet", "Our cat is named Miso.")
        dump = tmp_path / "dump.jsonl"
        wide.export_jsonl(dump)
        narrow = store_factory(embedder=HashingEmbedder(dim=64))
        assert 1 == narrow.import_jsonl(dump)
        assert HashingEmbedder(dim=64).embed(["Our cat is named Miso."])[0] == pytest.approx(
            narrow.get("pet").embedding, abs=1e-6
        )

    @needs(SupportsRecords, SupportsJsonl)
    def test_given_vectors_are_rounded_to_float32(self, store_factory: Factory) -> None:
        """upsert() returns the float32-rounded vector, which get() and export read back."""
        s = store_factory()
        vec = (0.1, 1 / 3, -2.718281828459045)
        written = s.upsert(MemoryRecord(key="k", content="v", embedding=vec))
        buf = io.StringIO()
        s.export_jsonl(buf)
        assert (as_float32(vec), as_float32(vec), list(as_float32(vec))) == (
            written.embedding,
            s.get("k").embedding,
            json.loads(buf.getvalue())["embedding"],
        )

    def test_embedded_vectors_are_float32(self, store_factory: Factory) -> None:
        """A vector the store computes is float32 too, and reads back unchanged."""
        s = store_factory(embedder=HashingEmbedder())
        written = s.store("k", "kubernetes cluster upgrade runbook")
        assert (as_float32(written.embedding), written.embedding) == (
            written.embedding,
            s.get("k").embedding,
        )


@needs(SupportsAsyncRecall)
class TestAsync:
    def test_arecall_matches_recall(self, store_factory: Factory) -> None:
        """The async twin returns what the sync call does."""
        s = store_factory()
        s.store("a", "alpha release notes")
        s.store("b", "beta release notes")

        async def both() -> tuple[Any, Any]:
            return await s.arecall("release", 5), await s.arecall("*", 5, session_id=None)

        by_query, recent = asyncio.run(both())
        assert (s.recall("release", 5), s.recall("*", 5)) == (by_query, recent)
