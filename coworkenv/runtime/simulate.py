"""Simulations from Python: :class:`SimulationConfig` in, :class:`SimulationResult` out, the
same call ``coworkenv simulate`` makes; and :class:`Scenario`, the handle a scenario script
drives a running simulation with.

    from coworkenv.runtime import SimulationConfig, simulate

    result = simulate(SimulationConfig("examples/simulations/week.yaml", agent="oracle"))
    print(len(result.outcomes), result.pass_rate, result.checks)

A scenario script is a Python file with ``SIMULATION`` (the YAML file it scripts, relative to
the script) and ``async def scenario(sim)``; it runs beside the simulation, deterministically
(the simulation waits at each of its ``await``s until what it waits for holds)::

    SIMULATION = "week.yaml"

    async def scenario(sim):
        sim.at("d2 10:00", lambda: sim.say("leo", "assistant", "Any news on the offsite?"))
        await sim.until(lambda: len(sim.outcomes) >= 10)
        sim.check("ten-by-tuesday", sim.now.weekday() <= 1)
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from ..sim.errors import RunConfigError

if TYPE_CHECKING:
    from ..bus import Bus
    from ..sim import Interrupt
    from ..sim.simulation import ArrivalOutcome, Loaded, SimCheck
    from ..sim.simulation.kernel import SimulationKernel
    from ..store import EventRecord
    from ..workspace import WorkspaceState

Script = Callable[["Scenario"], Awaitable[None]]


@dataclass(frozen=True)
class SimulationConfig:
    """Everything a simulation run takes."""

    file: str | Path
    """A simulation file (``kind: simulation``) or a scenario script (``.py``)."""
    agent: str | None = None
    """One policy for every agent of the roster (oracle | noop | openai:MODEL |
    teacher:openai:MODEL); default: each agent's own ``policy``."""
    agents: Mapping[str, str] = field(default_factory=dict)
    """Policies by agent id (win over ``agent``)."""
    db: str | Path = "runs/coworkenv.db"
    bus: str | Bus = "memory"
    run_id: str | None = None
    resume: bool = False
    """Go on with an interrupted simulation of this store (``run_id``, else the latest)."""
    script: Script | None = None
    """A scenario script (``async def scenario(sim)``); a ``.py`` file brings its own."""
    base_url: str | None = None
    api_key_env: str | None = None
    model_timeout: float = 120.0
    model_concurrency: int = 4
    max_tokens: int = 512
    drain_hours: float = 24.0
    """After the last working day: how many working hours open arrivals may still take to
    finish (working days go on after the clock's on the same hours)."""


@dataclass
class SimulationResult:
    run_id: str
    db: Path
    simulation: str
    outcomes: list[ArrivalOutcome]
    checks: list[SimCheck]
    events_hash: str
    state_hash: str
    event_count: int
    sim_seconds: float
    wall_seconds: float
    backlog: list[tuple[float, int]]

    @property
    def pass_rate(self) -> float:
        return sum(o.passed for o in self.outcomes) / len(self.outcomes) if self.outcomes \
            else 0.0

    @property
    def passed(self) -> bool:
        """Every arrival passed and every simulation-level check holds."""
        return bool(self.outcomes) and all(o.passed for o in self.outcomes) and all(
            c.passed for c in self.checks)

    def by(self, key: str) -> dict[str, dict[str, Any]]:
        """Figures per agent (``agent``) or per family (``family``)."""
        return figures_by(self.outcomes, key)


def figures_by(outcomes: list[ArrivalOutcome], key: str) -> dict[str, dict[str, Any]]:
    """:func:`figures` of the arrivals grouped by one of their fields."""
    groups: dict[str, list[ArrivalOutcome]] = {}
    for o in outcomes:
        groups.setdefault(str(getattr(o, key)), []).append(o)
    return {k: figures(v) for k, v in sorted(groups.items())}


