"""The ``coworkenv`` command: parse, call the library, print."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Synthesize, run, grade and export training environments for coworker "
                       "agents.")
console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        from . import __version__

        console.print(f"coworkenv {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit")] = False,
) -> None:
    """coworkenv: workspace simulator for training coworker agents."""


@app.command()
def tools(
    fmt: Annotated[str, typer.Option("--format", help="openai (JSON list) or markdown")] = "openai",
) -> None:
    """Print the workspace tool catalog (OpenAI function schemas or a markdown table)."""
    from .workspace import markdown_table, openai_tools

    if fmt == "openai":
        sys.stdout.write(json.dumps(openai_tools(), indent=2) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(markdown_table() + "\n")
    else:
        err.print(f"[red]--format: expected 'openai' or 'markdown', got {fmt!r}[/red]")
        raise typer.Exit(2)


DB_HELP = "SQLite file of the event store"
CAPABILITY_SHORT = {"tool_coordination": "tools", "multi_turn_communication": "multi-turn",
                    "dynamic_workspace_state": "dynamic", "safety_sensitive_handling": "safety"}
BUS_HELP = "memory (default) or mqtt://user:pass@host:port/prefix (all but the host optional)"


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


def _toolset(value: str | None) -> list[str] | None:
    if not value:
        return None
    from .workspace import REGISTRY

    names = [v.strip() for v in value.split(",") if v.strip()]
    apps = {t.app for t in REGISTRY.values()}
    bad = [n for n in names if n not in REGISTRY and n not in apps and n != "reference"]
    if bad:
        raise _fail(f"--tools: {bad} are neither tools nor apps ({', '.join(sorted(apps))}) "
                    "nor `reference` (the tools each task's reference solution calls)")
    return names


def _names(value: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when empty)."""
    names = [v.strip() for v in (value or "").split(",") if v.strip()]
    return names or None


def _select(tasks: list[Any], only: list[str] | None, families: str | None,
            per_family: int | None = None) -> list[Any]:
    """Tasks narrowed by --only (ids), --families and --per-family (the first K of each
    family, in file order); unknown names are an error."""
    if only:
        unknown = sorted(set(only) - {t.id for t in tasks})
        if unknown:
            raise _fail(f"--only: no task {unknown} among the {len(tasks)} loaded")
        tasks = [t for t in tasks if t.id in set(only)]
    fams = _names(families)
    if fams:
        unknown = sorted(set(fams) - {t.family for t in tasks})
        if unknown:
            raise _fail(f"--families: no task of family {unknown} (families: "
                        f"{sorted({t.family for t in tasks})})")
        tasks = [t for t in tasks if t.family in set(fams)]
    if per_family is not None:
        seen: dict[str, int] = {}
        kept = []
        for t in tasks:
            seen[t.family] = seen.get(t.family, 0) + 1
            if seen[t.family] <= per_family:
                kept.append(t)
        tasks = kept
    return tasks


def _load(paths: list[Path]) -> list[Any]:
    from .sim import TaskFileError, load_tasks

    try:
        return load_tasks(paths)
    except TaskFileError as exc:
        raise _fail(str(exc)) from None


@dataclass
class ModelOptions:
    base_url: str | None = None
    api_key_env: str | None = None
    cast: str = "scripted"
    cast_model: str | None = None
    cast_base_url: str | None = None
    timeout: float = 120.0
    max_concurrency: int = 4
    max_tokens: int = 512
    tools: list[str] | None = None


def _execute(tasks: list[Any], *, agent: str, db: Path, bus_url: str, trials: int,
             concurrency: int, clock: str, run_id: str | None, resume: bool,
             quiet: bool = False, faults: float = 0.0,
             models: ModelOptions | None = None, processes: int = 1) -> tuple[str, list[Any]]:
    import anyio
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .agents import agent_factory, cast_factory, parse_agent
    from .bus import BusError, bus_key, open_bus
    from .sim import ProcessFailedError, RunOptions, new_run_id, run_episodes, run_in_processes
    from .store import EventStore, LeaseHeldError, Reader

    mo = models or ModelOptions()
    try:
        spec = parse_agent(agent)
        if spec.kind == "remote" and bus_url.startswith("mqtt"):
            bus_key(required=True)  # workers started elsewhere must hold the same key
        make_agent: Any = None if spec.kind == "remote" else agent_factory(
            agent, base_url=mo.base_url, api_key_env=mo.api_key_env, timeout=mo.timeout,
            max_concurrency=mo.max_concurrency, max_tokens=mo.max_tokens)
        make_cast = cast_factory(mo.cast, model=mo.cast_model or spec.model or None,
                                 base_url=mo.cast_base_url or mo.base_url,
                                 api_key_env=mo.api_key_env)
        bus = open_bus(bus_url)
    except (ValueError, BusError) as exc:
        raise _fail(str(exc)) from None
    if processes > 1 and spec.kind == "remote":
        raise _fail("--processes: remote agents already run in their own worker processes; "
                    "use --processes 1 with --agent remote")
    if resume and run_id is None:
        if not db.exists():
            raise _fail(f"--resume: {db} does not exist; nothing to resume")
        with Reader(db) as r:
            run_id = r.latest_run()
        if run_id is None:
            raise _fail(f"--resume: {db} holds no run")
    from .sim.task import FaultPlan

    if not 0.0 <= faults <= 1.0:
        raise _fail(f"--faults: expected a rate between 0 and 1, got {faults}")
    from .sim import RunConfigError

    rid = run_id or new_run_id()
    try:
        opts = RunOptions(rid, agent, trials, concurrency, clock, spec.role, resume,
                          FaultPlan(rate=faults) if faults else None, tools=mo.tools)
    except RunConfigError as exc:
        raise _fail(f"--run-id: {exc}") from None
    total = len(tasks) * trials

    def progress() -> Any:
        return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, disable=quiet, transient=False)

    def planned(bar: Any, job: Any) -> Callable[[int, int], None]:
        """The bar counts what this call runs; a resume says what it will do first."""
        def on_plan(scheduled: int, todo: int) -> None:
            bar.update(job, total=todo)
            if not resume:
                return
            if todo == 0:
                err.print(f"run {rid} is finished: all {scheduled} (task, trial) pairs are "
                          "recorded; nothing to resume", highlight=False)
            else:
                err.print(f"resuming run {rid}: {scheduled - todo} of {scheduled} (task, trial) "
                          f"pairs recorded, {todo} to run", highlight=False)
        return on_plan

    if processes > 1:
        with progress() as bar:
            job = bar.add_task(f"{rid} ({agent}, {processes} processes)", total=total)
            try:
                return rid, run_in_processes(
                    tasks, processes=processes, db=db, open_bus=lambda: open_bus(bus_url),
                    agent=make_agent, cast=make_cast, options=opts,
                    on_done=lambda r: bar.advance(job), on_plan=planned(bar, job))
            except BusError as exc:
                raise _fail(f"--bus {bus_url}: {exc}", 1) from None
            except ProcessFailedError as exc:
                raise _fail(f"{exc} (run id {rid})", 1) from None
            except (LeaseHeldError, RunConfigError) as exc:
                raise _fail(str(exc)) from None

    async def go() -> list[Any]:
        with progress() as bar:
            job = bar.add_task(f"{rid} ({agent})", total=total)
            async with bus, EventStore(db) as store:
                if spec.kind != "remote":
                    return await run_episodes(tasks, agent=make_agent, cast=make_cast, bus=bus,
                                              store=store, options=opts,
                                              on_done=lambda r: bar.advance(job),
                                              on_plan=planned(bar, job))
                from .agents.remote import RemoteAgentProxy, RemotePool

                async with RemotePool(bus) as pool:
                    return await run_episodes(tasks, agent=lambda t: RemoteAgentProxy(pool, t),
                                              cast=make_cast, bus=bus, store=store,
                                              options=opts, on_done=lambda r: bar.advance(job),
                                              on_plan=planned(bar, job))

    try:
        results = anyio.run(go)
    except BusError as exc:
        raise _fail(f"--bus {bus_url}: {exc}", 1) from None
    except (LeaseHeldError, RunConfigError) as exc:
        raise _fail(str(exc)) from None
    except BaseExceptionGroup as group:  # raised inside the store's task group
        refused = group.subgroup((LeaseHeldError, RunConfigError))
        if refused is None:
            raise
        raise _fail(str(_first_leaf(refused))) from None
    return rid, results


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _run_summary(rid: str, db: Path, this_call: int, allow_errors: bool) -> None:
    """The run's result over every scheduled (task, trial), read back from the store."""
    from .sim.report import summarize
    from .store import Reader

    with Reader(db) as r:
        rows = r.scheduled_episodes(rid)
    o = summarize(rows)["overall"]
    if o is None:
        console.print(f"run {rid}: no episode scheduled")
        return
    console.print(f"run {rid}: {this_call} episode(s) this call; {_overall_line(o)}",
                  highlight=False)
    bad = [x for x in rows if x["status"] == "failed"]
    for x in bad[:10]:
        console.print(f"  {x['task_id']} trial {x['trial']}: failed at the "
                      f"{x['failure_boundary']} boundary: {x['failure']}", highlight=False,
                      markup=False)
    if len(bad) > 10:
        console.print(f"  ... and {len(bad) - 10} more (coworkenv eval --db {db} --run {rid})",
                      highlight=False, markup=False)
    if o["errors"] and not allow_errors:
        raise _fail(f"{o['errors']} episode(s) failed in the simulator (not the agent); "
                    "see above, or pass --allow-errors", 1)


