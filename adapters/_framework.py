"""What the agent-framework adapters share: one render per framework run, and the nesting mark.

A framework (LangChain, LangGraph, the OpenAI Agents SDK, pydantic-ai) calls its
model several times per run. Each adapter maps *one run* to *one turn*: the
run's first hook renders (one event), the later hooks place the same block.
While the run executes its tools, the adapter marks the context with a
:class:`~.loop.LoopTurn` (through :meth:`MemoryLoop.turn <.loop.MemoryLoop.turn>`),
so an agent started inside a tool, by this adapter, another framework adapter
or a plain :class:`~.loop.MemoryLoop`, is a ``sub_turn``: no parent block, its
own event.

Earlier blocks: by default (``earlier_blocks="strip"``) the block is placed in
the model request only and never written into the framework's history, so a
checkpointed or replayed history holds no block, each request carries one
(the current turn's), and the request prefix before the newest user message
stays byte-identical from turn to turn (the previous turn's own message
changes, so a provider's cache stops there). ``earlier_blocks="keep"``
writes the block into the history where the framework allows it, so each
request starts with the previous request's exact bytes, and every turn pays
for all earlier blocks again (docs/adapters.md has the measured cost of both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, NotRequired, Protocol, Unpack, cast

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin

from . import _core
from ._base import Adapter, AdapterOptions
from .loop import MemoryLoop, current_turn

__all__ = [
    "EARLIER_BLOCKS",
    "EarlierBlocks",
    "FrameworkAdapter",
    "FrameworkOptions",
    "Sessions",
    "ToolCore",
    "ToolSpec",
]

#: Session scopes per run: a fixed list, or a function of the framework's run context.
Sessions = Iterable[str | None] | Callable[[Any], Iterable[str | None]]
#: What happens to the blocks of earlier turns (the same values as the client wrappers').
EarlierBlocks = Literal["keep", "strip"]
EARLIER_BLOCKS: tuple[str, ...] = ("keep", "strip")


class ToolSpec(Protocol):
    """One memory tool as the framework-neutral core describes it (``MemoryTool``)."""

    @property
    def name(self) -> str:
        """The tool's name (``memory_store``, ``memory_recall``, ``memory_forget``)."""

    @property
    def description(self) -> str:
        """What the model is told the tool does."""

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the tool's arguments."""


class ToolCore(Protocol):
    """What the framework tool wrappers need of the memory tools (``MemoryTools``).

    ``call`` / ``acall`` take the model's arguments (a mapping or a JSON
    string) and return the text for the model; they never raise.
    """

    def __iter__(self) -> Iterator[ToolSpec]:
        """The tools, in order."""

    def call(self, name: str, arguments: Any = None) -> str:
        """Run one tool call (never raises)."""

    async def acall(self, name: str, arguments: Any = None) -> str:
        """The async twin of :meth:`call`."""


class FrameworkOptions(AdapterOptions, total=False):
    """The options of every framework adapter: :class:`AdapterOptions` and two of their own."""

    #: The turn's session scopes, or a function of the framework's run context returning them.
    sessions: NotRequired[Sessions]
    #: ``"strip"`` (default): the block in the request only; ``"keep"``: in the history too.
    earlier_blocks: NotRequired[EarlierBlocks]


class FrameworkAdapter(Adapter):
    """The shared constructor and the one-render-per-run step of the framework adapters."""

    default_channel = "agent"

    def __init__(
        self, store: Memory, agent_config: AgentConfig, **options: Unpack[FrameworkOptions]
    ) -> None:
        """``options``: :class:`FrameworkOptions`; a wrong store is a ``TypeError`` here."""
        sessions = options.pop("sessions", ())
        earlier = options.pop("earlier_blocks", "strip")
        if earlier not in EARLIER_BLOCKS:
            raise ValueError(f"'earlier_blocks' must be one of {EARLIER_BLOCKS} (got {earlier!r})")
        super().__init__(store, agent_config, **cast(AdapterOptions, options))
        if not (callable(sessions) or isinstance(sessions, Iterable)) or isinstance(sessions, str):
            raise TypeError(
                f"'sessions' must be a list of session ids or a function (got {sessions!r})"
            )
        self.sessions = sessions if callable(sessions) else _core.scopes(sessions)
        self.earlier_blocks: EarlierBlocks = earlier
        # Only its turn() is used: it sets the context mark every adapter reads.
        self._marker = MemoryLoop(store, agent_config, channel=self.channel)

    def _scopes(self, run_context: Any) -> tuple[str | None, ...]:
        if callable(self.sessions):
            return _core.scopes(self.sessions(run_context))
        return tuple(self.sessions)

    def _request(self, text: str, run_context: Any) -> tuple[_core.TurnInput, BaseException | None]:
        """The run's request: ``sub_turn`` inside any marked turn, else ``interactive``;
        and what the host's ``sessions`` function raised, if it did (the request is then
        sessionless and must not be rendered)."""
        nested = current_turn() is not None
        failed: BaseException | None = None
        try:
            sessions = self._scopes(run_context)
        except Exception as exc:  # noqa: BLE001 - a host bug is reported on the turn
            sessions, failed = (), exc
        req = _core.TurnInput(
            origin=TurnOrigin.SUB_TURN if nested else TurnOrigin.INTERACTIVE,
            query=text,
            sessions=sessions,
            turn=self._meta(None),
        )
        return req, failed

    def _save(self, req: _core.TurnInput) -> _core.Save:
        first = next((s for s in req.sessions if s is not None), None)
        return _core.Save(f"user_msg_{req.turn.turn_id}", req.query, first)

    def begin(self, text: str, run_context: Any = None) -> _core.Injection:
        """Render the turn of a run whose user message is ``text`` (one event). Never raises:
        a ``sessions`` function that raises gives no block and one ``memory_skipped``
        (``host_callback_failed``)."""
        req, failed = self._request(text, run_context)
        if failed is not None:
            return _core.host_failed(self.store, self.agent_config, req, "sessions", failed)
        return self._serve(req, self._save(req))

    async def abegin(self, text: str, run_context: Any = None) -> _core.Injection:
        """The async twin of :meth:`begin`."""
        req, failed = self._request(text, run_context)
        if failed is not None:
            return _core.host_failed(self.store, self.agent_config, req, "sessions", failed)
        return await self._aserve(req, self._save(req))

    @contextmanager
    def running(self, injection: _core.Injection | None) -> Iterator[None]:
        """Mark the context as inside this run's turn (tools started here are sub-turns)."""
        if injection is None:
            with self._marker.turn():
                yield
            return
        with self._marker.turn(
            origin=injection.origin, sessions=injection.sessions, turn_id=injection.turn.turn_id
        ) as turn:
            turn.injection = injection
            yield
