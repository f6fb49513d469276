"""Every statement :class:`~memory_inject.storage.postgres.PostgresStore` runs, as :class:`Stmt`.

:class:`Queries` builds them for one table and namespace: the live-row filter every
recall statement shares, the recall stages' statements (recent, keyword, nearest, LIKE),
the reads and writes of single rows. No I/O; the keyword statement's text is
``keyword``'s, the bulk import's statements are ``bulk``'s, their order ``recall``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from attrs import frozen
from psycopg import sql

from memory_inject.contract import RecallExclusion
from memory_inject.storage._plan_rows import like_pattern, like_prefix
from memory_inject.storage.postgres import context as _ctx
from memory_inject.storage.postgres.keyword import (
    excluded,
    keyword_query,
    like_query,
    term_stats_query,
)
from memory_inject.storage.postgres.schema import COLUMNS, RECALL_COLUMNS, TableNames
from memory_inject.storage.postgres.terms import DF_CAP, TermStats

__all__ = ["Queries", "Scope", "Stmt", "TermStats"]


@frozen
class Stmt:
    """One statement for a driver; ``rows=False`` sends back the rowcount instead of rows."""

    query: sql.Composed | sql.SQL
    params: dict[str, Any] | Sequence[Any] | None = None
    rows: bool = True


@frozen
class Scope:
    """The recall filters besides the query (``exclude``: rows left out, a refill's)."""

    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    exclude: RecallExclusion | None = None


def _cols(names: Sequence[str]) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(c) for c in names)


