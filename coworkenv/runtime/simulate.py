"""Simulations from Python: :class:`SimulationConfig` in, :class:`SimulationResult` out, the
same call ``coworkenv simulate`` makes.

    from coworkenv.runtime import SimulationConfig, simulate

    result = simulate(SimulationConfig("examples/simulations/week.yaml", agent="oracle"))
    print(len(result.outcomes), result.pass_rate, result.checks)

A scenario script (:mod:`.scenario`) runs beside a simulation; the figures of a run are
:mod:`.simreport`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..sim.errors import RunConfigError
from .answers import REPLAY_ONLY, RecordedAnswers, ReplayDiffers
from .scenario import Scenario, Script, load_script
from .simreport import figures, figures_by, model_figures, simulation_report

if TYPE_CHECKING:
    from ..bus import Bus
    from ..sim import Interrupt
    from ..sim.simulation import ArrivalOutcome, Loaded, SimCheck
    from ..sim.simulation.kernel import SimulationKernel
    from ..store import EventStore

__all__ = ["Scenario", "SimulationConfig", "SimulationResult", "asimulate", "figures",
           "figures_by", "load_script", "simulate", "simulation_report"]


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
    max_arg_chars: int | None = None
    """Declare model-backed agents' string arguments at most this long (their schemas'
    ``maxLength``): a bound a schema-constrained server stops at (see
    :attr:`~coworkenv.agents.Endpoint.max_arg_chars`)."""
    cast: str | None = None
    """scripted | llm for every person (default: the simulation's ``cast``, each person's own
    ``cast`` winning)."""
    cast_model: str | None = None
    cast_base_url: str | None = None
    """The people's OpenAI-compatible endpoint (default: the agents' ``base_url``)."""
    cast_api_key_env: str | None = None
    days: int | None = None
    """Run only the first working days of the clock (fixed-time arrivals and world events
    after them left out): a first look at a long simulation."""
    seed: int | None = None
    """Draw the workload with this seed instead of the file's (another draw of the same
    company's days: ``coworkenv simulate --seeds``)."""
    memory: str | None = None
    """persistent | per_arrival for every agent of the roster; default: each seat's own
    ``memory``, else persistent for model-backed policies and per_arrival for the others."""
    links_only: bool = False
    """Persistent oracles do not name the arrival of each action (``re``): the kernel
    credits their actions from the workspace's links alone (a check of attribution)."""
    drain_hours: float = 24.0
    """After the last working day: how many working hours open arrivals may still take to
    finish (working days go on after the clock's on the same hours)."""
    replay_model: str | None = None
    """Answer every model call (agents', people's) with the answers recorded by this run
    (:mod:`.answers`): the same simulation re-run with zero model calls; a call whose request
    differs from the recorded one stops the run, naming it (see ``replay_live``)."""
    replay_db: str | Path | None = None
    """The store that holds ``replay_model``'s run (default: ``db``)."""
    replay_live: bool = False
    """With ``replay_model``: from the first call the recording does not hold, or whose
    request differs, go on with the model (``base_url``) instead of stopping."""


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
    memory: dict[str, str] = field(default_factory=dict)
    """Each agent's memory: persistent or per_arrival."""
    model_use: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per agent (and ``people``): model calls, prompt and completion tokens, the largest
    prompt (tokens as the server counts them, else estimated), summaries, the calls' latency
    (``latency_ms``)."""
    attribution: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per persistent agent: its actions by how they were credited (``re``, ``entity``,
    ``reply``, ``person``, ``only open``, ``focus``, ``none``; ambiguous ones apart)."""
    model_answers: dict[str, Any] = field(default_factory=dict)
    """Where the model calls' answers came from: ``recorded`` (served from a recording: a
    resume's own prefix, ``replay_model``'s run), ``live`` (asked of the model), ``source``,
    and ``diverged`` (the first call whose request differed, with ``replay_live``)."""
    model_by_day: dict[str, dict[str, int]] = field(default_factory=dict)
    model_by_arrival: dict[str, dict[str, int]] = field(default_factory=dict)
    """Model calls, tokens and their latency (ms) by simulated day (ISO date) and by arrival."""

    def model(self, price: tuple[float, float] | None = None) -> dict[str, Any]:
        """The model use by agent, by arrival and by simulated day (:func:`model_figures`)."""
        return model_figures(self.model_use, self.model_by_day, self.model_by_arrival,
                             {o.key: o.agent for o in self.outcomes}, price)

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
        """Figures per agent (``agent``: with its memory, model use and how its actions were
        credited) or per family (``family``)."""
        out = figures_by(self.outcomes, key)
        if key == "agent":
            for sid, f in out.items():
                f["memory"] = self.memory.get(sid, "per_arrival")
                use = self.model_use.get(sid)
                if use:
                    f["model_calls"], f["prompt_max"] = use["calls"], use["prompt_max"]
                    f["tokens"] = use["prompt_tokens"] + use["completion_tokens"]
                    f["model_s"] = round(use.get("latency_ms", 0) / 1000, 3)
                if sid in self.attribution:
                    f["attribution"] = dict(sorted(self.attribution[sid].items()))
        return out


