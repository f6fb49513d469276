"""SQL and the I/O-free recall core of :class:`~memory_inject.storage.postgres.PostgresStore`.

:func:`recall_steps` is a generator: it yields :class:`Stmt` objects and is sent
back their rows, so the sync and the async store drive the very same logic.
User text never reaches ``to_tsquery`` syntax: the prompt is reduced to
``\\w+`` tokens, each single-quoted, OR-ed (``'tok1' | 'tok2'``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Generator, Sequence
from datetime import datetime
from typing import Any

from attrs import define, frozen
from psycopg import sql

from memory_inject.models import MemoryEntry
from memory_inject.storage._lexical import STOPWORDS, tokenize
from memory_inject.storage._pg_schema import (
    COLUMNS,
    RECALL_COLUMNS,
    TableNames,
    hnsw_index,
    row_to_record,
)
from memory_inject.storage.fusion import Fusion, RecallInfo, fuse
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "Plan",
    "Queries",
    "Scope",
    "Stmt",
    "TermStats",
    "like_patterns",
    "recall_steps",
    "tsquery_text",
]

_TOKEN = re.compile(r"(\w+)(\*?)")
_MAX_TERMS = 32
_MAX_LIKE_WORDS = 8
_STAGE = sql.Identifier("memory_inject_stage")
# The keyword stage ranks roughly this share of the table at most (tuned on the
# LoCoMo dev half, where it acts like BM25's IDF: R@5 0.485 -> 0.544, R@10 0.564 -> 0.619).
_RANK_FRACTION = 0.03
_RANK_FLOOR = 50.0


@frozen
class Stmt:
    """One statement for a driver; ``rows=False`` sends back the rowcount instead of rows."""

    query: sql.Composed
    params: dict[str, Any] | Sequence[Any] | None = None
    rows: bool = True


@frozen
class Scope:
    """The recall filters besides the query."""

    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@frozen
class TermStats:
    """The keyword stage's ranking budget and the lexemes that weigh on it.

    ``lexemes``/``rows`` are the table's common lexemes (ANALYZE's most common
    elements of ``tsv``) with their estimated row counts, kept only when they
    are big enough to matter against ``budget``.
    """

    budget: float = 0.0
    lexemes: tuple[str, ...] = ()
    rows: tuple[float, ...] = ()

    @classmethod
    def build(
        cls, lexemes: Sequence[str], rows: Sequence[float], table_rows: float, cap: int
    ) -> TermStats:
        """The budget is ~3% of the table (at least 50 rows, at most ``cap``)."""
        budget = min(float(cap), max(_RANK_FLOOR, _RANK_FRACTION * float(table_rows)))
        kept = [(w, float(n)) for w, n in zip(lexemes, rows, strict=True) if n > budget / 8]
        return cls(budget, tuple(w for w, _ in kept), tuple(n for _, n in kept))


@define
class Plan:
    """One recall's inputs; ``query=None`` is a time-only recall.

    ``rank_budget`` caps the keyword stage's ranking work (see
    :meth:`Queries.keyword`); ``terms`` are the statistics it needs, or None
    to read them first (the store caches them between recalls).
    """

    q: Queries
    scope: Scope
    limit: int
    fusion: Fusion
    query: str | None = None
    vector: Sequence[float] | None = None
    degraded: str | None = None
    rank_budget: int | None = None
    terms: TermStats | None = None
    terms_read: bool = False


def _query_terms(query: str) -> list[tuple[str, str]]:
    """``(word, "*" or "")`` for each token; function words go unless nothing else is left."""
    found = _TOKEN.findall(query.lower())
    return [(w, p) for w, p in found if w not in STOPWORDS] or found


def tsquery_text(query: str) -> str | None:
    """``'tok1' | 'tok2':* ...`` from the query's word tokens, or None when it has none.

    The commonest function words are dropped unless nothing else is left; a
    trailing ``*`` makes a prefix term. Only ``\\w`` characters are ever quoted.
    """
    terms = dict.fromkeys(f"'{w}'{':*' if p else ''}" for w, p in _query_terms(query))
    return " | ".join(list(terms)[:_MAX_TERMS]) or None


def like_patterns(query: str) -> list[str]:
    """``%word%`` ILIKE patterns (wildcards escaped) for up to 8 words, as the SQLite store."""
    words = [w for w in dict.fromkeys(tokenize(query, drop_stopwords=True)) if len(w) >= 2]
    return [
        "%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        for w in words[:_MAX_LIKE_WORDS]
    ]


def vector_literal(vector: Sequence[float]) -> str:
    """``vector`` in pgvector's text form, ``[x,y,...]``, for a ``::vector`` parameter."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


