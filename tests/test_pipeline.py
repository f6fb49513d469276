"""The spec's acceptance cases (section 10) and our end-to-end cases for render_memory_context.

Every test here runs twice, through ``render_memory_context`` and through
``arender_memory_context`` (the ``twin`` fixture of ``tests/_twins.py``), so the
twins cannot drift.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_inject import (
    BudgetConfig,
    InMemoryStore,
    MemoryEntry,
    MemoryInjectConfig,
    RenderResult,
    RerankConfig,
    TurnMeta,
    TurnOrigin,
    arender_memory_context,
    pipeline,
    resolve_inject_policy,
)
from memory_inject.config import PlanQueryConfig, RecallPlanConfig
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.policy import direct_policy
from memory_inject.signals import MemoryRecall, MemorySkipped, memory_skipped
from memory_inject.testing import FixtureMemory, recording
from tests._twins import call, twin  # noqa: F401

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def entry(
    key: str,
    content: str,
    category: str = "core",
    score: float | None = None,
    age_days: float = 0,
    importance: float | None = None,
    session_id: str | None = None,
) -> MemoryEntry:
    return MemoryEntry(
        key,
        content,
        category,
        NOW - timedelta(days=age_days),
        score=score,
        importance=importance,
        session_id=session_id,
    )


def trace_of(out: Any, name: str) -> Any:
    """The trace of the stage called ``name``."""
    return next(t for t in out.trace if t.name == name)


def render(
    mem: Any, query: str = "project status", *, exclude_conversation: bool = False, **kw: Any
) -> RenderResult:
    """Render in the current mode; ``exclude_conversation`` builds a direct policy."""
    kw.setdefault("now", NOW)
    if exclude_conversation:
        kw["policy"] = direct_policy(kw.pop("config", None), exclude_conversation=True)
    result: RenderResult = call(pipeline, "render_memory_context", mem, query, **kw)
    return result


class TestSpecRenderer:
    def test_renders_wrapped_block_and_emits_one_recall_event(self) -> None:
        """One core entry renders the exact wrapped block and one successful event."""
        mem = FixtureMemory(
            {None: [entry("user_preference", "prefers concise answers", score=0.9)]}
        )
        with recording() as rec:
            out = render(mem)
        assert (
            "[Memory context]\n- user_preference: prefers concise answers\n[/Memory context]\n\n"
        ) == out.text
        assert [(1, True)] == rec.pairs

    def test_recall_event_carries_the_turn_correlation_triple(self) -> None:
        """The event carries channel, agent alias and turn id from TurnMeta."""
        mem = FixtureMemory({None: [entry("k", "v", score=0.9)]})
        with recording() as rec:
            render(mem, turn=TurnMeta("cli", "default", "turn-42"))
        assert 1 == len(rec.events)
        ev = rec.events[0]
        assert ("cli", "default", "turn-42") == (ev.channel, ev.agent_alias, ev.turn_id)

    def test_empty_recall_renders_nothing_but_still_emits_the_event(self) -> None:
        """Nothing recalled gives '' and still one successful event."""
        with recording() as rec:
            out = render(FixtureMemory())
        assert "" == out.text
        assert [(0, True)] == rec.pairs

    def test_recall_failure_is_swallowed_and_reported_unsuccessful(self) -> None:
        """A failing store gives '' and one event with success False and the error."""
        with recording() as rec:
            out = render(FixtureMemory(fail=RuntimeError("db gone")))
        assert "" == out.text
        assert [(0, False)] == rec.pairs
        assert "db gone" in (rec.events[0].error or "")

    def test_exclude_conversation_drops_only_conversation_entries(self) -> None:
        """Conversation entries go when excluded; core entries stay."""
        mem = FixtureMemory(
            {
                None: [
                    entry("chat", "said hi earlier", "conversation", 0.9),
                    entry("fact", "server is prod-3", "core", 0.9),
                ]
            }
        )
        out = render(mem, exclude_conversation=True)
        assert "said hi earlier" not in out.text
        assert "- fact: server is prod-3\n" in out.text
        assert {"chat": "conversation_excluded"} == trace_of(out, "conversation_exclusion").dropped

    def test_uniform_skip_set_filters_poisoned_entries(self) -> None:
        """History keys, image markers and tool results are skipped; real knowledge stays."""
        mem = FixtureMemory(
            {
                None: [
                    entry("matrix_room_history", "lots of chat", score=0.9),
                    entry("img", "look [IMAGE:abc123]", score=0.9),
                    entry("tool", "<tool_result>ls</tool_result>", score=0.9),
                    entry("keeper", "real knowledge", score=0.9),
                ]
            }
        )
        out = render(mem)
        assert "[Memory context]\n- keeper: real knowledge\n[/Memory context]\n\n" == out.text
        skip = next(t for t in out.trace if t.name == "skip_set")
        assert {
            "matrix_room_history": "skip:history",
            "img": "skip:image",
            "tool": "skip:tool_result",
        } == dict(skip.dropped)

    def test_relevance_filter_drops_low_scores_and_keeps_unscored(self) -> None:
        """Floor 0.5: 0.1 dropped, 0.9 kept, unscored kept."""
        mem = FixtureMemory(
            {
                None: [
                    entry("low", "low", score=0.1),
                    entry("high", "high", score=0.9),
                    entry("none", "unscored", score=None),
                ]
            }
        )
        out = render(mem, config=MemoryInjectConfig(min_relevance_score=0.5))
        assert "- low:" not in out.text
        assert "- high: high\n" in out.text and "- none: unscored\n" in out.text
        assert {"low": "below_relevance:0.1"} == dict(trace_of(out, "relevance_filter").dropped)

    def test_budgets_cap_entry_count_and_truncate_long_content(self) -> None:
        """Five entries render four; the 900-char entry is cut to 800 + '...'."""
        long = "x" * 900
        mem = FixtureMemory(
            {
                None: [
                    entry("a", long, score=0.9),
                    entry("b", "two", score=0.9),
                    entry("c", "three", score=0.9),
                    entry("d", "four", score=0.9),
                    entry("e", "five", score=0.9),
                ]
            }
        )
        out = render(mem)
        assert "- d: four\n" in out.text
        assert "- e: five" not in out.text
        assert f"- a: {'x' * 800}...\n" in out.text and long not in out.text
        assert {"e": "budget:max_entries"} == dict(trace_of(out, "entry_cap").dropped)

    def test_total_budget_stops_before_overflowing(self) -> None:
        """Three 706-char lines under a 1500-char budget: two render, the third does not."""
        mem = FixtureMemory({None: [entry(k, k * 700, score=0.9) for k in "abc"]})
        cfg = MemoryInjectConfig(budget=BudgetConfig(max_total_chars=1500))
        out = render(mem, config=cfg)
        assert ["a", "b"] == [e.key for e in out.entries]
        assert 706 == len(f"- a: {'a' * 700}\n")
        assert {"c": "budget:max_total_chars"} == dict(out.trace[-1].dropped)

    def test_multi_session_recall_dedups_by_key_in_order(self) -> None:
        """The first scope's version of a shared key wins; both scopes' others render."""
        mem = FixtureMemory(
            {
                "history": [
                    entry("shared", "from history", score=0.9),
                    entry("only_first", "first only", score=0.9),
                ],
                "sender": [
                    entry("shared", "from sender", score=0.9),
                    entry("only_sender", "sender only", score=0.9),
                ],
            }
        )
        with recording() as rec:
            out = render(mem, sessions=["history", "sender"])
        assert "- shared: from history\n" in out.text and "from sender" not in out.text
        assert "- only_first: first only\n" in out.text
        assert "- only_sender: sender only\n" in out.text
        assert [(3, True)] == rec.pairs
        assert ["history", "sender"] == [c["session_id"] for c in mem.calls]

    def test_recall_routes_through_a_pass_through_decorator(self) -> None:
        """A pass-through decorator store renders identically and reaches the backend twice."""
        inner = FixtureMemory({None: [entry("k", "v", score=0.9)]})

        class PassThrough:
            name = "pipeline"

            def recall(self, *a: Any, **kw: Any) -> Sequence[MemoryEntry]:
                return inner.recall(*a, **kw)

        with recording() as rec:
            first = render(PassThrough()).text
            second = render(PassThrough()).text
        assert first == second != ""
        assert 2 == len(inner.calls)
        assert [(1, True), (1, True)] == rec.pairs


def _rerank_cfg(**kw: Any) -> MemoryInjectConfig:
    rr = {"enabled": True, **kw.pop("rerank", {})}
    return MemoryInjectConfig(rerank=RerankConfig(**rr), **kw)


class TestSpecRerank:
    def test_rerank_on_mmr_drops_near_duplicate_and_reorders(self) -> None:
        """Flags off renders a, b, c; rerank+MMR renders a then c and drops near-dup b."""
        a = entry("a", "the deploy target is prod-3 in eu-west", "daily", 0.95)
        b = entry("b", "the deploy target is prod-3 in eu-west today", "daily", 0.93)
        c = entry("c", "user likes green tea", "daily", 0.75)
        mem = FixtureMemory({None: [a, b, c]})
        assert ["a", "b", "c"] == [e.key for e in render(mem).entries]
        cfg = _rerank_cfg(
            recall_limit=2,
            rerank={
                "candidate_multiplier": 3,
                "strategy": "mmr",
                "mmr_lambda": 0.5,
                "threshold": 2,
            },
        )
        out = render(mem, config=cfg)
        assert ["a", "c"] == [e.key for e in out.entries]

    def test_rerank_gates_candidate_over_fetch(self) -> None:
        """Limit 5, multiplier 4: rerank on asks for 20, off asks for 5."""
        mem = FixtureMemory()
        render(mem, config=_rerank_cfg())
        render(mem, config=MemoryInjectConfig())
        assert [20, 5] == mem.limits

    def test_rerank_bounds_unlimited_recall_before_backend_and_scan(self) -> None:
        """Unlimited recall with rerank asks for 1024 and never sees a 1025th entry."""
        pool = [entry(f"k{i}", f"fact number {i} unique{i}", score=0.5) for i in range(1024)]
        pool.append(entry("overflow", "the over-returned entry", score=1.0))
        mem = FixtureMemory({None: pool})
        cfg = _rerank_cfg(recall_limit=0, rerank={"candidate_multiplier": 20})
        out = render(mem, config=cfg)
        assert [1024] == mem.limits
        assert "overflow" not in [e.key for e in out.entries]
        assert 4 == len(out.entries)
        assert isinstance(out.event, MemoryRecall)
        assert "rerank:pool_cap" == out.event.dropped["overflow"]

    def test_rerank_output_still_flows_through_budget_caps(self) -> None:
        """Six reranked candidates still render only four entries."""
        mem = FixtureMemory(
            {None: [entry(f"k{i}", f"distinct fact {i} w{i}", score=0.9) for i in range(6)]}
        )
        out = render(mem, config=_rerank_cfg(recall_limit=6))
        assert 4 == len(out.entries)

    def test_rerank_eligibility_filter_frees_slots_for_valid_candidates(self) -> None:
        """An ineligible history row scored 0.99 does not take a slot from five facts."""
        rows = [entry("channel_history", "all the chat", score=0.99)]
        rows += [entry(f"fact{i}", f"fact {i} is true {i}", score=0.8) for i in range(5)]
        cfg = _rerank_cfg(recall_limit=5, budget=BudgetConfig(max_entries=5))
        out = render(FixtureMemory({None: rows}), config=cfg)
        assert [f"fact{i}" for i in range(5)] == [e.key for e in out.entries]

    def test_stale_daily_survives_on_the_rerank_arm_only(self) -> None:
        """A 60-day-old daily entry dies to decay but survives the blend."""
        mem = FixtureMemory(
            {None: [entry("stale", "old but relevant", "daily", 0.6, age_days=60, importance=0.4)]}
        )
        assert "" == render(mem).text
        assert ["stale"] == [e.key for e in render(mem, config=_rerank_cfg()).entries]


class TestDecay:
    @pytest.mark.parametrize(("age", "factor"), [(0, 1.0), (7, 0.5), (14, 0.25)])
    def test_decay_halves_daily_scores_each_week(self, age: int, factor: float) -> None:
        """Daily scores halve every seven days."""
        out = render(
            FixtureMemory({None: [entry("d", "x", "daily", 0.8, age_days=age)]}),
            config=MemoryInjectConfig(min_relevance_score=0.0),
        )
        assert out.entries[0].score == pytest.approx(0.8 * factor)

    def test_core_never_decays_and_future_timestamps_do_not_grow(self) -> None:
        """Core is evergreen; a future timestamp is age zero."""
        out = render(
            FixtureMemory(
                {
                    None: [
                        entry("c", "x", "core", 0.8, age_days=300),
                        entry("f", "y", "daily", 0.8, age_days=-3),
                    ]
                }
            )
        )
        assert [0.8, 0.8] == [e.score for e in out.entries]

    def test_unknown_timestamp_and_unscored_entries_are_unchanged(self) -> None:
        """No timestamp or no score means no decay."""
        e1 = MemoryEntry("u", "x", "daily", None, score=0.8)
        e2 = entry("n", "y", "daily", None, age_days=30)
        out = render(FixtureMemory({None: [e1, e2]}))
        assert [0.8, None] == [e.score for e in out.entries]


class TestOriginsEndToEnd:
    """Policy plus render across origins, as an adapter would call them."""

    rows = (
        entry("fact", "server is prod-3", "core", 0.9),
        entry("chat", "we said hi", "conversation", 0.9),
        entry("note", "standup moved to 10am", "daily", 0.9),
    )

    def run(
        self,
        origin: TurnOrigin,
        sessions: list[str | None],
        config: MemoryInjectConfig | None = None,
    ) -> str:
        policy = resolve_inject_policy(
            origin, has_session=any(s is not None for s in sessions), config=config
        )
        if not policy.inject:
            return "<skip>"
        return render(
            FixtureMemory({s: list(self.rows) for s in sessions}),
            sessions=sessions,
            policy=policy,
        ).text

    @pytest.mark.parametrize("origin", [TurnOrigin.CRON, TurnOrigin.DAEMON])
    def test_scheduled_turns_never_see_conversation(self, origin: TurnOrigin) -> None:
        """Cron and daemon get facts and notes but never chat rows, with or without session."""
        cases: tuple[list[str | None], ...] = ([None], ["s1"])
        for sessions in cases:
            text = self.run(origin, sessions)
            assert "- fact: server is prod-3\n" in text and "we said hi" not in text

    def test_sessionful_channel_turn_sees_conversation(self) -> None:
        """A channel turn with a session sees its conversation rows."""
        assert "- chat: we said hi\n" in self.run(TurnOrigin.CHANNEL, ["dm1"])

    def test_sessionless_interactive_turn_excludes_conversation(self) -> None:
        """Without a session, conversation rows are excluded."""
        assert "we said hi" not in self.run(TurnOrigin.INTERACTIVE, [None])

    def test_sub_turn_is_skipped(self) -> None:
        """Sub-turns never get a block."""
        assert "<skip>" == self.run(TurnOrigin.SUB_TURN, ["s"])

    def test_per_origin_budget_and_disable(self) -> None:
        """A cron override caps entries at one; a disabled daemon origin is skipped."""
        cfg = MemoryInjectConfig(
            origins={"cron": {"budget": {"max_entries": 1}}, "daemon": {"enabled": False}}
        )
        text = self.run(TurnOrigin.CRON, [None], cfg)
        assert "[Memory context]\n- fact: server is prod-3\n[/Memory context]\n\n" == text
        assert "<skip>" == self.run(TurnOrigin.DAEMON, [None], cfg)

    def test_token_budget_bounds_the_whole_block(self) -> None:
        """With a token cap the rendered block never exceeds it."""
        from memory_inject._tokens import count_tokens

        rows = [entry(f"k{i}", "word " * 40, score=0.9) for i in range(4)]
        cfg = MemoryInjectConfig(budget=BudgetConfig(max_total_tokens=100))
        out = render(FixtureMemory({None: rows}), config=cfg)
        assert 0 < count_tokens(out.text, "cl100k_base") <= 100
        assert 2 == len(out.entries)
        assert isinstance(out.event, MemoryRecall)
        assert out.event.rendered_tokens == count_tokens(out.text, "cl100k_base")
        assert "budget:max_total_tokens" == out.event.dropped["k2"]


class TestFaults:
    def test_garbage_results_are_dropped_and_reported(self) -> None:
        """Objects that are not entries are dropped, valid ones render, success is False."""
        mem = FixtureMemory({None: ["not an entry", entry("k", "v", score=0.9), 42]})
        with recording() as rec:
            out = render(mem)
        assert ["k"] == [e.key for e in out.entries]
        assert [(1, False)] == rec.pairs
        assert "invalid_entry:str" in rec.events[0].dropped.values()

    def test_non_iterable_result_counts_as_failed_recall(self) -> None:
        """A store returning None fails that scope without raising."""

        class Broken:
            name = "broken"

            def recall(self, *a: Any, **kw: Any) -> Any:
                return None

        with recording() as rec:
            assert "" == render(Broken()).text
        assert [(0, False)] == rec.pairs

    def test_one_failing_scope_does_not_hide_the_other(self) -> None:
        """With two scopes, one failure still renders the other and success stays True."""

        class Half:
            name = "half"

            def recall(
                self, q: str, limit: int, *, session_id: str | None = None, **kw: Any
            ) -> Sequence[MemoryEntry]:
                if session_id == "bad":
                    raise OSError("disk")
                return [entry("ok", "fine", score=0.9)]

        with recording() as rec:
            out = render(Half(), sessions=["bad", "good"])
        assert ["ok"] == [e.key for e in out.entries]
        assert [(1, True)] == rec.pairs
        assert "disk" in (rec.events[0].error or "")

    def test_a_raising_receiver_does_not_break_the_render(self, caplog: Any) -> None:
        """An observer that raises is isolated; the block is still returned."""
        from memory_inject.signals import memory_recall

        def bad(sender: Any, *, event: Any) -> None:
            raise RuntimeError("observer bug")

        memory_recall.connect(bad)
        try:
            out = render(FixtureMemory({None: [entry("k", "v", score=0.9)]}))
        finally:
            memory_recall.disconnect(bad)
        assert "- k: v\n" in out.text
        assert "observer bug" in caplog.text


class _CountingStore:
    """Answers every recall with one fact and counts the calls."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        self.calls += 1
        return [entry("fact", "server is prod-3", "core", None)]


