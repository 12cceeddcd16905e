"""A run's configuration and its preparation: :class:`RunConfig` (everything ``coworkenv run``
takes) checked against the world and turned into a :class:`Prepared` run (tasks, store file,
factories of agents and people, the plan's options). Every engine starts from here: one event
loop (:mod:`.run`), several processes, or Ray (:mod:`.cluster`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..sim.errors import RunConfigError

if TYPE_CHECKING:
    from ..bus import Bus
    from ..sim import Actor, EpisodeResult, Task

SQLITE_HEADER = b"SQLite format 3\x00"
CLOCKS = ("virtual", "wall")


@dataclass(frozen=True)
class RunConfig:
    """Everything a run takes. Task sources are files, folders or :class:`Task` objects; the
    selection fields narrow them as ``coworkenv run --only/--families/--per-family`` do."""

    tasks: Sequence[str | Path | Task]
    agent: str | Callable[[Task], Actor] = "oracle"
    """oracle | noop | openai:MODEL | teacher:openai:MODEL | remote, or a factory that makes
    each episode's agent from its task (your own agent: name it with ``agent_name``)."""
    agent_name: str | None = None
    """The agent's name on record (resume checks it); default: ``agent`` when it is a string."""
    role: str | None = None
    """teacher or student, on record for export; default: the agent's (oracle and teacher:
    agents are teachers)."""
    db: str | Path = "runs/coworkenv.db"
    bus: str | Bus = "memory"
    """memory, or mqtt://user:pass@host:port/prefix, or a :class:`~coworkenv.bus.Bus` not yet
    opened (the run opens and closes it; one process)."""
    trials: int = 1
    concurrency: int = 64
    """Episodes at once, per process."""
    processes: int = 1
    clock: str = "virtual"
    run_id: str | None = None
    resume: bool = False
    faults: float = 0.0
    """Rate of injected transient failures on the agent's write-tool calls."""
    slips: float = 0.0
    """The oracle's rate of wrong person arguments it recovers from (a first name where the
    id is needed, then ``directory_search``, then the id; see
    :attr:`~coworkenv.agents.OracleAgent.slips`): teacher demonstrations of recovering from
    a ``not_found``. Where the episode offers ``directory_search`` only."""
    tools: Sequence[str] | None = None
    """Tools offered to the agent (tool or app names, or ``reference``); default: the task's."""
    only: Sequence[str] | None = None
    families: Sequence[str] | None = None
    per_family: int | None = None
    max_turns: int | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    cast: str | Callable[[Task], dict[str, Actor]] = "scripted"
    """scripted | llm-user | llm, or a factory of each episode's people (user and coworkers)."""
    cast_model: str | None = None
    cast_base_url: str | None = None
    model_timeout: float = 120.0
    model_concurrency: int = 4
    max_tokens: int = 512
    check_endpoints: bool = True
    """Ask each model endpoint once before the run (a run whose every model call would fail
    is refused up front)."""
    tune_gc: bool = True
    """Fewer garbage collections while episodes run (see :class:`~coworkenv.sim.RunOptions`)."""
    ray: str | None = None
    """Run the episodes on a Ray cluster: ``auto`` (the cluster this machine belongs to, else
    a new one on this machine) or the head's address (``host:6379``, ``ray://host:10001``).
    Needs ``pip install 'coworkenv[ray]'``; see :mod:`coworkenv.runtime.cluster`."""
    hosts: int | None = None
    """Ray episode hosts (actors, one CPU each); default: the cluster's CPUs."""
    shard_dir: str | None = None
    """Where each Ray episode host writes its SQLite shard, on its own node's disk; default:
    the node's temporary folder (``<tmp>/coworkenv-shards``)."""

    def __post_init__(self) -> None:
        for name in ("trials", "concurrency", "processes", "model_concurrency"):
            if getattr(self, name) < 1:
                raise RunConfigError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.per_family is not None and self.per_family < 1:
            raise RunConfigError(f"per_family: must be at least 1, got {self.per_family}")
        if self.max_turns is not None and self.max_turns < 1:
            raise RunConfigError(f"max_turns: must be at least 1, got {self.max_turns}")
        if self.max_tokens < 16:
            raise RunConfigError(f"max_tokens: must be at least 16, got {self.max_tokens}")
        if self.clock not in CLOCKS:
            raise RunConfigError(f"clock: expected virtual or wall, got {self.clock!r}")
        if not 0.0 <= self.faults <= 1.0:
            raise RunConfigError(f"faults: expected a rate between 0 and 1, got {self.faults}")
        if not 0.0 <= self.slips <= 1.0:
            raise RunConfigError(f"slips: expected a rate between 0 and 1, got {self.slips}")
        if self.slips and self.agent != "oracle":
            raise RunConfigError(f"slips: only the oracle agent slips, got agent {self.agent!r}")
        if not self.tasks:
            raise RunConfigError("tasks: no task file, folder or task given")
        if not isinstance(self.agent, str) and not self.agent_name:
            raise RunConfigError("agent_name: name your own agent factory (it is recorded "
                                 "with the run, and a resume must use the same name)")
        if self.role not in (None, "teacher", "student"):
            raise RunConfigError(f"role: expected teacher or student, got {self.role!r}")
        if self.hosts is not None and self.hosts < 1:
            raise RunConfigError(f"hosts: must be at least 1, got {self.hosts}")
        if self.hosts is not None and self.ray is None:
            raise RunConfigError("hosts: counts Ray episode hosts; give ray too (e.g. auto)")
        if self.ray is not None and self.processes > 1:
            raise RunConfigError("ray: a Ray run spreads episodes over hosts; use hosts, not "
                                 "processes")
        if self.ray is not None and not isinstance(self.bus, str):
            raise RunConfigError("bus: a Bus object serves one process; give its URL with ray")
        if not isinstance(self.bus, str) and self.processes > 1:
            raise RunConfigError("bus: a Bus object serves one process; give its URL for "
                                 "processes > 1")


