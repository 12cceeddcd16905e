"""Scenario scripts: a Python file with ``SIMULATION`` (the YAML file it scripts, relative to
the script) and ``async def scenario(sim)``, run beside the simulation, deterministically (the
simulation waits at each of its ``await``s until what it waits for holds)::

    SIMULATION = "week.yaml"

    async def scenario(sim):
        sim.at("d2 10:00", lambda: sim.say("leo", "assistant", "Any news on the offsite?"))
        await sim.until(lambda: len(sim.outcomes) >= 10)
        sim.check("ten-by-tuesday", sim.now.weekday() <= 1)

:class:`Scenario` is the handle the script drives its running simulation with.

How a script ends, and what the run records:

- it returns: the simulation goes on to its end without it;
- it raises (in its body, a ``sim.at``/``sim.every`` callback or a ``sim.until``
  predicate): the simulation stops at that point and the run ends ``failed``; the error
  names the script's line (:attr:`Scenario.error`, :meth:`Scenario.failure`);
- the simulation ends while it waits (``sim.until`` of what never holds, ``sim.sleep`` past
  the end): the check ``script:ran-to-end`` is recorded failed, naming the line it waited at;
- it awaits something outside the simulation (``asyncio.sleep``, I/O) for longer than
  :attr:`Scenario.outside_wait_s` seconds of wall time: it is cancelled there, the same
  check is recorded failed, and the simulation goes on to its end without it.
"""

from __future__ import annotations

import importlib.util
import linecache
import traceback
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

ENDED_CHECK = "ran-to-end"
"""The check a script that did not run to its end fails (``script:ran-to-end``)."""


class Scenario:
    """A scenario script's handle on its running simulation. Everything it does happens at a
    quiescent point of the simulation (between two deliveries), so a script is as
    deterministic as the simulation."""

    outside_wait_s: float = 30.0
    """How long (wall seconds) the simulation waits for a script that awaits something other
    than ``sim.until``/``sim.sleep`` before it goes on without the script."""

    def __init__(self, kernel: SimulationKernel) -> None:
        import anyio

        self._k = kernel
        self._waiting: tuple[Callable[[], bool], anyio.Event] | None = None
        self._yielded = anyio.Event()
        self._timers = 0
        self._file: str | None = None
        self._coro: Any = None
        self._scope = anyio.CancelScope()
        self.done = False
        self.error: BaseException | None = None
        """What the script raised (in its body or a callback): the run has failed."""
        self.where = ""
        """The script's line the error came from (``file:line``)."""
        self._how = ""

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
        self._k.timers[tid] = lambda: self._call(fn)
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
    def _call(self, fn: Callable[[], Any]) -> None:
        """A timer's callback; what it raises ends the script (and the run: ``failed``)."""
        if self.error is not None:
            return
        try:
            fn()
        except Exception as exc:
            self._failed(exc, f"in a sim.at callback at {self.now:%Y-%m-%d %H:%M}")

    def _failed(self, exc: Exception, how: str) -> None:
        self.error = exc
        line = next((f for f in reversed(traceback.extract_tb(exc.__traceback__))
                     if f.filename == self._file), None)
        self.where = f"{line.filename}:{line.lineno}" if line is not None else (
            self._file or "")
        self._how = how

    def failure(self) -> str:
        """The one line that says what the script raised, and where (with :attr:`error`)."""
        exc = self.error
        if exc is None:
            return ""
        where = f"at {self.where}, " if self.where else ""
        said = "; ".join(x.strip() for x in str(exc).splitlines() if x.strip())
        return f"scenario script: {type(exc).__name__}: {said} ({where}{self._how})"

    @property
    def stopped(self) -> bool:
        """The script raised: the simulation stops at the next delivery."""
        return self.error is not None

    async def _run(self, script: Script) -> None:
        self._file = _file_of(script)
        try:
            with self._scope:
                self._coro = script(self)
                await self._coro
        except Exception as exc:
            self._failed(exc, "in scenario()")
        finally:
            self.done = True
            self._waiting = None
            self._yielded.set()

    async def _start(self, tg: Any, script: Script) -> None:
        """Start the script and let it run to its first wait (or its end)."""
        tg.start_soon(self._run, script, name="scenario-script")
        await self._handed()

    async def _handed(self) -> None:
        """Wait until the script waits on the simulation again or ends; one that waits on
        something else for longer than :attr:`outside_wait_s` is cancelled there."""
        import anyio

        with anyio.move_on_after(self.outside_wait_s):
            await self._yielded.wait()
        if self._yielded.is_set():
            return
        where = self._suspended_at()
        self._scope.cancel()
        await self._yielded.wait()
        if self.error is None:
            self._unfinished(f"it waited {where} on something outside the simulation (not "
                             f"sim.until or sim.sleep) for over {self.outside_wait_s:g} s "
                             "of wall time; the simulation went on without it")

    async def _poll(self) -> None:
        """After each delivery: if what the script waits for holds, let it run to its next
        wait (or its end)."""
        import anyio

        w = self._waiting
        if w is None or self.error is not None:
            return
        try:
            if not w[0]():
                return
        except Exception as exc:
            self._failed(exc, f"in a sim.until predicate at {self.now:%Y-%m-%d %H:%M}")
            return
        self._waiting = None
        self._yielded = anyio.Event()
        w[1].set()
        await self._handed()

    def _ended(self) -> None:
        """The simulation has ended: a script still waiting did not run to its end (its check
        fails, naming where it waited)."""
        if not self.done and self.error is None:
            self._unfinished(f"the simulation ended while it waited {self._suspended_at()}; "
                             "what came after did not run")

    def _unfinished(self, detail: str) -> None:
        self.check(ENDED_CHECK, False, detail)

    def _suspended_at(self) -> str:
        """Where the script waits now: ``at FILE:LINE (the line's code)``."""
        coro, frame = self._coro, None
        while coro is not None:
            f = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if f is not None and f.f_code.co_filename == self._file:
                frame = f
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if frame is None:
            return "in the script"
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        return f"at {frame.f_code.co_filename}:{frame.f_lineno}" + (
            f" ({code})" if code else "")


def _file_of(script: Any) -> str | None:
    """The file a scenario function was defined in (its lines are the ones errors name)."""
    code = getattr(script, "__code__", None)
    return code.co_filename if code is not None else None


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