Outcome = tuple[list[MemoryEntry], RecallInfo]


def recall_steps(plan: Plan) -> Generator[Stmt, Any, Outcome]:
    """The recall contract, statement by statement (see the module docstring)."""
    q = plan.q
    if plan.query is None:
        rows = yield q.recent(plan.scope, plan.limit)
        entries = [row_to_record(r, RECALL_COLUMNS).to_entry(None) for r in rows]
        return entries, RecallInfo(strategy="recent")

    fetch = plan.limit * 2
    records: dict[str, MemoryRecord] = {}
    keyword: list[tuple[str, float]] = []
    vector: list[tuple[str, float]] = []
    if plan.vector is not None and any(plan.vector):
        for row in (yield q.nearest(plan.scope, vector_literal(plan.vector), fetch)):
            sim = row[-1]
            if sim is None or not math.isfinite(sim) or sim <= 0.0:
                continue
            rec = row_to_record(row[:-1], RECALL_COLUMNS)
            records[rec.id] = rec
            vector.append((rec.id, float(sim)))
    # "embedding" mode skips the keyword stage only while the vector stage is live.
    tsq = tsquery_text(plan.query)
    if tsq is not None and (plan.vector is None or plan.fusion.search_mode != "embedding"):
        words = None
        if plan.rank_budget is not None and ":*" not in tsq:
            if plan.terms is None:
                [(lexemes, rows, table_rows)] = yield q.term_stats()
                plan.terms = TermStats.build(lexemes, rows, table_rows, plan.rank_budget)
                plan.terms_read = True
            if plan.terms.lexemes:
                words = " ".join(w for w, _ in _query_terms(plan.query)[:_MAX_TERMS])
        stmt = q.keyword(plan.scope, tsq, fetch, words, plan.terms)
        for row in (yield stmt):
            rec = row_to_record(row[:-1], RECALL_COLUMNS)
            records[rec.id] = rec
            keyword.append((rec.id, float(row[-1])))
    fused = fuse(keyword, vector, plan.fusion, plan.limit)
    if fused:
        strategy = "hybrid" if keyword and vector else "vector" if vector else "keyword"
        entries = [records[i].to_entry(min(1.0, max(0.0, float(s)))) for i, s in fused]
        return entries, RecallInfo(strategy, len(keyword), len(vector), plan.degraded)
    patterns = like_patterns(plan.query)
    rows = (yield q.like(plan.scope, patterns, plan.limit)) if patterns else []
    entries = [row_to_record(r, RECALL_COLUMNS).to_entry(1.0) for r in rows]
    return entries, RecallInfo("like" if entries else "none", 0, 0, plan.degraded)


def _cols(names: Sequence[str]) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(c) for c in names)