class Queries:
    """Every statement the store runs, for one table and namespace.

    "Live" rows are those not forgotten, superseded or expired: all recall sees.
    """

    def __init__(
        self,
        names: TableNames,
        namespace: str,
        shared: tuple[str, ...] = (),
        config: str = "'english'",
    ) -> None:
        """Statements for the table ``names`` and ``namespace``.

        A session's recall also sees the sessionless rows of the ``shared`` categories.
        ``config`` is the text search configuration the table's tsvector is parsed with,
        as a SQL string literal (``folding.config_sql``): prompts are parsed with it too.
        """
        self.names = names
        self.config = config
        self.t = names.ident()
        self.ns = namespace
        self.shared = list(shared)
        self.all = _cols(COLUMNS)
        self.rec = _cols(RECALL_COLUMNS)
        self._upserts: dict[tuple[str, ...], sql.Composed] = {}
        self._keywords: dict[tuple[object, ...], sql.SQL] = {}

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
        if scope.exclude is not None:
            parts.extend(excluded(scope.exclude, params))
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
        *,
        probes: Sequence[str] = (),
        frequencies: Sequence[str] = (),
        vector: str | None = None,
        counted: Sequence[str] | None = None,
        budget: float | None = None,
    ) -> Stmt:
        """Rank matches of ``tsquery`` with ts_rank, and say which query lexemes each holds.

        Each row ends with its rank, whether it matches each of the tsqueries
        ``probes`` (which labels of its tsvector hold a query lexeme), how many
        live rows of the namespace match each of the tsqueries ``frequencies``,
        capped at ``terms.df_cap`` (the same on every row, computed once), and with
        ``vector`` its cosine similarity to it (``"minmax"`` fusion). Only
        parameters vary, so psycopg prepares the statement after a few runs.

        ts_rank costs a few microseconds a row and ignores how common a
        word is, so a prompt holding a word found in half the table ranks half
        the table. With ``words`` and ``terms`` the candidates are selected
        by the query's rarest lexemes only, adding commoner ones while their
        estimated rows stay within ``terms.budget`` (the rarest is always
        kept); every query word still counts in the rank. This bounds the
        work on big tables and, like BM25's IDF, stops a word found everywhere
        from flooding the candidates. On a small table the counts that select are the
        statement's own (``counted``: ``frequencies``' lexemes); ``budget`` raises the budget.
        """
        where, params = self._live(scope)
        params.update(tsq=tsquery, lim=limit, probe=list(probes), dfq=list(frequencies))
        params["cap"] = DF_CAP if terms is None else terms.df_cap
        if vector is not None:
            params["vec"] = vector
        by_count = counted is not None and terms is not None
        selective = by_count or not (words is None or terms is None or not terms.lexemes)
        if terms is not None and selective:
            most = max(terms.budget, budget or 0.0)
            params.update(budget=most, over=int(most) + 1)
        if by_count:
            params["dlex"] = list(counted or ())
        elif words is not None and terms is not None and selective:
            params["words"] = words
            params.update(clex=terms.lexemes_text, crows=terms.rows_text)
        # The text depends only on the scope's shape and the branch: composed once (composing
        # it and turning it into bytes cost about 0.3 ms of Python per recall).
        shape = (
            scope.session_id is not None,
            scope.since is not None,
            scope.until is not None,
            scope.exclude,
            selective,
            by_count,
            vector is not None,
        )
        cached = self._keywords.get(shape)
        if cached is None:
            how = {"selective": selective, "cosine": vector is not None, "counted": by_count}
            text = keyword_query(self.t, self.rec, where, config=self.config, **how)
            cached = self._keywords[shape] = sql.SQL(text.as_string(None))
        return Stmt(cached, params)

    def term_stats(self) -> Stmt:
        """ANALYZE's common lexemes of ``tsv`` with their row estimates, and the table's rows.

        The last column is the exact count of the namespace's live rows when the
        table is small (or was never analyzed), else NULL.
        """
        return Stmt(term_stats_query(self.t), {"rel": self.t.as_string(), "ns": self.ns})

    def nearest(self, scope: Scope, vector: str, limit: int, far: str | None = None) -> Stmt:
        """Live rows with a vector, nearest to ``vector`` first, each with its cosine similarity.

        ``vector`` is a :func:`~memory_inject.storage.postgres.recall.vector_literal`.
        With ``far`` (``-vector``) each row ends with the cosine of the scope's
        row farthest from ``vector``: nearest ``far`` by the same index, as
        SQLite's graph finds it (``"minmax"`` fusion's low end).
        """
        where, params = self._live(scope)
        far_sql = (
            ", (SELECT 1 - (f.embedding_vec <=> %(vec)s::vector) FROM {t} AS f WHERE {where} "
            "AND f.embedding_vec IS NOT NULL ORDER BY f.embedding_vec <=> %(far)s::vector LIMIT 1)"
        )
        low = sql.SQL(far_sql if far is not None else "").format(t=self.t, where=where)
        query = sql.SQL(
            "SELECT {cols}, 1 - (embedding_vec <=> %(vec)s::vector) AS sim{low} FROM {t} "
            "WHERE {where} AND embedding_vec IS NOT NULL "
            "ORDER BY embedding_vec <=> %(vec)s::vector LIMIT %(lim)s"
        ).format(cols=self.rec, low=low, t=self.t, where=where)
        return Stmt(query, {**params, "vec": vector, "lim": limit, "far": far})

    def like(
        self, scope: Scope, patterns: list[str], limit: int, *, most_first: bool, vector: str | None
    ) -> Stmt:
        """The substring fallback's rows (:func:`.keyword.like_query`); cosines to ``vector``."""
        where, params = self._live(scope)
        query = like_query(self.t, self.rec, where, most_first=most_first, cosine=bool(vector))
        return Stmt(query, {**params, "pats": patterns, "lim": limit, "vec": vector})

    def tagged(
        self,
        scope: Scope,
        limit: int,
        *,
        entity_id: str | None,
        source: str | None,
        statuses: Sequence[str] | None,
    ) -> Stmt:
        """Live rows tagged with ``entity_id`` / written by ``source`` (and of ``statuses``).

        Best confidence first (none last), then newest update: a recall plan's
        entity and plugin queries. The status filter runs before the limit.
        """
        where, params = self._live(scope)
        parts: list[sql.Composable] = [where]
        if entity_id is not None:
            parts.append(sql.SQL("%(entity)s = ANY(entity_ids)"))
            params["entity"] = entity_id
        if source is not None:
            parts.append(sql.SQL("source = %(source)s"))
            params["source"] = source
        if statuses is not None:
            parts.append(sql.SQL("status = ANY(%(statuses)s)"))
            params["statuses"] = list(statuses)
        query = sql.SQL(
            "SELECT {cols} FROM {t} WHERE {where} "
            "ORDER BY confidence DESC NULLS LAST, updated_at DESC, rid DESC LIMIT %(lim)s"
        ).format(cols=self.rec, t=self.t, where=sql.SQL(" AND ").join(parts))
        return Stmt(query, {**params, "lim": limit})

    def entity_ids(self) -> Stmt:
        """Every entity id on a row of the namespace that is not forgotten."""
        query = sql.SQL(
            "SELECT DISTINCT e FROM {t}, unnest(entity_ids) AS e "
            "WHERE namespace = %s AND deleted_at IS NULL ORDER BY e"
        ).format(t=self.t)
        return Stmt(query, (self.ns,))

    def mentioning(self, prefix: str, mention: str, limit: int) -> Stmt:
        """``(entity id, content)`` of live rows with an entity id under ``prefix`` whose
        content holds ``mention`` (case-insensitive; the caller checks whole words)."""
        query = sql.SQL(
            "SELECT e, content FROM {t}, unnest(entity_ids) AS e "
            "WHERE namespace = %s AND deleted_at IS NULL AND e LIKE %s AND content ILIKE %s "
            "LIMIT %s"
        ).format(t=self.t)
        return Stmt(query, (self.ns, like_prefix(prefix), like_pattern(mention), limit))

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

    def assignments(self, keep: Sequence[str]) -> sql.Composed:
        """``c = EXCLUDED.c`` for every column but ``namespace`` and ``key``; a column of
        ``keep`` keeps its stored value, unless the row was forgotten (a forgotten row
        belongs to no one: a write of its key is a new row, as on SQLite)."""
        return sql.SQL(", ").join(
            sql.SQL(
                "{c} = CASE WHEN {t}.deleted_at IS NULL THEN {t}.{c} ELSE EXCLUDED.{c} END"
                if c in keep
                else "{c} = EXCLUDED.{c}"
            ).format(c=sql.Identifier(c), t=self.t)
            for c in COLUMNS
            if c not in ("namespace", "key")
        )

    def upsert(self, params: list[Any], keep: Sequence[str], move: bool = False) -> Stmt:
        """Insert ``params`` (one per column), or update the row under its key; returns the row.

        The columns in ``keep`` (and ``namespace`` and ``key``) keep their stored values on
        update. A new row of a session (or an event) gets its two predecessors as context
        (:mod:`.context`); an updated row's are computed after (``writes.upsert_steps``).
        A live row of another scope is not replaced (no row comes back) unless ``move``.
        """
        kind, context = _ctx.context_params(params)
        key = (*keep, "\x00move" if move else "", kind)
        query = self._upserts.get(key)
        if query is None:
            guard = sql.SQL(
                ""
                if move
                # A row belongs to its scope: a live row of another session (or the
                # shared rows) is not replaced, and then no row comes back (KeyOwnedError).
                else "WHERE {t}.deleted_at IS NOT NULL "
                "OR {t}.session_id IS NOT DISTINCT FROM EXCLUDED.session_id "
            ).format(t=self.t)
            # Then its rid, whether it is new, and where the row it replaced was (the
            # statement's snapshot is before the change) with its stream's lock key.
            query = sql.SQL(
                "INSERT INTO {t} ({cols}, {ctx_cols}) VALUES ({ph}, {ctx}) "
                'ON CONFLICT (namespace, "key") DO UPDATE SET {assign} {guard}'
                "RETURNING {cols}, {t}.rid, {t}.xmax = 0, (SELECT json_build_array(o.rid, "
                'o.session_id, o.category, o.profile_id, o.layer, o."timestamp", {key}) '
                'FROM {t} AS o WHERE o.namespace = {t}.namespace AND o."key" = {t}."key")'
            ).format(
                t=self.t,
                key=sql.SQL(_ctx.stream_key(self.names.table, "o")),
                cols=self.all,
                ph=sql.SQL(", ").join(sql.Placeholder() for _ in COLUMNS),
                ctx_cols=sql.SQL(_ctx.CONTEXT_COLUMNS),
                ctx=_ctx.context_values(self.t, kind),
                assign=self.assignments(tuple(keep)),
                guard=guard,
            )
            self._upserts[key] = query
        return Stmt(query, [*params, *context])

    def mark_used(self, ids: list[str]) -> Stmt:
        """Bump ``times_used`` and ``last_used_at`` of rows in ``ids``; sends back the rowcount."""
        query = sql.SQL(
            "UPDATE {t} SET times_used = times_used + 1, last_used_at = now() "
            "WHERE namespace = %s AND id = ANY(%s) AND deleted_at IS NULL"
        ).format(t=self.t)
        return Stmt(query, (self.ns, ids), rows=False)

    def lock_live(self, key: str) -> Stmt:
        """The id and session of the row under ``key`` unless forgotten, locked ``FOR UPDATE``."""
        query = sql.SQL(
            'SELECT id, session_id FROM {t} WHERE namespace = %s AND "key" = %s '
            "AND deleted_at IS NULL FOR UPDATE"
        ).format(t=self.t)
        return Stmt(query, (self.ns, key))

    def set_superseded_by(self, old_id: str, new_id: str) -> Stmt:
        """Point row ``old_id`` at its successor ``new_id``; sends back the rowcount."""
        query = sql.SQL(
            "UPDATE {t} SET superseded_by = %s WHERE namespace = %s AND id = %s"
        ).format(t=self.t)
        return Stmt(query, (new_id, self.ns, old_id), rows=False)
