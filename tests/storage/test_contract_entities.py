"""The recall-plan capabilities every store has: ``recall_where`` and ``known_entities``.

One contract for in memory, SQLite and PostgreSQL (issue 12, item 9): a
founder-os plan's company and plugin queries are answered by the store's own
filter on every backend, never skipped nor searched among a window of recent
rows, and the status filter applies before the limit (item 7).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_inject.contract import SupportsEntities, SupportsFilteredRecall, supports

Factory = Callable[..., Any]
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def keys(entries: Sequence[Any]) -> list[str]:
    return [e.key for e in entries]


def seed(store: Any) -> None:
    """Acme rows of every status, a plugin's rows, and 250 newer unrelated rows."""
    rows = [
        ("acme-cand-1", "company:acme-corp", None, "candidate", 0.95),
        ("acme-cand-2", "company:acme-corp", None, "candidate", 0.95),
        ("acme-cand-3", "company:acme-corp", None, "candidate", 0.95),
        ("acme-net30", "company:acme-corp", None, "confirmed", 0.90),
        ("acme-sarah", "company:acme-corp", None, "applied", 0.72),
        ("acme-none", "company:acme-corp", None, "confirmed", None),
        ("globex-note", "company:globex", None, "confirmed", 0.99),
        ("p09-cand", None, "P09", "candidate", 0.99),
        ("p09-bullets", None, "P09", "confirmed", 0.80),
        ("p09-dismissed", None, "P09", "dismissed", 0.99),
    ]
    for i, (key, entity, source, status, conf) in enumerate(rows):
        store.store(
            key,
            f"memory {key}",
            "fact",
            timestamp=T0 + timedelta(minutes=i),
            entity_ids=[entity] if entity else [],
            source=source,
            status=status,
            confidence=conf,
        )
    for i in range(250):  # newer than every plugin row: a recent-rows window misses P09
        store.store(f"filler-{i}", f"unrelated note {i}", "fact", timestamp=T0 + timedelta(days=1))


class TestRecallWhereContract:
    def test_every_store_answers_entity_and_plugin_queries(self, store_factory: Factory) -> None:
        """Entity and source queries keep only allowed statuses before the limit, best first."""
        s = store_factory()
        assert all(supports(s, p) for p in (SupportsFilteredRecall, SupportsEntities))
        seed(s)
        ok = ("confirmed", "applied")
        assert (
            ["acme-net30", "acme-sarah", "acme-none"],
            ["p09-bullets"],
            ["acme-cand-1", "acme-cand-2", "acme-cand-3"],
            ["p09-cand", "p09-dismissed"],
        ) == (
            sorted_by_conf(s.recall_where(None, 3, entity_id="company:acme-corp", statuses=ok)),
            keys(s.recall_where(None, 2, source="P09", statuses=ok)),
            sorted(keys(s.recall_where(None, 3, entity_id="company:acme-corp"))),
            sorted(keys(s.recall_where(None, 2, source="P09"))),
        )
        assert {"acme corp": "company:acme-corp", "globex": "company:globex"} == dict(
            s.known_entities()
        )

    def test_confidence_orders_and_no_confidence_sorts_last(self, store_factory: Factory) -> None:
        """Rows come best confidence first, a row without confidence after every other."""
        s = store_factory()
        seed(s)
        got = s.recall_where(None, 10, entity_id="company:acme-corp", statuses=("confirmed",))
        assert ["acme-net30", "acme-none"] == keys(got)
        assert [None, None] == [e.score for e in got]

    def test_empty_statuses_match_nothing(self, store_factory: Factory) -> None:
        """An empty status list keeps no row at all."""
        s = store_factory()
        seed(s)
        assert [] == list(s.recall_where(None, 5, source="P09", statuses=()))

    def test_ranked_query_filters_status_before_its_limit(self, store_factory: Factory) -> None:
        """A ranked query restricted to statuses is not filled by rows of other statuses."""
        s = store_factory()
        for i in range(3):
            s.store(f"cand-{i}", "invoice terms for acme invoice", "fact", status="candidate")
        s.store("conf", "invoice terms", "fact", status="confirmed")
        got = s.recall_where("invoice terms", 2, mode="lexical", statuses=("confirmed",))
        assert ["conf"] == keys(got)


def sorted_by_conf(entries: Sequence[Any]) -> list[str]:
    """The keys, checking on the way that confidence never rises down the list."""
    confs = [e.extra.get("confidence") for e in entries]
    known = [c for c in confs if c is not None]
    assert known == sorted(known, reverse=True)
    assert confs[len(known) :] == [None] * (len(confs) - len(known))
    return keys(entries)
