"""Schema 12 of the SQLite store: the keyword index holds live rows only (issue 29).

A forgotten row stays in ``memories`` (an export still has it) but, until
schema 11, it stayed in ``memories_fts`` too: its words counted in every
word's document frequency, the row count and the average length, so the score
of another row for a prompt naming the forgotten words told that they had been
written ("office sunflower22" scored 0.5, "office sunflower21" 0.4, a store that
never held the password 0.4 for both). From schema 12 the index's external
content is the view ``memories_live`` (the live rows), the triggers index a row
while it is live (a forget removes its entry, a write that revives it adds it),
and FTS5's ``rebuild`` and ``integrity-check`` read the same rows.
:func:`live_index` builds the migration's statements from :mod:`.ddl`'s
constants.
"""

from __future__ import annotations

import sqlite3

from memory_inject.storage.sqlite.ddl_context import CTX_STANDALONE_ASSIGN, DAY_WORDS

__all__ = ["TOKENIZE", "live_index"]

_MARKS_TOKENIZE = "'porter unicode61 categories ''L* N* Co Mc Mn'''"


def _tokenize() -> str:
    """The marks tokenizer where this SQLite's unicode61 takes ``categories``, else the
    default one (the marks stay separators there, as before schema 13)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize={_MARKS_TOKENIZE})")
    except sqlite3.Error:
        return "'porter unicode61'"
    finally:
        conn.close()
    return _MARKS_TOKENIZE


#: The index's tokenizer from schema 13: combining marks (Mn, Mc) are part of a word, so
#: "बेटी" ("daughter") is one token, not "ब" and "ट" (unicode61's default categories are
#: ``L* N* Co``). Latin accents typed apart (NFD) still fold: unicode61 drops a diacritic
#: inside a token, as before. The SQL string literal, quotes included; the default
#: tokenizer where this SQLite's unicode61 has no ``categories`` option.
TOKENIZE = _tokenize()


def live_index(
    columns: str, scope_token: str, tokenize: str = "'porter unicode61'"
) -> tuple[str, ...]:
    """The statements of schema 12 for the index's ``columns`` and the ``scope_token``
    expression (over ``{row}``); the triggers compute context as schema 11's do. Schema
    13 is the same index built again with the :data:`TOKENIZE` tokenizer."""
    old = ", ".join(f"old.{c.strip()}" for c in columns.split(","))
    return (
        "DROP TRIGGER memories_fts_insert",
        "DROP TRIGGER memories_fts_delete",
        "DROP TRIGGER memories_fts_update",
        "DROP TABLE memories_fts",
        "DROP VIEW IF EXISTS memories_live",  # a file set back to an older version by hand
        f"CREATE VIEW memories_live AS SELECT rid, {columns} FROM memories "  # noqa: S608
        "WHERE deleted_at IS NULL",
        f"CREATE VIRTUAL TABLE memories_fts USING fts5({columns}, content='memories_live', "
        f"content_rowid='rid', tokenize={tokenize})",
        f"""CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            UPDATE memories SET {CTX_STANDALONE_ASSIGN.format(row="new")},
                ctx_scope = {scope_token.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, {columns})
            SELECT rid, {columns} FROM memories WHERE rid = new.rid AND deleted_at IS NULL;
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories
            WHEN old.deleted_at IS NULL BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, {columns})
            VALUES ('delete', old.rid, {old});
        END""",  # noqa: S608 - built from constants
        # A forget (deleted_at set) takes the entry out; a revive puts the row's in.
        f"""CREATE TRIGGER memories_fts_update
            AFTER UPDATE OF key, content, tags, timestamp, session_id, category, deleted_at
            ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, {columns})
            SELECT 'delete', old.rid, {old} WHERE old.deleted_at IS NULL;
            UPDATE memories SET ctx_day = {DAY_WORDS.format(row="new")},
                ctx_scope = {scope_token.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, {columns})
            SELECT rid, {columns} FROM memories WHERE rid = new.rid AND deleted_at IS NULL;
        END""",  # noqa: S608 - built from constants
        "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
    )
