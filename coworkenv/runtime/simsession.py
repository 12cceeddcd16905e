"""One agent of a running simulation, stepped from outside: :class:`SimulationSession`.

The simulation runs as ``coworkenv simulate`` runs it, every other agent of its roster
following its own policy; the held agent's seat is the caller's. Each arrival routed to it
is one episode for the caller: :meth:`SimulationSession.reset` waits for the seat's next
arrival and returns its opening (system prompt and request), :meth:`~SimulationSession.step`
takes one action and returns what the agent was told until its next decision, with the
reward (the arrival's score, once it is graded) and whether the arrival is over. While the
caller thinks, the simulation waits (deterministic: the same actions give the same log).

    async with SimulationSession("examples/simulations/handoff.yaml", agent="fin",
                                 db="runs/s.db") as s:
        obs = await s.reset()
        while True:
            obs, reward, done, info = await s.step(my_policy(obs))
            if done:
                break
    print(s.result.passed)         # the whole simulation's result, once it has ended

This is how a trainer (TRL, OpenEnv, verifiers) trains one agent inside a busy company.
Several agents may be held at once (``agent=["ea", "fin"]``): each is a :class:`SeatSession`
of ``s.seats``, stepped by its own client, each arrival's reward its seat's; a seat says the
task of the arrival in hand (``seat.task``: its tools, reference, checks), and
``await seat.release()`` lets its agent go while the simulation runs on (``coworkenv train
seats`` trains each held agent on its first arrival this way). ``seed`` draws the workload
with another seed than the file's (as ``simulate --seeds``).
Leaving the block ends the arrival in hand; the seat's later arrivals go to ``then`` (a
policy name, default ``noop``) and the simulation runs to its end (the run ``finished``).

Leaving it by an exception, or by a cancellation (a caller's timeout, the event loop closing
while the block is open), stops the simulation there: the run ends ``abandoned`` (a session's
actions cannot be replayed, so it is not resumable: run it again under a new ``run_id``) and
the exception reaches the caller as itself. A usage error (a bad ``run_id``, file or agent)
is raised by ``async with`` itself, before the block runs, as one
:class:`~coworkenv.sim.RunConfigError`.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..sim.errors import RunConfigError
from .run import _ours, first_error
from .session import Action, Observation, SessionAgent
from .simulate import SimulationConfig, SimulationResult, asimulate

if TYPE_CHECKING:
    from ..sim.simulation import ArrivalOutcome, Live
    from ..sim.simulation.kernel import SimulationKernel
    from ..sim.task import Task


class SeatSession:
    """One held agent of a :class:`SimulationSession`: its arrivals, one episode each
    (:meth:`reset`, :meth:`step`), for the caller's client of that agent."""

    def __init__(self, owner: SimulationSession, seat: str) -> None:
        self.owner = owner
        self.seat = seat
        self.outcome: ArrivalOutcome | None = None
        """The last arrival of this agent that was graded."""
        self.steps = 0
        self._waiting: deque[tuple[SessionAgent, Task]] = deque()
        self._arrived = anyio.Event()
        self._current: SessionAgent | None = None
        self.task: Task | None = None
        """The task of the arrival in hand (its tools, reference, checks: what a client may
        offer its model), None between arrivals."""
        self._released = False

    # the simulation's side -----------------------------------------------------------------
    def _make(self, task: Any) -> Any:
        if self._released:
            return self.owner._fallback(task)
        a = SessionAgent()
        self._waiting.append((a, task))
        self._arrived.set()
        self.owner._arrived.set()
        return a

    def _closed(self, live: Live, outcome: ArrivalOutcome) -> None:
        if not isinstance(live.agent, SessionAgent):
            return
        if live.agent is self._current:
            self.outcome = outcome
        live.agent.end()  # (the caller's next receive ends: done)

    def _release(self) -> None:
        """Later arrivals of the seat go to ``then`` (and are on record as its)."""
        from ..agents.factory import parse_agent

        self._released = True
        k = self.owner._kernel
        if k is not None:
            k.agent_names[self.seat] = self.owner.then
            k.roles[self.seat] = parse_agent(self.owner.then).role

    async def release(self) -> None:
        """Let go of this agent while the simulation runs on: the arrival in hand ends now,
        those that came and were not taken up end as they are, and its later arrivals go to
        the session's ``then`` policy (a trainer that wants one arrival per agent and
        simulation lets go after it, so the simulation never waits on an agent nobody
        steps)."""
        self._release()
        await self._end_current()
        while self._waiting:
            self._current, _ = self._waiting.popleft()
            await self._end_current()

    async def _end_current(self) -> None:
        """End the arrival in hand (the caller let go of it): its agent is told to end now,
        and again whenever it asks, until its arrival is graded."""
        a = self._current
        self._current, self.task = None, None
        if a is None:
            return

        async def release() -> None:
            try:
                await a.actions.send(Action.end())
                while True:
                    await a.told.receive()
                    await a.actions.send(Action.end())
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        tg = self.owner._tg
        assert tg is not None
        tg.start_soon(release, name=f"simulation-release-{self.seat}")

    # the caller's side -------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """The simulation has ended (no arrival will come to this agent any more)."""
        return self.owner._done.is_set() and not self._waiting

    async def reset(self) -> Observation:
        """Wait for this agent's next arrival; its opening and what it was told before its
        first decision (``done``: the simulation ended first)."""
        owner = self.owner
        if owner._tg is None:
            raise RunConfigError("simulation session: open it first (async with ...)")
        if self._current is not None:
            await self._end_current()
        while not self._waiting:
            if owner._done.is_set():
                if owner.error is not None:
                    raise owner.error
                return Observation([], done=True)
            self._arrived = anyio.Event()
            await self._arrived.wait()
        a, self.task = self._waiting.popleft()
        self._current = a
        self.outcome, self.steps = None, 0
        try:
            told = await a.told.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return Observation(a.opening, done=True)
        return Observation([*a.opening, *told])

    async def step(self, action: Action) -> tuple[Observation, float, bool, dict[str, Any]]:
        """One action of this agent; (what it was told until its next decision, reward,
        whether this arrival is over, info). The reward is 0 until the arrival is graded,
        then its score."""
        a = self._current
        if a is None:
            raise RunConfigError("simulation session: reset() takes up an arrival first")
        await a.actions.send(action)
        if action.kind != "wait":
            self.steps += 1
        try:
            told = await a.told.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            rest, a.buffer = a.buffer, []
            self._current = None
            o = self.outcome
            return Observation(rest, done=True), (o.score if o else 0.0), True, self.info()
        return Observation(told), 0.0, False, self.info()

    def info(self) -> dict[str, Any]:
        o = self.outcome
        out: dict[str, Any] = {"agent": self.seat, "steps": self.steps}
        if o is not None:
            out.update(arrival=o.key, task_id=o.task_id, termination=o.termination,
                       score=o.score, passed=o.passed, completion=o.completion,
                       response_hours=o.response_hours)
        return out