class TestAbstention:
    @pytest.mark.parametrize("prompt", ["", "  ", "?", "ok", "thanks!", "👍", "[IMAGE:/a.png]"])
    def test_a_prompt_without_content_words_recalls_nothing(self, prompt: str) -> None:
        """No store call, an empty block and one event that says no_query_terms."""
        store = _CountingStore()
        with recording() as rec:
            out = render(store, prompt)
        assert ("", 0) == (out.text, store.calls)
        assert [(0, True)] == rec.pairs
        assert "no_query_terms" == rec.events[0].abstained

    def test_require_query_terms_off_keeps_time_only_recall(self) -> None:
        """require_query_terms: false restores the spec's recall for an empty prompt."""
        store = _CountingStore()
        with recording() as rec:
            out = render(store, "", config=MemoryInjectConfig(require_query_terms=False))
        assert "- fact: server is prod-3\n" in out.text
        assert 1 == store.calls
        assert rec.events[0].abstained is None

    def test_every_hit_under_the_floor_is_reported_below_relevance(self) -> None:
        """Recalled but nothing relevant enough: an empty block, abstained below_relevance."""
        mem = FixtureMemory({None: [entry("a", "x", score=0.1), entry("b", "y", score=0.3)]})
        with recording() as rec:
            out = render(mem, "deploy target")
        assert "" == out.text
        assert "below_relevance" == rec.events[0].abstained
        assert {"a", "b"} == set(rec.events[0].dropped)

    def test_a_rendered_block_is_no_abstention(self) -> None:
        """One entry over the floor renders; the event's abstained stays None."""
        mem = FixtureMemory({None: [entry("a", "x", score=0.9), entry("b", "y", score=0.1)]})
        with recording() as rec:
            out = render(mem, "deploy target")
        assert ["a"] == [e.key for e in out.entries]
        assert rec.events[0].abstained is None

    def test_a_failed_recall_is_not_an_abstention(self) -> None:
        """A store error is reported as a failure, not as a choice to inject nothing."""
        with recording() as rec:
            render(FixtureMemory(fail=RuntimeError("db gone")), "deploy target")
        assert (False, None) == (rec.events[0].success, rec.events[0].abstained)