def _table(results: list[Any], tasks: list[Any], title: str) -> None:
    from rich.table import Table

    by_id = {t.id: t for t in tasks}
    table = Table(title=title)
    numeric = ("trial", "turns", "completion", "safety", "robust", "score")
    for col in ("task", "family", "capabilities", "trial", "turns", "sim time", "wall",
                "termination", "completion", "safety", "robust", "score"):
        table.add_column(col, justify="right" if col in numeric else "left")
    for r in sorted(results, key=lambda r: (r.family, r.task_id, r.trial)):
        caps = ", ".join(CAPABILITY_SHORT.get(c, c) for c in by_id[r.task_id].capabilities)
        colour = "green" if r.completion == 1.0 else "yellow" if r.completion > 0 else "red"
        table.add_row(r.task_id, r.family, caps, str(r.trial), str(r.turns),
                      f"{r.sim_time / 60:.0f} min", f"{r.wall_time * 1000:.0f} ms",
                      r.termination if not r.failure else f"{r.termination}: {r.failure}",
                      f"[{colour}]{r.completion:.2f}[/{colour}]",
                      f"{r.safety:.2f}" if r.safety == 1 else f"[red]{r.safety:.2f}[/red]",
                      f"{r.robustness:.2f}", f"{r.score:.2f}" + (" ✓" if r.passed else ""))
    console.print(table)


@app.command()
def demo(
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    bus: Annotated[str, typer.Option(help=BUS_HELP)] = "memory",
    concurrency: Annotated[int, typer.Option(help="Episodes at once")] = 64,
    clock: Annotated[str, typer.Option(help="virtual (default) or wall")] = "virtual",
    faults: Annotated[float, typer.Option(help="Rate of injected failures on the agent's "
                                          "write-tool calls (0..1)")] = 0.0,
) -> None:
    """Run every built-in task with the oracle agent, concurrently, and print the results."""
    from .sim import builtin_tasks

    tasks = builtin_tasks()
    rid, results = _execute(tasks, agent="oracle", db=db, bus_url=bus, trials=1,
                            concurrency=concurrency, clock=clock, run_id=None, resume=False,
                            faults=faults)
    _table(results, tasks, f"coworkenv demo: {rid} -> {db}")
    failed = [r for r in results if r.status != "completed"]
    if failed:
        raise _fail(f"{len(failed)} episode(s) failed", 1)


