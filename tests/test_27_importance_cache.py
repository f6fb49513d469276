"""Issue 27, item 11 (in part): heuristic importance, zeroclaw's constants, the hot cache.

Each against stores seeded from the seeds' own examples (PI's JSONL records, zeroclaw's
acceptance facts, founder-os's skill example), on SQLite and PostgreSQL, sync and async.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import memory_inject
from memory_inject import (
    AgentConfig,
    BackendConfig,
    BudgetConfig,
    DecayConfig,
    MemoryInjectConfig,
    arender_memory_context,
    heuristic_importance,
    open_store,
    render_memory_context,
)
from memory_inject import defaults as d
from memory_inject.cli import cli
from memory_inject.config import load_agent_config
from memory_inject.contract import (
    RecallAnswer,
    RecallQuery,
    SupportsAsyncAnswer,
    SupportsClose,
    SupportsStandingContext,
    SupportsWrite,
    supports,
)
from memory_inject.exceptions import ConfigError
from memory_inject.models import MemoryEntry
from memory_inject.storage import InMemoryStore
from memory_inject.storage.hot_cache import (
    HOT_CACHE_SIZE,
    HOT_CACHE_TTL_S,
    HotCacheInfo,
    HotCacheStore,
    with_retrieval_stages,
)
from memory_inject.storage.importance import (
    HIGH_SIGNAL_KEYWORDS,
    IMPORTANCE_BY_CATEGORY,
    MAX_KEYWORD_BONUS,
)
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage._pi_seed import jsonl

if TYPE_CHECKING:
    from adapters.tools import aremember, remember
else:
    from memory_inject.adapters.tools import aremember, remember

ROOT = Path(__file__).resolve().parents[1]
CACHED = ("fts", "vector", "cache")
#: Renders everything recalled, undecayed, so what the store answered is what shows.
SHOW_ALL = MemoryInjectConfig(
    recall_limit=20,
    min_relevance_score=0.0,
    decay=DecayConfig(enabled=False),
    budget=BudgetConfig(max_entries=20),
)

#: Seed examples written with store(): (key, content, category, the spec's arithmetic).
SEED_FACTS = [
    # zeroclaw's acceptance facts (spec 10.1, cases 5 and 9)
    ("user_preference", "prefers concise answers", "core", 0.7),
    ("fact", "server is prod-3", "core", 0.7),
    ("chat", "said hi earlier", "conversation", 0.2),
    # PI's rules (seeds 000 and 002): one high-signal word each
    ("mem_memory_md", "Never edit MEMORY.md directly", "core", 0.7 + 0.1),
    ("mem_def", "Always run typecheck before pushing", "daily", 0.3 + 0.1),
    ("mem_xyz", "Run typecheck only in CI, never before pushing", "daily", 0.3 + 0.1),
    # founder-os's skill example: custom categories
    ("pref-archive-newsletters", "Always archive newsletters after drafting.", "preference", 0.5),
    (
        "acme-billing-contact",
        "Sarah Chen at Acme is the billing decision-maker.",
        "contact",
        0.4 + 0.1,
    ),
    (
        "pattern-invoice-monday",
        "User batches invoice processing on Monday mornings.",
        "pattern",
        0.4,
    ),
]


def _close(store: Any) -> None:
    if isinstance(store, SupportsClose):
        store.close()


@pytest.fixture(params=["in_memory", "sqlite", "postgres"])
def plain_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """An empty store of each built-in kind."""
    if request.param == "in_memory":
        store: Any = InMemoryStore()
    elif request.param == "sqlite":
        store = SQLiteStore(tmp_path / "m.db")
    else:
        from tests.storage._pg_backend import make_postgres_store

        store = make_postgres_store(request.getfixturevalue("pg_dsn"))
    try:
        yield store
    finally:
        _close(store)


# -- heuristic importance ---------------------------------------------------------------


class TestHeuristicImportance:
    def test_each_category_has_its_base(self) -> None:
        """core 0.7, daily 0.3, conversation 0.2, anything else 0.4 (spec 7.2)."""
        got = {c: heuristic_importance(c, "plain words") for c in ("core", "daily")}
        got |= {c: heuristic_importance(c, "plain words") for c in ("conversation", "project")}
        assert {"core": 0.7, "daily": 0.3, "conversation": 0.2, "project": 0.4} == got

    @pytest.mark.parametrize("word", HIGH_SIGNAL_KEYWORDS)
    def test_each_high_signal_word_adds_a_tenth_in_any_case(self, word: str) -> None:
        """Every keyword, upper case and inside a longer word, adds 0.1."""
        assert pytest.approx(0.3 + 0.1) == heuristic_importance("daily", f"x {word.upper()}s y")

    def test_the_keyword_bonus_and_the_total_are_capped(self) -> None:
        """Three keywords add 0.2, not 0.3; a core fact tops out at 0.9, never above 1."""
        text = "A critical rule: we must never skip it"
        assert pytest.approx(0.7 + MAX_KEYWORD_BONUS) == heuristic_importance("core", text)
        assert 1.0 >= max(heuristic_importance(c, text) for c in IMPORTANCE_BY_CATEGORY)

    def test_a_repeated_keyword_counts_once(self) -> None:
        """ "never ... never" is one keyword."""
        assert pytest.approx(0.2 + 0.1) == heuristic_importance("conversation", "never, never")

    def test_the_value_is_rounded(self) -> None:
        """0.7 + 0.1 reads back as 0.8, not 0.7999999999999999."""
        assert 0.8 == heuristic_importance("core", "Never edit MEMORY.md directly")


class TestImportanceOnWrite:
    def test_store_writes_the_heuristic_and_recall_returns_it(self, plain_store: Any) -> None:
        """store() without importance stores the heuristic; get and recall return it."""
        for key, content, category, _ in SEED_FACTS:
            plain_store.store(key, content, category)
        expected = {k: pytest.approx(v) for k, _, _, v in SEED_FACTS}
        assert expected == {r.key: r.importance for r in plain_store.list()}
        recalled = plain_store.recall("*", 50)
        assert expected == {e.key: e.importance for e in recalled}
        found = plain_store.recall("typecheck before pushing", 5)
        assert {"mem_def": pytest.approx(0.4)} == {
            e.key: e.importance for e in found if e.key == "mem_def"
        }

    def test_a_given_importance_wins_even_zero(self, plain_store: Any) -> None:
        """An explicit importance, 0.0 included, is stored as given; none gets the heuristic;
        content that is not text is still the record's own TypeError."""
        plain_store.store("mem_memory_md", "Never edit MEMORY.md directly", "core", importance=0.0)
        plain_store.store("mem_friday", "Never deploy on Fridays", "core")
        with pytest.raises(TypeError, match="'content' must be a string"):
            plain_store.store("k", 42, "core")
        got = {r.key: r.importance for r in plain_store.list()}
        assert {"mem_memory_md": 0.0, "mem_friday": pytest.approx(0.8)} == got

    def test_an_update_recomputes_it_from_the_new_content(self, plain_store: Any) -> None:
        """Rewriting a key without importance scores the new text, not the old value."""
        plain_store.store("fact", "server is prod-3", "core", importance=0.1)
        plain_store.store("fact", "the server must be prod-3", "core")
        record = plain_store.get("fact")
        assert record is not None
        assert pytest.approx(0.8) == record.importance

    def test_remember_and_aremember_store_it(self, plain_store: Any) -> None:
        """The host's remember() and its async twin get the heuristic, read back by arecall."""
        remember(plain_store, None, "Never edit MEMORY.md directly", key="mem_memory_md")

        async def run() -> list[MemoryEntry]:
            await aremember(
                plain_store,
                None,
                "Always run typecheck before pushing",
                key="mem_def",
                category="daily",
            )
            if supports(plain_store, SupportsAsyncAnswer):
                answer = await plain_store.aanswer(RecallQuery("*", 10))
                aclose = getattr(plain_store, "aclose", None)
                if aclose is not None:  # PostgreSQL's async pool closes on its loop
                    await aclose()
                return list(answer.entries)
            return list(await plain_store.arecall("*", 10))  # pragma: no cover

        got = {e.key: e.importance for e in asyncio.run(run())}
        assert {"mem_memory_md": pytest.approx(0.8), "mem_def": pytest.approx(0.4)} == got

    def test_the_cli_add_stores_it(self, tmp_path: Path) -> None:
        """`memory-inject add` without --importance stores the heuristic."""
        db = tmp_path / "m.db"
        result = CliRunner().invoke(
            cli,
            [
                *("add", "pref-archive-newsletters", "Always archive newsletters after drafting."),
                *("--category", "preference", "--db", str(db)),
            ],
        )
        assert 0 == result.exit_code, result.output
        with SQLiteStore(db) as store:
            record = store.get("pref-archive-newsletters")
        assert record is not None
        assert pytest.approx(0.5) == record.importance


