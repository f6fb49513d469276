"""A word inside a host, a path, a version, an email or a URL is found on both engines.

PostgreSQL's parser keeps "staging.fernhill.internal", "tests/billing", "v3.0" and
"15.6" as one token each, while SQLite's unicode61 splits them into words, and a query's
words (``\\w+``) never hold a dot or a slash: on PostgreSQL "billing" could not find
"tests/billing/". Schema 7 parses the tsvector's texts with ``COMPOUND_MARKS`` read as
spaces (schema 8 adds the hyphen: "prod-3" was "prod" and the signed integer "-3"),
so both engines find the same rows (benchmarks/facts.py --prompts
benchmarks/facts_heldout3.json --backend postgres: 27 -> 30 of 50, as SQLite).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from memory_inject.storage.calibration import SUBSTRING_WEIGHT
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import folding as pg_folding
from memory_inject.storage.postgres import migrations as pg_migrations
from memory_inject.storage.postgres.folding import COMPOUND_MARKS
from tests.storage import _pg_backend as pgb

ENGINES = ["sqlite", "postgres"]
FACTS = {
    "host": "Staging runs on staging.fernhill.internal in eu-west-1.",
    "path": "The suite lives in services/quartz/tests and runs with make.",
    "version": "Payments v3.0 goes live in January.",
    "number": "Production is Postgres 15.6 on RDS.",
    "email": "Send the invoices to ledger@northwind.example today.",
    "url": "The runbook is at https://wiki.example.org/payments/oncall for now.",
    "time": "Standup is at 09:30 on Google Meet.",
    "hyphen": "Production deploys go to prod-3.",
    "covid": "She had COVID-19 in March.",
}
#: Words found only inside each fact's compound, and the fact.
ASKED = [
    ("fernhill", "host"),
    ("quartz", "path"),
    ("v3", "version"),
    ("15", "number"),
    ("northwind", "email"),
    ("oncall", "url"),
    ("09", "time"),
    ("prod-3", "hyphen"),
    ("covid-19", "covid"),
]


def _found(store: Any, prompt: str) -> list[tuple[str, float]]:
    return [(e.key, round(e.score or 0.0, 6)) for e in store.recall(prompt, 3)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("prompt", "key"), ASKED, ids=[k for _, k in ASKED])
def test_a_word_inside_a_compound_is_found(
    engine_store: Callable[[str], Any], engine: str, prompt: str, key: str
) -> None:
    store = engine_store(engine)
    for k, content in FACTS.items():
        store.store(k, content)
    # The whole query held as a word: 1.0, not the substring fallback's 0.6.
    assert _found(store, prompt)[:1] == [(key, 1.0)]


def test_the_marks_are_what_postgres_joins_words_with() -> None:
    assert sorted(COMPOUND_MARKS) == ["-", ".", "/", ":", "@"]


@pytest.mark.postgres
def test_a_schema_7_table_reads_hyphens_as_spaces(
    pg_scratch_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 7 kept "prod-3" as "prod" and "-3": "which server is prod-3?" scored 0.33 on
    PostgreSQL against the README's own example, 1.0 on SQLite. Opened again, the table
    reads it as SQLite does."""
    with monkeypatch.context() as m:
        pgb.old_schema(m, 7)
        m.setattr(pg_folding, "COMPOUND_MARKS", "./@:")  # schema 7's marks
        with PostgresStore(pg_scratch_dsn) as old:
            old.store("hyphen", FACTS["hyphen"])
            assert _found(old, "prod-3")[0][1] < 1.0  # "3" never matched "-3"
    with PostgresStore(pg_scratch_dsn) as store:
        assert _found(store, "prod-3") == [("hyphen", 1.0)]


@pytest.mark.postgres
def test_a_schema_6_table_is_parsed_again(
    pg_scratch_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows the previous schema wrote are found by the words inside their compounds once
    the table is opened (the tsvector is computed again for every row), and the
    tsvector is still kept in the row (schema 4)."""
    with monkeypatch.context() as m:
        pgb.old_schema(m, 6)
        with PostgresStore(pg_scratch_dsn) as old:
            old.store("path", FACTS["path"])
            # What schema 6 found: no word, only the substring fallback.
            assert _found(old, "quartz") == [("path", SUBSTRING_WEIGHT)]
    with PostgresStore(pg_scratch_dsn) as store:
        assert _found(store, "quartz") == [("path", 1.0)]
        store.store("host", FACTS["host"])
        assert _found(store, "fernhill") == [("host", 1.0)]
    with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM memories_schema_version")]
        [(storage,)] = conn.execute(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = 'memories'::regclass "
            "AND attname = 'tsv'"
        ).fetchall()
    assert sorted(versions) == [v for v, _, _ in pg_migrations.MIGRATIONS]
    assert storage == "m"  # still kept in the row (schema 4)
