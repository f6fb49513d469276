"""Remembering on purpose: :func:`remember` / :func:`aremember` and the checks of a write.

This module owns the write path the host calls (``remember``) and the one the
``memory_store`` tool shares with it (:func:`write_args`): the arguments
checked, the row stamped with its session scope and the governance profile
the render of the turn's origin compares against, and a failing store
reported as :class:`Remembered` ``error``, never raised. The tools themselves
are in :mod:`.tools`; both are public from there.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from attrs import frozen

from memory_inject._workers import in_worker
from memory_inject.config import AgentConfig
from memory_inject.contract import Memory, SupportsAsyncWrite, SupportsWrite
from memory_inject.models import TurnOrigin
from memory_inject.policy import InjectPolicy, resolve_inject_policy
from memory_inject.render._view import fold as view_of

from . import _core
from ._base import check_store
from .messages import starts_with_block

__all__ = [
    "RememberOptions",
    "Remembered",
    "aremember",
    "memory_key",
    "policy_for",
    "remember",
    "sync_store",
    "write_args",
]

_log = logging.getLogger("memory_inject.adapters")
_MAX_KEY = 200


def memory_key(content: str, scope: str | None = None) -> str:
    """A key derived from the text within its scope, so remembering the same fact twice in
    one scope updates one row, and the same fact in two sessions is two rows.

    A shared row's (``scope`` None) is the key earlier versions derived for every
    scope, so existing shared ``mem_*`` rows keep theirs.
    """
    text = " ".join(content.split()).lower()
    if scope is not None:
        text = f"{scope}\x1f{text}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"mem_{digest[:16]}"  # a lone surrogate: the store's check names it, not this


@frozen
class Remembered:
    """What :func:`remember` wrote: the key, or the error (then ``key`` is None)."""

    key: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the row was written."""
        return self.error is None


#: A block marker, opening or closing, on the normalised view (``render._view``).
_BLOCK_MARKER = re.compile(r"\[ */? *memory *context *\]", re.IGNORECASE)


def _checked(
    content: object, key: object, category: object, scope: str | None
) -> tuple[str, str, str]:
    if not isinstance(content, str) or not content.strip():
        raise ValueError(f"'content' must be a non-empty string (got {content!r:.80})")
    if starts_with_block(content) or _BLOCK_MARKER.search(view_of(content)) is not None:
        # Anywhere, in any spelling a reader takes for it (a zero-width space in front,
        # full-width brackets): stored, such a block rendered as forged entries.
        raise ValueError("'content' must be a fact, not a rendered memory block")
    if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > _MAX_KEY):
        raise ValueError(f"'key' must be a non-empty string of at most {_MAX_KEY} characters")
    if not isinstance(category, str) or not category:
        raise ValueError(f"'category' must be a non-empty string (got {category!r:.80})")
    return content, key or memory_key(content, scope), category


def policy_for(agent: AgentConfig | None, origin: TurnOrigin | str, session: bool) -> InjectPolicy:
    """The policy a turn of ``origin`` gets from ``agent`` (defaults without one): its
    config stamps the profile a write carries and shapes the tools' recall."""
    config = agent.memory if agent is not None else None
    return resolve_inject_policy(origin, has_session=session, config=config)


def write_args(
    store: Memory,
    agent: AgentConfig | None,
    content: object,
    key: object,
    category: object,
    session_id: str | None,
    origin: TurnOrigin | str,
    cwd: str | os.PathLike[str] | None,
    fields: Mapping[str, Any],
) -> tuple[str, str, dict[str, Any]]:
    """Check the arguments (``ValueError``; a wrong type a ``TypeError``), and the store
    can write (``TypeError``). A store would refuse the same ones, but that refusal was
    returned as a failed write, not raised as the caller's mistake."""
    text, key, cat = _checked(content, key, category, session_id)
    if session_id is not None and not isinstance(session_id, str):
        raise TypeError(
            f"remember: 'session_id' must be a str or None (got {type(session_id).__name__})"
        )
    importance = fields.get("importance")
    if importance is not None and (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not 0 <= importance <= 1
    ):
        raise ValueError(f"remember: 'importance' must be between 0 and 1 (got {importance!r})")
    if not isinstance(store, SupportsWrite | SupportsAsyncWrite):
        raise TypeError(
            f"remember: 'store' must have a store() method (got {type(store).__name__})"
        )
    policy = policy_for(agent, origin, session_id is not None)
    stamped = {**fields, **_core.profile_fields(policy.config, cwd), "session_id": session_id}
    # Stated now: a fact written again under its key is new information, so its age (what
    # decay counts, for a ``daily`` fact) starts again. An update kept the first write's
    # time, and a book the model rewrote today decayed as a year old, never shown.
    return text, key, {"category": cat, **stamped, "timestamp": datetime.now(UTC)}