def figures(outcomes: list[ArrivalOutcome]) -> dict[str, Any]:
    """Arrivals, pass rate, mean score and response times (working hours) of some arrivals."""
    resp = sorted(o.response_hours for o in outcomes)
    n = len(outcomes)
    return {"arrivals": n, "passed": sum(o.passed for o in outcomes),
            "pass_rate": round(sum(o.passed for o in outcomes) / n, 4) if n else 0.0,
            "score": round(sum(o.score for o in outcomes) / n, 4) if n else 0.0,
            "completed": sum(o.termination == "agent_finished" for o in outcomes),
            "response_h_median": round(median(resp), 3) if resp else None,
            "response_h_p90": round(resp[min(n - 1, int(0.9 * n))], 3) if resp else None,
            "response_h_max": round(resp[-1], 3) if resp else None}


def simulation_report(reader: Any, run_id: str) -> dict[str, Any] | None:
    """A simulation run's own figures as the store holds them (None: not a simulation): its
    checks (SLA, nothing dropped, budgets, a script's), and per agent and per family the
    arrivals, pass rate, score and response times in working hours."""
    from ..sim.simulation import ArrivalOutcome
    from ..store import NotFoundError

    try:
        sim = reader.episode(f"{run_id}:@simulation")
    except NotFoundError:
        return None
    grades = {r["episode_id"]: r for r in reader.scheduled_episodes(run_id)}
    outcomes = []
    for e in reader.episodes(run_id):
        o, g = e.outcome, grades.get(e.episode_id)
        if "arrival" not in o or g is None:
            continue
        outcomes.append(ArrivalOutcome(
            str(o["arrival"]), e.task_id, str(o.get("template", "")), e.family,
            str(o.get("agent", "")), float(o.get("arrived", 0.0)), o.get("started"),
            float(o.get("finished", 0.0)), str(e.termination), e.status,
            float(g["completion"] or 0.0), float(g["score"] or 0.0), bool(g["passed"]),
            float(o.get("response_hours", 0.0)), str(e.events_hash or "")))
    return {"simulation": sim.outcome.get("simulation"), "status": sim.status,
            "checks": sim.outcome.get("checks", []), "arrivals": len(outcomes),
            "events": sim.event_count, "events_hash": sim.events_hash,
            "by_agent": figures_by(outcomes, "agent"),
            "by_family": figures_by(outcomes, "family")}


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
    """The simulation file a scenario script names, and its ``scenario`` function."""
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
    return (path.parent / target).resolve(), fn


@dataclass
class _Prepared:
    loaded: Loaded
    script: Script | None
    db: Path
    run_id: str
    policies: dict[str, str]


def _prepare(c: SimulationConfig) -> _Prepared:
    from ..agents.factory import parse_agent
    from ..sim.simulation import load_simulation
    from ..store import Reader
    from .run import check_db

    path = Path(c.file)
    if not path.exists():
        raise RunConfigError(f"file {path}: no such file")
    script = c.script
    if path.suffix == ".py":
        path, script = load_script(path)
    loaded = load_simulation(path)
    seats = {s.id for s in loaded.sim.roster}
    unknown = sorted(set(c.agents) - seats)
    if unknown:
        raise RunConfigError(f"agents: unknown agent {unknown[0]!r} (agents: "
                             f"{', '.join(sorted(seats))})")
    policies = {s.id: c.agents.get(s.id) or c.agent or s.policy for s in loaded.sim.roster}
    for sid, pol in policies.items():
        try:
            parse_agent(pol)
        except ValueError as exc:
            raise RunConfigError(f"agents: {sid}: {exc}") from None
    db = check_db(Path(c.db))
    run_id = c.run_id
    if c.resume and run_id is None:
        if not db.exists():
            raise RunConfigError(f"resume: {db} does not exist; nothing to resume")
        with Reader(db) as r:
            sims = [x["run_id"] for x in r.runs()
                    if (x.get("config") or {}).get("simulation") == loaded.sim.id]
        if not sims:
            raise RunConfigError(f"resume: {db} holds no run of simulation {loaded.sim.id!r}")
        run_id = sims[-1]
    if run_id is None:
        from ..sim import new_run_id

        run_id = new_run_id().replace("run-", "sim-", 1)
    from ..sim.runner import check_run_id

    check_run_id(run_id)
    if not c.resume and db.exists() and db.stat().st_size:
        from ..sim.runner import refuse_recorded_run

        with Reader(db) as r:
            refuse_recorded_run(r, run_id, db)
    return _Prepared(loaded, script, db, run_id, policies)