class SimulationSession:
    """See the module's docstring. ``agent``: the agent held, or several (``seats``: one
    :class:`SeatSession` each, for a client each)."""

    def __init__(self, file: str | Path, *, agent: str | Sequence[str],
                 db: str | Path = "runs/coworkenv.db",
                 agents: Mapping[str, str] | None = None, policy: str | None = None,
                 run_id: str | None = None, then: str = "noop",
                 seed: int | None = None) -> None:
        held = [agent] if isinstance(agent, str) else list(dict.fromkeys(agent))
        if not held:
            raise RunConfigError("agent: give the agent (or agents) of the roster to hold")
        self.config = SimulationConfig(file, agent=policy, agents=dict(agents or {}), db=db,
                                       run_id=run_id, seed=seed)
        self.seats = {sid: SeatSession(self, sid) for sid in held}
        """The held agents, by id: each its own :meth:`~SeatSession.reset` and
        :meth:`~SeatSession.step`, for its own client (step them concurrently: the
        simulation waits on whichever agent it handed something to)."""
        self.seat = held[0]
        self.then = then
        self.result: SimulationResult | None = None
        self.error: BaseException | None = None
        self._arrived = anyio.Event()
        self._done = anyio.Event()
        self._started = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._fallback: Any = None
        self._kernel: SimulationKernel | None = None

    # one held agent: the session is its seat ------------------------------------------------
    def _one(self) -> SeatSession:
        if len(self.seats) > 1:
            raise RunConfigError(f"simulation session: it holds {len(self.seats)} agents "
                                 f"({', '.join(self.seats)}): step each through its seat, "
                                 "e.g. s.seats[" + repr(self.seat) + "].reset()")
        return self.seats[self.seat]

    @property
    def outcome(self) -> ArrivalOutcome | None:
        """The last arrival of the held agent that was graded."""
        return self._one().outcome

    @property
    def steps(self) -> int:
        return self._one().steps

    async def reset(self) -> Observation:
        """The held agent's :meth:`SeatSession.reset`."""
        return await self._one().reset()

    async def step(self, action: Action) -> tuple[Observation, float, bool, dict[str, Any]]:
        """The held agent's :meth:`SeatSession.step`."""
        return await self._one().step(action)

    def info(self) -> dict[str, Any]:
        return self._one().info()

    @property
    def done(self) -> bool:
        """The simulation has ended (no arrival will come to a held agent any more)."""
        return self._done.is_set() and not any(s._waiting for s in self.seats.values())

    # the simulation's side -----------------------------------------------------------------
    def _closed(self, live: Live, outcome: ArrivalOutcome) -> None:
        seat = self.seats.get(live.seat.id)
        if seat is not None:
            seat._closed(live, outcome)

    def _hook(self, kernel: SimulationKernel) -> None:
        self._kernel = kernel
        kernel.on_closed.append(self._closed)
        self._started.set()

    async def _run(self) -> None:
        try:
            self.result = await asimulate(
                self.config, hold={sid: s._make for sid, s in self.seats.items()},
                on_kernel=self._hook)
        except Exception as exc:  # (the simulation's error, as itself: not in a group)
            self.error = _ours(exc) if isinstance(exc, BaseExceptionGroup) else exc
        finally:
            self._done.set()
            self._arrived.set()
            for seat in self.seats.values():
                seat._arrived.set()
            self._started.set()

    async def __aenter__(self) -> SimulationSession:
        from ..agents.factory import agent_factory

        try:
            self._fallback = agent_factory(self.then)
        except ValueError as exc:
            raise RunConfigError(f"then: {exc}") from None
        self._stack = anyio.create_task_group()
        self._tg = await self._stack.__aenter__()
        self._tg.start_soon(self._run, name=f"simulation-holding-{'-'.join(self.seats)}")
        try:
            await self._started.wait()  # (the run is on record, or it could not start)
        except BaseException:
            self._tg.cancel_scope.cancel()
            await self._close(*sys.exc_info())
            raise
        if self._kernel is None and self.error is not None:  # (a usage error: said as is)
            await self._close(None, None, None)
            raise self.error
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        if et is not None:  # (an exception or a cancellation: the run is abandoned there)
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._close(et, ev, tb)
            return
        for seat in self.seats.values():
            seat._release()
        try:
            while not self._done.is_set():
                for seat in self.seats.values():  # (what came before the release: ended)
                    await seat.release()
                self._arrived = anyio.Event()
                await self._arrived.wait()
        except BaseException:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._close(*sys.exc_info())
            raise
        await self._close(None, None, None)
        if self.error is not None:
            raise self.error

    async def _close(self, et: type[BaseException] | None, ev: BaseException | None,
                     tb: TracebackType | None) -> None:
        """Close the task group; a caller's exception ``ev`` goes on as itself (not in an
        exception group), what the simulation raised beside it noted on it."""
        try:
            await self._stack.__aexit__(et, ev, tb)
        except BaseExceptionGroup as group:
            rest = group.split(lambda e: e is ev or isinstance(
                e, anyio.get_cancelled_exc_class()))[1]
            if ev is None:
                raise first_error(rest or group) from group
            if rest is not None:
                ev.add_note(f"(the simulation failed too: {first_error(rest)!r})")
        finally:
            self._tg = None