# -- the constants ------------------------------------------------------------------


class TestDefaultConstants:
    def test_each_constant_is_what_the_default_config_resolves_to(self) -> None:
        """Every exported constant equals the defaults file's resolved value (or its bound)."""
        memory = load_agent_config(ROOT / "config" / "defaults.yaml").memory
        resolved = memory.for_origin("interactive")
        expected = {
            "DEFAULT_RECALL_LIMIT": resolved.recall_limit,
            "DEFAULT_MAX_ENTRIES": resolved.budget.max_entries,
            "DEFAULT_ENTRY_MAX_CHARS": resolved.budget.entry_max_chars,
            "DEFAULT_MAX_TOTAL_CHARS": resolved.budget.max_total_chars,
            "DEFAULT_MIN_RELEVANCE_SCORE": resolved.min_relevance_score,
            "DEFAULT_HALF_LIFE_DAYS": resolved.decay.half_life_days,
            "DEFAULT_NEAR_DUPLICATE_THRESHOLD": resolved.rerank.near_duplicate_threshold,
            "DEFAULT_IMPORTANCE_WEIGHT": resolved.rerank.importance_weight,
            "DEFAULT_RECENCY_WEIGHT": resolved.rerank.recency_weight,
            "DEFAULT_MMR_LAMBDA": resolved.rerank.mmr_lambda,
            "DEFAULT_RERANK_THRESHOLD": resolved.rerank.threshold,
            "DEFAULT_CANDIDATE_MULTIPLIER": resolved.rerank.candidate_multiplier,
            "DEFAULT_VECTOR_WEIGHT": resolved.backend.vector_weight,
            "DEFAULT_KEYWORD_WEIGHT": resolved.backend.keyword_weight,
            "DEFAULT_RETRIEVAL_STAGES": resolved.retrieval_stages,
            "DEFAULT_DEADLINE_MS": resolved.deadline_ms,
            "MAX_CANDIDATE_POOL": resolved.rerank.pool_cap,
            "MEMORY_CONTEXT_OPEN": memory_inject.MEMORY_CONTEXT_OPEN,
            "MEMORY_CONTEXT_CLOSE": memory_inject.MEMORY_CONTEXT_CLOSE,
        }
        actual = {name: getattr(d, name) for name in d.__all__}
        assert expected == {k: v for k, v in actual.items() if k in expected}
        assert {"MAX_MEMORY_RERANK_CANDIDATE_MULTIPLIER"} == set(actual) - set(expected)

    def test_the_multiplier_bound_is_the_one_the_config_enforces(self) -> None:
        """MAX_MEMORY_RERANK_CANDIDATE_MULTIPLIER is accepted, one more is refused."""
        top = d.MAX_MEMORY_RERANK_CANDIDATE_MULTIPLIER
        assert top == memory_inject.RerankConfig(candidate_multiplier=top).candidate_multiplier
        with pytest.raises(ValueError, match="'candidate_multiplier' must be <= 20"):
            memory_inject.RerankConfig(candidate_multiplier=top + 1)

    def test_zeroclaws_module_constants_are_exported_with_its_values(self) -> None:
        """The seed's four constants, from the package root, with the spec's values."""
        got = {
            n: getattr(memory_inject, n) for n in memory_inject.__all__ if n.startswith("DEFAULT_")
        }
        spec = {
            "DEFAULT_RECALL_LIMIT": 5,
            "DEFAULT_MAX_ENTRIES": 4,
            "DEFAULT_ENTRY_MAX_CHARS": 800,
            "DEFAULT_MAX_TOTAL_CHARS": 4000,
        }
        assert spec == got
        assert 0.4 == d.DEFAULT_MIN_RELEVANCE_SCORE

    def test_the_hot_cache_constants_are_what_the_cache_uses(self) -> None:
        """256 answers, 300 s: the values a wrapper made by open_store runs with."""
        info = HotCacheStore(InMemoryStore()).cache_info()
        assert (HOT_CACHE_SIZE, HOT_CACHE_TTL_S) == (info.maxsize, info.ttl_s)
        assert (256, 300.0) == (HOT_CACHE_SIZE, HOT_CACHE_TTL_S)


