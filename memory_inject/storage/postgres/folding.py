"""How PostgreSQL's tsvector reads words: compounds split (schemas 7, 8), accents and
Unicode normal forms folded (schema 9).

Schemas 7 and 8 read :data:`COMPOUND_MARKS` as spaces (:func:`split_compounds`).

Until schema 9 the tsvector was parsed with the built-in ``english`` configuration,
which keeps accents: "café" was not found by "cafe", and a row written decomposed (NFD, as macOS
file names and some keyboards give text) was found by no prompt at all, where SQLite's
``unicode61`` and :class:`~memory_inject.storage.memory.InMemoryStore` fold both.

Schema 9 gives each table its own text search configuration, ``<table>_english``: a
copy of ``english`` whose words pass through the ``unaccent`` dictionary before the
stemmer, and its ``_words`` function composes every text (NFC) before parsing. Every
statement that parses a prompt's words uses the same configuration
(:func:`config_sql`), so a prompt and a row are read alike. ``unaccent`` ships with
PostgreSQL's contrib modules and is a trusted extension (PostgreSQL 13+): a role that
may create objects in the database installs it. Where it cannot be had, the
configuration is a plain copy of ``english`` (accents kept, normal forms still
composed) and the store works as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from memory_inject.storage.postgres import context as _ctx

if TYPE_CHECKING:
    from memory_inject.storage.postgres.schema import TableNames

__all__ = [
    "COMPOUND_MARKS",
    "FOLDED_SINCE",
    "config_sql",
    "fold_words",
    "rebuild_tsv",
    "split_compounds",
]

#: The characters PostgreSQL's parser joins words with into one token (a host, a path
#: "src/auth", a version "v3.0", a number "15.6", an email, a URL, a time "10:00"), read
#: as spaces before parsing (schema 7): SQLite's unicode61 splits there, and a query's
#: words (``\w+``) never hold them, so a word inside such a token could not be found.
#: Schema 8 adds "-": "prod-3" was "prod" and a signed "-3" (0.33 for the README's example).
COMPOUND_MARKS = "./@:-"


def split_compounds(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schemas 7 and 8: the tsvector parses every text with :data:`COMPOUND_MARKS` as
    spaces, computed again for every row (its GIN index built again)."""
    rebuild_tsv(conn, names)


def rebuild_tsv(
    conn: psycopg.Connection[Any], names: TableNames, *, text: str = "$1", config: str = "'english'"
) -> None:
    """The ``_words`` function (``text``, SQL of its argument ``$1``, with
    :data:`COMPOUND_MARKS` read as spaces) and the tsvector over it in ``config``
    (:func:`tsv_expression`), computed again for every row, its GIN index built again."""
    t = names.ident()
    marks = sql.Literal(COMPOUND_MARKS)
    statements = [
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {fn}(text) RETURNS text LANGUAGE sql "
            "IMMUTABLE PARALLEL SAFE AS $$ SELECT translate({text}, {marks}, {spaces}) $$"
        ).format(
            fn=names.ident("_words"),
            text=sql.SQL(text),
            marks=marks,
            spaces=sql.Literal(" " * len(COMPOUND_MARKS)),
        ),
        sql.SQL("ALTER TABLE {t} DROP COLUMN tsv").format(t=t),
        sql.SQL(
            "ALTER TABLE {t} ADD COLUMN tsv tsvector GENERATED ALWAYS AS ({tsv}) STORED"
        ).format(t=t, tsv=_ctx.tsv_expression(names, split=True, config=config)),
        sql.SQL("ALTER TABLE {t} ALTER COLUMN tsv SET STORAGE MAIN").format(t=t),
        sql.SQL("CREATE INDEX {idx} ON {t} USING gin (tsv)").format(
            idx=names.ident("_tsv_idx"), t=t
        ),
    ]
    for stmt in statements:
        conn.execute(stmt)


#: The first schema whose tsvector is parsed with the table's own configuration.
FOLDED_SINCE = 9


def config_sql(names: TableNames, version: int) -> str:
    """The text search configuration a table at schema ``version`` is parsed with, as a
    SQL string literal (cast it to ``regconfig``). The table name is a plain identifier
    (``TableNames`` checks it), quoted so that its case is kept."""
    if version < FOLDED_SINCE:
        return "'english'"
    return f"'\"{names.table}_english\"'"


def _unaccent(conn: psycopg.Connection[Any]) -> sql.Identifier | None:
    """The ``unaccent`` dictionary, installing its extension if it is not yet; ``None``
    when the server does not have it or this role may not install it."""
    find = (
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n "
        "ON n.oid = e.extnamespace WHERE e.extname = 'unaccent'"
    )
    row = conn.execute(find).fetchone()
    if row is None:
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
        except psycopg.Error:
            return None
        row = conn.execute(find).fetchone()
    return None if row is None else sql.Identifier(row[0], "unaccent")


def fold_words(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 9: the table's configuration (``unaccent`` then the English stemmer), every
    text composed before parsing, the tsvector computed again for every row."""
    config = names.ident("_english")
    dictionary = _unaccent(conn)
    conn.execute(sql.SQL("DROP TEXT SEARCH CONFIGURATION IF EXISTS {}").format(config))
    conn.execute(
        sql.SQL("CREATE TEXT SEARCH CONFIGURATION {} (COPY = pg_catalog.english)").format(config)
    )
    if dictionary is not None:
        conn.execute(
            sql.SQL(
                "ALTER TEXT SEARCH CONFIGURATION {} ALTER MAPPING FOR hword, hword_part, word "
                "WITH {}, pg_catalog.english_stem"
            ).format(config, dictionary)
        )
    row = conn.execute("SELECT current_setting('server_encoding') = 'UTF8'").fetchone()
    # normalize() needs a UTF8 server; another encoding holds no decomposed letters to compose.
    text = "normalize($1, NFC)" if row and row[0] else "$1"
    rebuild_tsv(conn, names, text=text, config=config_sql(names, FOLDED_SINCE))
