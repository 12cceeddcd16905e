"""Seats of running simulations for OpenEnv clients (``coworkenv serve-env --simulation FILE
--seat ea --seat fin``).

Each OpenEnv session holds one seat (an agent of the simulation's roster) of one simulation
at a time: ``reset(seat="fin")`` joins a *lobby*, and once every seat of the lobby has a
client the simulation starts (a :class:`~coworkenv.runtime.SimulationSession` holding all of
them), so no seat's arrivals go unplayed while its client is still connecting. Each reset
then takes up the seat's next arrival (one OpenEnv episode: its opening, the task's tools);
steps are the agent's actions; the reward is the arrival's score once it is graded, on the
seat that played it. When the simulation has ended, the seat's next reset joins a new lobby
(the next simulation, the next seed). A client that leaves (its socket closes, its session
expires) lets its seat go: its later arrivals go to the ``then`` policy, and the simulation
runs to its end without it.

Lobbies: ``reset(seat=..., seed=N)`` meets the clients that asked for seed N; without a seed,
clients meet in the oldest open lobby that lacks their seat, whose seed is the next of
``seed``, ``seed + 1``, ... (default: the file's seed). A lobby not filled within
``lobby_timeout_s`` answers its waiting clients with an error that names the missing seats.
Every simulation is a run of its own in the store, as ``coworkenv simulate`` records it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..http_server import app_handlers, on_loop
from ..sim.errors import RunConfigError


@dataclass(eq=False)
class Lobby:
    """One simulation of the server: the seats' clients gathering, then its session."""

    seed: int
    asked: int | None
    """The seed its clients asked for (None: whichever came next)."""
    joined: set[str] = field(default_factory=set)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Every seat has its client and the simulation started (or could not: ``error``)."""
    session: Any = None
    """Its :class:`~coworkenv.runtime.SimulationSession`, once started."""
    error: BaseException | None = None
    let_go: set[str] = field(default_factory=set)
    """Seats whose clients are done with this simulation."""
    all_let_go: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def run_id(self) -> str | None:
        s = self.session
        return None if s is None or s._kernel is None else str(s._kernel.run_id)


class SimulationSeats:
    """The server's simulations and their lobbies (see the module's docstring), on the
    server's event loop; the OpenEnv environment of each client calls :meth:`join`,
    :meth:`let_go` and :meth:`offered`."""

    def __init__(self, file: str | Path, seats: Sequence[str], db: str | Path, *,
                 agents: Mapping[str, str] | None = None, policy: str | None = None,
                 then: str = "noop", seed: int | None = None,
                 tools: list[str] | None = None, lobby_timeout_s: float = 300.0) -> None:
        from ..agents.factory import agent_factory
        from ..runtime.simulate import SimulationConfig, _prepare
        from ..sim.simulation import load_simulation

        loaded = load_simulation(file)
        roster = [s.id for s in loaded.sim.roster]
        self.seats = list(dict.fromkeys(seats)) or roster
        unknown = [s for s in self.seats if s not in roster]
        if unknown:
            raise RunConfigError(f"seat: {', '.join(map(repr, unknown))} not in the roster of "
                                 f"{file} (agents: {', '.join(roster)})")
        try:
            agent_factory(then)
        except ValueError as exc:
            raise RunConfigError(f"then: {exc}") from None
        # the other agents' policies and the store, checked as simulate checks them: now,
        # not when the first lobby fills
        _prepare(SimulationConfig(file, agent=policy, agents=dict(agents or {}), db=db))
        self.file, self.db, self.then = Path(file), db, then
        self.simulation = loaded.sim.id
        self.agents, self.policy, self.tools = dict(agents or {}), policy, tools
        self.base_seed = loaded.sim.seed if seed is None else seed
        self.lobby_timeout_s = lobby_timeout_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        """Never set: a simulation that fails is its clients' error, not the server's."""
        self._open: list[Lobby] = []
        self._lobbies: set[Lobby] = set()
        self._drawn = 0
        self._offered: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self._closing: set[asyncio.Future[Any]] = set()
        self.started = 0
        """Simulations started so far."""

    # the clients' side -----------------------------------------------------------------------
    async def join(self, seat: str, seed: int | None) -> Lobby:
        """Wait until this client's lobby is full and its simulation started; the lobby (its
        session's ``seats[seat]`` is the client's)."""
        if seat not in self.seats:
            raise RunConfigError(f"seat {seat!r} is not served here (seats: "
                                 f"{', '.join(self.seats)})")
        lobby = next((lb for lb in self._open if lb.asked == seed and seat not in lb.joined),
                     None)
        if lobby is None:
            if seed is None:
                drawn, self._drawn = self.base_seed + self._drawn, self._drawn + 1
            lobby = Lobby(seed=seed if seed is not None else drawn, asked=seed)
            self._open.append(lobby)
        lobby.joined.add(seat)
        if lobby.joined >= set(self.seats):
            self._open.remove(lobby)
            self._lobbies.add(lobby)
            self.started += 1
            lobby.task = asyncio.get_running_loop().create_task(
                self._play(lobby), name=f"coworkenv-simulation-seed-{lobby.seed}")
        try:
            await asyncio.wait_for(asyncio.shield(lobby.ready.wait()), self.lobby_timeout_s)
        except TimeoutError:
            missing = sorted(set(self.seats) - lobby.joined)
            lobby.joined.discard(seat)
            if not lobby.joined and lobby in self._open:
                self._open.remove(lobby)
            raise RunConfigError(f"no client took seat(s) {', '.join(missing)} of the "
                                 f"simulation with seed {lobby.seed} within "
                                 f"{self.lobby_timeout_s:g} s (it starts once every seat of "
                                 f"{', '.join(self.seats)} has a client: reset(seat=...))"
                                 ) from None
        except BaseException:  # (the client went away while waiting: its place is free)
            if not lobby.ready.is_set():
                lobby.joined.discard(seat)
            raise
        if lobby.error is not None:
            raise lobby.error
        return lobby

    def let_go(self, lobby: Lobby, seat: str) -> None:
        """The seat's client is done with ``lobby``'s simulation (it left, or moved on to the
        next): its arrival in hand ends, its later ones go to ``then``; once every seat is
        let go, the simulation runs to its end and its session closes."""
        if seat in lobby.let_go:
            return
        lobby.let_go.add(seat)
        if lobby.session is not None and lobby.error is None:
            held = lobby.session.seats[seat]
            self._soon(held.release())
        if lobby.let_go >= set(self.seats):
            lobby.all_let_go.set()

    def offered(self, task: Any) -> list[dict[str, Any]]:
        """The functions an arrival of ``task`` offers (its tools, ``send_message``, ``wait``,
        ``finish``): one list per tool set, shared, never to be changed."""
        from ..agents.chat import agent_tools
        from ..sim.task import task_toolset

        names = tuple(task_toolset(task, self.tools))
        if names not in self._offered:
            self._offered[names] = agent_tools(list(names))
        return self._offered[names]

    # the server's side -----------------------------------------------------------------------
    async def _play(self, lobby: Lobby) -> None:
        from ..runtime.simsession import SimulationSession

        try:
            async with SimulationSession(self.file, agent=self.seats, db=self.db,
                                         agents=self.agents, policy=self.policy,
                                         then=self.then, seed=lobby.seed) as session:
                lobby.session = session
                lobby.ready.set()
                await lobby.all_let_go.wait()
        except Exception as exc:  # (its clients are told; the server serves on)
            lobby.error = exc
        finally:
            lobby.ready.set()
            self._lobbies.discard(lobby)

    def _soon(self, coro: Any) -> None:
        """Run ``coro`` on the server's loop (called there), awaited at shutdown."""
        task = asyncio.get_running_loop().create_task(coro)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def call_soon(self, fn: Any, *args: Any) -> None:
        """``fn(*args)`` on the server's loop (from OpenEnv's worker threads too)."""
        loop = self.loop
        if loop is None:
            return
        if on_loop(loop):
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Serve; on shutdown the simulations still running stop there (each run ends
        ``abandoned``, as a session left by an exception does) and waiting clients are told."""
        self.loop = asyncio.get_running_loop()
        try:
            async with app_handlers(app):
                yield
        finally:
            stopping = RunConfigError("the server is stopping")
            for lobby in self._open:
                lobby.error = stopping
                lobby.ready.set()
            running = [lb.task for lb in self._lobbies if lb.task is not None]
            for task in running:
                task.cancel()
            await asyncio.gather(*running, *self._closing, return_exceptions=True)
            self.loop = None