@dataclass
class _Prepared:
    loaded: Loaded
    script: Script | None
    db: Path
    run_id: str
    policies: dict[str, str]


def load_file(file: str | Path, script: Script | None = None, days: int | None = None
              ) -> tuple[Loaded, Script | None]:
    """A simulation file checked whole, or a scenario script's simulation and its script;
    ``days``: its first working days only."""
    from ..sim.simulation import load_simulation

    path = Path(file)
    if not path.exists():
        raise RunConfigError(f"file {path}: no such file")
    if path.suffix == ".py":
        path, script = load_script(path)
    return load_simulation(path, days=days), script


def _prepare(c: SimulationConfig) -> _Prepared:
    from ..agents.factory import parse_agent
    from ..store import Reader
    from .run import check_db

    if c.memory not in (None, "persistent", "per_arrival"):
        raise RunConfigError(f"memory: expected persistent or per_arrival, got {c.memory!r}")
    if c.cast not in (None, "scripted", "llm"):
        raise RunConfigError(f"cast: expected scripted or llm, got {c.cast!r}")
    loaded, script = load_file(c.file, c.script, c.days)
    if c.seed is not None:
        loaded = dataclasses.replace(loaded, sim=loaded.sim.model_copy(update={"seed": c.seed}))
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
                        sim_id: str, memory: dict[str, str]) -> tuple[Any, list[Any],
                                                                      dict[str, Any]]:
    """What the store holds of an interrupted simulation (what it resumes from, the model
    calls it recorded, its recorded configuration); partial arrival records removed."""
    from ..sim.simulation import Resume
    from ..store import MEASURED, Reader, events_hash

    await store.flush()
    with Reader(store) as r:
        recorded = r.run_config(run_id)
        if recorded is None:
            return Resume(), [], {}
        status = next((x["status"] for x in r.runs() if x["run_id"] == run_id), None)
        if status == "finished":
            raise RunConfigError(f"resume: simulation run {run_id!r} is finished; nothing to "
                                 f"resume (its figures: coworkenv eval --run {run_id})")
        was = recorded[1]
        held = sorted(k for k, v in (was.get("policies") or {}).items() if v == "session")
        if held and was.get("policies") != policies:
            raise RunConfigError(f"resume: simulation run {run_id!r} ({status}) held agent "
                                 f"{held[0]!r} from outside (a SimulationSession), whose "
                                 "actions cannot be replayed; run the simulation again under "
                                 "a new run id")
        if was.get("simulation") != sim_id or was.get("policies") != policies or \
                was.get("memory", dict.fromkeys(policies, "per_arrival")) != memory:
            raise RunConfigError(f"resume: run {run_id!r} was simulation "
                                 f"{was.get('simulation')!r} with agents {was.get('policies')} "
                                 f"(memory {was.get('memory')}); resume it with the same")
        rows = r.event_count(episode_id)
        calls: list[Any] = []

        def model_calls(events: Any) -> Any:
            for e in events:
                if e.kind in MEASURED:
                    calls.append(e)
                yield e
        digest = events_hash(model_calls(r.events(episode_id))) if rows else ""  # (streamed)
        done = {e.episode_id for e in r.episodes(run_id, status="completed")} | {
            e.episode_id for e in r.episodes(run_id, status="failed")}
        partial = [e.episode_id for st in ("running", "aborted")
                   for e in r.episodes(run_id, status=st) if e.episode_id != episode_id]
    if rows == 0:  # cut before its log began: it starts again
        partial.append(episode_id)
    for eid in partial:  # cut mid-record: recorded again, whole
        for table in ("event_rows", "event_prefixes", "check_results", "grades", "projection",
                      "episodes"):
            await store.execute(f"DELETE FROM {table} WHERE episode_id=?", (eid,))
    return Resume(rows, digest, done), calls, was