def select_tasks(tasks: list[Task], only: Sequence[str] | None = None,
                 families: Sequence[str] | None = None,
                 per_family: int | None = None) -> list[Task]:
    """Tasks narrowed to ids (``only``), families, and the first ``per_family`` tasks of each
    family (in file order); a name that matches nothing is an error."""
    if only:
        unknown = sorted(set(only) - {t.id for t in tasks})
        if unknown:
            raise RunConfigError(f"only: no task {unknown} among the {len(tasks)} loaded")
        tasks = [t for t in tasks if t.id in set(only)]
    if families:
        unknown = sorted(set(families) - {t.family for t in tasks})
        if unknown:
            raise RunConfigError(f"families: no task of family {unknown} (families: "
                                 f"{sorted({t.family for t in tasks})})")
        tasks = [t for t in tasks if t.family in set(families)]
    if per_family is not None:
        seen: dict[str, int] = {}
        kept = []
        for t in tasks:
            seen[t.family] = seen.get(t.family, 0) + 1
            if seen[t.family] <= per_family:
                kept.append(t)
        tasks = kept
    return tasks


def resolve_tasks(config: RunConfig) -> list[Task]:
    """The config's tasks: loaded (files and folders), selected, turn limits capped."""
    from ..sim import Task, load_tasks

    given = [x for x in config.tasks if isinstance(x, Task)]
    paths = [Path(x) for x in config.tasks if not isinstance(x, Task)]
    loaded = [*given, *(load_tasks(paths) if paths else [])]
    tasks = select_tasks(loaded, config.only, config.families, config.per_family)
    if config.max_turns is not None:
        cap = config.max_turns
        tasks = [t.model_copy(update={"limits": t.limits.model_copy(update={
            "max_turns": min(t.limits.max_turns, cap)})}) for t in tasks]
    if not tasks:
        raise RunConfigError("tasks: the selection left no task to run")
    return tasks


def check_db(db: Path, name: str = "db") -> Path:
    """A store to record into: new, or an SQLite file; never a folder or another file."""
    if db.is_dir():
        raise RunConfigError(f"{name} {db}: is a folder; give a file name "
                             f"(e.g. {db / 'coworkenv.db'})")
    if db.exists() and db.stat().st_size:
        with db.open("rb") as f:
            if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                raise RunConfigError(f"{name} {db}: exists and is not an SQLite database; "
                                     "give another file")
    if db.parent.exists() and not db.parent.is_dir():
        raise RunConfigError(f"{name} {db}: {db.parent} is a file, not a folder")
    return db


class EndpointUnreachableError(RunConfigError):
    """A model endpoint that does not answer, found before the run."""


def check_endpoint(base_url: str | None, name: str = "base_url") -> None:
    """An OpenAI-compatible endpoint answers (any HTTP answer will do): checked before a run
    whose every episode would otherwise fail at its first model call."""
    if not base_url:
        return
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="probe", max_retries=0, timeout=10.0)
    try:
        client.models.list()
    except openai.APIStatusError:
        pass  # it answered (an error status is still a server)
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise EndpointUnreachableError(
            f"{name} {base_url}: no server answers ({type(cause).__name__}: {cause}); start "
            "one (e.g. `coworkenv serve`) or check the address") from None
    except openai.APIError:
        pass  # it answered, if not quite as OpenAI does; the run will say more
    finally:
        client.close()


@dataclass
class Prepared:
    """A run ready to start: everything checked, factories built, the plan's options fixed."""

    config: RunConfig
    tasks: list[Task]
    db: Path
    options: Any
    make_agent: Any
    make_cast: Any
    remote: bool


