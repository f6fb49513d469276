"""A word is one word in either Unicode normal form and, on every engine, with or
without its accents.

SQLite's unicode61 folds accents and composed/decomposed letters, and ``InMemoryStore``
folds them the same way. PostgreSQL's tsvector was parsed with the built-in 'english'
configuration, which keeps both apart: "cafe" did not find "café", and a row written
decomposed (NFD) was found by no prompt. Schema 9 parses it with the table's own
configuration (``unaccent`` before the stemmer) over composed text. A prompt typed
decomposed was also split at its combining marks on every engine ("zu\u0308rich" read
as "zu" and "rich"): the prompt is composed before its words are read.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any, Literal

import psycopg
import pytest

from memory_inject.storage import fusion
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import folding as pg_folding
from tests.storage import _pg_backend as pgb

Factory = Callable[..., Any]
Form = Literal["NFC", "NFD"]

OFFICE = "Our office is in Zürich, near the Bahnhofstraße café."
PROMPTS = [
    "where is the office in zürich?",
    "zürich",
    "the café",
    "zurich",
    "cafe",
    "bahnhofstraße",
]


def _keys(store: Any, prompt: str) -> list[str]:
    return [e.key for e in store.recall(prompt, 5)]


@pytest.mark.parametrize("content_form", ["NFC", "NFD"])
@pytest.mark.parametrize("query_form", ["NFC", "NFD"])
def test_a_word_in_either_normal_form_and_without_accents_finds_the_row(
    store_factory: Factory, content_form: Form, query_form: Form
) -> None:
    store = store_factory()
    store.store("office", unicodedata.normalize(content_form, OFFICE))
    store.store("other", "The plants need water on Fridays.")
    for prompt in PROMPTS:
        assert ["office"] == _keys(store, unicodedata.normalize(query_form, prompt)), prompt


def test_a_decomposed_prompt_is_read_as_its_composed_words() -> None:
    decomposed = unicodedata.normalize("NFD", "what about zürich and the café?")
    assert fusion.content_words(decomposed) == [("zürich", False), ("café", False)]


@pytest.mark.postgres
def test_a_schema_8_table_is_folded_when_opened(
    pg_scratch_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows the previous schema wrote are found without their accents once the table is
    opened by this library (its tsvector computed again under the table's configuration)."""
    with monkeypatch.context() as m:
        pgb.old_schema(m, 8)
        with PostgresStore(pg_scratch_dsn) as old:
            old.store("office", OFFICE)
            old.store("decomposed", unicodedata.normalize("NFD", "The Rösti recipe is Omi's."))
            assert _keys(old, "zurich") == []  # schema 8 kept the accent
            assert _keys(old, "rösti") == []  # and the decomposed row apart
    with PostgresStore(pg_scratch_dsn) as store:
        assert _keys(store, "zurich") == ["office"]
        assert _keys(store, "rösti recipe") == ["decomposed"]
        assert _keys(store, "rosti") == ["decomposed"]
    with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM memories_schema_version")]
        [(config,)] = conn.execute("SELECT cfgname FROM pg_ts_config WHERE cfgname LIKE 'mem%'")
    assert pg_folding.FOLDED_SINCE in versions
    assert config == "memories_english"


@pytest.mark.postgres
def test_a_table_named_in_capitals_gets_its_own_configuration(pg_scratch_dsn: str) -> None:
    """The configuration's name keeps the table's case (an unquoted name would be folded
    to lower case and not found)."""
    with PostgresStore(pg_scratch_dsn, table="Memories_Team") as store:
        store.store("office", OFFICE)
        assert _keys(store, "zurich cafe") == ["office"]


@pytest.mark.postgres
def test_without_unaccent_the_table_keeps_accents_but_composes_words(
    pg_scratch_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server without the ``unaccent`` extension (or a role that may not install it)
    still opens the table: accents are kept, as before schema 9, and a decomposed row is
    found by its composed words."""
    monkeypatch.setattr(pg_folding, "_unaccent", lambda conn: None)
    with PostgresStore(pg_scratch_dsn) as store:
        store.store("office", OFFICE)
        store.store("decomposed", unicodedata.normalize("NFD", "The Rösti recipe is Omi's."))
        assert _keys(store, "zürich") == ["office"]
        assert _keys(store, "zurich") == []
        assert _keys(store, "rösti") == ["decomposed"]


PLURALS = {
    "gpus": "The training box has four GPUs and two SSDs.",
    "kpi": "Our main KPI is weekly active users.",
    "menu": "The lunch menu changes on Mondays.",
}
PLURAL_PROMPTS = {
    "how many gpu does the training box have?": "gpus",
    "which ssd is in the training box?": "gpus",
    "what are our kpis?": "kpi",
    "when do the menus change?": "menu",
}


def _plural_hits(store: Any) -> dict[str, list[tuple[str, float]]]:
    for key, content in PLURALS.items():
        store.store(key, content)
    return {p: [(e.key, round(e.score, 2)) for e in store.recall(p, 3)] for p in PLURAL_PROMPTS}


def test_a_plural_is_one_word_on_sqlite(engine_store: Callable[[str], Any]) -> None:
    hits = _plural_hits(engine_store("sqlite"))
    assert {p: [k for k, _ in found] for p, found in hits.items()} == {
        p: [key] for p, key in PLURAL_PROMPTS.items()
    }
    assert all(score >= 0.4 for found in hits.values() for _, score in found)


@pytest.mark.postgres
def test_a_plural_the_english_stemmer_keeps_is_found_as_on_sqlite(
    engine_store: Callable[[str], Any],
) -> None:
    """PostgreSQL's stemmer (Porter2) keeps the "s" of "GPUs", "SSDs", "KPIs" and "menus",
    which SQLite's Porter stems away: "what are our kpis?" found nothing there. The other
    number of such a word is asked as one of its spellings, and both engines score alike."""
    assert _plural_hits(engine_store("postgres")) == _plural_hits(engine_store("sqlite"))


def test_a_word_with_a_dotted_capital_i_is_one_word(store_factory: Factory) -> None:
    """``"İzmir".lower()`` is "i", a combining dot and "zmir": the prompt's word was split
    at the dot and found only by the substring fallback (0.6, under a 0.4-floor's margin
    only by chance), its own word."""
    store = store_factory()
    store.store("city", "Our office is in İzmir.")
    store.store("other", "The plants need water on Fridays.")
    for prompt in ("İzmir", "where is the İZMİR office?", "izmir"):
        assert [(e.key, e.score) for e in store.recall(prompt, 3)] == [("city", 1.0)], prompt