async def asimulate(config: SimulationConfig, *, interrupt: Interrupt | None = None,
                    on_progress: Callable[[float, int], None] | None = None,
                    hold: Mapping[str, Callable[[Any], Any]] | None = None,
                    on_kernel: Callable[[SimulationKernel], None] | None = None,
                    played: Mapping[str, tuple[str, Callable[[Any], Any]]] | None = None
                    ) -> SimulationResult:
    """Run a simulation in this event loop. ``on_progress(fraction of the days, arrivals
    graded)`` is told as it goes; ``interrupt`` stops it (:class:`~coworkenv.sim.RunInterrupted`:
    what is recorded stays, ``resume=True`` goes on). ``hold``: agents of the roster whose
    agent for each arrival comes from the caller's factory (recorded as policy ``session``:
    see :class:`~coworkenv.runtime.SimulationSession`); ``played``: agents of the roster whose
    agent for each arrival comes from a factory of the caller's, recorded under the name given
    (a mutant of a policy, your own agent); ``on_kernel`` sees the kernel before it runs."""
    import anyio

    from ..agents.factory import AgentSpec, agent_factory, endpoint, parse_agent, persistent_factory
    from ..agents.persona import LLMPerson
    from ..agents.remote import RemoteAgentProxy, RemotePool
    from ..agents.scripted import ScriptedPerson
    from ..bus import BusError
    from ..sim import Interrupt, RunInterrupted
    from ..sim.simulation.kernel import SimulationKernel
    from ..store import EventStore, RunLease
    from .prepare import _bus

    p = _prepare(config)
    loaded, sim = p.loaded, p.loaded.sim
    if config.replay_model is not None and not config.replay_live and not config.base_url:
        # (every answer comes from the recording: a call it does not hold stops the run)
        config = replace(config, base_url=REPLAY_ONLY)
    specs: dict[str, AgentSpec] = {sid: parse_agent(pol) for sid, pol in p.policies.items()}
    remote = {sid for sid, sp in specs.items() if sp.kind == "remote"}
    try:
        factories: dict[str, Any] = {
            sid: agent_factory(pol, base_url=config.base_url, api_key_env=config.api_key_env,
                               timeout=config.model_timeout,
                               max_concurrency=config.model_concurrency,
                               max_tokens=config.max_tokens,
                               max_arg_chars=config.max_arg_chars)
            for sid, pol in p.policies.items() if sid not in remote}
        if remote and isinstance(config.bus, str) and config.bus.startswith("mqtt"):
            from ..bus import bus_key

            bus_key(required=True)  # (workers started elsewhere must hold the same key)
    except (ValueError, BusError) as exc:
        raise RunConfigError(str(exc)) from None
    theirs = {**{sid: ("session", make) for sid, make in (hold or {}).items()},
              **(played or {})}
    for sid, (name, make) in theirs.items():
        if sid not in factories:
            raise RunConfigError(f"hold: unknown agent {sid!r} (agents: "
                                 f"{', '.join(sorted(factories))})")
        factories[sid], p.policies[sid] = make, name
        specs[sid] = AgentSpec("session")
    memory = memory_modes(loaded, specs, config.memory, held=set(theirs))
    try:
        persistent = {sid: persistent_factory(
            p.policies[sid], base_url=config.base_url, api_key_env=config.api_key_env,
            links_only=config.links_only, timeout=config.model_timeout,
            max_concurrency=config.model_concurrency, max_tokens=config.max_tokens,
            max_arg_chars=config.max_arg_chars)
            for sid, mode in memory.items() if mode == "persistent"}
    except ValueError as exc:
        raise RunConfigError(str(exc)) from None
    check_budgets(loaded, memory, specs)
    tz = {str(x.get("id")): str(x.get("timezone") or "UTC")
          for x in loaded.company.get("people", [])}

    played_by = cast_modes(loaded, config.cast)
    cast_ep = None
    if "llm" in played_by.values():
        try:
            cast_ep = endpoint(config.cast_model or "cast", config.cast_base_url or
                               config.base_url, config.cast_api_key_env or config.api_key_env,
                               max_tokens=120, timeout=config.model_timeout,
                               max_concurrency=config.model_concurrency)
        except ValueError as exc:
            raise RunConfigError(f"cast_base_url: {exc}") from None

    def person(task: Any, member: Any, role: str, agent_person: str) -> Any:
        if cast_ep is not None and played_by.get(member.person, played_by[""]) == "llm":
            return LLMPerson(member, tz.get(member.person, "UTC"), role=role,
                             agent_person=agent_person, endpoint=cast_ep,
                             instruction=task.instruction)
        return ScriptedPerson(member, tz.get(member.person, "UTC"), role=role,
                              agent_person=agent_person)

    bus = _bus(config.bus)
    stop = interrupt or Interrupt()
    t0 = time.perf_counter()
    async with _final_state(p.db, p.run_id, stop) as run, stop.listening(), bus, \
            _closed_whole(EventStore(p.db)) as store, contextlib.AsyncExitStack() as stack:
        if remote:  # the agents that workers serve (over the bus), each arrival its own
            pool = await stack.enter_async_context(RemotePool(bus, serial=True))
            for sid in remote:
                factories[sid] = _remote_factory(pool, p.run_id, specs[sid].model,
                                                 RemoteAgentProxy)
        with RunLease(p.db, p.run_id):  # one runner per run
            episode_id = f"{p.run_id}:@simulation"
            resume, own_calls, was = await _resume_state(
                store, p.run_id, episode_id, p.policies, sim.id, memory) \
                if config.resume else (None, [], {})
            replaying = _replay_source(config, p.db, was)
            answers = _answers(replaying, sim.clock.start, own_calls, p.db, config)
            await store.create_run(p.run_id, ", ".join(f"{k}={v}" for k, v in
                                                      p.policies.items()),
                                   {"simulation": sim.id, "file": str(loaded.path),
                                    "policies": p.policies, "memory": memory, "trials": 1,
                                    "tasks": [], **replaying})
            run.started = True  # (from here on, it ends in a final state)
            kernel = SimulationKernel(
                loaded, run_id=p.run_id, bus=bus, store=store, policies=factories,
                person=person, agent_names=p.policies,
                roles={sid: s.role for sid, s in specs.items()}, resume=resume,
                drain_hours=config.drain_hours, persistent=persistent, answers=answers)
            scenario = Scenario(kernel) if p.script is not None else None
            kernel.stopping = lambda: stop.requested or (scenario is not None and
                                                         scenario.stopped)
            if on_kernel is not None:
                on_kernel(kernel)
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
                            await scenario._start(tg, p.script)
                        async with _failed_replay(store, p.run_id):
                            await kernel.run_simulation()
                        if scenario is not None and scenario.error is not None:
                            tg.cancel_scope.cancel()  # (stopped where the script raised)
                        elif stop.requested:  # (stopped between two deliveries)
                            tg.cancel_scope.cancel()
                        else:
                            if scenario is not None:
                                scenario._ended()  # (still waiting: its check fails)
                            events_hash, state_hash = await kernel.close_simulation(
                                time.perf_counter() - t0)
                        if scenario is not None and not scenario.done:
                            tg.cancel_scope.cancel()  # (waiting for what never came)
            finally:
                await store.flush()
            if scenario is not None and scenario.error is not None:
                failure = f"{scenario.failure()}; run {p.run_id} failed"
                _end_run(p.db, p.run_id, "failed", failure)
                raise RunConfigError(failure) from scenario.error
            if stop.requested:
                raise RunInterrupted(p.run_id, [], stop.signum)
            await store.finish_run(p.run_id)
            await store.flush()
    if on_progress is not None:
        on_progress(1.0, len(kernel.outcomes))
    return SimulationResult(p.run_id, p.db, sim.id, kernel.outcomes, kernel.sim_checks(),
                            events_hash, state_hash, len(kernel._log),
                            kernel.clock.now, time.perf_counter() - t0, kernel.backlog,
                            memory, kernel.model_use, kernel.attribution_counts,
                            _answer_figures(answers, kernel), kernel.model_by_day,
                            kernel.model_by_arrival)