async def _resume_state(store: Any, run_id: str, episode_id: str, policies: dict[str, str],
                        sim_id: str) -> Any:
    """What the store holds of an interrupted simulation; partial arrival records removed."""
    from ..sim.simulation import Resume
    from ..store import Reader, events_hash

    await store.flush()
    with Reader(store) as r:
        recorded = r.run_config(run_id)
        if recorded is None:
            return Resume()
        status = next((x["status"] for x in r.runs() if x["run_id"] == run_id), None)
        if status == "finished":
            raise RunConfigError(f"resume: simulation run {run_id!r} is finished; nothing to "
                                 f"resume (its figures: coworkenv eval --run {run_id})")
        if recorded[1].get("simulation") != sim_id or recorded[1].get("policies") != policies:
            raise RunConfigError(f"resume: run {run_id!r} was simulation "
                                 f"{recorded[1].get('simulation')!r} with agents "
                                 f"{recorded[1].get('policies')}; resume it with the same")
        rows = r.event_count(episode_id)
        digest = events_hash(r.events(episode_id)) if rows else ""  # (streamed)
        done = {e.episode_id for e in r.episodes(run_id, status="completed")} | {
            e.episode_id for e in r.episodes(run_id, status="failed")}
        partial = [e.episode_id for e in r.episodes(run_id, status="running")
                   if e.episode_id != episode_id]
    if rows == 0:  # cut before its log began: it starts again
        partial.append(episode_id)
    for eid in partial:  # cut mid-record: recorded again, whole
        for table in ("events", "check_results", "grades", "projection", "episodes"):
            await store.execute(f"DELETE FROM {table} WHERE episode_id=?", (eid,))
    return Resume(rows, digest, done)