@app.command()
def run(
    tasks: Annotated[list[Path], typer.Option("--tasks", help="Task files or folders")],
    agent: Annotated[str, typer.Option(help="oracle | noop | openai:MODEL | "
                                       "teacher:openai:MODEL")] = "oracle",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint of the "
                                                 "agent's model, e.g. http://127.0.0.1:8080/v1")]
    = None,
    api_key_env: Annotated[str | None, typer.Option(help="Environment variable holding the "
                                                    "API key")] = None,
    cast: Annotated[str, typer.Option(help="scripted | llm-user | llm (model personas for the "
                                      "user, or for user and coworkers)")] = "scripted",
    cast_model: Annotated[str | None, typer.Option(help="Model of the personas (default: the "
                                                   "agent's)")] = None,
    cast_base_url: Annotated[str | None, typer.Option(help="Endpoint of the personas "
                                                      "(default: --base-url)")] = None,
    model_timeout: Annotated[float, typer.Option(help="Seconds per model call")] = 120.0,
    model_concurrency: Annotated[int, typer.Option(min=1, help="Model calls at once per "
                                                   "endpoint")] = 4,
    max_tokens: Annotated[int, typer.Option(min=16, help="Completion tokens per model call")]
    = 512,
    tools: Annotated[str | None, typer.Option(help="Tools offered to the agent, comma-separated "
                                              "tool or app names, or `reference` (the tools each "
                                              "task's reference solution calls); default: the "
                                              "task's, or all")]
    = None,
    only: Annotated[list[str] | None, typer.Option(help="Run only these task ids")] = None,
    families: Annotated[str | None, typer.Option(help="Run only these workflow families, "
                                                 "comma-separated")] = None,
    per_family: Annotated[int | None, typer.Option(min=1, help="Run only the first K tasks "
                                                   "of each family (in file order), e.g. to "
                                                   "evaluate a model on a sample of a large "
                                                   "synthesized set")] = None,
    max_turns: Annotated[int | None, typer.Option(min=1, help="Cap every task's agent turns")]
    = None,
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task (for pass@k)")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes at once (per process)")] = 64,
    processes: Annotated[int, typer.Option(min=1, help="OS processes sharing the episodes, each "
                                           "with its own event loop, bus connection and store "
                                           "writer on the same --db (for fast agents, where one "
                                           "event loop is the bottleneck)")] = 1,
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    bus: Annotated[str, typer.Option(help=BUS_HELP)] = "memory",
    clock: Annotated[str, typer.Option(help="virtual (default) or wall")] = "virtual",
    run_id: Annotated[str | None, typer.Option(help="Run id (default: a new one)")] = None,
    resume: Annotated[bool, typer.Option(help="Complete the missing episodes of a run (the "
                                         "latest one unless --run-id)")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bar or table")] = False,
    faults: Annotated[float, typer.Option(help="Rate of injected failures on the agent's "
                                          "write-tool calls (0..1)")] = 0.0,
    allow_errors: Annotated[bool, typer.Option(help="Exit 0 even when episodes failed in the "
                                               "simulator itself (setup, runtime, world, "
                                               "grading, tools, simulated people)")] = False,
) -> None:
    """Run tasks with an agent; every episode is recorded in the store. The summary counts
    every scheduled episode: one that failed at the agent boundary scores 0; failures of the
    simulator are errors, and the command exits 1 on them (unless --allow-errors)."""
    loaded = _select(_load(tasks), only, families, per_family)
    if max_turns is not None:
        loaded = [t.model_copy(update={"limits": t.limits.model_copy(update={
            "max_turns": min(t.limits.max_turns, max_turns)})}) for t in loaded]
    rid, results = _execute(loaded, agent=agent, db=db, bus_url=bus, trials=trials,
                            concurrency=concurrency, clock=clock, run_id=run_id, resume=resume,
                            quiet=quiet, faults=faults,
                            models=ModelOptions(base_url, api_key_env, cast, cast_model,
                                                cast_base_url, model_timeout, model_concurrency,
                                                max_tokens, _toolset(tools)),
                            processes=processes)
    if not quiet and results:
        _table(results, loaded, f"{rid} -> {db}")
    _run_summary(rid, db, len(results), allow_errors)


