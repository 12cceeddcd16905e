"""Scenario scripts: a Python file with ``SIMULATION`` (the YAML file it scripts, relative to
the script) and ``async def scenario(sim)``, run beside the simulation, deterministically (the
simulation waits at each of its ``await``s until what it waits for holds)::

    SIMULATION = "week.yaml"

    async def scenario(sim):
        sim.at("d2 10:00", lambda: sim.say("leo", "assistant", "Any news on the offsite?"))
        await sim.until(lambda: len(sim.outcomes) >= 10)
        sim.check("ten-by-tuesday", sim.now.weekday() <= 1)

:class:`Scenario` is the handle the script drives its running simulation with.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..sim.errors import RunConfigError

if TYPE_CHECKING:
    from ..sim.simulation import ArrivalOutcome
    from ..sim.simulation.kernel import SimulationKernel
    from ..store import EventRecord
    from ..workspace import WorkspaceState

Script = Callable[["Scenario"], Awaitable[None]]


class Scenario:
    """A scenario script's handle on its running simulation. Everything it does happens at a
    quiescent point of the simulation (between two deliveries), so a script is as
    deterministic as the simulation."""

    def __init__(self, kernel: SimulationKernel) -> None:
        import anyio

        self._k = kernel
        self._waiting: tuple[Callable[[], bool], anyio.Event] | None = None
        self._yielded = anyio.Event()
        self._timers = 0
        self.done = False
        self.error: BaseException | None = None

    # reading ------------------------------------------------------------------------------
    @property
    def now(self) -> datetime:
        """The simulated time."""
        return self._k.cal.at(self._k.clock.now)

    @property
    def seconds(self) -> float:
        """Simulated seconds since the start."""
        return self._k.clock.now

    @property
    def workspace(self) -> WorkspaceState:
        """The shared workspace as it is now (read it; change it through tools)."""
        return self._k.state

    @property
    def outcomes(self) -> list[ArrivalOutcome]:
        """The arrivals graded so far, in the order they ended."""
        return self._k.outcomes

    @property
    def open(self) -> int:
        """Arrivals waiting or in work."""
        return len(self._k.live)

    def events(self, since: int = 0) -> list[EventRecord]:
        """The simulation's log from ``since`` on (decoded: read what you need)."""
        from ..store import EventRecord

        return [EventRecord.from_row(r) for r in self._k._log.rows_from(since)]

    def time(self, when: str) -> float:
        """Seconds since the start of a simulation time (``dN HH:MM``, ``HH:MM``, ISO)."""
        return self._k.cal.seconds(when)

    # acting -------------------------------------------------------------------------------
    def at(self, when: str | float, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` at a simulation time (or seconds since the start)."""
        from ..sim.episode import _Delivery

        at = self.time(when) if isinstance(when, str) else float(when)
        self._timers += 1
        tid = f"script-{self._timers}"
        self._k.timers[tid] = fn
        self._k.clock.schedule(at, _Delivery("script", "kernel", "script", {"id": tid}),
                               priority=0)

    def every(self, minutes: float, fn: Callable[[], Any], *, start: str | float | None = None,
              until: str | float | None = None) -> None:
        """Call ``fn()`` every ``minutes`` simulated minutes (from ``start``, until ``until``,
        else the end of the last working day)."""
        first = self.seconds if start is None else (self.time(start) if isinstance(start, str)
                                                    else float(start))
        last = self._k.cal.end_s if until is None else (self.time(until) if isinstance(
            until, str) else float(until))
        t = first
        while t <= last:
            self.at(t, fn)
            t += minutes * 60

    def say(self, sender: str, to: str, text: str) -> None:
        """A direct message from a person to a person or an agent's person, now."""
        actor = self._k.actor_for(to)
        if actor is None:
            raise ValueError(f"say: {to!r} is no one in this simulation")
        self._k.submit(sender, actor, "message", {"from": sender, "text": text}, 0.0)

    def add_task(self, template: str, *, to: str, at: str | float | None = None,
                 requester: str | None = None) -> str:
        """One more arrival of a task template, routed to an agent (id or person); its key."""
        from ..sim.simulation import Route

        if template not in self._k.loaded.templates:
            raise ValueError(f"add_task: unknown task {template!r}")
        seat = next((s.id for s in self._k.sim.roster if to in (s.id, s.person)), None)
        if seat is None:
            raise ValueError(f"add_task: unknown agent {to!r}")
        when = self.seconds if at is None else (self.time(at) if isinstance(at, str)
                                                else float(at))
        return self._k.add_arrival(template, Route(agent=seat), when, requester)

    def check(self, check_id: str, passed: bool, detail: str = "") -> None:
        """A simulation-level check: recorded in the log and in the result's checks."""
        from ..sim.simulation import SimCheck

        self._k.extra_checks.append(SimCheck(f"script:{check_id}", bool(passed), detail))
        self._k.note("script", "sim.check", {"id": check_id, "passed": bool(passed),
                                             "detail": detail})

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds (checked after each delivery; the simulation waits
        for the script to go on)."""
        import anyio

        if predicate():
            return
        ev = anyio.Event()
        self._waiting = (predicate, ev)
        self._yielded.set()
        await ev.wait()

    async def sleep(self, minutes: float) -> None:
        """Wait ``minutes`` of simulated time."""
        flag: list[bool] = []
        self.at(self.seconds + minutes * 60, lambda: flag.append(True))
        await self.until(lambda: bool(flag))

    # the kernel's side ------------------------------------------------------------------------
    async def _run(self, script: Script) -> None:
        try:
            await script(self)
        except Exception as exc:
            self.error = exc
        finally:
            self.done = True
            self._waiting = None
            self._yielded.set()

    async def _poll(self) -> None:
        """After each delivery: if what the script waits for holds, let it run to its next
        wait (or its end)."""
        import anyio

        w = self._waiting
        if w is None or not w[0]():
            return
        self._waiting = None
        self._yielded = anyio.Event()
        w[1].set()
        await self._yielded.wait()


def load_script(path: Path) -> tuple[Path, Script]:
    """The simulation file a scenario script names (beside the script, as the script was
    given: relative stays relative), and its ``scenario`` function."""
    if path.is_dir():
        raise RunConfigError(f"{path}: is a folder, not a scenario script (a .py file)")
    spec = importlib.util.spec_from_file_location(f"coworkenv_scenario_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise RunConfigError(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    target = getattr(mod, "SIMULATION", None)
    fn = getattr(mod, "scenario", None)
    if not isinstance(target, str | Path):
        raise RunConfigError(f"{path}: SIMULATION: name the simulation file it scripts "
                             "(e.g. SIMULATION = \"week.yaml\")")
    if fn is None or not callable(fn):
        raise RunConfigError(f"{path}: scenario: define `async def scenario(sim)`")
    return path.parent / target, fn