class TestInMemoryStoreEndToEnd:
    def test_lexical_recall_renders_the_matching_fact(self) -> None:
        """BM25 recall from InMemoryStore puts the matching fact in the block."""
        store = InMemoryStore()
        store.store("server", "production server is prod-3", timestamp=NOW)
        store.store("tea", "the user drinks green tea", timestamp=NOW)
        out = render(store, "which production server?")
        assert (
            "[Memory context]\n- server: production server is prod-3\n[/Memory context]\n\n"
            == out.text
        )

    def test_async_twin_renders_the_same_bytes(self) -> None:
        """arender_memory_context gives the same block as the sync version."""

        store = InMemoryStore()
        store.store("server", "production server is prod-3", timestamp=NOW)
        sync = render(store, "production server")
        async_ = asyncio.run(arender_memory_context(store, "production server", now=NOW))
        assert sync.text == async_.text != ""


class _DegradingStore:
    """Answers every recall, but reports its embedder failed (a semantic query degraded)."""

    name = "degrading"

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        return [entry("fact", "server is prod-3", "core", 0.9)]

    def answer(self, q: RecallQuery) -> RecallAnswer:
        return RecallAnswer(self.recall(q.query, q.limit), ("embedder_failed: model not loaded",))


class TestTwins:
    def test_embedder_failure_in_a_semantic_plan_query_is_the_same_in_both(self) -> None:
        """A semantic-only plan whose embedder failed: no entries, success False, in both twins."""
        cfg = MemoryInjectConfig(
            recall_plan=RecallPlanConfig(enabled=True, queries=(PlanQueryConfig("semantic", 3),))
        )
        out = render(_DegradingStore(), "prod", config=cfg)
        assert "" == out.text
        assert not out.success
        assert isinstance(out.event, MemoryRecall)
        assert "embedder_failed" in (out.event.error or "")

    def test_a_skip_policy_announces_the_skip_and_touches_no_store(self) -> None:
        """A skip policy sends one memory_skipped with the reason and never recalls."""
        store = FixtureMemory({None: [entry("fact", "server is prod-3", "core", 0.9)]})
        policy = resolve_inject_policy(TurnOrigin.SUB_TURN, has_session=True)
        seen: list[MemorySkipped] = []

        def on_skip(sender: Any, *, event: MemorySkipped) -> None:
            seen.append(event)

        memory_skipped.connect(on_skip)
        try:
            with recording() as rec:
                out = render(
                    store, "prod", policy=policy, sessions=["s1"], turn=TurnMeta("cli", "a", "t1")
                )
        finally:
            memory_skipped.disconnect(on_skip)
        assert out.skipped and out.success and "" == out.text
        assert [] == rec.events
        assert [("sub_turn", "sub_turn", ("s1",), "t1")] == [
            (e.reason, e.origin, e.sessions, e.turn_id) for e in seen
        ]
        assert [] == store.calls

    def test_policy_and_config_together_are_refused(self) -> None:
        """A render given a policy does not also take a config or origin to re-resolve."""
        policy = resolve_inject_policy("cron", has_session=False)
        with pytest.raises(TypeError, match="either 'policy' or 'config'"):
            render(FixtureMemory({}), policy=policy, config=MemoryInjectConfig())

    def test_the_policy_carries_the_origin_config(self) -> None:
        """The render uses the per-origin config the policy resolved (cron: 1 entry)."""
        cfg = MemoryInjectConfig(origins={"cron": {"budget": {"max_entries": 1}}})
        rows = [entry(f"k{i}", f"fact number {i}", "core", 0.9) for i in range(3)]
        policy = resolve_inject_policy("cron", has_session=False, config=cfg)
        assert 1 == policy.config.budget.max_entries
        out = render(FixtureMemory({None: rows}), policy=policy)
        assert 1 == len(out.entries)
        assert "cron" == out.event.origin