@app.command()
def replay(
    db: Annotated[Path, typer.Option(help=DB_HELP)],
    episode: Annotated[str, typer.Option(help="Episode id")],
    hash_: Annotated[bool, typer.Option("--hash", help="Print the event-sequence hash and the "
                                        "final workspace hash, rebuilt from the log")] = False,
    at: Annotated[int | None, typer.Option(help="Print the workspace as it was at this seq")]
    = None,
    diff: Annotated[tuple[int, int] | None, typer.Option(help="Print what changed between "
                                                         "two seqs: A B")] = None,
    agent_view: Annotated[bool, typer.Option("--agent-view", help="Print the messages the "
                                             "agent saw and produced, in chat format")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of text")] = False,
) -> None:
    """Replay an episode from the event log: timeline, time travel, diffs, the agent's view."""
    from rich.markup import escape

    from .agents.chat import agent_view as render_agent_view
    from .sim import events_hash
    from .store import StoreError
    from .workspace import replay_events
    from .workspace.diff import describe_state, diff_states

    reader = _reader(db)
    with reader:
        try:
            reader.episode(episode)
        except StoreError as exc:
            raise _fail(str(exc)) from None
        events = list(reader.events(episode))
    last = events[-1].seq if events else -1
    for name, seq in (("--at", at), *(((f"--diff {i + 1}", s) for i, s in
                                       enumerate(diff)) if diff else ())):
        if seq is not None and not 0 <= seq <= last:
            raise _fail(f"{name}: seq {seq} is outside this episode (0..{last})")
    if hash_:
        sys.stdout.write(f"events {events_hash(events)}\nstate "
                         f"{replay_events(events).state_hash()}\n")
    elif at is not None:
        state = replay_events(events, upto=at)
        if as_json:
            sys.stdout.write(json.dumps(state.to_json(), indent=2) + "\n")
        else:
            e = events[at]
            console.print(f"workspace at seq {at} ({e.sim_time / 60:.1f} simulated min, after "
                          f"{e.actor} {e.kind}):", highlight=False)
            for line in describe_state(state):
                console.print(line, highlight=False, markup=False)
    elif diff is not None:
        a, b = diff
        d = diff_states(replay_events(events, upto=a), replay_events(events, upto=b))
        if as_json:
            sys.stdout.write(json.dumps(d, indent=2) + "\n")
            return
        if not d:
            console.print(f"no change between seq {a} and seq {b}")
        for app_name, ch in d.items():
            for eid, data in ch["added"].items():
                console.print(f"+ {app_name}/{eid}: {json.dumps(data, ensure_ascii=False)[:150]}",
                              highlight=False, markup=False)
            for eid in ch["removed"]:
                console.print(f"- {app_name}/{eid}", highlight=False, markup=False)
            for eid, fields in ch["changed"].items():
                for f, (old, new) in fields.items():
                    console.print(f"~ {app_name}/{eid}.{f}: {json.dumps(old)[:70]} -> "
                                  f"{json.dumps(new)[:70]}", highlight=False, markup=False)
    elif agent_view:
        msgs = render_agent_view(events)
        if as_json:
            sys.stdout.write(json.dumps(msgs, indent=2, ensure_ascii=False) + "\n")
            return
        for m in msgs:
            body = m.get("content") or ""
            if m.get("tool_calls"):
                f = m["tool_calls"][0]["function"]
                body = f"{f['name']}({f['arguments']})"
            console.print(f"[bold]{m['role']:>9}[/bold] {escape(body)}", highlight=False)
    else:
        for e in events:
            if e.kind.startswith("ws.") and e.actor == "setup":
                continue
            body = json.dumps(e.payload, ensure_ascii=False)
            console.print(f"{e.seq:>5} {e.sim_time / 60:>7.1f}m {e.actor:>10} {e.kind:<22} "
                          f"{body[:110]}", highlight=False, markup=False)


def _reader(db: Path) -> Any:
    from .store import Reader, StoreError

    try:
        return Reader(db)
    except StoreError as exc:
        raise _fail(str(exc)) from None


@app.command()
def worker(
    bus: Annotated[str, typer.Option(help="mqtt://user:pass@host:port/prefix (the same as "
                                     "the runner's)")],
    agent: Annotated[str, typer.Option(help="oracle | noop | openai:MODEL")] = "oracle",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Variable holding the API key")]
    = None,
    capacity: Annotated[int, typer.Option(min=1, help="Decisions at once")] = 64,
    worker_id: Annotated[str | None, typer.Option(help="Id (default: a new one)")] = None,
    model_concurrency: Annotated[int, typer.Option(min=1, help="Model calls at once")] = 4,
) -> None:
    """Serve agent decisions for episodes run by `coworkenv run --agent remote` elsewhere.
    The runner and every worker share COWORKENV_BUS_KEY: envelopes are signed with it."""
    import anyio
    from pydantic import TypeAdapter

    from .agents import NoopAgent, OpenAIAgent, OracleAgent, parse_agent
    from .agents.factory import endpoint
    from .agents.remote import Worker
    from .bus import BusError, bus_key, open_bus
    from .sim.task import Step

    try:
        spec = parse_agent(agent)
        b = open_bus(bus, key=bus_key(required=True) if bus.startswith("mqtt") else None)
        ep = endpoint(spec.model, base_url, api_key_env, max_concurrency=model_concurrency) \
            if spec.kind == "openai" else None
    except (ValueError, BusError) as exc:
        raise _fail(str(exc)) from None
    if spec.kind not in ("oracle", "noop", "openai"):
        raise _fail(f"--agent: a worker serves oracle, noop or openai:MODEL, not {agent!r}")
    steps = TypeAdapter(list[Step])

    def make(setup: dict[str, Any]) -> Any:
        if spec.kind == "oracle":
            if not setup.get("reference"):
                raise ValueError("the runner sent no reference solution")
            return OracleAgent(steps.validate_python(setup["reference"]))
        if spec.kind == "noop":
            return NoopAgent()
        assert ep is not None
        return OpenAIAgent(ep)

    async def go() -> None:
        async with b:
            w = Worker(b, make, spec.kind, capacity=capacity, worker_id=worker_id)
            console.print(f"worker {w.worker_id} ({agent}) serving {bus}", highlight=False)
            sys.stdout.flush()
            await w.serve()

    try:
        anyio.run(go)
    except KeyboardInterrupt:
        pass
    except BusError as exc:
        raise _fail(f"--bus {bus}: {exc}", 1) from None


@app.command()
def synth(
    requirements: Annotated[list[Path], typer.Argument(help="Workflow requirement files (YAML) "
                                                       "or BPMN 2.0 process files (.bpmn)")],
    out: Annotated[Path, typer.Option(help="Where to write the accepted tasks (JSONL)")],
    generator: Annotated[str, typer.Option(help="procedural (plans of workflow primitives, "
                                           "composed) | families (the five fixed plans) | "
                                           "openai (a model proposes the plans) | openai-spec "
                                           "(a model writes whole task specs)")]
    = "procedural",
    n: Annotated[int, typer.Option(min=1, help="Tasks to produce")] = 100,
    max_repairs: Annotated[int, typer.Option(min=0, help="Repair rounds per task")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the procedural generator")] = 0,
    model: Annotated[str | None, typer.Option(help="Model (openai generator)")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Variable holding the API key")] = None,
    max_tokens: Annotated[int, typer.Option(help="Tokens per generated spec")] = 3000,
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks in flight")] = 8,
    examples: Annotated[int, typer.Option(min=0, help="Valid example tasks in the prompt "
                                          "(openai-spec generator; 0 for small context "
                                          "windows)")]
    = 1,
    workers: Annotated[int, typer.Option(min=1, help="Processes that validate (every mutant "
                                         "is a full episode; use the cores you have)")] = 1,
    mutate: Annotated[bool, typer.Option(help="Accept a task only if its grader kills every "
                                         "applicable mutant and passes every equivalent one")]
    = True,
) -> None:
    """Generate tasks from workflow requirements or BPMN processes; validate each by running
    it (mutants included); repair what fails."""
    import anyio
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from .agents.factory import endpoint
    from .sim import TaskFileError, builtin_tasks
    from .synth import (
        OpenAIGenerator,
        OpenAIPlanGenerator,
        ProceduralGenerator,
        load_requirement,
        synthesize,
    )

    try:
        reqs = [load_requirement(p) for p in requirements]
    except TaskFileError as exc:
        raise _fail(str(exc)) from None
    gen: Any
    if generator in ("procedural", "families"):
        gen = ProceduralGenerator(seed, mode="compose" if generator == "procedural"
                                  else "families")
    elif generator in ("openai", "openai-spec"):
        try:
            ep = endpoint(model or "", base_url, api_key_env, max_tokens=max_tokens,
                          max_concurrency=concurrency, timeout=600)
        except ValueError as exc:
            raise _fail(str(exc)) from None
        if not model:
            raise _fail("--model is required with --generator openai")
        shown = [json.loads(t.model_dump_json(exclude_defaults=True))
                 for t in builtin_tasks()[:examples]]
        gen = OpenAIPlanGenerator(ep, seed=seed) if generator == "openai" else \
            OpenAIGenerator(ep, shown)
    else:
        raise _fail(f"--generator: expected procedural, families, openai or openai-spec, "
                    f"got {generator!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    attempts_path = out.with_name(out.name + ".attempts.jsonl")
    log = attempts_path.open("w")

    def on_attempt(a: Any) -> None:
        log.write(json.dumps({"requirement": a.requirement, "index": a.index, "round": a.round,
                              "accepted": a.accepted, "duplicate": a.duplicate,
                              "report": a.report, "spec": a.spec}) + "\n")
        log.flush()

    with Progress(TextColumn("[bold]synth"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        job = bar.add_task("synth", total=n)
        specs, attempts, stats = anyio.run(lambda: synthesize(
            reqs, gen, n, max_repairs=max_repairs, concurrency=concurrency,
            on_attempt=on_attempt, on_done=lambda: bar.advance(job), mutate=mutate,
            workers=workers))
    log.close()
    from .outputs import atomic_file, write_file_manifest

    with atomic_file(out) as f:  # whole or not at all, with a manifest loaders check
        for s in specs:
            f.write(json.dumps(s) + "\n")
    write_file_manifest(out, tasks=len(specs))
    summary = stats.to_json()
    with atomic_file(out.with_name(out.name + ".report.json")) as f:
        f.write(json.dumps(summary, indent=2))
    t = Table(title=f"synth: {len(specs)} of {n} accepted -> {out}")
    for col in ("requirement", "capability", "tasks exercising it"):
        t.add_column(col)
    for rid, cov in summary["coverage"].items():
        for cap, count in cov.items():
            t.add_row(rid, cap, str(count) if count else "[red]0[/red]")
    console.print(t)
    console.print(f"first-pass validity {summary['first_pass_validity']:.3f}, after repair "
                  f"{summary['validity_after_repair']:.3f}, mean rounds "
                  f"{summary['mean_rounds']:.2f}, rejections {summary['rejection_reasons']}; "
                  f"{len(attempts)} attempts in {attempts_path}", highlight=False)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Task files or folders (YAML, JSON, "
                                                "JSONL)")],
    mutate: Annotated[bool, typer.Option("--mutate", help="Also prove each grader against "
                                         "mutants of the reference solution: sabotaged "
                                         "variants must fail, equivalent ones must pass")]
    = False,
    as_json: Annotated[Path | None, typer.Option("--json", help="Write every report (with "
                                                 "each mutant's result) to this file")] = None,
) -> None:
    """Validate task files: parse, resolve, run the reference and a no-op, check capabilities
    (and with --mutate, kill every applicable mutant with no false positive)."""
    import anyio
    from rich.markup import escape
    from rich.progress import Progress

    from .outputs import atomic_file
    from .sim import TaskFileError
    from .sim.loader import read_task_items, task_files
    from .synth import Rejection, Report, validate_task_async

    items: list[tuple[str, Any]] = []
    unreadable: list[tuple[str, Report]] = []
    for f in (f for path in files for f in task_files(path)):
        try:
            items += read_task_items(f, lenient=True)
        except TaskFileError as exc:  # a whole file that cannot be read
            unreadable.append((exc.file, Report("?", False, [Rejection("parse", exc.file, p)
                                                             for p in exc.problems])))

    async def go() -> list[Any]:
        out = []
        with Progress(console=err, transient=True, disable=len(items) < 20) as bar:
            job = bar.add_task("validating", total=len(items))
            for where, spec in items:
                out.append(await validate_task_async(spec, where, mutate=mutate))
                bar.advance(job)
        return out

    reports = [r for _, r in unreadable] + anyio.run(go)
    wheres = [w for w, _ in unreadable] + [w for w, _ in items]
    bad = 0
    for where, r in zip(wheres, reports, strict=True):
        if not r.accepted:
            bad += 1
            for line in r.text().splitlines():
                console.print(f"[red]rejected[/red] {escape(where)} ({escape(r.task_id)}): "
                              f"{escape(line)}", highlight=False)
    if mutate:
        _mutation_table(reports)
    if as_json is not None:
        as_json.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(as_json) as out:
            out.write(json.dumps([r.to_json() for r in reports], indent=2))
    console.print(f"{len(reports) - bad} of {len(reports)} task(s) valid")
    if bad:
        raise typer.Exit(1)


def _mutation_table(reports: list[Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="mutation check: sabotaged variants must fail, equivalent ones must pass")
    for col in ("task", "applicable", "killed", "survivors", "false positives"):
        t.add_column(col, justify="right" if col in ("applicable", "killed") else "left")
    totals = [0, 0, 0, 0]
    for r in reports:
        m = r.mutation
        if m is None:
            t.add_row(escape(r.task_id), "-", "-", "not run (the task is rejected before)", "-")
            continue
        surv = "; ".join(f"{s.id} ({s.description})" + (f" accepted: {s.accepted}"
                                                          if s.accepted else "")
                         for s in m.survivors) or "none"
        fps = "; ".join(f"{f.id} ({f.description}, score {f.score})"
                        for f in m.false_positives) or "0"
        t.add_row(escape(r.task_id), str(m.applicable), str(m.killed), escape(surv), escape(fps))
        totals[0] += m.applicable
        totals[1] += m.killed
        totals[2] += len(m.survivors)
        totals[3] += len(m.false_positives)
    console.print(t)
    console.print(f"mutants: {totals[0]} applicable, {totals[1]} killed, {totals[2]} survived, "
                  f"{totals[3]} false positive(s)", highlight=False)


export_app = typer.Typer(no_args_is_help=True, help="Export training data from the store.")
app.add_typer(export_app, name="export")


@export_app.command("sft")
def export_sft_cmd(
    db: Annotated[Path, typer.Option(help=DB_HELP)],
    out: Annotated[Path, typer.Option(help="Folder for train/eval JSONL (and a HF dataset)")],
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run")] = None,
    min_score: Annotated[float, typer.Option(help="Score a demonstration needs")] = 0.75,
    split_by: Annotated[str, typer.Option(help="task | family")] = "task",
    eval_fraction: Annotated[float, typer.Option(help="Share of tasks/families held out")] = 0.2,
    all_roles: Annotated[bool, typer.Option(help="Also student episodes that passed")] = False,
    held_out: Annotated[str | None, typer.Option(help="Task ids or families (as --split-by) "
                                                 "to hold out, comma-separated, instead of "
                                                 "--eval-fraction")] = None,
) -> None:
    """Teacher episodes that passed, as SFT conversations with tools (TRL's format)."""
    from .training import export_sft

    if split_by not in ("task", "family"):
        raise _fail(f"--split-by: expected task or family, got {split_by!r}")
    _reader(db).close()
    st = export_sft(db, out, run=run_id, min_score=min_score, split_by=split_by,  # type: ignore[arg-type]
                    eval_fraction=eval_fraction, teachers_only=not all_roles,
                    held_out=_names(held_out))
    console.print(f"wrote {st.written} rows to {out} ({st.considered} considered, excluded "
                  f"{dict(st.excluded)})", highlight=False)


@export_app.command("rl")
def export_rl_cmd(
    out: Annotated[Path, typer.Option(help="Folder for train/eval JSONL")],
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", help="Task files")] = None,
    db: Annotated[Path | None, typer.Option(help="Or: the tasks a run used")] = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Run id (with --db)")] = None,
    split_by: Annotated[str, typer.Option(help="task | family")] = "task",
    eval_fraction: Annotated[float, typer.Option(help="Share held out")] = 0.2,
    tools: Annotated[str | None, typer.Option(help="Tools offered (as for `run --tools`)")]
    = None,
    held_out: Annotated[str | None, typer.Option(help="Task ids or families to hold out, "
                                                 "comma-separated")] = None,
) -> None:
    """Task prompts for RL (the opening conversation, tools and task id of each task)."""
    from .sim import Task
    from .training import export_rl

    if (tasks is None) == (db is None):
        raise _fail("give exactly one of --tasks or --db")
    if tasks is not None:
        loaded, source = _load(tasks), ", ".join(map(str, tasks))
    else:
        assert db is not None
        with _reader(db) as r:
            rid = run_id or r.latest_run()
            if rid is None:
                raise _fail(f"{db} holds no run")
            loaded = [Task.model_validate_json(s) for s in r.task_specs(rid).values()]
        source = f"{db}, run {rid}"
    from .sim import HeldOutError

    try:
        st = export_rl(loaded, out, split_by=split_by, eval_fraction=eval_fraction,  # type: ignore[arg-type]
                       source=source, tools=_toolset(tools), held_out=_names(held_out))
    except HeldOutError as exc:
        raise _fail(str(exc)) from None
    console.print(f"wrote {st.written} prompts to {out}", highlight=False)


train_app = typer.Typer(no_args_is_help=True, help="Train a model (needs the train extra).")
app.add_typer(train_app, name="train")


@train_app.command("sft")
def train_sft_cmd(
    model: Annotated[str, typer.Option(help="Hugging Face id or folder, or a .gguf file")],
    data: Annotated[Path, typer.Option(help="Folder written by `coworkenv export sft`")],
    out: Annotated[Path, typer.Option(help="Checkpoint folder")],
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps")] = 30,
    learning_rate: Annotated[float, typer.Option(help="Learning rate")] = 5e-5,
    batch_size: Annotated[int, typer.Option(min=1, help="Per-device batch size")] = 2,
    max_length: Annotated[int, typer.Option(min=64, help="Tokens per example")] = 2048,
    lora: Annotated[bool, typer.Option(help="Train LoRA adapters (peft)")] = False,
    gpu: Annotated[bool, typer.Option(help="Train on the accelerator (bf16, gradient "
                                      "checkpointing); default CPU")] = False,
) -> None:
    """Supervised fine-tuning on teacher demonstrations with TRL (assistant-only loss)."""
    _train_imports("train sft")
    from .training.sft import SFTOptions, train_sft

    if not (data / "train.jsonl").exists():
        raise _fail(f"--data: {data / 'train.jsonl'} not found (run `coworkenv export sft`)")
    from .outputs import IncompleteOutputError
    from .sim import HeldOutError

    try:
        res = train_sft(model, data, out, SFTOptions(steps, learning_rate, batch_size,
                                                     max_length, lora, cpu=not gpu))
    except (HeldOutError, IncompleteOutputError) as exc:
        raise _fail(str(exc)) from None
    losses = res["losses"]
    console.print(f"trained {len(losses)} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}; "
                  f"checkpoint {res['checkpoint']}", highlight=False)


def _train_imports(what: str) -> None:
    try:
        import trl  # noqa: F401
    except ImportError as exc:
        raise _fail(f"{what} needs the train extra: pip install -e '.[train]' ({exc})") from None


@train_app.command("grpo")
def train_grpo_cmd(
    model: Annotated[str, typer.Option(help="Hugging Face id or folder (e.g. an SFT "
                                       "checkpoint), or a .gguf file")],
    tasks: Annotated[list[Path], typer.Option("--tasks", help="Task files or folders to roll "
                                              "out (RL prompts)")],
    out: Annotated[Path, typer.Option(help="Checkpoint folder")],
    db: Annotated[Path, typer.Option(help="SQLite file the rollout episodes are recorded in")]
    = Path("runs/coworkenv.db"),
    only: Annotated[list[str] | None, typer.Option(help="Only these task ids")] = None,
    families: Annotated[str | None, typer.Option(help="Only these families, comma-separated")]
    = None,
    held_out: Annotated[str | None, typer.Option(help="Never train on these families or task "
                                                 "ids, comma-separated (the evaluation's; as "
                                                 "`export --held-out`)")] = None,
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps")] = 2,
    learning_rate: Annotated[float, typer.Option(help="Learning rate")] = 1e-6,
    batch_size: Annotated[int, typer.Option(min=1, help="Rollouts per step (a multiple of "
                                            "--num-generations)")] = 2,
    num_generations: Annotated[int, typer.Option(min=2, help="Rollouts per prompt (the GRPO "
                                                 "group)")] = 2,
    max_completion_length: Annotated[int, typer.Option(min=16, help="Tokens per rollout "
                                                       "(model turns and tool results)")] = 256,
    max_tool_calls: Annotated[int, typer.Option(min=1, help="Tool-calling iterations per "
                                                "rollout")] = 6,
    temperature: Annotated[float, typer.Option(help="Sampling temperature")] = 1.0,
    beta: Annotated[float, typer.Option(help="KL coefficient (0: no reference model)")] = 0.0,
    reward_weights: Annotated[str, typer.Option(help="Weights of score,completion,safety,"
                                                "robustness")] = "1,0,0,0",
    tools: Annotated[str, typer.Option(help="Tools each episode offers: `reference` (those "
                                       "its reference solution calls), or tool/app names")]
    = "reference",
    use_vllm: Annotated[bool, typer.Option(help="Generate with vLLM (GPU hosts)")] = False,
    vllm_mode: Annotated[str, typer.Option(help="colocate | server")] = "colocate",
    gpu: Annotated[bool, typer.Option(help="Train on the accelerator (bf16); default CPU")]
    = False,
    run_id: Annotated[str | None, typer.Option(help="Run id of the rollout episodes")] = None,
) -> None:
    """GRPO with TRL where every rollout is a live, recorded coworkenv episode, rewarded
    with its grade (score, completion, safety, robustness logged separately)."""
    _train_imports("train grpo")
    from .training.grpo import GRPOOptions, train_grpo

    loaded = _select(_load(tasks), only, families)
    excluded = set(_names(held_out) or [])
    loaded = [t for t in loaded if t.family not in excluded and t.id not in excluded]
    if not loaded:
        raise _fail("no task left to train on (check --only / --families / --held-out)")
    try:
        weights = tuple(float(x) for x in reward_weights.split(","))
    except ValueError:
        weights = ()
    if len(weights) != 4:
        raise _fail(f"--reward-weights: expected 4 numbers (score,completion,safety,robustness), "
                    f"got {reward_weights!r}")
    if batch_size % num_generations:
        raise _fail(f"--batch-size ({batch_size}) must be a multiple of --num-generations "
                    f"({num_generations})")
    opts = GRPOOptions(steps=steps, learning_rate=learning_rate, batch_size=batch_size,
                       num_generations=num_generations,
                       max_completion_length=max_completion_length, max_tool_calls=max_tool_calls,
                       temperature=temperature, beta=beta,
                       reward_weights=weights,  # type: ignore[arg-type]
                       tools=_toolset(tools), use_vllm=use_vllm, vllm_mode=vllm_mode, cpu=not gpu)
    from .sim import HeldOutError
    from .training.export import refuse_held_out

    try:
        refuse_held_out("train grpo", loaded)  # (before the model is loaded)
    except HeldOutError as exc:
        raise _fail(str(exc)) from None
    res = train_grpo(model, loaded, out, db, opts, run_id=run_id)
    r = res["rewards"]
    console.print(f"trained {steps} GRPO steps on {len(loaded)} task(s); reward per step: "
                  + "; ".join(f"{k} {[round(v, 3) for v in vals]}" for k, vals in r.items())
                  + f"; rollouts: run {res['rollout_run']} in {db}; checkpoint {out}",
                  highlight=False)


@app.command()
def serve(
    model: Annotated[str, typer.Option(help="Checkpoint folder or hub id, or a .gguf file")],
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port")] = 8000,
    name: Annotated[str | None, typer.Option(help="Model name clients use (default: the "
                                             "folder's name)")] = None,
) -> None:
    """Serve a checkpoint as an OpenAI-compatible chat endpoint (transformers; the chat
    template and tool-call parser training uses), for `coworkenv run --agent openai:NAME`."""
    _train_imports("serve")
    from .training.serve import ChatModel, ChatServer

    m = ChatModel(model, name=name or "")
    srv = ChatServer(m, host, port)
    console.print(f"serving {m.name} (checkpoint {m.path}, weights sha256 {m.sha}) at "
                  f"{srv.base_url}", highlight=False)
    with contextlib.suppress(KeyboardInterrupt):
        srv.serve_forever()


@app.command()
def regrade(
    db: Annotated[Path, typer.Option(help=DB_HELP)],
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", help="Task files to grade "
                                                     "with (default: the specs the run used)")]
    = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run")] = None,
) -> None:
    """Grade recorded episodes again from the event log, without re-running them."""
    import anyio

    from .sim.report import regrade_store
    from .store import EventStore

    _reader(db).close()
    loaded = _load(tasks) if tasks else None

    async def go() -> dict[str, int]:
        async with EventStore(db) as store:
            return await regrade_store(store, loaded, run_id)

    counts = anyio.run(go)
    console.print(f"regraded {counts['episodes']} episode(s): {counts['changed']} changed, "
                  f"{counts['skipped']} skipped (no task spec); {counts['failed']} failed "
                  "episode(s) have no grade and count as 0 in eval")


def _summary_table(title: str, groups: dict[str, Any], label: str) -> None:
    from rich.table import Table

    t = Table(title=title)
    for col in (label, "episodes", "failed", "score", "completion", "safety viol.",
                "robustness", "pass rate", "pass@k", "pass^k C(c,k)/C(n,k)", "pass^k (c/n)^k"):
        t.add_column(col, justify="left" if col == label else "right")
    for name, s in groups.items():
        ci = s.get("ci95") or {}
        t.add_row(name, str(s["episodes"]), _failed_cell(s), _with_ci(s["score"], ci.get("score")),
                  _with_ci(s["completion"], ci.get("completion")), str(s["safety_violations"]),
                  f"{s['robustness']:.3f}", _with_ci(s["pass_rate"], ci.get("pass_rate")),
                  _with_ci(s["pass_at_k"], ci.get("pass_at_k")),
                  _with_ci(s["pass_hat_k"], ci.get("pass_hat_k")), _num(s["pass_hat_k_power"]))
    console.print(t)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _failed_cell(s: dict[str, Any]) -> str:
    """Scheduled episodes without a grade (each scores 0): agent, simulator, never ran."""
    parts = [f"{s[k]} {name}" for k, name in (("agent_failures", "agent"), ("errors", "error"),
                                               ("missing", "missing")) if s[k]]
    return ", ".join(parts) or "0"


def _overall_line(o: dict[str, Any]) -> str:
    return (f"{o['episodes']} scheduled episodes ({o['graded']} graded, "
            f"{o['agent_failures']} failed at the agent, {o['errors']} simulator errors, "
            f"{o['missing']} missing): score {o['score']:.3f}, pass rate {o['pass_rate']:.3f}, "
            f"pass@{o['k']} {_num(o['pass_at_k'])}, pass^{o['k']} {_num(o['pass_hat_k'])} "
            f"(C(c,k)/C(n,k)) {_num(o['pass_hat_k_power'])} ((c/n)^k), safety violations "
            f"{o['safety_violations']}")


@app.command("eval")
def eval_(
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    run_id: Annotated[str | None, typer.Option("--run", help="Run id (default: the latest)")]
    = None,
    k: Annotated[int | None, typer.Option(help="k for pass@k and pass^k (default: trials)")]
    = None,
    out: Annotated[Path | None, typer.Option(help="Folder for the JSON and PNG (default: "
                                             "next to the database)")] = None,
    compare: Annotated[tuple[str, str] | None, typer.Option(
        help="Compare two runs A B: B - A paired by task, with 95% intervals")] = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="NAME=PATH: report the tasks of PATH (task files or a folder) as a set, "
        "matched by id or content (repeatable; e.g. benchmark=examples/benchmark)")] = None,
    episode: Annotated[str | None, typer.Option(help="Show one episode's grade and the "
                                                "evidence each item rests on")] = None,
) -> None:
    """Report scores per set of tasks, workflow family and capability (table, JSON, PNG),
    with 95% bootstrap intervals (tasks resampled with their trials)."""
    from .outputs import atomic_file
    from .sim.report import chart, summarize, task_sets
    from .sim.report import compare as compare_runs

    named = _named_sets(sets or [])
    reader = _reader(db)
    with reader:
        if episode is not None:
            _show_episode(reader, episode)
            return
        if compare is not None:
            a, b = (reader.scheduled_episodes(r) for r in compare)
            for rid, rows in zip(compare, (a, b), strict=True):
                if not rows:
                    raise _fail(f"--compare: run {rid!r} has no episodes in {db}")
            specs = {**reader.task_specs(compare[0]), **reader.task_specs(compare[1])}
            diff = compare_runs(a, b, task_sets(named, specs))
            _compare_table(compare, diff)
            dest = (out or db.parent) / f"compare-{compare[0]}-{compare[1]}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(dest) as f:
                f.write(json.dumps(diff, indent=2))
            console.print(f"wrote {dest}")
            return
        rid = run_id or reader.latest_run()
        if rid is None:
            raise _fail(f"{db} holds no run")
        rows = reader.scheduled_episodes(rid)
        membership = task_sets(named, reader.task_specs(rid))
    if not rows:
        raise _fail(f"run {rid!r} has no episodes in {db}")
    trials = min(sum(1 for r in rows if r["task_id"] == t) for t in {r["task_id"] for r in rows})
    if k is not None and not 1 <= k <= trials:
        raise _fail(f"--k: expected 1..{trials} (the run has {trials} trial(s) per task), "
                    f"got {k}")
    summary = summarize(rows, k, membership)
    for name in named:
        if name not in summary["by_set"]:
            console.print(f"set {name}: none of its tasks are in run {rid}")
    if summary["by_set"]:
        _summary_table(f"{rid}: by set of tasks", summary["by_set"], "set")
    _summary_table(f"{rid}: by workflow family", summary["by_family"], "family")
    _summary_table(f"{rid}: by capability", summary["by_capability"], "capability")
    o = summary["overall"]
    console.print(f"overall: {_overall_line(o)}", highlight=False)
    folder = out or db.parent
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_file(folder / f"eval-{rid}.json") as f:
        f.write(json.dumps({"run": rid, **summary, "episodes": rows}, indent=2))
    chart(summary, folder / f"eval-{rid}.png", rid)
    console.print(f"wrote {folder / f'eval-{rid}.json'} and {folder / f'eval-{rid}.png'}")


def _named_sets(values: list[str]) -> dict[str, list[Any]]:
    """``--set NAME=PATH`` options as named lists of tasks."""
    named: dict[str, list[Any]] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise _fail(f"--set: expected NAME=PATH (e.g. benchmark=examples/benchmark), "
                        f"got {v!r}")
        named[name] = _load([Path(path)])
    return named


def _with_ci(value: float | None, ci: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if not ci else f"{value:.3f} [{ci[0]:.2f},{ci[1]:.2f}]"


def _compare_table(runs: tuple[str, str], diff: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"{runs[1]} - {runs[0]}, paired by task (95% bootstrap intervals)")
    for col in ("group", "tasks", "score A", "score B", "score B-A", "pass A", "pass B",
                "pass B-A"):
        t.add_column(col, justify="left" if col == "group" else "right")
    groups = [("(all)", diff["overall"])]
    groups += [(f"set {n}", d) for n, d in diff["by_set"].items()]
    groups += list(diff["by_family"].items())
    for name, d in groups:
        x, y = d["a"], d["b"]
        t.add_row(name, str(d.get("tasks", 0)), _num(x["score"]) if x else "-",
                  _num(y["score"]) if y else "-",
                  _with_ci(d.get("score_delta"), d.get("score_delta_ci95")),
                  _num(x["pass_rate"]) if x else "-", _num(y["pass_rate"]) if y else "-",
                  _with_ci(d.get("pass_rate_delta"), d.get("pass_rate_delta_ci95")))
    console.print(t)


def _show_episode(reader: Any, episode: str) -> None:
    from rich.table import Table

    from .store import StoreError

    try:
        ep = reader.episode(episode)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    g = reader.grade(episode)
    if g is None:
        raise _fail(f"episode {episode!r} has no grade ({ep.status}: {ep.failure})")
    console.print(f"[bold]{episode}[/bold] task {ep.task_id} ({ep.family}), {ep.termination}: "
                  f"completion {g['completion']:.3f}, safety {g['safety']:.3f}, robustness "
                  f"{g['robustness']:.3f}, score {g['score']:.3f}, "
                  f"{'passed' if g['passed'] else 'failed'}")
    t = Table(title="evidence")
    for col in ("item", "kind", "weight/value", "result", "detail", "event seqs"):
        t.add_column(col)
    for c in reader.check_results(episode):
        t.add_row(c["check_id"], c["kind"], f"{c['weight']:g}", "pass" if c["passed"] else
                  "[red]fail[/red]", c["detail"][:70], ", ".join(map(str, c["evidence"])))
    for r in g["detail"].get("rules", []):
        t.add_row(r["id"], f"safety:{r['kind']}", f"{r['value']:g}",
                  "pass" if r["passed"] else "[red]VIOLATED[/red]", r["detail"][:70],
                  ", ".join(map(str, r["evidence"])))
    rob = g["detail"].get("robustness", {})
    t.add_row("robustness", "robustness", f"{rob.get('value', 1):g}",
              f"{rob.get('failed_calls', 0)} failed / {rob.get('calls', 0)} calls",
              f"recovered {rob.get('recovered_tools', [])} of {rob.get('failed_tools', [])}",
              ", ".join(map(str, rob.get("evidence", []))))
    console.print(t)


@app.command()
def view(
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    port: Annotated[int, typer.Option(help="Port (0: any free port)")] = 8765,
    host: Annotated[str, typer.Option(help="Address to bind; keep 127.0.0.1 unless you mean "
                                      "to serve other hosts")] = "127.0.0.1",
) -> None:
    """Serve a local, read-only web viewer of the runs and episodes in a database."""
    from .store import StoreError
    from .viewer import ViewerServer

    try:
        server = ViewerServer(db, host, port)
    except (StoreError, OSError) as exc:
        raise _fail(f"{db}: {exc}") from None
    h, p = str(server.server_address[0]), server.server_address[1]
    console.print(f"coworkenv viewer on http://{h}:{p}/ (read-only {db}); Ctrl-C stops it",
                  highlight=False)
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@app.command()
def schema(
    what: Annotated[str, typer.Argument(help="task")] = "task",
) -> None:
    """Print the JSON schema of a task file (generated from the models)."""
    from .sim import Task

    if what != "task":
        raise _fail(f"schema: expected 'task', got {what!r}")
    sys.stdout.write(json.dumps(Task.model_json_schema(), indent=2) + "\n")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
