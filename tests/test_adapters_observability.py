"""Logging and OpenTelemetry bridges on memory_recall (adapters/observability.py)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from memory_inject import AgentConfig

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import (
        ChannelAdapter,
        InboundMessage,
        LoggingBridge,
        MemoryLoop,
        OpenTelemetryBridge,
    )
else:
    from memory_inject.adapters import (
        ChannelAdapter,
        InboundMessage,
        LoggingBridge,
        MemoryLoop,
        OpenTelemetryBridge,
    )
from memory_inject.signals import memory_recall, memory_skipped
from memory_inject.storage.sqlite import SQLiteStore
from tests._twins import call, twin  # noqa: F401

LEAKY_VALUE = "sk-abcdefghijklmnop1234"
QUERY = f"where do production deploys go? api_key={LEAKY_VALUE}"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    s.store("deploy_target", "Production deploys go to prod-3 (eu-west-1).", "core")
    s.store("old_chat", "We talked about production deploys.", "conversation")
    yield s
    s.close()


def one_turn(store: SQLiteStore, text: str = QUERY) -> None:
    call(
        MemoryLoop(store, AgentConfig(agent="alice")),
        "prepare",
        [{"role": "user", "content": text}],
        turn_id="t1",
    )


@pytest.fixture
def otel() -> tuple[InMemorySpanExporter, TracerProvider]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


class TestLoggingBridge:
    def test_one_structured_record_per_event(
        self, store: SQLiteStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Each render logs one record whose extra fields describe the event."""
        caplog.set_level(logging.INFO, logger="memory_inject.recall")
        with LoggingBridge():
            one_turn(store, "where do production deploys go?")
        [record] = [r for r in caplog.records if r.name == "memory_inject.recall"]
        assert logging.INFO == record.levelno
        got = {
            k: getattr(record, k)
            for k in (
                "backend",
                "success",
                "num_entries",
                "rendered_entries",
                "channel",
                "agent_alias",
                "turn_id",
                "origin",
                "partial",
                "abstained",
                "error",
                "dropped",
                "dropped_reasons",
            )
        }
        assert {
            "backend": "sqlite",
            "success": True,
            "num_entries": 2,
            "rendered_entries": 1,
            "channel": "cli",
            "agent_alias": "alice",
            "turn_id": "t1",
            "origin": "interactive",
            "partial": False,
            "abstained": None,
            "error": None,
            "dropped": 1,
            "dropped_reasons": {"conversation_excluded": 1},
        } == got
        assert isinstance(vars(record)["duration_ms"], float)

    def test_the_raw_query_never_reaches_the_log(
        self, store: SQLiteStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Only the scrubbed query summary is logged, never the secret in the raw text."""
        caplog.set_level(logging.INFO, logger="memory_inject.recall")
        with LoggingBridge():
            one_turn(store)
        [record] = [r for r in caplog.records if r.name == "memory_inject.recall"]
        assert LEAKY_VALUE not in record.getMessage()
        assert all(LEAKY_VALUE not in str(v) for v in vars(record).values())
        assert "api_key=sk-a*[REDACTED]" in vars(record)["query_summary"]

    def test_failures_log_at_warning(
        self, store: SQLiteStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A failed recall is logged at WARNING even when the bridge's level is INFO."""
        caplog.set_level(logging.INFO, logger="memory_inject.recall")
        store.close()
        with LoggingBridge():
            one_turn(store)
        [record] = [r for r in caplog.records if r.name == "memory_inject.recall"]
        assert (logging.WARNING, False) == (record.levelno, vars(record)["success"])
        assert "closed" in vars(record)["error"]

    def test_disconnect_stops_the_records(
        self, store: SQLiteStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """After disconnect() nothing is logged; connect() returns the bridge."""
        caplog.set_level(logging.INFO, logger="memory_inject.recall")
        logger = logging.getLogger("memory_inject.recall")
        bridge = LoggingBridge(logger, logging.INFO).connect()
        assert bridge.connected
        one_turn(store)
        bridge.disconnect()
        one_turn(store)
        assert 1 == len([r for r in caplog.records if r.name == "memory_inject.recall"])

    @pytest.mark.parametrize("per_store", [False, True])
    def test_a_disconnected_bridge_is_let_go(self, store: SQLiteStore, per_store: bool) -> None:
        """A bridge connected for one store and disconnected stayed among the signals'
        receivers for ever (blinker unpairs only that sender): 5,000 per-tenant bridges
        stayed alive, and a render with no listener paid for them (twenty-eighth round)."""
        before = (dict(memory_recall.receivers), dict(memory_skipped.receivers))
        for _ in range(3):
            with LoggingBridge().connect(store if per_store else None) as bridge:
                assert bridge.connected
            assert not bridge.connected
        assert before == (dict(memory_recall.receivers), dict(memory_skipped.receivers))

    def test_a_bridge_on_one_store_ignores_the_others(
        self, store: SQLiteStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """connect(sender=store) hears only that store's renders."""
        caplog.set_level(logging.INFO, logger="memory_inject.recall")
        with SQLiteStore(tmp_path / "other.db") as other, LoggingBridge().connect(store):
            one_turn(other)
            one_turn(store)
        assert 1 == len([r for r in caplog.records if r.name == "memory_inject.recall"])


class TestOpenTelemetryBridge:
    def test_a_memory_recall_span_with_the_turn_attributes(
        self, store: SQLiteStore, otel: tuple[InMemorySpanExporter, TracerProvider]
    ) -> None:
        """Each event becomes a memory.recall span under the turn's span, with its attributes."""
        exporter, provider = otel
        tracer = provider.get_tracer("test")
        adapter = ChannelAdapter(store, AgentConfig(agent="bot"), channel_name="telegram")
        msg = InboundMessage(
            channel="telegram",
            sender="alice",
            text="production deploys?",
            reply_target="alice",
            message_id="1",
            history_key="telegram_alice",
        )
        with OpenTelemetryBridge(tracer), tracer.start_as_current_span("turn") as turn:
            call(adapter, "handle", msg, turn_id="m1")
        spans = {s.name: s for s in exporter.get_finished_spans()}
        span = spans["memory.recall"]
        assert turn.get_span_context().span_id == span.parent.span_id  # type: ignore[union-attr]
        assert {
            "memory_inject.channel": "telegram",
            "gen_ai.agent.name": "bot",
            "memory_inject.turn_id": "m1",
            "memory_inject.backend": "sqlite",
            "memory_inject.success": True,
            "memory_inject.num_entries": 1,
            "memory_inject.rendered_entries": 1,
            "memory_inject.dropped": 0,
            "memory_inject.origin": "channel",
            "memory_inject.partial": False,
        } == dict(span.attributes or {})
        assert span.start_time <= span.end_time  # type: ignore[operator]

    def test_an_abstaining_render_carries_the_reason(
        self, store: SQLiteStore, otel: tuple[InMemorySpanExporter, TracerProvider]
    ) -> None:
        """A contentless prompt's span says memory_inject.abstained = no_query_terms."""
        exporter, provider = otel
        with OpenTelemetryBridge(provider.get_tracer("test")):
            one_turn(store, "thanks!")
        [span] = [s for s in exporter.get_finished_spans() if s.name == "memory.recall"]
        attributes = dict(span.attributes or {})
        assert "no_query_terms" == attributes["memory_inject.abstained"]
        assert 0 == attributes["memory_inject.num_entries"]

    def test_a_failed_recall_sets_the_error_status(
        self, store: SQLiteStore, otel: tuple[InMemorySpanExporter, TracerProvider]
    ) -> None:
        """success False marks the span ERROR with the event's error."""
        exporter, provider = otel
        store.close()
        with OpenTelemetryBridge(provider.get_tracer("test")):
            one_turn(store)
        [span] = exporter.get_finished_spans()
        assert StatusCode.ERROR == span.status.status_code
        assert "closed" in (span.status.description or "")

    def test_without_opentelemetry_the_error_names_the_extra(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A missing opentelemetry package is an ImportError telling which extra to install."""
        monkeypatch.setitem(sys.modules, "opentelemetry", None)
        with pytest.raises(ImportError, match=r"memory-inject\[otel\]"):
            OpenTelemetryBridge()