# -- the retrieval_stages key -------------------------------------------------------------


class TestRetrievalStagesKey:
    def test_the_default_is_fts_and_vector(self) -> None:
        """zeroclaw's default, and no cache."""
        assert ("fts", "vector") == MemoryInjectConfig().retrieval_stages

    def test_an_unknown_stage_names_the_file_and_the_key(self, tmp_path: Path) -> None:
        """A typo is a ConfigError naming the file, the key and the stages allowed."""
        path = tmp_path / "a.yaml"
        path.write_text("agent: a\nmemory:\n  retrieval_stages: [fts, cahce]\n", encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            load_agent_config(path)
        text = str(err.value)
        assert str(path) in text
        assert "'retrieval_stages' must name items from ['fts', 'vector', 'cache']" in text
        assert "['cahce']" in text

    def test_it_is_not_an_origin_override(self, tmp_path: Path) -> None:
        """The cache belongs to the store, not to a turn's origin."""
        path = tmp_path / "a.yaml"
        path.write_text(
            "agent: a\nmemory:\n  origins:\n    cron:\n      retrieval_stages: [cache]\n",
            encoding="utf-8",
        )
        with pytest.raises(ConfigError, match="'retrieval_stages' is not a known key"):
            load_agent_config(path)

    def test_open_store_wraps_only_when_asked(self, tmp_path: Path) -> None:
        """open_store gives a HotCacheStore around the SQLite store with "cache", else the store."""

        def agent(stages: tuple[str, ...]) -> AgentConfig:
            backend = BackendConfig(path=str(tmp_path / "m.db"))
            return AgentConfig("a", MemoryInjectConfig(backend=backend, retrieval_stages=stages))

        plain = open_store(agent(("fts", "vector")))
        cached = open_store(agent(CACHED))
        try:
            assert isinstance(plain, SQLiteStore)
            assert isinstance(cached, HotCacheStore)
            assert isinstance(cached.inner, SQLiteStore)
        finally:
            _close(plain)
            _close(cached)


# -- the hot cache on seeded stores ----------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``open_agent_store(stages)``: open_store on one SQLite file or PostgreSQL database."""
    opened: list[Any] = []
    if request.param == "sqlite":
        backend_config = BackendConfig(path=str(tmp_path / "m.db"))
        drop: Callable[[], None] = lambda: None  # noqa: E731
    else:
        from psycopg.conninfo import make_conninfo as conninfo

        from tests.storage._pg_backend import create_database, drop_database

        server = request.getfixturevalue("pg_dsn")
        name = create_database(server)
        backend_config = BackendConfig(kind="postgres", dsn=conninfo(server, dbname=name))

        def drop() -> None:
            drop_database(server, name)

    def open_agent_store(stages: tuple[str, ...] = CACHED) -> Any:
        memory = MemoryInjectConfig(backend=backend_config, retrieval_stages=stages)
        store = open_store(AgentConfig("a", memory))
        opened.append(store)
        return store

    try:
        yield open_agent_store
    finally:
        for store in opened:
            _close(store)
        drop()


def _count_calls(store: HotCacheStore) -> list[RecallQuery]:
    """Record every query that reaches the wrapped store (sync or async)."""
    inner: Any = store.inner
    asked: list[RecallQuery] = []
    answer, aanswer = inner.answer, inner.aanswer

    def counted(q: RecallQuery) -> RecallAnswer:
        asked.append(q)
        return answer(q)  # type: ignore[no-any-return]

    async def acounted(q: RecallQuery) -> RecallAnswer:
        asked.append(q)
        return await aanswer(q)  # type: ignore[no-any-return]

    inner.answer, inner.aanswer = counted, acounted
    return asked


Render = Callable[..., Awaitable[Any]]


def _scenario(mode: str, store: Any, body: Callable[[Render], Awaitable[None]]) -> None:
    """Run ``body`` on one event loop with a ``render(query, **kwargs)`` of the mode.

    The async mode awaits ``arender_memory_context``; PostgreSQL's async pool is opened
    on that loop, so it is closed there at the end (``aclose``, see ``PostgresStore``).
    """

    async def render(query: str, **kwargs: Any) -> Any:
        if mode == "sync":
            return render_memory_context(store, query, config=SHOW_ALL, **kwargs)
        return await arender_memory_context(store, query, config=SHOW_ALL, **kwargs)

    async def run() -> None:
        try:
            await body(render)
        finally:
            aclose = getattr(store, "aclose", None)
            if mode == "async" and aclose is not None:
                await aclose()

    asyncio.run(run())


@pytest.mark.parametrize("mode", ["sync", "async"])
class TestHotCache:
    def test_a_repeated_render_is_served_from_the_cache(
        self, backend: Callable[..., Any], mode: str
    ) -> None:
        """PI's seed store: the second identical render asks the store nothing, same bytes."""
        store = backend()
        store.import_jsonl(jsonl())
        asked = _count_calls(store)
        got: list[Any] = []

        async def body(render: Render) -> None:
            got.append(await render("typecheck before pushing"))
            got.append(len(asked))
            got.append(await render("typecheck before pushing"))

        _scenario(mode, store, body)
        first, reached, second = got
        assert "Always run typecheck before pushing" in first.text
        assert first.text == second.text
        assert reached > 0
        assert reached == len(asked)  # nothing reached the store the second time
        assert reached == store.cache_info().hits

    def test_without_cache_every_render_reaches_the_store(
        self, backend: Callable[..., Any], mode: str
    ) -> None:
        """zeroclaw's pass-through decorator: two renders, the store asked both times."""
        store = backend(("fts", "vector"))
        store.import_jsonl(jsonl())
        cached = HotCacheStore(store, maxsize=0)  # the same wrapper, caching nothing
        asked = _count_calls(cached)
        got: list[Any] = []

        async def body(render: Render) -> None:
            got.append(await render("typecheck before pushing"))
            got.append(len(asked))
            got.append(await render("typecheck before pushing"))

        _scenario(mode, cached, body)
        first, reached, second = got
        assert first.text == second.text
        assert 2 * reached == len(asked)

    def test_one_scope_never_gets_another_scopes_rows(
        self, backend: Callable[..., Any], mode: str
    ) -> None:
        """zeroclaw's group scopes: the same question in two scopes, each gets its own row."""
        store = backend()
        store.store("group_a_fact", "the server is prod-3", "conversation", session_id="group_a")
        store.store("group_b_fact", "the server is prod-7", "conversation", session_id="group_b")
        got: list[Any] = []

        async def body(render: Render) -> None:
            for scope in ("group_a", "group_b", "group_a"):
                got.append(await render("which server is it", sessions=[scope]))

        _scenario(mode, store, body)
        a, b, again = got
        assert ("prod-3" in a.text, "prod-7" in a.text) == (True, False)
        assert ("prod-7" in b.text, "prod-3" in b.text) == (True, False)
        assert a.text == again.text
        assert 1 <= store.cache_info().hits

    def test_a_write_through_the_wrapper_is_seen_at_once(
        self, backend: Callable[..., Any], mode: str
    ) -> None:
        """store(), forget(): the next render recalls the store as it is now."""
        store = backend()
        store.import_jsonl(jsonl())
        got: list[Any] = []

        async def body(render: Render) -> None:
            got.append(await render("typecheck before pushing"))
            store.store("mem_new", "Typecheck before pushing, always, with --strict", "core")
            got.append(await render("typecheck before pushing"))
            assert store.forget("mem_def")
            got.append(await render("typecheck before pushing"))

        _scenario(mode, store, body)
        before, added, forgotten = got
        assert "--strict" not in before.text
        assert "--strict" in added.text
        assert "Always run typecheck before pushing" in added.text
        assert "Always run typecheck before pushing" not in forgotten.text

    def test_a_write_to_the_wrapped_store_is_seen_at_once(
        self, backend: Callable[..., Any], mode: str
    ) -> None:
        """A write that bypasses the wrapper moves the store's data_version."""
        store = backend()
        store.import_jsonl(jsonl())
        got: list[Any] = []

        async def body(render: Render) -> None:
            await render("typecheck before pushing")
            store.inner.store("mem_new", "Typecheck before pushing, always, with --strict", "core")
            got.append(await render("typecheck before pushing"))

        _scenario(mode, store, body)
        assert "--strict" in got[0].text

    def test_a_usage_mark_is_a_write(self, backend: Callable[..., Any], mode: str) -> None:
        """mark_used changes times_used, which recall returns: the kept answer goes."""
        store = backend()
        store.import_jsonl(jsonl())
        query = RecallQuery("typecheck before pushing", 5)
        got: list[RecallAnswer] = []

        async def body(_: Render) -> None:
            ask = store.answer if mode == "sync" else None
            got.append(ask(query) if ask else await store.aanswer(query))
            store.mark_used([got[0].entries[0].id])
            got.append(ask(query) if ask else await store.aanswer(query))

        _scenario(mode, store, body)
        first, again = got
        used = first.entries[0].id
        before = {e.id: e.extra["times_used"] for e in first.entries}
        after = {e.id: e.extra["times_used"] for e in again.entries}
        assert before[used] + 1 == after[used]


class TestOtherWriters:
    def test_sqlite_sees_another_processs_write(self, tmp_path: Path) -> None:
        """Another store object on the file (as another process would be): seen at once."""
        db = tmp_path / "m.db"
        memory = MemoryInjectConfig(backend=BackendConfig(path=str(db)), retrieval_stages=CACHED)
        store: Any = open_store(AgentConfig("a", memory))
        try:
            store.import_jsonl(jsonl())
            render_memory_context(store, "typecheck before pushing", config=SHOW_ALL)
            with SQLiteStore(db) as other:
                other.store("mem_new", "Typecheck before pushing, always, with --strict", "core")
            after = render_memory_context(store, "typecheck before pushing", config=SHOW_ALL)
        finally:
            store.close()
        assert "--strict" in after.text

    def test_postgres_sees_another_writer_once_the_answer_ages_out(self, pg_dsn: str) -> None:
        """PostgreSQL's data_version counts only its own writes: another store object's
        write is served stale until the time-to-live, then seen (docs/storage.md)."""
        from tests.storage._pg_backend import make_postgres_store

        now = [0.0]
        inner = make_postgres_store(pg_dsn)
        other = make_postgres_store(pg_dsn, same_database_as=inner)
        store = HotCacheStore(inner, clock=lambda: now[0])
        try:
            inner.import_jsonl(jsonl())
            render_memory_context(store, "typecheck before pushing", config=SHOW_ALL)
            other.store("mem_new", "Typecheck before pushing, always, with --strict", "core")
            stale = render_memory_context(store, "typecheck before pushing", config=SHOW_ALL)
            now[0] += HOT_CACHE_TTL_S
            fresh = render_memory_context(store, "typecheck before pushing", config=SHOW_ALL)
        finally:
            other.close()
            inner.close()
        assert ("--strict" in stale.text, "--strict" in fresh.text) == (False, True)


# -- the wrapper itself -----------------------------------------------------------------


class _Fake:
    """A store whose answers, version and writes a test controls."""

    name = "fake"

    def __init__(self) -> None:
        self.version = 0
        self.degraded: tuple[str, ...] = ()
        self.calls = 0
        self.during: Callable[[], None] = lambda: None
        self.closed = False
        self.label = "not a method"

    @property
    def data_version(self) -> int:
        return self.version

    def answer(self, q: RecallQuery) -> RecallAnswer:
        self.calls += 1
        self.during()
        entry = MemoryEntry(q.query or "k", f"answer {self.calls}", "core", None, score=1.0)
        return RecallAnswer([entry], degraded=self.degraded)

    # Writes that leave data_version alone (as PostgreSQL's counter can, for a moment):
    # only the wrapper's own count of writes can tell.
    def store(self, key: str, content: str, category: str = "core", **_: Any) -> str:
        return key

    async def astore(self, key: str, content: str, category: str = "core", **_: Any) -> str:
        return key

    def _private(self) -> str:
        return "private"

    def close(self) -> None:
        self.closed = True


class TestWrapper:
    def test_keeps_at_most_maxsize_answers_least_recently_used_first(self) -> None:
        """Three queries with room for two: the least recently asked one is asked again."""
        fake = _Fake()
        cache = HotCacheStore(fake, maxsize=2)
        cache.recall("a", 1)
        cache.recall("b", 1)
        cache.recall("a", 1)  # a is now the most recent
        cache.recall("c", 1)  # evicts b
        cache.recall("a", 1)
        cache.recall("b", 1)
        assert 4 == fake.calls
        assert HotCacheInfo(hits=2, misses=4, size=2, maxsize=2, ttl_s=HOT_CACHE_TTL_S) == (
            cache.cache_info()
        )

    def test_an_answer_ages_out_after_the_time_to_live(self) -> None:
        """At ttl_s seconds the store is asked again."""
        now = [100.0]
        fake = _Fake()
        cache = HotCacheStore(fake, ttl_s=5, clock=lambda: now[0])
        cache.recall("a", 1)
        now[0] += 4.9
        cache.recall("a", 1)
        now[0] += 0.1
        cache.recall("a", 1)
        assert 2 == fake.calls

    def test_a_degraded_answer_is_not_kept(self) -> None:
        """An embedder failure is this call's news; the next call asks again."""
        fake = _Fake()
        fake.degraded = ("embedder_failed: down",)
        cache = HotCacheStore(fake)
        first = cache.answer(RecallQuery("a", 1))
        cache.answer(RecallQuery("a", 1))
        assert (2, ("embedder_failed: down",)) == (fake.calls, first.degraded)

    def test_an_answer_a_write_overtook_is_not_kept(self) -> None:
        """A write through the wrapper while the store answers: the answer is not kept."""
        fake = _Fake()
        cache = HotCacheStore(fake)
        fake.during = lambda: cache.store("k", "v")
        cache.recall("a", 1)
        fake.during = lambda: None
        cache.recall("a", 1)
        assert (2, 0) == (fake.calls, cache.cache_info().hits)

    def test_async_writes_drop_the_answers_too(self) -> None:
        """astore through the wrapper is a write; so is any method it does not know."""
        fake = _Fake()
        cache: Any = HotCacheStore(fake)
        cache.recall("a", 1)
        asyncio.run(cache.astore("k", "v"))
        cache.recall("a", 1)
        assert 2 == fake.calls

    def test_the_deadline_is_not_part_of_the_key(self) -> None:
        """Two turns with different deadlines ask the same question."""
        fake = _Fake()
        cache = HotCacheStore(fake)
        cache.answer(RecallQuery("a", 1, deadline=1.0))
        cache.answer(RecallQuery("a", 1, deadline=2.0))
        assert 1 == fake.calls

    def test_a_query_that_cannot_be_a_key_goes_to_the_store(self) -> None:
        """A list where a tuple belongs: answered, never kept, counted as neither."""
        fake = _Fake()
        cache = HotCacheStore(fake)
        q = RecallQuery("a", 1, statuses=["active"])  # type: ignore[arg-type]
        cache.answer(q)
        cache.answer(q)
        info = cache.cache_info()
        assert (2, 0, 0) == (fake.calls, info.hits, info.misses)

    def test_maxsize_or_ttl_zero_keeps_nothing(self) -> None:
        """A cache with no room, or no time, is a pass-through."""
        fake = _Fake()
        for cache in (HotCacheStore(fake, maxsize=0), HotCacheStore(fake, ttl_s=0)):
            cache.recall("a", 1)
            cache.recall("a", 1)
        assert 4 == fake.calls

    def test_served_entries_are_a_tuple(self) -> None:
        """A caller cannot change a kept answer's list of entries."""
        cache = HotCacheStore(_Fake())
        assert isinstance(cache.answer(RecallQuery("a", 1)).entries, tuple)
        assert isinstance(cache.answer(RecallQuery("a", 1)).entries, tuple)

    def test_a_raw_batch_is_passed_on(self) -> None:
        """A store whose answer is not a RecallAnswer: given back as it is, not kept."""

        class Raw(_Fake):
            def answer(self, q: RecallQuery) -> Any:
                self.calls += 1
                return ["raw"]

        raw = Raw()
        cache = HotCacheStore(raw)
        got: Any = (cache.answer(RecallQuery("a", 1)), cache.answer(RecallQuery("a", 1)))
        assert (["raw"], ["raw"]) == got
        assert 2 == raw.calls

    def test_aanswer_without_an_async_twin_runs_answer_in_a_thread(self) -> None:
        """A store without aanswer: answered off the loop, then kept."""
        fake = _Fake()
        cache = HotCacheStore(fake)

        async def run() -> list[str]:
            got = [await cache.arecall("a", 1), await cache.arecall("a", 1)]
            return [e.content for batch in got for e in batch]

        assert ["answer 1", "answer 1"] == asyncio.run(run())

    def test_it_forwards_what_it_does_not_cache(self) -> None:
        """Reads, values and private members as they are; close drops the answers."""
        fake = _Fake()
        cache: Any = HotCacheStore(fake)
        cache.recall("a", 1)
        assert (0, "not a method", "private") == (
            cache.data_version,
            cache.label,
            cache._private(),
        )
        assert 1 == cache.cache_info().size
        with cache:
            pass
        assert (True, 0) == (fake.closed, cache.cache_info().size)

        async def async_with() -> None:
            async with HotCacheStore(_Fake()) as other:
                other.recall("a", 1)

        asyncio.run(async_with())
        with pytest.raises(AttributeError):
            cache.missing_member  # noqa: B018
        with pytest.raises(AttributeError):
            cache.__missing_dunder__  # noqa: B018
        assert "HotCacheStore(" in repr(cache)

    def test_it_has_the_capabilities_of_the_store_it_wraps(self, tmp_path: Path) -> None:
        """The render sees the same capabilities, the deadline honouring included."""
        with SQLiteStore(tmp_path / "m.db") as sqlite:
            cache = HotCacheStore(sqlite)
            for cap in (SupportsStandingContext, SupportsWrite, SupportsAsyncAnswer):
                assert supports(cache, cap)
            assert type(cache).honours_deadline is True
        assert type(HotCacheStore(_Fake())).honours_deadline is False
        with HotCacheStore(_Fake()) as plain:
            assert not hasattr(plain, "standing_records")
        without_close = HotCacheStore(InMemoryStore())
        with without_close:
            pass
        cached = HotCacheStore(InMemoryStore())
        cached.cache_clear()
        assert "in_memory" == cached.name

    def test_async_with_awaits_aclose_when_the_store_has_it(self) -> None:
        """``async with`` ends with ``aclose`` (PostgreSQL's async pool), else ``close``."""
        closed: list[str] = []

        class AsyncClosing(_Fake):
            async def aclose(self) -> None:
                closed.append("aclose")

        async def run() -> None:
            async with HotCacheStore(AsyncClosing()) as store:
                store.recall("a", 1)

        asyncio.run(run())
        assert ["aclose"] == closed

    def test_it_refuses_what_it_cannot_cache(self) -> None:
        """No answer or no data_version is a TypeError; bad sizes are ValueErrors."""
        with pytest.raises(TypeError, match="a store with 'answer'"):
            HotCacheStore(object())
        with pytest.raises(ValueError, match="'maxsize' must be an integer >= 0"):
            HotCacheStore(_Fake(), maxsize=-1)
        with pytest.raises(ValueError, match="'ttl_s' must be >= 0"):
            HotCacheStore(_Fake(), ttl_s=float("nan"))

    def test_a_store_that_cannot_be_cached_is_opened_as_it_is(self) -> None:
        """with_retrieval_stages leaves a store without data_version (none, markdown) alone."""

        class NoVersion:
            name = "none"

            def answer(self, q: RecallQuery) -> RecallAnswer:
                return RecallAnswer([])

        store = NoVersion()
        agent = AgentConfig("a", MemoryInjectConfig(retrieval_stages=CACHED))
        assert store is with_retrieval_stages(store, agent)
        fake = _Fake()
        assert fake is with_retrieval_stages(fake, AgentConfig("a"))
        assert isinstance(with_retrieval_stages(fake, agent), HotCacheStore)
