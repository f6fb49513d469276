"""The engine of the client wrappers: one turn per new user message, blocks kept in place.

A wrapped ``create`` call hands its message list (``messages=`` or the
Responses ``input=``) to :meth:`ClientMemory.prepare`. The user's message is
found by :mod:`.messages`; a fingerprint of the conversation up to it (the
role and text of each message, and the turn's sessions) says whether this is
a new turn or another step of a tool loop:

* a known fingerprint with messages after the user's (the model's tool call, the
  tool's result) is a tool-loop step: the same block again, no recall, no event;
* anything else is a new turn: policy, render, one event. So a retry of the same
  request, or another conversation that happens to start with the same words, is a
  turn of its own, and the rule needs no state shared between threads or tasks.
* a request with no user message, only the tools' outputs (a Responses loop on
  server-side state: ``previous_response_id``, ``conversation=``), is a step of the turn
  whose reply asked for those calls, found by their ids (:mod:`._call_ids`): nothing is
  placed (the server holds the block it got), and the model's answer ends that turn.

**Earlier blocks.** With ``earlier_blocks="keep"`` (the default) every
earlier user message the wrapper gave a block gets the same block again, at
the same place, so each request starts with the exact bytes of the previous
one and the provider's prompt cache keeps hitting; the cost is every earlier
block, resent each turn. A block is kept only while every row it shows is
still there as shown and visible to the turn's sessions (checked with the
store's ``get`` at each new turn): a forgotten or changed fact makes its
block go for good. The blocks are this wrapper's memory, in this process: a
new wrapper, a restart or another worker sends earlier messages without
their blocks (one cache miss, never a stale fact). ``"strip"`` sends only this turn's block: fewer
tokens, but the previous turn's message changes, so the cache stops there.
The caller's list is never modified either way (docs/adapters.md measures both).

**Sub-turns.** A turn opens a mark in :func:`.loop.current_turn`'s context
variable (a context variable, so it follows threads and tasks as MemoryLoop's
does). A new turn that starts while a mark is open, in a conversation that
does not contain the marked turn's message, is a nested agent (a tool that
runs another agent): ``sub_turn``, no block, one ``memory_skipped``. A
conversation that does contain it (or the outputs of its tool calls, sent on
server-side state) is the next turn of the same one. The mark
closes when the model answers without asking for a tool (or the call raises),
and it is live only while the host code that made the call is still running
(its frame, held by the mark: on this stack, on the stack of the thread or in
the await chain of the task that made it). So a loop that stopped on a tool
call (a tool raised, the host returned the pending call) leaves nothing behind:
the next request on that pooled thread or long-lived task starts clean.

The SDK side (the keyword that carries the messages, the forwarding objects
and ``call``/``acall``) is in :mod:`._client_call`.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from types import FrameType
from typing import Any, Literal, Unpack, cast

from attrs import frozen

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin

from . import _core
from ._base import Adapter, AdapterOptions
from ._call_ids import Steps, call_ids, reply_items
from ._kept import Shown, digest, stale
from ._turns import CURRENT, LoopTurn, active_turn, where_running
from .loop import MemoryLoop
from .messages import (
    Api,
    Placement,
    check_api,
    check_placement,
    find_user_message,
    get_field,
    is_user_message,
    message_text,
    place_on,
    tool_names,
)

__all__ = [
    "EARLIER_BLOCKS",
    "ClientMemory",
    "ClientOptions",
    "EarlierBlocks",
    "Prepared",
]

EarlierBlocks = Literal["keep", "strip"]
EARLIER_BLOCKS: tuple[str, ...] = ("keep", "strip")
#: How many user messages' blocks a wrapper remembers (oldest forgotten first).
MEMO_SIZE = 4096


class ClientOptions(AdapterOptions, total=False):
    """The wrappers' options: the turns' scopes and origin, and where blocks go."""

    #: Session scopes of every turn (e.g. ``["cli_main"]``); none: sessionless.
    sessions: Iterable[str | None]
    #: The origin of a turn that is not nested (default ``interactive``).
    origin: TurnOrigin | str
    #: Every turn is suppressed (no recall; one ``memory_skipped``).
    suppress: bool
    #: ``prefix_user`` (default) or ``message``, as in :func:`.messages.inject_block`.
    placement: Placement
    #: ``keep`` (default: byte-identical prefix) or ``strip`` (only this turn's block).
    earlier_blocks: EarlierBlocks


@frozen
class Prepared:
    """What ``prepare`` did: the list to send and this turn's injection (None: reused)."""

    messages: list[Any]
    injection: _core.Injection | None
    fingerprint: str | None  # the turn's user message (None: no turn)