def factories(c: RunConfig) -> tuple[Any, Any, Any]:
    """The agent's spec, and the factories of each episode's agent and cast (people), built
    from a config (in the process that runs the episodes: a Ray episode host builds its own)."""
    from ..agents import agent_factory, cast_factory, parse_agent
    from ..agents.factory import AgentSpec
    from ..bus import BusError, bus_key

    try:
        if isinstance(c.agent, str):
            spec = parse_agent(c.agent)
            bus_url = c.bus if isinstance(c.bus, str) else ""
            if spec.kind == "remote" and bus_url.startswith("mqtt"):
                bus_key(required=True)  # workers started elsewhere must hold the same key
            make_agent: Any = None if spec.kind == "remote" else agent_factory(
                c.agent, base_url=c.base_url, api_key_env=c.api_key_env,
                timeout=c.model_timeout, max_concurrency=c.model_concurrency,
                max_tokens=c.max_tokens, slips=c.slips)
        else:
            spec, make_agent = AgentSpec("custom"), c.agent
        make_cast = c.cast if not isinstance(c.cast, str) else cast_factory(
            c.cast, model=c.cast_model or spec.model or None,
            base_url=c.cast_base_url or c.base_url, api_key_env=c.api_key_env)
    except (ValueError, BusError) as exc:
        raise RunConfigError(str(exc)) from None
    return spec, make_agent, make_cast


def prepare(config: RunConfig, tasks: list[Task] | None = None) -> Prepared:
    """Check a config against the world (the store file, the endpoints, the bus key) and
    build what the run needs; raises library errors naming the field."""
    from ..sim import RunOptions, new_run_id
    from ..sim.task import FaultPlan
    from ..store import Reader

    c = config
    db = check_db(Path(c.db))
    if isinstance(c.bus, str):
        _bus(c.bus)  # (a malformed address, before anything starts)
    tasks = tasks if tasks is not None else resolve_tasks(c)
    spec, make_agent, make_cast = factories(c)
    if c.check_endpoints and spec.kind == "openai":
        check_endpoint(c.base_url)
    if c.check_endpoints and c.cast not in ("scripted",) and isinstance(c.cast, str):
        check_endpoint(c.cast_base_url or c.base_url,
                       "cast_base_url" if c.cast_base_url else "base_url")
    if c.processes > 1 and spec.kind == "remote":
        raise RunConfigError("processes: remote agents already run in their own worker "
                             "processes; use processes 1 with an agent of kind remote")
    if c.ray is not None and spec.kind == "remote":
        raise RunConfigError("ray: remote agents are served by workers over MQTT; run them "
                             "without ray")
    run_id = c.run_id
    if c.resume and run_id is None:
        if not db.exists():
            raise RunConfigError(f"resume: {db} does not exist; nothing to resume")
        agent_name = c.agent_name or str(c.agent) + (f" slips={c.slips:g}" if c.slips else "")
        with Reader(db) as r:
            # the newest unfinished run of these tasks and this agent, else the newest run
            # (whose own check then says why it cannot be resumed, or that it is finished)
            like = unfinished_runs(r, [t.id for t in tasks], agent_name, c.trials)
            run_id = like[-1]["run_id"] if like else r.latest_run()
        if run_id is None:
            raise RunConfigError(f"resume: {db} holds no run")
    elif not c.resume and run_id is not None and db.exists():
        from ..sim.runner import refuse_recorded_run
        from ..store import SchemaError

        try:
            with Reader(db) as r:
                refuse_recorded_run(r, run_id, db)
        except SchemaError:
            pass  # (an empty SQLite file: the store makes its tables; nothing recorded yet)
    try:
        options = RunOptions(run_id or new_run_id(), c.agent_name or str(c.agent) + (
            f" slips={c.slips:g}" if c.slips else ""), c.trials,
                             c.concurrency, c.clock, c.role or spec.role, c.resume,
                             FaultPlan(rate=c.faults) if c.faults else None,
                             tools=list(c.tools) if c.tools is not None else None,
                             tune_gc=c.tune_gc)
    except RunConfigError as exc:
        raise RunConfigError(f"run_id: {exc}") from None
    return Prepared(c, tasks, db, options, make_agent, make_cast, spec.kind == "remote")


def unfinished_runs(reader: Any, task_ids: Sequence[str], agent_name: str,
                    trials: int) -> list[dict[str, Any]]:
    """Runs of the store (oldest first) with these tasks, agent and trials that are not
    finished and that no live runner holds: what ``--resume`` would go on with."""
    ids = set(task_ids)
    return [x for x in reader.run_overview()
            if x["status"] != "finished" and x["holder"] is None and not x["simulation"]
            and x["agent"] == agent_name and x["trials"] == trials
            and set(x["config"].get("tasks") or ()) == ids]


OnDone = Callable[["EpisodeResult"], None]
OnPlan = Callable[[int, int], None]


def _bus(url: str | Bus) -> Any:
    """The bus of a URL (not yet connected); a malformed URL is a config error."""
    from ..bus import BusError, open_bus

    if not isinstance(url, str):
        return url
    try:
        return open_bus(url)
    except (ValueError, BusError) as exc:
        raise RunConfigError(str(exc)) from None