class Queries:
    """Every statement the store runs, for one table and namespace.

    "Live" rows are those not forgotten, superseded or expired: all recall sees.
    """

    def __init__(self, names: TableNames, namespace: str, shared: tuple[str, ...] = ()) -> None:
        """Statements for the table ``names`` and ``namespace``.

        A session's recall also sees the sessionless rows of the ``shared`` categories.
        """
        self.names = names
        self.t = names.ident()
        self.ns = namespace
        self.shared = list(shared)
        self.all = _cols(COLUMNS)
        self.rec = _cols(RECALL_COLUMNS)
        self._upserts: dict[tuple[str, ...], sql.Composed] = {}

    # recall

    def _live(self, scope: Scope) -> tuple[sql.Composed, dict[str, Any]]:
        parts = [
            "namespace = %(ns)s AND deleted_at IS NULL AND superseded_by IS NULL "
            "AND (expires_at IS NULL OR expires_at > now())"
        ]
        params: dict[str, Any] = {"ns": self.ns}
        if scope.session_id is not None:
            params["session"] = scope.session_id
            if self.shared:
                parts.append(
                    "(session_id = %(session)s "
                    "OR (session_id IS NULL AND category = ANY(%(shared)s)))"
                )
                params["shared"] = self.shared
            else:
                parts.append("session_id = %(session)s")
        if scope.since is not None:
            parts.append('"timestamp" >= %(since)s')
            params["since"] = scope.since
        if scope.until is not None:
            parts.append('"timestamp" <= %(until)s')
            params["until"] = scope.until
        return sql.SQL(" AND ").join(sql.SQL(p) for p in parts), params

    def recent(self, scope: Scope, limit: int) -> Stmt:
        """Live rows in ``scope``, most recently updated first: the time-only recall."""
        where, params = self._live(scope)
        query = sql.SQL(
            "SELECT {cols} FROM {t} WHERE {where} ORDER BY updated_at DESC, rid DESC LIMIT %(lim)s"
        ).format(cols=self.rec, t=self.t, where=where)
        return Stmt(query, {**params, "lim": limit})

    def keyword(
        self,
        scope: Scope,
        tsquery: str,
        limit: int,
        words: str | None = None,
        terms: TermStats | None = None,
    ) -> Stmt:
        """Rank matches of ``tsquery`` with ts_rank_cd.

        ts_rank_cd costs a few microseconds a row and ignores how common a
        word is, so a prompt holding a word found in half the table ranks half
        the table. With ``words`` and ``terms`` the candidates are selected
        by the query's rarest lexemes only, adding commoner ones while their
        estimated rows stay within ``terms.budget`` (the rarest is always
        kept); every query word still counts in the rank. This bounds the
        work on big tables and, like BM25's IDF, stops a word found everywhere
        from flooding the candidates.
        """
        where, params = self._live(scope)
        params = {**params, "tsq": tsquery, "lim": limit}
        if words is None or terms is None:
            query = sql.SQL(
                "SELECT {cols}, ts_rank_cd(tsv, tq.q) AS rank "
                "FROM {t}, to_tsquery('english'::regconfig, %(tsq)s) AS tq(q) "
                "WHERE {where} AND tsv @@ tq.q ORDER BY rank DESC, id LIMIT %(lim)s"
            ).format(cols=self.rec, t=self.t, where=where)
            return Stmt(query, params)
        query = sql.SQL(
            "WITH lex AS ("
            " SELECT l, coalesce(c.n, 0) AS n"
            " FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(words)s))) AS l"
            " LEFT JOIN unnest(%(clex)s::text[], %(crows)s::float8[]) AS c(lexeme, n)"
            " ON c.lexeme = l"
            "), kept AS ("
            " SELECT l FROM (SELECT l, sum(n) OVER (ORDER BY n, l) AS cum,"
            " row_number() OVER (ORDER BY n, l) AS rn FROM lex) AS r"
            " WHERE r.cum <= %(budget)s OR r.rn = 1"
            "), tq AS ("
            " SELECT to_tsquery('english'::regconfig, %(tsq)s) AS q, coalesce("
            "(SELECT string_agg(quote_literal(l), ' | ') FROM kept)::tsquery,"
            " to_tsquery('english'::regconfig, %(tsq)s)) AS f"
            ") "
            "SELECT {cols}, ts_rank_cd(tsv, tq.q) AS rank FROM {t}, tq "
            "WHERE {where} AND tsv @@ tq.f ORDER BY rank DESC, id LIMIT %(lim)s"
        ).format(cols=self.rec, t=self.t, where=where)
        params.update(
            words=words, clex=list(terms.lexemes), crows=list(terms.rows), budget=terms.budget
        )
        return Stmt(query, params)

    def term_stats(self) -> Stmt:
        """ANALYZE's common lexemes of ``tsv`` with their row estimates, and the table's rows."""
        query = sql.SQL(
            "SELECT coalesce(array_agg(m.e ORDER BY m.e) FILTER (WHERE m.e IS NOT NULL), '{{}}'),"
            " coalesce(array_agg(m.f * c.reltuples ORDER BY m.e)"
            " FILTER (WHERE m.e IS NOT NULL), '{{}}'),"
            " max(c.reltuples)"
            " FROM pg_class AS c"
            " JOIN pg_namespace AS ns ON ns.oid = c.relnamespace"
            " LEFT JOIN pg_stats AS s ON s.schemaname = ns.nspname AND s.tablename = c.relname"
            " AND s.attname = 'tsv'"
            " LEFT JOIN LATERAL unnest(s.most_common_elems::text::text[],"
            " s.most_common_elem_freqs) AS m(e, f) ON true"
            " WHERE c.oid = to_regclass(%(rel)s)"
        ).format()
        return Stmt(query, {"rel": self.t.as_string()})

    def nearest(self, scope: Scope, vector: str, limit: int) -> Stmt:
        """Live rows with a vector, nearest to ``vector`` first, each with its cosine similarity.

        ``vector`` is a :func:`vector_literal`.
        """
        where, params = self._live(scope)
        query = sql.SQL(
            "SELECT {cols}, 1 - (embedding_vec <=> %(vec)s::vector) AS sim FROM {t} "
            "WHERE {where} AND embedding_vec IS NOT NULL "
            "ORDER BY embedding_vec <=> %(vec)s::vector LIMIT %(lim)s"
        ).format(cols=self.rec, t=self.t, where=where)
        return Stmt(query, {**params, "vec": vector, "lim": limit})

    def like(self, scope: Scope, patterns: list[str], limit: int) -> Stmt:
        """Live rows whose key or content ILIKE-matches any of ``patterns``, newest update first.

        The fallback when ranking finds nothing; ``patterns`` come from :func:`like_patterns`.
        """
        where, params = self._live(scope)
        query = sql.SQL(
            "SELECT {cols} FROM {t} WHERE {where} "
            'AND ("key" ILIKE ANY(%(pats)s) OR content ILIKE ANY(%(pats)s)) '
            "ORDER BY updated_at DESC, rid DESC LIMIT %(lim)s"
        ).format(cols=self.rec, t=self.t, where=where)
        return Stmt(query, {**params, "pats": patterns, "lim": limit})

    # reads

    def get(self, key: str) -> Stmt:
        """The row under ``key`` unless forgotten (superseded and expired rows too)."""
        query = sql.SQL(
            'SELECT {cols} FROM {t} WHERE namespace = %s AND "key" = %s AND deleted_at IS NULL'
        ).format(cols=self.all, t=self.t)
        return Stmt(query, (self.ns, key))

    def listing(self, category: str | None, session_id: str | None, limit: int | None) -> Stmt:
        """Rows not forgotten, newest ``timestamp`` first, filtered; ``limit=None`` is all."""
        parts = ["namespace = %(ns)s AND deleted_at IS NULL"]
        params: dict[str, Any] = {"ns": self.ns}
        if category is not None:
            parts.append("category = %(category)s")
            params["category"] = str(category)
        if session_id is not None:
            parts.append("session_id = %(session)s")
            params["session"] = session_id
        tail = sql.SQL("")
        if limit is not None:
            tail = sql.SQL(" LIMIT %(lim)s")
            params["lim"] = max(0, int(limit))
        query = sql.SQL(
            'SELECT {cols} FROM {t} WHERE {where} ORDER BY "timestamp" DESC, rid DESC{tail}'
        ).format(
            cols=self.all,
            t=self.t,
            where=sql.SQL(" AND ").join(sql.SQL(p) for p in parts),
            tail=tail,
        )
        return Stmt(query, params)

    def count(self) -> Stmt:
        """How many rows of the namespace are not forgotten."""
        query = sql.SQL(
            "SELECT count(*) FROM {t} WHERE namespace = %s AND deleted_at IS NULL"
        ).format(t=self.t)
        return Stmt(query, (self.ns,))

    def export(self) -> Stmt:
        """Every row of the namespace in insertion order, forgotten and superseded ones included."""
        query = sql.SQL("SELECT {cols} FROM {t} WHERE namespace = %s ORDER BY rid").format(
            cols=self.all, t=self.t
        )
        return Stmt(query, (self.ns,))

    # writes

    def _assignments(self, keep: Sequence[str]) -> sql.Composed:
        return sql.SQL(", ").join(
            sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c))
            for c in COLUMNS
            if c not in ("namespace", "key", *keep)
        )

    def upsert(self, params: list[Any], keep: Sequence[str]) -> Stmt:
        """Insert ``params`` (one per column), or update the row under its key; returns the row.

        The columns in ``keep`` (and ``namespace`` and ``key``) keep their stored
        values on update. The statement is built once per ``keep``.
        """
        key = tuple(keep)
        query = self._upserts.get(key)
        if query is None:
            query = sql.SQL(
                "INSERT INTO {t} ({cols}) VALUES ({ph}) "
                'ON CONFLICT (namespace, "key") DO UPDATE SET {assign} RETURNING {cols}'
            ).format(
                t=self.t,
                cols=self.all,
                ph=sql.SQL(", ").join(sql.Placeholder() for _ in COLUMNS),
                assign=self._assignments(key),
            )
            self._upserts[key] = query
        return Stmt(query, params)

    def forget(self, key: str) -> Stmt:
        """Soft-delete the row under ``key`` (set ``deleted_at``); sends back the rowcount."""
        query = sql.SQL(
            "UPDATE {t} SET deleted_at = now() "
            'WHERE namespace = %s AND "key" = %s AND deleted_at IS NULL'
        ).format(t=self.t)
        return Stmt(query, (self.ns, key), rows=False)

    def mark_used(self, ids: list[str]) -> Stmt:
        """Bump ``times_used`` and ``last_used_at`` of rows in ``ids``; sends back the rowcount."""
        query = sql.SQL(
            "UPDATE {t} SET times_used = times_used + 1, last_used_at = now() "
            "WHERE namespace = %s AND id = ANY(%s) AND deleted_at IS NULL"
        ).format(t=self.t)
        return Stmt(query, (self.ns, ids), rows=False)

    def lock_live(self, key: str) -> Stmt:
        """The id of the row under ``key`` unless forgotten, locked ``FOR UPDATE``."""
        query = sql.SQL(
            'SELECT id FROM {t} WHERE namespace = %s AND "key" = %s AND deleted_at IS NULL '
            "FOR UPDATE"
        ).format(t=self.t)
        return Stmt(query, (self.ns, key))

    def set_superseded_by(self, old_id: str, new_id: str) -> Stmt:
        """Point row ``old_id`` at its successor ``new_id``; sends back the rowcount."""
        query = sql.SQL(
            "UPDATE {t} SET superseded_by = %s WHERE namespace = %s AND id = %s"
        ).format(t=self.t)
        return Stmt(query, (new_id, self.ns, old_id), rows=False)

    # bulk import: COPY into a temp table, then one merge

    def stage_create(self) -> list[sql.Composed]:
        """Create the import's staging table: temporary, dropped at commit, plus ``_seq``."""
        return [
            sql.SQL(
                "CREATE TEMP TABLE {s} ON COMMIT DROP AS SELECT {cols} FROM {t} WITH NO DATA"
            ).format(s=_STAGE, cols=self.all, t=self.t),
            sql.SQL("ALTER TABLE {s} ADD COLUMN _seq bigint").format(s=_STAGE),
        ]

    def stage_copy(self) -> sql.Composed:
        """``COPY`` into the staging table: every column, then ``_seq``."""
        return sql.SQL("COPY {s} ({cols}, _seq) FROM STDIN").format(s=_STAGE, cols=self.all)

    def any_rows(self) -> Stmt:
        """Whether the table holds any row at all, in any namespace, forgotten ones too."""
        return Stmt(sql.SQL("SELECT EXISTS (SELECT 1 FROM {t})").format(t=self.t))

    def hnsw_present(self) -> sql.Composed:
        """Whether the table's HNSW index exists."""
        return sql.SQL("SELECT to_regclass({name}) IS NOT NULL").format(
            name=sql.Literal(self.names.hnsw.as_string())
        )

    def hnsw_drop(self) -> sql.Composed:
        """Drop the table's HNSW index if it exists."""
        return sql.SQL("DROP INDEX IF EXISTS {idx}").format(idx=self.names.hnsw)

    def hnsw_rebuild(self) -> list[sql.Composed]:
        """Build the HNSW index again, first raising ``maintenance_work_mem`` to 512MB if lower.

        The setting is raised for the current transaction only.
        """
        return [
            # Room for the graph in memory (only ever raised, and only for this transaction).
            sql.SQL(
                "SELECT set_config('maintenance_work_mem', '512MB', true) "
                "WHERE pg_size_bytes(current_setting('maintenance_work_mem')) "
                "< pg_size_bytes('512MB')"
            ).format(),
            hnsw_index(self.names),
        ]

    def stage_merge(self) -> sql.Composed:
        # The last line wins for a repeated key; rows go in in file order (rid order).
        """Upsert the staged rows into the table in file order; a repeated key's last line wins."""
        return sql.SQL(
            "INSERT INTO {t} ({cols}) SELECT {cols} FROM ("
            'SELECT DISTINCT ON ("key") * FROM {s} ORDER BY "key", _seq DESC'
            ") AS last ORDER BY _seq "
            'ON CONFLICT (namespace, "key") DO UPDATE SET {assign}'
        ).format(t=self.t, cols=self.all, s=_STAGE, assign=self._assignments(()))