@dataclass
class _Started:
    started: bool = False


@contextlib.asynccontextmanager
async def _final_state(db: Path, run_id: str, stop: Interrupt) -> AsyncIterator[_Started]:
    """Around a run, outermost (its exit comes after the store has closed): a run that is on
    record (``started``) and stops other than by finishing ends ``failed`` or ``abandoned``
    (:func:`_ending`), else stays ``running``, resumable."""
    run = _Started()
    try:
        yield run
    except BaseException as exc:
        ending = _ending(exc, stop.requested) if run.started else None
        if ending is not None:
            _end_run(db, run_id, *ending)
        raise


@contextlib.asynccontextmanager
async def _closed_whole(store: EventStore) -> AsyncIterator[EventStore]:
    """``async with store``, closed whole even when cancelled (its connection's thread would
    otherwise outlive the event loop): what its writer had not taken is lost, and
    :func:`_final_state` records how the run ended."""
    import anyio

    with anyio.CancelScope() as scope:
        async with store:
            try:
                yield store
            except BaseException:
                scope.shield = True  # (from here on: its writer stops, its connection closes)
                raise


def _ending(exc: BaseException, interrupted: bool) -> tuple[str, str] | None:
    """How a run that stopped with ``exc`` ends, and why: ``failed`` (the simulation's error),
    ``abandoned`` (cancelled from outside: a session left, a caller's timeout), or None: it
    stays as it is, resumable (interrupted; a usage error, such as a resume that does not
    replay what was recorded; a replay that can go on; another runner holds it)."""
    import anyio

    from ..errors import CoworkenvError
    from ..sim import RunInterrupted
    from ..store import LeaseHeldError, LeaseLostError

    leaves: list[BaseException] = []

    def flatten(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for x in e.exceptions:
                flatten(x)
        else:
            leaves.append(e)
    flatten(exc)
    if any(isinstance(e, RunInterrupted | ReplayDiffers | LeaseHeldError | LeaseLostError |
                      RunConfigError) or str(e).startswith("resume:") for e in leaves):
        return None
    error = next((e for e in leaves if isinstance(e, Exception)), None)
    if error is not None:
        return "failed", str(error) if isinstance(error, CoworkenvError) else \
            f"{type(error).__name__}: {error}"
    if not interrupted and any(isinstance(e, anyio.get_cancelled_exc_class()) for e in leaves):
        return "abandoned", "cancelled before the simulation ended"
    return None


def _end_run(db: Path, run_id: str, status: str, why: str) -> None:
    """End a run that stopped before its end: ``status`` (failed, abandoned) on the run, its
    simulation episode (``why`` as its failure) and the arrivals it cut short ``aborted``.
    Written here, not through the event store: a cancellation has stopped its writer too.
    Best effort: a store that cannot be written (locked past 30 s, gone) keeps the run as it
    was, and the error that stopped the run is the one said."""
    import sqlite3

    if str(db) == ":memory:" or str(db).startswith("file::memory:"):
        return
    with contextlib.suppress(sqlite3.Error), \
            contextlib.closing(sqlite3.connect(db, timeout=30, isolation_level=None)) as c:
        c.execute("BEGIN IMMEDIATE")
        c.execute("UPDATE episodes SET status='aborted', termination=?, failure=?, "
                  "finished_at=? WHERE episode_id=? AND status='running'",
                  (status, why, time.time(), f"{run_id}:@simulation"))
        c.execute("UPDATE episodes SET status='aborted', termination='aborted' "
                  "WHERE run_id=? AND status='running'", (run_id,))
        c.execute("UPDATE runs SET status=? WHERE run_id=? AND status='running'",
                  (status, run_id))
        c.execute("COMMIT")


@contextlib.asynccontextmanager
async def _failed_replay(store: Any, run_id: str) -> Any:
    """A re-run whose recorded answers no longer fit has ended: its run is ``failed``."""
    try:
        yield
    except ReplayDiffers as exc:
        if not exc.resumable:
            await store.finish_run(run_id, "failed")
        raise


def _replay_source(config: SimulationConfig, db: Path, was: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """The run whose answers this one serves (recorded in its configuration, so that a
    resume goes on serving them): ``config``'s, else the resumed run's own."""
    if config.replay_model is not None:
        return {"replay_model": config.replay_model,
                "replay_db": str(config.replay_db or db), "replay_live": config.replay_live}
    return {k: was[k] for k in ("replay_model", "replay_db", "replay_live") if k in was}


def _answers(replaying: Mapping[str, Any], start: Any, own: list[Any], db: Path,
             config: SimulationConfig) -> RecordedAnswers | None:
    """The recorded answers a run serves: a resume's own calls first, then those of the run
    it replays (if any); None when there are none to serve."""
    if not replaying and not own:
        return None
    if replaying:
        live = bool(replaying.get("replay_live"))
        path = Path(replaying["replay_db"])
        if not path.is_file():
            raise RunConfigError(f"replay_db: {path}: no such file")
        base = RecordedAnswers.read(path, str(replaying["replay_model"]), start,
                                    missing="live" if live else "error",
                                    mismatch="live" if live else "error")
    else:
        base = RecordedAnswers({}, f"{db}", start)
    return base.resuming(own, f"{db}") if own else base


def _answer_figures(answers: RecordedAnswers | None, kernel: Any) -> dict[str, Any]:
    served = answers.served if answers is not None else 0
    out: dict[str, Any] = {"recorded": served, "live": kernel.live_model_calls}
    if answers is not None:
        out["source"] = answers.source
        if answers.diverged is not None:
            out["diverged"] = answers.diverged
    return out


def cast_modes(loaded: Loaded, override: str | None) -> dict[str, str]:
    """Who plays each person: ``override``, else their own ``cast``, else the simulation's
    (``""``: everyone else)."""
    if override not in (None, "scripted", "llm"):
        raise RunConfigError(f"cast: expected scripted or llm, got {override!r}")
    sim = loaded.sim
    out = {"": override or sim.cast}
    for p in sim.people:
        out[p.person] = override or p.cast or sim.cast
    return out


def memory_modes(loaded: Loaded, specs: Mapping[str, Any], override: str | None,
                 held: set[str]) -> dict[str, str]:
    """Each seat's memory: ``override``, else its own ``memory``, else persistent for a
    model-backed policy and per_arrival for the others; a seat held from outside (a session,
    stepped one arrival at a time) and one served by remote workers are per_arrival, and
    asking for persistent there is an error naming the seat."""
    if override not in (None, "persistent", "per_arrival"):
        raise RunConfigError(f"memory: expected persistent or per_arrival, got {override!r}")
    out: dict[str, str] = {}
    for i, seat in enumerate(loaded.sim.roster):
        spec = specs[seat.id]
        asked = override or seat.memory
        mode = asked or ("persistent" if spec.model_backed else "per_arrival")
        if mode == "persistent" and (seat.id in held or spec.kind == "remote"):
            if asked is not None:
                how = "a session steps it one arrival at a time" if seat.id in held else \
                    "remote workers serve one arrival's agent at a time"
                raise RunConfigError(f"roster[{i}].memory: agent {seat.id!r} cannot be "
                                     f"persistent: {how}")
            mode = "per_arrival"
        out[seat.id] = mode
    return out


def check_budgets(loaded: Loaded, memory: Mapping[str, str], specs: Mapping[str, Any]) -> None:
    """A persistent model-backed seat's functions and system prompt take at most half of its
    prompt budget (else every call would be cut to its last turn); refused naming the seat."""
    from ..agents.chat import agent_tools, estimate_tokens, with_re
    from ..sim.simulation.seats import seat_toolset

    templates = list(loaded.templates.values())
    for i, seat in enumerate(loaded.sim.roster):
        if memory.get(seat.id) != "persistent" or not specs[seat.id].model_backed:
            continue
        names = seat_toolset(seat, templates)
        fixed = estimate_tokens([], with_re(agent_tools(names))) + 600  # (+ system prompt)
        budget = seat.context.budget_tokens
        if fixed * 2 > budget:
            raise RunConfigError(
                f"roster[{i}].context.budget_tokens: {budget} leaves no room: agent "
                f"{seat.id!r} has {len(names)} functions, which with its system prompt take "
                f"about {fixed} tokens; raise it to {fixed * 2} or more, or give the seat "
                "fewer `tools`")


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
