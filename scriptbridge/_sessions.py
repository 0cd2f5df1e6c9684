"""Sessions: steps that start from what a session's earlier steps left.

``async with bridge.session(tools=None, limits=None) as session`` (:class:`BridgeSession`;
``with sync_bridge.session() as session``, :class:`SyncBridgeSession`) gives a ``run(source,
*, inputs=None)`` that runs each step through the bridge's own run path: a **fresh child**, as
every run is, given what carries in the ``start`` (:class:`~sandbox.protocol.CarryIn`). The child
binds it and re-runs the definitions (:mod:`sandbox._carry`), and at the end of a successful
step reports what carries out (:class:`~sandbox.protocol.Carry`), which the host validates like
every message of a child (names a script can bind, plain data, within the step's bound), and
keeps only when the step's result is ``ok``. Guarantees:

- **What carries**: globals holding plain data, as values (tuples become lists; each name gets
  its own copy); top-level ``def``, ``class``, ``import`` and ``from ... import`` statements of
  successful steps, re-run before the step's script in the sandbox, every effect refused (a
  tool call, fetch, file access or print made while they re-run raises in the definition, which
  is then left out). No other statement ever runs again, so no tool call is made twice.
- **The bound** (:func:`carry_budget`): the msgpack bytes of the plain globals (names and
  values) plus the UTF-8 bytes of the definitions are at most 1 MiB
  (:data:`~sandbox.protocol.CARRY_MAX_BYTES`), or a quarter of ``Limits.max_message_bytes``
  when that is smaller; at most 1,000 definitions and 10,000 globals. Definitions take the bound
  first (the newest kept), then globals in the order they were first bound.
- **Dropped**: whatever can't carry (a generator, a lambda, an exception, a file, a module proxy
  in a variable, a value past the bound, an API name bound again, a definition that failed to
  re-run) is named in the step's ``ScriptResult.dropped``. A failed step carries nothing new:
  the session goes on from the last successful step, and its ``dropped`` is empty.
- **References**: the reference ids every step of the session was given (failed steps
  included; at most :data:`MAX_SESSION_IDS`, the oldest forgotten first) stay fetchable by its
  later steps, and by no other session or run. Never marks are the registry's, global: a never
  reference stays never in every step.
- **Apart**: sessions share no state; each step has its own child and its own ``runs/<id>/``
  (``refs/``, and ``out/``, which isn't shared with later steps). Steps of one session run one
  at a time: a ``run`` started while another runs waits for it (in order), then starts from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import trio

from sandbox.protocol import CARRY_MAX_BYTES, CarryIn

from ._exceptions import ScriptBridgeError
from ._limits import Limits
from ._results import ScriptResult
from ._run_state import RunState, Watch

if TYPE_CHECKING:
    from ._supervisor import Bridge
    from ._sync import SyncBridge

__all__ = ["BridgeSession", "SessionState", "SyncBridgeSession", "carry_budget"]

MAX_SESSION_IDS: Final = 10_000
"""The most reference ids a session keeps issued to it (the oldest are forgotten first)."""


def carry_budget(limits: Limits) -> int:
    """The bound of what one step of a session may carry to the next (module doc)."""
    return min(CARRY_MAX_BYTES, limits.max_message_bytes // 4)


class SessionState:
    """What a session's steps left, kept on the bridge's trio side; one per session."""

    def __init__(self) -> None:
        self.globals: dict[str, Any] = {}
        self.definitions: list[str] = []
        self.given_ids: dict[str, None] = {}
        """Reference ids issued to the session, oldest first."""
        self.lock = trio.Lock()
        self.open = True

    def seed(self, run: RunState) -> None:
        """Give a step's run what carries in, and the reference ids issued to the session."""
        run.carry_in = CarryIn.model_construct(  # made from validated messages: not again
            globals=self.globals, definitions=self.definitions, max_bytes=carry_budget(run.limits)
        )
        run.given_ids.update(self.given_ids)

    def end(self, run: RunState, result: ScriptResult) -> ScriptResult:
        """Keep what the step's run left (its carry only when it is ``ok``); return its result
        with what was dropped."""
        for ref_id in run.given_ids:
            self.given_ids.pop(ref_id, None)
            self.given_ids[ref_id] = None
        while len(self.given_ids) > MAX_SESSION_IDS:
            del self.given_ids[next(iter(self.given_ids))]
        carry = run.carry_out
        if not result.ok or carry is None:
            return result
        self.globals, self.definitions = dict(carry.globals), list(carry.definitions)
        return result.model_copy(update={"dropped": list(carry.dropped)})


