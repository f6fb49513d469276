"""Log every recall (LoggingBridge) and trace it (OpenTelemetryBridge, extra `otel`).

python examples/observability.py
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

from memory_inject import AgentConfig
from memory_inject.adapters import LoggingBridge, MemoryLoop
from memory_inject.storage.sqlite import SQLiteStore


class FieldsFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return (
            f"{super().format(record)} | rendered_entries={record.rendered_entries} "
            f"dropped_reasons={record.dropped_reasons} query={record.query_summary!r}"
        )


def main() -> int:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(FieldsFormatter("%(levelname)s %(name)s %(message)s"))
    logging.getLogger("memory_inject.recall").addHandler(handler)
    logging.getLogger("memory_inject.recall").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "memory.db")
        store.store("deploy_target", "Production deploys go to prod-3.", "core")
        loop = MemoryLoop(store, AgentConfig(agent="alice"))
        with LoggingBridge():
            loop.prepare([{"role": "user", "content": "deploy to prod with token=abcd1234efgh"}])
        try:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )
        except ImportError:
            print("opentelemetry-sdk is not installed: skipping the tracing half")
        else:
            from memory_inject.adapters import OpenTelemetryBridge

            provider, exporter = TracerProvider(), InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            tracer = provider.get_tracer("example")
            with OpenTelemetryBridge(tracer), tracer.start_as_current_span("agent.turn"):
                loop.prepare([{"role": "user", "content": "where do deploys go?"}])
            for span in exporter.get_finished_spans():
                print("span", span.name, dict(span.attributes or {}))
        store.close()
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
