"""The SQL that fills a SQLite record's context columns when it is written.

``ctx_day`` (its day in words), ``ctx_prev`` / ``ctx_prev2`` (the two records
written just before it in its session when within ``NEAR_MINUTES`` of it, in its
event, or, for a sessionless record written alone, the 30 minutes before it:
``ctx_near``), as expressions over a row that the triggers and migrations of
:mod:`.ddl` assign; and
:data:`OWN_MATCH`, the keyword stage's rule that a record with near context is
a hit for its own words only.
"""

from __future__ import annotations

from memory_inject.storage.day_vote import NEAR_MINUTES, standalone_sql

__all__ = [
    "CTX_ASSIGN",
    "CTX_EVENT_ASSIGN",
    "CTX_NEAR_ASSIGN",
    "CTX_STANDALONE_ASSIGN",
    "DAY_WORDS",
    "OWN_COLUMNS",
    "OWN_MATCH",
    "own_match",
]

# "8 May 2023" from a fixed-width UTC timestamp (``format_ts``), in SQL so the
# triggers and the migration compute it the same way.
DAY_WORDS = (
    "(CAST(CAST(substr({row}.timestamp, 9, 2) AS INTEGER) AS TEXT) || ' ' || "
    "CASE substr({row}.timestamp, 6, 2) "
    "WHEN '01' THEN 'January' "
    "WHEN '02' THEN 'February' "
    "WHEN '03' THEN 'March' "
    "WHEN '04' THEN 'April' "
    "WHEN '05' THEN 'May' "
    "WHEN '06' THEN 'June' "
    "WHEN '07' THEN 'July' "
    "WHEN '08' THEN 'August' "
    "WHEN '09' THEN 'September' "
    "WHEN '10' THEN 'October' "
    "WHEN '11' THEN 'November' "
    "WHEN '12' THEN 'December' "
    "ELSE '' END || ' ' || "
    "substr({row}.timestamp, 1, 4))"
)
# ``row``'s timestamp moved by NEAR_MINUTES ("-" back, "+" on), as stored timestamps read.
_NEAR_SHIFT = (
    "strftime('%Y-%m-%dT%H:%M:%S', {row}.timestamp, '{sign}" + str(NEAR_MINUTES) + " minutes') "
    "|| substr({row}.timestamp, 20)"
)
# The content of the n-th live record written before ``row`` in its session, when it was
# written within NEAR_MINUTES of ``row`` (schema 10). A long-lived session (a channel, a
# chat the memory tools write in now and then) holds facts days apart: those are not
# each other's context, as a chat's turns are. Only the n-th record is looked at, so a
# write never walks the session's history for an older one inside the window.
_NEIGHBOUR = (
    "(SELECT CASE WHEN p.timestamp >= "  # noqa: S608 - constants
    + _NEAR_SHIFT.replace("{sign}", "-")
    + " AND p.timestamp <= "
    + _NEAR_SHIFT.replace("{sign}", "+")
    + " THEN p.content END FROM memories AS p WHERE {row}.session_id IS NOT NULL "
    "AND p.namespace = {row}.namespace AND p.session_id = {row}.session_id "
    "AND p.rid < {row}.rid AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
)
CTX_ASSIGN = (
    "ctx_prev = " + _NEIGHBOUR.replace("{n}", "0") + ", "
    "ctx_prev2 = " + _NEIGHBOUR.replace("{n}", "1") + ", "
    "ctx_day = " + DAY_WORDS
)
# The content of the n-th live record written before ``row`` in its *event*
# (schema 8): the sessionless records of its namespace, category and profile
# (none and blank alike) stamped with its very timestamp. A writer that stamps
# rows with one moment (an import of a dated conversation, a batch of facts
# from one source) declares them one event, an anonymous session, so they are
# each other's context as a session's turns are. Records stamped apart (each
# ``store()`` takes its own clock reading) are not one event: they get near
# context instead (below), which never recalls a row for another's words. A PI record
# (one with a ``layer``) is a reviewed statement that stands alone. The
# partial index ``memories_event`` finds the event's rows by seek.
_EVENT_NEIGHBOUR = (
    "(SELECT p.content FROM memories AS p "
    "WHERE {row}.layer IS NULL AND p.session_id IS NULL AND p.layer IS NULL "
    "AND p.namespace = {row}.namespace AND p.category = {row}.category "
    "AND coalesce(p.profile_id, '') = coalesce({row}.profile_id, '') "
    "AND p.timestamp = {row}.timestamp AND p.rid < {row}.rid AND p.deleted_at IS NULL "
    "ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
)
CTX_EVENT_ASSIGN = (
    "ctx_prev = CASE WHEN {row}.session_id IS NULL THEN "
    + _EVENT_NEIGHBOUR.replace("{n}", "0")
    + " ELSE "
    + _NEIGHBOUR.replace("{n}", "0")
    + " END, ctx_prev2 = CASE WHEN {row}.session_id IS NULL THEN "
    + _EVENT_NEIGHBOUR.replace("{n}", "1")
    + " ELSE "
    + _NEIGHBOUR.replace("{n}", "1")
    + " END, ctx_day = "
    + DAY_WORDS
)
_NEAR_FROM = _NEAR_SHIFT.replace("{sign}", "-")
# The content of the n-th live record written just before ``row`` (by
# timestamp) in its namespace, category and profile, at most ``NEAR_MINUTES``
# earlier (schema 9). A record written alone (``store()`` takes its own clock
# reading, so a chat's turns or a conversation's facts are seconds apart) gets
# these as context when it has no event: they reorder its matches, but a
# record so linked is only ever recalled for its own words (``OWN_MATCH``).
_NEAR_NEIGHBOUR = (
    "(SELECT p.content FROM memories AS p "  # noqa: S608 - constants
    "WHERE {row}.layer IS NULL AND p.session_id IS NULL AND p.layer IS NULL "
    "AND p.namespace = {row}.namespace AND p.category = {row}.category "
    "AND coalesce(p.profile_id, '') = coalesce({row}.profile_id, '') "
    "AND p.timestamp >= " + _NEAR_FROM + " AND p.timestamp < {row}.timestamp "
    "AND p.rid < {row}.rid AND p.deleted_at IS NULL "
    "ORDER BY p.timestamp DESC, p.rid DESC LIMIT 1 OFFSET {n})"
)
_EV0 = _EVENT_NEIGHBOUR.replace("{n}", "0")
CTX_NEAR_ASSIGN = (
    "ctx_prev = CASE WHEN {row}.session_id IS NOT NULL THEN "
    + _NEIGHBOUR.replace("{n}", "0")
    + " ELSE coalesce("
    + _EV0
    + ", "
    + _NEAR_NEIGHBOUR.replace("{n}", "0")
    + ") END, ctx_prev2 = CASE WHEN {row}.session_id IS NOT NULL THEN "
    + _NEIGHBOUR.replace("{n}", "1")
    + " WHEN "
    + _EV0
    + " IS NOT NULL THEN "
    + _EVENT_NEIGHBOUR.replace("{n}", "1")
    + " ELSE "
    + _NEAR_NEIGHBOUR.replace("{n}", "1")
    + " END, ctx_near = CASE WHEN {row}.session_id IS NULL AND "
    + _EV0
    + " IS NULL AND "
    + _NEAR_NEIGHBOUR.replace("{n}", "0")
    + " IS NOT NULL THEN 1 END, ctx_day = "
    + DAY_WORDS
)
#: ANDed to the keyword stage's scope (its statements name the row ``m``): a
#: record whose context is near rather than its session's or event's
#: (``ctx_near``) is a hit only when its own columns (:data:`OWN_COLUMNS`)
#: hold a query phrase; the one parameter is :func:`own_match` of the query.
OWN_MATCH = (
    "(m.ctx_near IS NULL OR EXISTS (SELECT 1 FROM memories_fts AS own "
    "WHERE own.memories_fts MATCH ? AND own.rowid = m.rid))"
)


#: A record's own indexed columns: its words and its day, not its neighbours'.
OWN_COLUMNS = ("key", "content", "tags", "ctx_day")


def own_match(match: str) -> str:
    """The :data:`OWN_MATCH` argument: the query's ``match`` in a record's own columns."""
    return "{" + " ".join(OWN_COLUMNS) + "} : (" + match + ")"


# A row ``day_vote.STANDALONE_SOURCES`` wrote (a fact stored on purpose) takes no
# neighbours (schema 11); it is still one for the rows written after it.
_STANDALONE = standalone_sql("{row}")
CTX_STANDALONE_ASSIGN = (
    CTX_NEAR_ASSIGN.replace(
        "ctx_prev = CASE WHEN ", "ctx_prev = CASE WHEN " + _STANDALONE + " THEN NULL WHEN "
    )
    .replace("ctx_prev2 = CASE WHEN ", "ctx_prev2 = CASE WHEN " + _STANDALONE + " THEN NULL WHEN ")
    .replace("ctx_near = CASE WHEN ", "ctx_near = CASE WHEN " + _STANDALONE + " THEN NULL WHEN ")
)
