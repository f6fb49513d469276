"""founder-os's query A on a store without an embedder searches by keywords (twenty-ninth
round).

``preset: founder_os`` sets no embedder, and the Python example of governance.md uses it
as it is. On SQLite and PostgreSQL the semantic query was then dropped on every turn, an
``error`` on each event, so a memory only the task's words matched was never shown; the
in-memory store answered it by keywords. A store without an embedder is keyword-only,
for the semantic query too, on every store alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory_inject import MemoryRecall, render_memory_context
from memory_inject.config import parse_agent_config

FOUNDER_OS = parse_agent_config({"agent": "f", "memory": {"preset": "founder_os"}}).memory


def test_query_a_finds_the_tasks_words(store_factory: Callable[..., Any]) -> None:
    store = store_factory()
    store.store("acme_terms", "Acme pays invoices on net-30 terms.", "fact", status="confirmed")
    store.store("globex", "Globex likes newsletters.", "fact", status="confirmed")
    store.store("draft", "Acme invoices are drafted by Kim.", "fact", status="candidate")
    result = render_memory_context(
        store, "what are acme invoices terms", config=FOUNDER_OS, source="P11"
    )
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert (True, None, ()) == (event.success, event.error, event.degraded)
    assert ("acme_terms",) == event.rendered_keys  # a candidate is never shown