@frozen
class _Decision:
    prints: dict[int, str]
    idx: int | None
    req: _core.TurnInput | None  # None: nothing to render, ``done`` is the answer
    done: Prepared | None = None


@frozen
class _Mark:
    fingerprint: str
    parent: LoopTurn | None


_log = logging.getLogger("memory_inject.adapters")
_MARKS: OrderedDict[str, _Mark] = OrderedDict()  # turn_id -> mark, for every wrapper


class ClientMemory(Adapter):
    """Policy, render and placement for one wrapped client (shared by OpenAI and Anthropic)."""

    default_channel = "api"

    def __init__(
        self, store: Memory, agent_config: AgentConfig, **options: Unpack[ClientOptions]
    ) -> None:
        """See :class:`ClientOptions`; the store is checked here (``TypeError``)."""
        placement = options.pop("placement", "prefix_user")
        earlier = options.pop("earlier_blocks", "keep")
        sessions = _core.scopes(options.pop("sessions", ()))
        origin = TurnOrigin(options.pop("origin", TurnOrigin.INTERACTIVE))
        suppress = bool(options.pop("suppress", False))
        check_placement(placement)
        if earlier not in EARLIER_BLOCKS:
            raise ValueError(f"'earlier_blocks' must be one of {EARLIER_BLOCKS} (got {earlier!r})")
        # What is left once the wrapper took its own: unknown ones are refused by name.
        super().__init__(store, agent_config, **cast(AdapterOptions, options))
        self.placement: Placement = placement
        self.earlier_blocks: EarlierBlocks = earlier
        self.sessions = sessions
        self.origin = origin
        self.suppress = suppress
        self._blocks: OrderedDict[str, str] = OrderedDict()
        # fingerprint -> (key, content digest) of each row its block shows (keep mode)
        self._shown: dict[str, Shown] = {}
        # tool-call id -> its turn and the block sent with the call whose reply made it
        self._steps = Steps(MEMO_SIZE)
        self._mark_owner = MemoryLoop(store, agent_config)  # owns the marks, renders nothing

    # -- one call -------------------------------------------------------------------

    def _fingerprints(self, messages: Sequence[Any], upto: int, api: Api) -> dict[int, str]:
        """A fingerprint per user message up to ``upto`` (a rolling hash of the conversation)."""
        # surrogatepass: a lone surrogate (text cut from UTF-16) is the SDK's to refuse; here
        # it made the turn go out with no event (round 35)
        h = hashlib.sha256(repr(self.sessions).encode("utf-8", "surrogatepass"))
        out: dict[int, str] = {}
        for i in range(upto + 1):
            msg = messages[i]
            role = get_field(msg, "role") or get_field(msg, "type")
            h.update(f"\x1e{role}\x1f{message_text(msg)}".encode("utf-8", "surrogatepass"))
            if i == upto or is_user_message(msg, api=api):
                out[i] = h.copy().hexdigest()
        return out

    def _nested(
        self, fingerprints: Iterable[str], caller: FrameType | None, before: Sequence[Any]
    ) -> bool:
        active = active_turn()
        if active is None:
            return False
        mark = _MARKS.get(active.turn_id)
        if mark is not None and mark.fingerprint in {*fingerprints, *self._steps.turns(before)}:
            return False  # the open turn's next step (its tools' outputs: server-side state)
        # Another conversation from the very call that opened the turn: the host's loop
        # came round (a worker's next request), so the open turn was left, not entered.
        return caller is None or not active.called_again_from(caller)

    def _request(self, messages: Sequence[Any], idx: int, nested: bool) -> _core.TurnInput:
        return _core.TurnInput(
            origin=TurnOrigin.SUB_TURN if nested else self.origin,
            query=message_text(messages[idx]),
            sessions=self.sessions,
            suppress=self.suppress,
            turn=self._meta(None),
        )

    def _open(self, fingerprint: str, turn_id: str, nested: bool, caller: FrameType | None) -> None:
        active = active_turn()
        parent = active
        if not nested and active is not None:  # the next turn of the open one: replace it
            replaced = _MARKS.pop(active.turn_id, None)
            parent = replaced.parent if replaced is not None else None
            active.close()
        thread, task = where_running()
        mark = LoopTurn(
            origin=TurnOrigin.SUB_TURN if nested else self.origin,
            sessions=self.sessions,
            suppress=self.suppress,
            turn_id=turn_id,
            owner=self._mark_owner,
            nested=nested,
            frame=caller,
            thread=thread,
            task=task,
            site=caller.f_lasti if caller is not None else None,
        )
        _MARKS[turn_id] = _Mark(fingerprint, parent)
        while len(_MARKS) > MEMO_SIZE:
            _MARKS.popitem(last=False)
        CURRENT.set(mark)  # left set on purpose: the turn spans this call and the tools after it

    def end_turn(self) -> None:
        """Close this wrapper's open turn by hand (a loop that stopped with a tool call
        unanswered), so a later, unrelated conversation in this context is not a sub-turn."""
        active = active_turn()
        mark = _MARKS.get(active.turn_id) if active is not None else None
        if active is not None and mark is not None and active.owner is self._mark_owner:
            self.close(mark.fingerprint)

    def close(self, fingerprint: str | None, where: LoopTurn | None = None) -> None:
        """End the turn of ``fingerprint`` if it is the open one (the model answered).

        ``where``: the mark open where the call was made; a stream read in another
        context (a worker thread, a finalizer's task) ends that mark itself."""
        active = CURRENT.get()
        if where is not None and active is not where and fingerprint is not None:
            opened = _MARKS.get(where.turn_id)
            if opened is not None and opened.fingerprint == fingerprint:
                _MARKS.pop(where.turn_id, None)
                where.close()
            return
        mark = _MARKS.get(active.turn_id) if active is not None else None
        if fingerprint is None or active is None or mark is None:
            return
        if mark.fingerprint == fingerprint:
            _MARKS.pop(active.turn_id, None)  # another thread may have trimmed it already
            active.close()
            parent = mark.parent
            CURRENT.set(parent if parent is not None and parent.live else None)

    def _decide(self, messages: Sequence[Any], api: Api, caller: FrameType | None) -> _Decision:
        check_api(api)
        idx, problem = find_user_message(messages, api=api)
        if problem is not None:
            req = _core.TurnInput(
                origin=TurnOrigin.SUB_TURN if active_turn() else self.origin,
                query="",
                sessions=self.sessions,
                suppress=self.suppress,
                turn=self._meta(None),
            )
            injection = _core.unreadable(self.store, self.agent_config, req, problem)
            return _Decision({}, None, None, Prepared(list(messages), injection, None))
        if idx is None:  # tools' outputs alone (server-side state): a step of their turn
            step = Prepared(list(messages), None, self._turn_of(messages))
            return _Decision({}, None, None, step)
        prints = self._fingerprints(messages, idx, api)
        if prints[idx] in self._blocks and idx < len(messages) - 1:  # a tool-loop step
            own = self._step_block(messages[idx + 1 :])
            return _Decision(prints, idx, None, self._placed(messages, prints, idx, None, own=own))
        nested = self._nested(prints.values(), caller, messages[:idx])
        return _Decision(prints, idx, self._request(messages, idx, nested))

    def _placed(
        self,
        messages: Sequence[Any],
        prints: dict[int, str],
        idx: int | None,
        injection: _core.Injection | None,
        caller: FrameType | None = None,
        *,
        own: str | None = None,
    ) -> Prepared:
        """``messages`` with the blocks placed; ``own`` is the turn's block when the
        conversation's tool calls say which it was (:meth:`note_step`)."""
        out = list(messages)
        if idx is None:
            return Prepared(out, injection, None)
        keep = self.earlier_blocks == "keep"
        if injection is not None:
            if keep:
                self._forget_stale(prints, idx)
            self._remember(prints[idx], injection)
            nested = injection.origin is TurnOrigin.SUB_TURN
            self._open(prints[idx], injection.turn.turn_id, nested, caller)
        for i in sorted(prints, reverse=True):  # right to left: an insert shifts nothing before it
            if i == idx or keep:
                block = own if i == idx and own is not None else self._blocks.get(prints[i], "")
                out = place_on(out, i, block, placement=self.placement)
        return Prepared(out, injection, prints[idx])

    def _remember(self, fingerprint: str, injection: _core.Injection) -> None:
        self._blocks[fingerprint] = injection.block
        entries = injection.result.entries if injection.result is not None else ()
        self._shown[fingerprint] = tuple((e.key, digest(e.content)) for e in entries)
        while len(self._blocks) > MEMO_SIZE:
            old, _ = self._blocks.popitem(last=False)
            self._shown.pop(old, None)

    def note_step(self, fingerprint: str | None, resp: Any) -> None:
        """The reply to the turn of ``fingerprint`` asks for tools: remember its block under
        the calls' ids, so that conversation's next step gets it even when another one with
        the same words got a block since (:mod:`._call_ids`)."""
        self.note_calls(fingerprint, call_ids(reply_items(resp)))

    def note_calls(self, fingerprint: str | None, ids: Iterable[str]) -> None:
        """:meth:`note_step` for the call ids a streamed reply carried."""
        if fingerprint is not None:
            self._steps.note(fingerprint, self._blocks.get(fingerprint), ids)

    def _step_block(self, after: Sequence[Any]) -> str | None:
        """The block a tool-loop step's calls were made under (None: not known)."""
        return self._steps.block(after)

    def _turn_of(self, messages: Sequence[Any]) -> str | None:
        """The turn whose tool calls ``messages`` answer (the open one first), so that the
        model's answer to them ends it; None: calls this wrapper did not see."""
        turns = self._steps.turns(messages)
        active = active_turn()
        mark = _MARKS.get(active.turn_id) if active is not None else None
        if mark is not None and mark.fingerprint in turns:
            return mark.fingerprint
        return min(turns, default=None)

    def _forget_stale(self, prints: dict[int, str], idx: int) -> None:
        """Before a new turn re-places the earlier blocks (``keep``): strip for good each
        one that shows a row no longer there as shown (:func:`._kept.stale`)."""
        earlier = [fp for i, fp in prints.items() if i != idx and self._blocks.get(fp)]
        for fingerprint in stale(self.store, self.sessions, self._shown, earlier):
            self._blocks[fingerprint] = ""  # stripped from now on, in every later request
            self._shown.pop(fingerprint, None)

    def prepare(
        self, messages: Sequence[Any], *, api: Api, caller: FrameType | None = None
    ) -> Prepared:
        """The list to send for one ``create`` call; never raises because of memory.

        ``caller`` is the frame of the host code making the call: the turn this
        call opens stays open only while that frame runs (default: the caller of
        ``prepare``)."""
        where = caller if caller is not None else sys._getframe(1)
        decision = self._decide(messages, api, where)
        if decision.req is None:
            return decision.done or Prepared(list(messages), None, None)
        injection = self._serve(decision.req, self._save(decision.req), tool_names(messages))
        return self._placed(messages, decision.prints, decision.idx, injection, where)

    async def aprepare(
        self, messages: Sequence[Any], *, api: Api, caller: FrameType | None = None
    ) -> Prepared:
        """The async twin of :meth:`prepare`."""
        where = caller if caller is not None else sys._getframe(1)
        decision = self._decide(messages, api, where)
        if decision.req is None:
            return decision.done or Prepared(list(messages), None, None)
        injection = await self._aserve(decision.req, self._save(decision.req), tool_names(messages))
        return self._placed(messages, decision.prints, decision.idx, injection, where)

    def _save(self, req: _core.TurnInput) -> _core.Save:
        first = next((s for s in self.sessions if s is not None), None)
        return _core.Save(f"user_msg_{req.turn.turn_id}", req.query, first)