async def asimulate(config: SimulationConfig, *, interrupt: Interrupt | None = None,
                    on_progress: Callable[[float, int], None] | None = None,
                    hold: Mapping[str, Callable[[Any], Any]] | None = None,
                    on_kernel: Callable[[SimulationKernel], None] | None = None
                    ) -> SimulationResult:
    """Run a simulation in this event loop. ``on_progress(fraction of the days, arrivals
    graded)`` is told as it goes; ``interrupt`` stops it (:class:`~coworkenv.sim.RunInterrupted`:
    what is recorded stays, ``resume=True`` goes on). ``hold``: agents of the roster whose
    agent for each arrival comes from the caller's factory (recorded as policy ``session``:
    see :class:`~coworkenv.runtime.SimulationSession`); ``on_kernel`` sees the kernel before
    it runs."""
    import anyio

    from ..agents.factory import AgentSpec, agent_factory, parse_agent
    from ..agents.remote import RemoteAgentProxy, RemotePool
    from ..agents.scripted import ScriptedPerson
    from ..bus import BusError
    from ..sim import Interrupt, RunInterrupted
    from ..sim.simulation.kernel import SimulationKernel
    from ..store import EventStore, RunLease
    from .prepare import _bus

    p = _prepare(config)
    loaded, sim = p.loaded, p.loaded.sim
    specs: dict[str, AgentSpec] = {sid: parse_agent(pol) for sid, pol in p.policies.items()}
    remote = {sid for sid, sp in specs.items() if sp.kind == "remote"}
    try:
        factories: dict[str, Any] = {
            sid: agent_factory(pol, base_url=config.base_url, api_key_env=config.api_key_env,
                               timeout=config.model_timeout,
                               max_concurrency=config.model_concurrency,
                               max_tokens=config.max_tokens)
            for sid, pol in p.policies.items() if sid not in remote}
        if remote and isinstance(config.bus, str) and config.bus.startswith("mqtt"):
            from ..bus import bus_key

            bus_key(required=True)  # (workers started elsewhere must hold the same key)
    except (ValueError, BusError) as exc:
        raise RunConfigError(str(exc)) from None
    for sid, make in (hold or {}).items():
        if sid not in factories:
            raise RunConfigError(f"hold: unknown agent {sid!r} (agents: "
                                 f"{', '.join(sorted(factories))})")
        factories[sid], p.policies[sid] = make, "session"
        specs[sid] = AgentSpec("session")
    tz = {str(x.get("id")): str(x.get("timezone") or "UTC")
          for x in loaded.company.get("people", [])}

    def person(task: Any, member: Any, role: str, agent_person: str) -> Any:
        return ScriptedPerson(member, tz.get(member.person, "UTC"), role=role,
                              agent_person=agent_person)

    bus = _bus(config.bus)
    stop = interrupt or Interrupt()
    t0 = time.perf_counter()
    async with stop.listening(), bus, EventStore(p.db) as store, \
            contextlib.AsyncExitStack() as stack:
        if remote:  # the agents that workers serve (over the bus), each arrival its own
            pool = await stack.enter_async_context(RemotePool(bus))
            for sid in remote:
                factories[sid] = _remote_factory(pool, p.run_id, specs[sid].model,
                                                 RemoteAgentProxy)
        with RunLease(p.db, p.run_id):  # one runner per run
            episode_id = f"{p.run_id}:@simulation"
            resume = await _resume_state(store, p.run_id, episode_id, p.policies, sim.id) \
                if config.resume else None
            await store.create_run(p.run_id, ", ".join(f"{k}={v}" for k, v in
                                                      p.policies.items()),
                                   {"simulation": sim.id, "file": str(loaded.path),
                                    "policies": p.policies, "trials": 1, "tasks": []})
            kernel = SimulationKernel(
                loaded, run_id=p.run_id, bus=bus, store=store, policies=factories,
                person=person, agent_names=p.policies,
                roles={sid: s.role for sid, s in specs.items()}, resume=resume,
                drain_hours=config.drain_hours)
            kernel.stopping = lambda: stop.requested
            if on_kernel is not None:
                on_kernel(kernel)
            scenario = Scenario(kernel) if p.script is not None else None
            if on_progress is not None:
                end = kernel.cal.end_s
                last = [0.0]

                async def progress() -> None:
                    if kernel.clock.now - last[0] >= 600 or not kernel.live:
                        last[0] = kernel.clock.now
                        on_progress(min(1.0, kernel.clock.now / end), len(kernel.outcomes))
                kernel.after_settle.append(progress)
            try:
                with stop.cancels():
                    async with anyio.create_task_group() as tg:
                        if scenario is not None:
                            assert p.script is not None
                            kernel.after_settle.append(scenario._poll)
                            tg.start_soon(scenario._run, p.script, name="scenario-script")
                            await scenario._yielded.wait()
                        await kernel.run_simulation()
                        if stop.requested:  # (stopped between two deliveries)
                            tg.cancel_scope.cancel()
                        else:
                            events_hash, state_hash = await kernel.close_simulation(
                                time.perf_counter() - t0)
                        if scenario is not None and not scenario.done:
                            tg.cancel_scope.cancel()  # (waiting for what never came)
            finally:
                await store.flush()
            if stop.requested:
                raise RunInterrupted(p.run_id, [], stop.signum)
            if scenario is not None and scenario.error is not None:
                raise RunConfigError(f"scenario script: {type(scenario.error).__name__}: "
                                     f"{scenario.error}") from scenario.error
            await store.finish_run(p.run_id)
            await store.flush()
    if on_progress is not None:
        on_progress(1.0, len(kernel.outcomes))
    return SimulationResult(p.run_id, p.db, sim.id, kernel.outcomes, kernel.sim_checks(),
                            events_hash, state_hash, len(kernel._log),
                            kernel.clock.now, time.perf_counter() - t0, kernel.backlog)


def _remote_factory(pool: Any, run_id: str, group: str, proxy: Any) -> Callable[[Any], Any]:
    """Each arrival's agent served by a worker of ``group``, which holds it under the
    arrival's own episode id."""
    return lambda task: proxy(pool, task, episode=f"{run_id}:{task.id}:0:0", group=group)


def simulate(config: SimulationConfig, *, interrupt: Interrupt | None = None,
             on_progress: Callable[[float, int], None] | None = None) -> SimulationResult:
    """Run a simulation to its end (see :func:`asimulate`)."""
    import anyio

    from .run import unwrapped

    out: list[SimulationResult] = []

    async def go() -> list[Any]:
        out.append(await asimulate(config, interrupt=interrupt, on_progress=on_progress))
        return []
    unwrapped(lambda: anyio.run(go))
    return out[0]