def _failed(key: str, exc: Exception) -> Remembered:
    _log.warning("memory_inject: remember of %r failed", key, exc_info=exc)
    return Remembered(None, f"remember_failed: {type(exc).__name__}: {exc}")


class RememberOptions(TypedDict, total=False):
    """The keyword options of :func:`remember` and :func:`aremember`."""

    #: The row's key (default: :func:`memory_key` of the text).
    key: str | None
    #: ``core`` (default), ``daily``, ``conversation`` or a custom category.
    category: str
    #: The session scope the row belongs to (None: every session sees it).
    session_id: str | None
    #: 0..1, feeds the rerank arm.
    importance: float | None
    #: The origin whose resolved config stamps the profile (default ``interactive``).
    origin: TurnOrigin | str
    #: The working directory the governance profile is resolved from.
    cwd: str | os.PathLike[str] | None
    #: Stamped on the row (default ``remember``).
    source: str


def _planned(
    store: Memory, agent: AgentConfig | None, content: str, options: RememberOptions
) -> tuple[str, str, dict[str, Any]]:
    check_store(store, "remember")
    importance = options.get("importance")
    extra: dict[str, Any] = {"source": options.get("source", "remember")}
    if importance is not None:
        extra["importance"] = importance
    return write_args(
        store,
        agent,
        content,
        options.get("key"),
        options.get("category", "core"),
        options.get("session_id"),
        options.get("origin", TurnOrigin.INTERACTIVE),
        options.get("cwd"),
        extra,
    )


def _kept_key(store: Memory, key: str, content: str, options: RememberOptions) -> str:
    """``key``, or the key an earlier version derived for the same fact in the same session
    when that row is there (it is updated, not duplicated)."""
    session = options.get("session_id")
    get = getattr(store, "get", None)
    if options.get("key") is not None or session is None or not callable(get):
        return key
    legacy = memory_key(content)
    found = get(legacy)
    if found is not None and getattr(found, "session_id", None) == session:
        return legacy
    return key


def remember(
    store: Memory, agent: AgentConfig | None, content: str, **options: Unpack[RememberOptions]
) -> Remembered:
    """Store one fact on purpose; later turns recall and inject it like any other row.

    ``key`` defaults to :func:`memory_key` of the text (the same fact twice is
    one row). The row is stamped with ``session_id`` and, when governance is
    on, the profile the render of an ``origin`` turn compares against
    (:class:`RememberOptions`). Bad arguments are a ``ValueError`` (and a
    store without ``store()`` a ``TypeError``); a store that fails is logged
    and returned as ``error``, never raised, so a turn that remembers cannot
    fail because of memory.
    """
    text, k, fields = _planned(store, agent, content, options)
    try:
        k = _kept_key(store, k, text, options)
        sync_store(store, k, text, fields)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _failed(k, exc)
    return Remembered(k)


async def aremember(
    store: Memory, agent: AgentConfig | None, content: str, **options: Unpack[RememberOptions]
) -> Remembered:
    """The async twin of :func:`remember`: ``astore`` is awaited, else ``store`` runs in a
    thread."""
    text, k, fields = _planned(store, agent, content, options)
    try:
        k = await in_worker(_kept_key, store, k, text, options)
        if isinstance(store, SupportsAsyncWrite):
            await store.astore(k, text, **fields)
        else:
            await in_worker(sync_store, store, k, text, fields)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _failed(k, exc)
    return Remembered(k)


def sync_store(store: Memory, key: str, text: str, fields: Mapping[str, Any]) -> None:
    """``store.store(key, text, **fields)``; a store with only ``astore`` is a ``TypeError``."""
    if not isinstance(store, SupportsWrite):
        raise TypeError("the store only has astore(): call the async twin")
    store.store(key, text, **fields)
