"""The SQLite store's schema as statements: the tables, the full-text index, its triggers.

:data:`MIGRATIONS` brings a file from each version to the next (never edit a
released entry: append one); ``memories_fts`` is an external-content FTS5
index over the record's text, two neighbours' text, its day in words and its
scope token, kept by triggers; ``memories_log`` is the change log the
readers' caches follow. The scope token's rules are here twice, in SQL for
the triggers and in Python (:func:`scope_token`) for recall's MATCH clause.
:mod:`.migrations` applies these statements.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject.storage.sqlite.ddl_context import (
    CTX_ASSIGN,
    CTX_EVENT_ASSIGN,
    CTX_NEAR_ASSIGN,
    CTX_STANDALONE_ASSIGN,
    DAY_WORDS,
    OWN_COLUMNS,
    OWN_MATCH,
    own_match,
)
from memory_inject.storage.sqlite.ddl_live import TOKENIZE, live_index

__all__ = [
    "FTS_COLUMNS",
    "LOG_KEEP",
    "MIGRATIONS",
    "OWN_COLUMNS",
    "OWN_MATCH",
    "SCHEMA_VERSION",
    "own_match",
    "scope_match",
    "scope_token",
    "scope_tokens",
    "tokens_match",
]


# The row's scope as one index token: "s" + hex of its session id (first 100
# characters), or "g" + hex of its category for a sessionless row. Recall adds
# the scope's tokens to MATCH so FTS5 intersects posting lists instead of
# ranking every match and joining it to its row (see ``scope_match``). A token
# is only a pre-filter: the SQL scope still decides, so two ids that stem alike
# can never leak into each other's recall.
_SCOPE_TOKEN = (
    "(CASE WHEN {row}.session_id IS NOT NULL "  # noqa: S105 - SQL, not a secret
    "THEN 's' || hex(substr({row}.session_id, 1, 100)) "
    "ELSE 'g' || hex(substr({row}.category, 1, 100)) END)"
)
FTS_COLUMNS = "key, content, tags, ctx_prev, ctx_prev2, ctx_day, ctx_scope"
#: How many entries of ``memories_log`` (schema 6) are kept: a reader's cache
#: more changes behind than this rebuilds instead of re-reading the changed rows.
LOG_KEEP = 4096


def _fts_insert_trigger(assign: str) -> str:
    """The insert trigger of schema 4 on: the row's context (``assign`` over ``{row}``) and
    scope token are set, then the row is indexed."""
    return f"""CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            UPDATE memories SET {assign.format(row="new")},
                ctx_scope = {_SCOPE_TOKEN.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, {FTS_COLUMNS})
            SELECT rid, {FTS_COLUMNS} FROM memories WHERE rid = new.rid;
        END"""  # noqa: S608 - built from constants


# Each entry moves the schema from version i to i + 1. Never edit a released
# entry: append a new one, so every existing file can be brought forward.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the table of records. Timestamps are fixed-width UTC text, lists and
    # the scope mapping are JSON text, the embedding is little-endian float32.
    (
        """CREATE TABLE memories (
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            category TEXT NOT NULL,
            timestamp TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            session_id TEXT,
            namespace TEXT NOT NULL,
            importance REAL,
            confidence REAL,
            status TEXT NOT NULL DEFAULT 'active',
            tags TEXT NOT NULL DEFAULT '[]',
            source TEXT,
            entity_ids TEXT NOT NULL DEFAULT '[]',
            profile_id TEXT,
            scope TEXT,
            applies_when TEXT NOT NULL DEFAULT '[]',
            does_not_apply_when TEXT NOT NULL DEFAULT '[]',
            known_exceptions TEXT NOT NULL DEFAULT '[]',
            rule_type TEXT,
            memory_kind TEXT,
            layer TEXT,
            supersedes TEXT NOT NULL DEFAULT '[]',
            superseded_by TEXT,
            times_used INTEGER NOT NULL DEFAULT 0,
            last_used_at TEXT,
            expires_at TEXT,
            deleted_at TEXT,
            embedding BLOB,
            UNIQUE (namespace, key),
            UNIQUE (namespace, id)
        )""",
        "CREATE INDEX memories_recent ON memories (namespace, updated_at DESC) "
        "WHERE deleted_at IS NULL AND superseded_by IS NULL",
        "CREATE INDEX memories_session ON memories (namespace, session_id, updated_at DESC)",
        "CREATE INDEX memories_created ON memories (namespace, timestamp)",
    ),
    # 2: the full-text index over key, content and tags (the tags' JSON text
    # tokenises to the tag words). External content, so the text is stored
    # once; the update trigger fires only when indexed text changes, so usage
    # counters never touch the index. 'rebuild' indexes rows written under v1.
    (
        "CREATE VIRTUAL TABLE memories_fts USING fts5("
        "key, content, tags, content='memories', content_rowid='rid', "
        "tokenize='porter unicode61')",
        """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, key, content, tags)
            VALUES (new.rid, new.key, new.content, new.tags);
        END""",
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.rid, old.key, old.content, old.tags);
        END""",
        """CREATE TRIGGER memories_fts_update AFTER UPDATE OF key, content, tags ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.rid, old.key, old.content, old.tags);
            INSERT INTO memories_fts(rowid, key, content, tags)
            VALUES (new.rid, new.key, new.content, new.tags);
        END""",
        "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
    ),
    # 3: context expansion and calibrated scores (issue 14). A record written
    # in a session also indexes, at low weight, the two records written just
    # before it in that session (``ctx_prev``, ``ctx_prev2``), and every record
    # its creation date as words (``ctx_day``, "8 May 2023"). The values are
    # set once, when the row is inserted, so no older row is ever rewritten;
    # they live in the base table because the index has external content.
    (
        "ALTER TABLE memories ADD COLUMN ctx_prev TEXT",
        "ALTER TABLE memories ADD COLUMN ctx_prev2 TEXT",
        "ALTER TABLE memories ADD COLUMN ctx_day TEXT",
        "CREATE INDEX memories_stream ON memories (namespace, session_id, rid)",
        f"UPDATE memories SET {CTX_ASSIGN.format(row='memories')}",  # noqa: S608 - constants
        "DROP TRIGGER memories_fts_insert",
        "DROP TRIGGER memories_fts_delete",
        "DROP TRIGGER memories_fts_update",
        "DROP TABLE memories_fts",
        "CREATE VIRTUAL TABLE memories_fts USING fts5("
        "key, content, tags, ctx_prev, ctx_prev2, ctx_day, content='memories', "
        "content_rowid='rid', tokenize='porter unicode61')",
        f"""CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            UPDATE memories SET {CTX_ASSIGN.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, key, content, tags, ctx_prev, ctx_prev2, ctx_day)
            SELECT rid, key, content, tags, ctx_prev, ctx_prev2, ctx_day
            FROM memories WHERE rid = new.rid;
        END""",  # noqa: S608 - built from constants
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags,
                ctx_prev, ctx_prev2, ctx_day)
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day);
        END""",
        # The day follows the timestamp; the neighbours stay as first written.
        f"""CREATE TRIGGER memories_fts_update
            AFTER UPDATE OF key, content, tags, timestamp ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags,
                ctx_prev, ctx_prev2, ctx_day)
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day);
            UPDATE memories SET ctx_day = {DAY_WORDS.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, key, content, tags, ctx_prev, ctx_prev2, ctx_day)
            SELECT rid, key, content, tags, ctx_prev, ctx_prev2, ctx_day
            FROM memories WHERE rid = new.rid;
        END""",  # noqa: S608 - built from constants
        "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
    ),
    # 4: the scope in the index (``ctx_scope``, bm25 weight 0), so a session's
    # recall is a posting-list intersection (100k rows: 12 ms p50 joined).
    (
        "ALTER TABLE memories ADD COLUMN ctx_scope TEXT",
        f"UPDATE memories SET ctx_scope = {_SCOPE_TOKEN.format(row='memories')}",  # noqa: S608
        "DROP TRIGGER memories_fts_insert",
        "DROP TRIGGER memories_fts_delete",
        "DROP TRIGGER memories_fts_update",
        "DROP TABLE memories_fts",
        f"CREATE VIRTUAL TABLE memories_fts USING fts5({FTS_COLUMNS}, content='memories', "
        "content_rowid='rid', tokenize='porter unicode61')",
        _fts_insert_trigger(CTX_ASSIGN),
        f"""CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, {FTS_COLUMNS})
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day, old.ctx_scope);
        END""",  # noqa: S608 - built from constants
        # The day and the scope follow the row; the neighbours stay as first written.
        f"""CREATE TRIGGER memories_fts_update
            AFTER UPDATE OF key, content, tags, timestamp, session_id, category ON memories
            BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, {FTS_COLUMNS})
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day, old.ctx_scope);
            UPDATE memories SET ctx_day = {DAY_WORDS.format(row="new")},
                ctx_scope = {_SCOPE_TOKEN.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, {FTS_COLUMNS})
            SELECT rid, {FTS_COLUMNS} FROM memories WHERE rid = new.rid;
        END""",  # noqa: S608 - built from constants
        "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
    ),
    # 5: PI records (issue 12). ``metadata`` keeps the fields of an imported
    # record that have no column (JSON text); the partial index serves the
    # standing-context query (a profile's active L1 records and L2 rules, and
    # the newest rows of the always-shown sections), so it reads those rows,
    # not the namespace.
    (
        "ALTER TABLE memories ADD COLUMN metadata TEXT",
        "CREATE INDEX memories_standing ON memories (namespace, layer, rule_type, confidence) "
        "WHERE deleted_at IS NULL AND superseded_by IS NULL AND status = 'active'",
        "CREATE INDEX memories_standing_category ON memories (namespace, category, updated_at) "
        "WHERE deleted_at IS NULL AND superseded_by IS NULL AND status = 'active'",
    ),
    # 6: a change log for the readers' in-memory caches (issue 14). Every
    # insert, update and delete of a memory, by any connection, appends the
    # row's rid; a cache built at log position S re-reads only the rows logged
    # after S instead of every row. Only the newest LOG_KEEP entries are kept:
    # a cache further behind than that rebuilds.
    (
        "CREATE TABLE memories_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, rid INTEGER NOT NULL)",
        f"""CREATE TRIGGER memories_log_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_log(rid) VALUES (new.rid);
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_update AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_log(rid) SELECT old.rid WHERE old.rid IS NOT new.rid;
            INSERT INTO memories_log(rid) VALUES (new.rid);
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_log(rid) VALUES (old.rid);
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
    ),
    # 7: a random stamp on every log entry (issue 25). A cache knows the
    # position it is current at and that entry's stamp: a file whose history
    # diverged (a backup restored into the live file) can hold the same
    # positions and even the same rids, never the same stamps, so the cache
    # sees a history it did not follow and reads everything again.
    (
        "ALTER TABLE memories_log ADD COLUMN stamp INTEGER",
        "DROP TRIGGER memories_log_insert",
        "DROP TRIGGER memories_log_update",
        "DROP TRIGGER memories_log_delete",
        f"""CREATE TRIGGER memories_log_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_log(rid, stamp) VALUES (new.rid, random());
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_update AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_log(rid, stamp)
                SELECT old.rid, random() WHERE old.rid IS NOT new.rid;
            INSERT INTO memories_log(rid, stamp) VALUES (new.rid, random());
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_log(rid, stamp) VALUES (old.rid, random());
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        # Where the log is now, stamped, so a cache built before any new write has a stamp.
        "INSERT INTO memories_log(rid, stamp) SELECT 0, random() WHERE EXISTS "
        "(SELECT 1 FROM memories)",
    ),
    # 8: the sessionless records of one event are each other's context
    # (issue 29): a record without a session indexes the two live records
    # written just before it in its event (``_EVENT_NEIGHBOUR``). Existing
    # sessionless rows get theirs here; their index entries are replaced
    # (removed with the old values, added with the new), no other row's.
    (
        "CREATE INDEX memories_event ON memories (namespace, category, "
        "coalesce(profile_id, ''), timestamp, rid) WHERE session_id IS NULL AND layer IS NULL",
        "DROP TRIGGER memories_fts_insert",
        _fts_insert_trigger(CTX_EVENT_ASSIGN),
        f"INSERT INTO memories_fts(memories_fts, rowid, {FTS_COLUMNS}) "  # noqa: S608 - constants
        f"SELECT 'delete', rid, {FTS_COLUMNS} FROM memories "
        "WHERE session_id IS NULL AND layer IS NULL",
        f"UPDATE memories SET {CTX_EVENT_ASSIGN.format(row='memories')} "  # noqa: S608
        "WHERE session_id IS NULL AND layer IS NULL",
        f"INSERT INTO memories_fts(rowid, {FTS_COLUMNS}) "  # noqa: S608 - constants
        f"SELECT rid, {FTS_COLUMNS} FROM memories WHERE session_id IS NULL AND layer IS NULL",
    ),
    # 9: a sessionless record written alone (no event) takes the two records
    # written before it within NEAR_MINUTES as context (``_NEAR_NEIGHBOUR``),
    # marked ``ctx_near``: recall returns it only for its own words
    # (``OWN_MATCH``). Existing such rows (no context yet) get theirs here.
    (
        "ALTER TABLE memories ADD COLUMN ctx_near INTEGER",
        "DROP TRIGGER memories_fts_insert",
        _fts_insert_trigger(CTX_NEAR_ASSIGN),
        "CREATE TEMP TABLE near_rows AS SELECT rid FROM memories "
        "WHERE session_id IS NULL AND layer IS NULL AND ctx_prev IS NULL",
        f"INSERT INTO memories_fts(memories_fts, rowid, {FTS_COLUMNS}) "  # noqa: S608 - constants
        f"SELECT 'delete', rid, {FTS_COLUMNS} FROM memories "
        "WHERE rid IN (SELECT rid FROM temp.near_rows)",
        f"UPDATE memories SET {CTX_NEAR_ASSIGN.format(row='memories')} "  # noqa: S608
        "WHERE rid IN (SELECT rid FROM temp.near_rows)",
        f"INSERT INTO memories_fts(rowid, {FTS_COLUMNS}) "  # noqa: S608 - constants
        f"SELECT rid, {FTS_COLUMNS} FROM memories WHERE rid IN (SELECT rid FROM temp.near_rows)",
        "DROP TABLE temp.near_rows",
    ),
    # 10: a session's neighbours count only when written within NEAR_MINUTES of the
    # record (``_NEIGHBOUR``): facts a long-lived session gathers days apart are not each
    # other's context. Rows written before keep the context they were written with, as
    # an update keeps it.
    (
        "DROP TRIGGER memories_fts_insert",
        _fts_insert_trigger(CTX_NEAR_ASSIGN),
    ),
    # 11: a fact stored on purpose (``day_vote.STANDALONE_SOURCES``: ``remember()``,
    # the memory tools) takes no neighbours as context: facts written seconds apart
    # are not each other's turns. Rows written before keep theirs, as in 10.
    (
        "DROP TRIGGER memories_fts_insert",
        _fts_insert_trigger(CTX_STANDALONE_ASSIGN),
    ),
    # 12: the keyword index holds live rows only (``ddl_live``): a forgotten row's words
    # no longer count in any other row's score.
    live_index(FTS_COLUMNS, _SCOPE_TOKEN),
    # 13: a word's combining marks are part of it (``ddl_live.TOKENIZE``): Hindi, Bengali,
    # Tamil words were indexed as their consonants, which matched unrelated prompts. The
    # index is built again from the live rows, once, as schema 12's was.
    live_index(FTS_COLUMNS, _SCOPE_TOKEN, TOKENIZE),
)

SCHEMA_VERSION = len(MIGRATIONS)


def scope_token(session_id: str | None, category: str) -> str:
    """The ``ctx_scope`` token of a row, as the index holds it (``_SCOPE_TOKEN`` in Python).

    SQLite's ``substr`` ends a text at its first NUL, so the token does too: an
    id holding one must still find its own rows (the live-row filter, not the
    token, tells ids apart).
    """
    if session_id is not None:
        return "s" + session_id.split("\0", 1)[0][:100].encode("utf-8").hex().upper()
    return "g" + category.split("\0", 1)[0][:100].encode("utf-8").hex().upper()


def scope_tokens(session_id: str, shared: Sequence[str]) -> tuple[str, ...]:
    """The ``ctx_scope`` tokens of a session's rows and of the sessionless ``shared`` ones."""
    return (scope_token(session_id, ""), *(scope_token(None, c) for c in shared))


def scope_match(session_id: str, shared: Sequence[str]) -> str:
    """The MATCH clause that keeps a session's rows and the sessionless ``shared`` ones."""
    return tokens_match(scope_tokens(session_id, shared))


def tokens_match(tokens: Sequence[str]) -> str:
    """The MATCH clause that keeps rows whose ``ctx_scope`` is one of ``tokens``."""
    return "ctx_scope : (" + " OR ".join(f'"{t}"' for t in tokens) + ")"