class BridgeSession:
    """A session of a :class:`~scriptbridge.Bridge` (module doc): ``async with
    bridge.session() as session: await session.run(source)``. Made by
    :meth:`Bridge.session`; opened once."""

    def __init__(self, bridge: Bridge, tools: Sequence[str] | None, limits: Limits | None) -> None:
        self._bridge = bridge
        self._tools = None if tools is None else list(tools)
        self._limits = limits
        self._state: SessionState | None = None
        self._used = False

    def _open(self) -> None:
        if self._used:
            raise ScriptBridgeError("a session is opened once: make another with session()")
        if self._tools is not None:
            self._bridge.tool_specs(self._tools)  # raises ValueError for a tool not offered
        self._used = True
        self._state = SessionState()

    def _close(self) -> None:
        state, self._state = self._state, None
        if state is not None:
            state.open = False

    async def __aenter__(self) -> BridgeSession:
        """Open the session (``ScriptBridgeError`` when the bridge isn't open; ``ValueError``
        for a name in ``tools`` that isn't offered)."""
        self._bridge._live()
        self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the session: what it carried is let go; a step still running ends as it
        would, and later ``run`` calls raise ``ScriptBridgeError``."""
        self._close()

    @property
    def variables(self) -> dict[str, Any]:
        """The plain-data globals the session carries into its next step (a copy; empty
        when it isn't open)."""
        state = self._state
        return {} if state is None else self._bridge._sync(lambda: dict(state.globals))

    async def run(
        self,
        source: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        label: str | None = None,
        on_output: Callable[[str], object] | None = None,
    ) -> ScriptResult:
        """Run one step in a fresh child, starting from what earlier successful steps left.

        Returns and raises as :meth:`Bridge.run` does (``label`` and ``on_output`` as there);
        also ``ScriptBridgeError`` when the session isn't open. A step started while another
        runs waits for it first.
        """
        watch = Watch(label, on_output)
        return await self._bridge._live().call(self._step, source, inputs, watch)

    async def _step(
        self, source: str, inputs: Mapping[str, Any] | None, watch: Watch | None = None
    ) -> ScriptResult:
        state = self._state
        if state is None:
            raise ScriptBridgeError("open the session (async with) before running steps")
        async with state.lock:
            if not state.open:
                raise ScriptBridgeError("the session was closed")
            return await self._bridge._run(source, inputs, self._limits, self._tools, state, watch)


class SyncBridgeSession:
    """A session of a :class:`~scriptbridge.SyncBridge`: ``with bridge.session() as session:
    session.run(source)``; a :class:`BridgeSession` in blocking form (safe from many threads;
    steps of one session still run one at a time)."""

    def __init__(
        self, bridge: SyncBridge, tools: Sequence[str] | None, limits: Limits | None
    ) -> None:
        self._sync_bridge = bridge
        self._session = BridgeSession(bridge.bridge, tools, limits)

    def __enter__(self) -> SyncBridgeSession:
        """Open the session, as :meth:`BridgeSession.__aenter__` does."""
        self._sync_bridge._live()
        self._session._open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the session, as :meth:`BridgeSession.__aexit__` does."""
        self._session._close()

    @property
    def variables(self) -> dict[str, Any]:
        """:attr:`BridgeSession.variables`."""
        return self._session.variables

    def run(
        self,
        source: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        label: str | None = None,
        on_output: Callable[[str], object] | None = None,
    ) -> ScriptResult:
        """:meth:`BridgeSession.run`, blocking (``on_output`` is called in the bridge's
        thread)."""
        host = self._sync_bridge._live()
        return host.call_blocking(self._session._step, source, inputs, Watch(label, on_output))
