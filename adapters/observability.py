"""Bridges from the ``memory_recall`` and ``memory_skipped`` signals to logging, to
OpenTelemetry and to Prometheus metrics.

All are plain receivers: they observe, never steer, and a bridge that fails
is isolated by the pipeline. None ever sees the raw query; the event only
carries ``query_summary`` (credential-scrubbed, at most 200 characters).
Every turn reaches a bridge: a rendered one as ``memory_recall``, a skipped
one (policy, sub-turn, an unreadable message, a host callback that raised)
as ``memory_skipped``.

Bridges connect strongly (``weak=False``), so ``LoggingBridge().connect()``
keeps working after the expression is gone; ``disconnect()`` or a ``with``
block ends it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from types import TracebackType
from typing import Any, Self

from blinker import ANY

from memory_inject.contract import Memory
from memory_inject.signals import MemoryRecall, MemorySkipped, memory_recall, memory_skipped

__all__ = [
    "LoggingBridge",
    "OpenTelemetryBridge",
    "PrometheusBridge",
    "event_fields",
    "skip_fields",
]

_OTEL_HINT = (
    "OpenTelemetryBridge needs the OpenTelemetry API; install the 'otel' extra: "
    "pip install 'memory-inject[otel]'"
)
_PROMETHEUS_HINT = (
    "PrometheusBridge needs prometheus-client; install the 'metrics' extra: "
    "pip install 'memory-inject[metrics]'"
)


def skip_fields(event: MemorySkipped) -> dict[str, Any]:
    """The structured fields of one skipped turn."""
    return {
        "reason": event.reason,
        "origin": event.origin,
        "channel": event.channel,
        "agent_alias": event.agent_alias,
        "turn_id": event.turn_id,
        "detail": event.detail,
    }


def event_fields(event: MemoryRecall) -> dict[str, Any]:
    """The structured fields of one event (no raw query, no memory contents)."""
    reasons = Counter(reason.split(":", 1)[0] for reason in event.dropped.values())
    return {
        "backend": event.backend,
        "success": event.success,
        "num_entries": event.num_entries,
        "rendered_entries": event.rendered_entries,
        "duration_ms": round(event.duration * 1000.0, 3),
        "channel": event.channel,
        "agent_alias": event.agent_alias,
        "turn_id": event.turn_id,
        "origin": event.origin,
        "partial": event.partial,
        "abstained": event.abstained,
        "prompt_similarity": event.prompt_similarity,
        "error": event.error,
        "dropped": sum(reasons.values()),
        "dropped_reasons": dict(sorted(reasons.items())),
        "query_summary": event.query_summary,
    }


class _Bridge:
    """Connect/disconnect plumbing shared by the bridges."""

    _sender: object = None

    def __call__(self, sender: Memory, *, event: MemoryRecall | MemorySkipped) -> None:
        if isinstance(event, MemorySkipped):
            self.skipped(event)
        else:
            self.recalled(event)

    def recalled(self, event: MemoryRecall) -> None:
        raise NotImplementedError  # pragma: no cover

    def skipped(self, event: MemorySkipped) -> None:
        raise NotImplementedError  # pragma: no cover

    def connect(self, sender: Memory | None = None) -> Self:
        """Start receiving both signals (of ``sender`` only, when given)."""
        self.disconnect()
        self._sender = ANY if sender is None else sender
        memory_recall.connect(self, sender=self._sender, weak=False)
        memory_skipped.connect(self, sender=self._sender, weak=False)
        return self

    def disconnect(self) -> None:
        if self._sender is not None:
            # From every sender: blinker's disconnect(receiver, sender=X) only unpairs X,
            # and a strongly held receiver stayed in the signal's receivers for ever.
            memory_recall.disconnect(self)
            memory_skipped.disconnect(self)
            self._sender = None

    @property
    def connected(self) -> bool:
        return self._sender is not None

    def __enter__(self) -> Self:
        return self if self.connected else self.connect()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.disconnect()


class LoggingBridge(_Bridge):
    """One log record per event, with :func:`event_fields` as ``extra``.

    A failed recall (``success`` false) or a partial one is logged at
    ``WARNING`` or ``level``, whichever is higher.
    """

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        """Log each event on ``logger`` (default ``memory_inject.recall``) at ``level``."""
        self.logger = logger if logger is not None else logging.getLogger("memory_inject.recall")
        self.level = level

    def skipped(self, event: MemorySkipped) -> None:
        """One record per skipped turn; a failure skip (``detail`` set) at WARNING at least."""
        level = self.level if event.detail is None else max(self.level, logging.WARNING)
        if not self.logger.isEnabledFor(level):
            return
        fields = skip_fields(event)
        self.logger.log(
            level,
            "memory_skipped reason=%s origin=%s turn_id=%s%s",
            fields["reason"],
            fields["origin"],
            fields["turn_id"],
            "" if event.detail is None else f" detail={event.detail}",
            extra=fields,
        )

    def recalled(self, event: MemoryRecall) -> None:
        """One record per render; a failed or partial one at WARNING at least."""
        level = (
            self.level if event.success and not event.partial else max(self.level, logging.WARNING)
        )
        if not self.logger.isEnabledFor(level):
            return
        fields = event_fields(event)
        self.logger.log(
            level,
            "memory_recall backend=%s success=%s recalled=%d rendered=%d dropped=%d "
            "duration_ms=%.2f origin=%s turn_id=%s",
            fields["backend"],
            fields["success"],
            fields["num_entries"],
            fields["rendered_entries"],
            fields["dropped"],
            fields["duration_ms"],
            fields["origin"],
            fields["turn_id"],
            extra=fields,
        )


class OpenTelemetryBridge(_Bridge):
    """A ``memory.recall`` span per event, nested under the current span (the turn's).

    The span ends when the event arrives and starts ``event.duration``
    earlier, so it covers the recall. Attributes: ``memory_inject.channel``,
    ``gen_ai.agent.name``, ``memory_inject.turn_id``, ``memory_inject.backend``,
    ``memory_inject.success``, ``memory_inject.num_entries``,
    ``memory_inject.rendered_entries``, ``memory_inject.dropped``,
    ``memory_inject.origin``, ``memory_inject.partial`` and (when the block
    is empty on purpose) ``memory_inject.abstained``; a failed recall
    sets the span status to ERROR with the event's error.
    """

    span_name = "memory.recall"

    def __init__(self, tracer: Any = None) -> None:
        """Use ``tracer`` (default: the global tracer); needs the ``otel`` extra."""
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ImportError(_OTEL_HINT) from exc
        self._trace = trace
        self.tracer = tracer if tracer is not None else trace.get_tracer("memory_inject")

    @staticmethod
    def attributes(event: MemoryRecall) -> dict[str, str | bool | int | float]:
        """The event as OpenTelemetry span attributes (GenAI names where one exists)."""
        fields = event_fields(event)
        names = {
            "channel": "memory_inject.channel",
            "agent_alias": "gen_ai.agent.name",
            "turn_id": "memory_inject.turn_id",
            "backend": "memory_inject.backend",
            "success": "memory_inject.success",
            "num_entries": "memory_inject.num_entries",
            "rendered_entries": "memory_inject.rendered_entries",
            "dropped": "memory_inject.dropped",
            "origin": "memory_inject.origin",
            "partial": "memory_inject.partial",
            "abstained": "memory_inject.abstained",
            "prompt_similarity": "memory_inject.prompt_similarity",
        }
        return {attr: fields[key] for key, attr in names.items() if fields[key] is not None}

    def skipped(self, event: MemorySkipped) -> None:
        """A zero-length ``memory.skipped`` span with the reason; ERROR for a failure skip."""
        now = time.time_ns()
        attributes = {
            f"memory_inject.{k}" if k != "agent_alias" else "gen_ai.agent.name": v
            for k, v in skip_fields(event).items()
            if v is not None and k != "detail"
        }
        span = self.tracer.start_span("memory.skipped", start_time=now, attributes=attributes)
        if event.detail is not None:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.detail))
        span.end(end_time=now)

    def recalled(self, event: MemoryRecall) -> None:
        """A ``memory.recall`` span covering the recall; ERROR for a failed one."""
        end = time.time_ns()
        start = end - int(event.duration * 1e9)
        span = self.tracer.start_span(
            self.span_name, start_time=start, attributes=self.attributes(event)
        )
        if not event.success:
            span.set_status(
                self._trace.Status(self._trace.StatusCode.ERROR, event.error or "recall failed")
            )
        span.end(end_time=end)


class PrometheusBridge(_Bridge):
    """Prometheus metrics of every turn (needs the ``metrics`` extra).

    * ``memory_inject_renders_total{origin, success}``: rendered turns;
    * ``memory_inject_skips_total{origin, reason}``: skipped turns;
    * ``memory_inject_recall_seconds{backend}``: recall time (histogram);
    * ``memory_inject_rendered_entries``: entries in the block (histogram);
    * ``memory_inject_dropped_total{reason}``: entries dropped, by the reason's kind;
    * ``memory_inject_degraded_total{kind}``: degraded lines (``deadline``, ``store_busy``...).

    ``registry`` is where they are registered (default: the client's global registry;
    a test passes its own ``CollectorRegistry``). Labels are bounded: origins, reasons and
    backends are names, never ids.
    """

    def __init__(self, registry: Any = None, namespace: str = "memory_inject") -> None:
        """Create the metrics in ``registry``."""
        try:
            import prometheus_client as prom
        except ImportError as exc:
            raise ImportError(_PROMETHEUS_HINT) from exc
        kw: dict[str, Any] = {"namespace": namespace}
        if registry is not None:
            kw["registry"] = registry
        self.renders = prom.Counter("renders", "Rendered turns", ["origin", "success"], **kw)
        self.skips = prom.Counter("skips", "Skipped turns", ["origin", "reason"], **kw)
        self.recall_seconds = prom.Histogram(
            "recall_seconds", "Recall time of a rendered turn", ["backend"], **kw
        )
        self.rendered_entries = prom.Histogram(
            "rendered_entries",
            "Entries in a turn's block",
            buckets=(0, 1, 2, 4, 8, 16, 32, 64),
            **kw,
        )
        self.dropped = prom.Counter("dropped", "Entries dropped, by reason", ["reason"], **kw)
        self.degraded = prom.Counter("degraded", "Degraded recalls, by kind", ["kind"], **kw)

    def recalled(self, event: MemoryRecall) -> None:
        """Count the render, its recall time, rendered entries, drops and degraded lines."""
        origin = event.origin or "unknown"
        self.renders.labels(origin, "true" if event.success else "false").inc()
        self.recall_seconds.labels(event.backend).observe(event.duration)
        self.rendered_entries.observe(event.rendered_entries)
        for reason, n in Counter(r.split(":", 1)[0] for r in event.dropped.values()).items():
            self.dropped.labels(reason).inc(n)
        for line in event.degraded:
            self.degraded.labels(line.split(":", 1)[0]).inc()

    def skipped(self, event: MemorySkipped) -> None:
        """Count the skipped turn by origin and reason."""
        self.skips.labels(event.origin or "unknown", event.reason).inc()
