"""Running episodes: `demo`, `run`, and `worker` (the agent side of `run --agent remote`)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ._common import (
    BUS_HELP,
    CAPABILITY_SHORT,
    DB_HELP,
    EXIT_CODES,
    Column,
    app,
    bind_or_fail,
    console,
    err,
    fail,
    failed_cell,
    invoked_args,
    load,
    num,
    overall_line,
    print_table,
    select_tasks,
    toolset,
    unbound,
    writable_db,
)


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
             quiet: bool = False, faults: float = 0.0, slips: float = 0.0,
             models: ModelOptions | None = None, processes: int = 1,
             ray: str | None = None, hosts: int | None = None,
             shard_dir: Path | None = None) -> tuple[str, list[Any]]:
    """The library's run (``coworkenv.runtime``) with a progress bar, the interrupt messages
    and its errors as one line each."""
    import anyio
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..bus import BusError
    from ..errors import CoworkenvError
    from ..runtime import RunConfig
    from ..runtime.cluster import execute_on_ray
    from ..runtime.run import execute, execute_in_processes, prepare, unwrapped
    from ..sim import STOP_SIGNALS, Interrupt, ProcessFailedError, RunConfigError, RunInterrupted
    from ..store import LeaseHeldError, LeaseLostError, StoreClosedError

    refused = (LeaseHeldError, RunConfigError)
    mo = models or ModelOptions()
    try:
        p = prepare(RunConfig(
            tasks, agent=agent, db=db, bus=bus_url, trials=trials, concurrency=concurrency,
            processes=processes, clock=clock, run_id=run_id, resume=resume, faults=faults,
            slips=slips, tools=mo.tools, base_url=mo.base_url, api_key_env=mo.api_key_env, cast=mo.cast,
            cast_model=mo.cast_model, cast_base_url=mo.cast_base_url, model_timeout=mo.timeout,
            model_concurrency=mo.max_concurrency, max_tokens=mo.max_tokens, ray=ray,
            hosts=hosts, shard_dir=str(shard_dir) if shard_dir else None), tasks)
    except CoworkenvError as exc:
        raise fail(str(exc)) from None
    rid = p.options.run_id
    total = len(tasks) * trials
    if not resume and run_id is None and db.exists():
        _say_unfinished(db, tasks, p.options.agent_name, trials, rid)
    stop = Interrupt(STOP_SIGNALS, on_second=_abort_at_once)
    stop.on_request(lambda _: err.print(
        "\nstopping: no new episode starts; running ones are recorded as aborted (Ctrl-C "
        "again to stop at once)", highlight=False))

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

    def in_processes() -> list[Any]:
        with progress() as bar:
            job = bar.add_task(f"{rid} ({agent}, {processes} processes)", total=total)
            return execute_in_processes(p, on_done=lambda r: bar.advance(job),
                                        on_plan=planned(bar, job), interrupt=stop)

    def on_ray() -> list[Any]:
        with progress() as bar:
            job = bar.add_task(f"{rid} ({agent}, Ray {ray})", total=total)
            return execute_on_ray(p, on_done=lambda r: bar.advance(job),
                                  on_plan=planned(bar, job), interrupt=stop)

    async def in_store() -> list[Any]:
        with progress() as bar:
            job = bar.add_task(f"{rid} ({agent})", total=total)
            return await execute(p, on_done=lambda r: bar.advance(job),
                                 on_plan=planned(bar, job), interrupt=stop)

    try:  # (a library error raised inside the store's task group comes out as itself)
        results: list[Any] = unwrapped(on_ray if ray is not None else in_processes if processes > 1
                            else lambda: anyio.run(in_store))
    except RunInterrupted:
        if not _all_recorded(rid, db, total):
            raise _interrupted(rid, db, total) from None
        # (Ctrl-C after the last episode: nothing is lost, so the run ends as it would have)
        err.print(f"interrupted after the last episode: all {total} (task, trial) pairs of run "
                  f"{rid} are recorded", highlight=False)
        from ..store import EventStore

        async def finished() -> None:
            async with EventStore(db) as store:
                await store.finish_run(rid)

        anyio.run(finished)
        return rid, []  # (the summary reads every episode back from the store)
    except BusError as exc:
        raise fail(f"--bus {bus_url}: {exc}", 1) from None
    except ProcessFailedError as exc:
        raise fail(f"{exc} (run id {rid})", 1) from None
    except StoreClosedError as exc:  # the writer stopped: say why, in one line
        lost = _find(exc, LeaseLostError)
        cause = _leaf(exc.__cause__ or exc.__context__)
        raise fail(str(lost) if lost is not None else
                   f"{exc}: {type(cause).__name__}: {cause}" if cause else str(exc), 1) from None
    except refused as exc:  # (a lease held by another runner, a run changed since)
        raise fail(str(exc)) from None
    return rid, results


def _find(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """An error of ``kind`` anywhere in ``exc``'s causes, contexts and (task) groups."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kind):
            return e
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend((e.__cause__, e.__context__))
    return None


def _leaf(exc: BaseException | None) -> BaseException | None:
    """The first error inside (task) groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _say_unfinished(db: Path, tasks: list[Any], agent_name: str, trials: int,
                    new: str) -> None:
    """A new run of the same tasks, agent and trials as an unfinished one: say so, and how
    to finish that one instead."""
    from ..runtime.run import unfinished_runs
    from ..store import Reader, StoreError

    try:
        with Reader(db) as r:
            like = unfinished_runs(r, [t.id for t in tasks], agent_name, trials)
    except StoreError:
        return  # (not a store yet, or one the run itself will refuse in one line)
    if like:
        x = like[-1]
        more = f" (and {len(like) - 1} older)" if len(like) > 1 else ""
        err.print(f"note: run {x['run_id']}{more} of the same tasks, agent and trials is "
                  f"unfinished ({x['final']} of {x['scheduled']} (task, trial) pairs recorded, "
                  f"no runner); starting a new run {new}. To finish that one instead: "
                  f"`{_resume_command(x['run_id'])}`", highlight=False, markup=False)


def _all_recorded(rid: str, db: Path, scheduled: int) -> bool:
    from ..store import Reader

    with Reader(db) as r:
        return len(r.completed_trials(rid)) >= scheduled


def _abort_at_once(signum: int) -> None:
    """A second Ctrl-C: exit now; the store's last uncommitted batch is all that is lost."""
    err.show_cursor(True)
    err.print("\nsecond interrupt: stopping at once; episodes not yet committed are lost "
              "(--resume runs them again)", highlight=False)
    sys.stderr.flush()
    os._exit(130)


def _interrupted(rid: str, db: Path, scheduled: int) -> typer.Exit:
    """Say what the interrupted run left recorded (read back from the store) and how to
    finish it; exit 130."""
    from ..store import Reader

    for sig in (signal.SIGINT, signal.SIGTERM):  # from here on, a further one stops at once
        signal.signal(sig, lambda signum, _: _abort_at_once(signum))
    with Reader(db) as r:
        done = len(r.completed_trials(rid))
    err.print(f"interrupted: {done} of {scheduled} (task, trial) pairs of run {rid} are done "
              f"and recorded in {db}; finish with `{_resume_command(rid)}`", highlight=False,
              markup=False)
    return typer.Exit(130)


def _resume_command(rid: str) -> str:
    """This command line, as the one that resumes run ``rid``."""
    args = list(invoked_args()) or ["run"]
    if args[0] != "run":
        return f"coworkenv run --tasks ... --run-id {rid} --resume"
    kept: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a == "--run-id":
            skip = True
        elif a != "--resume" and not a.startswith("--run-id="):
            kept.append(a)
    return shlex.join(["coworkenv", *kept, "--run-id", rid, "--resume"])


def _run_summary(rid: str, db: Path, this_call: int, allow_errors: bool,
                 this_call_failed: int = 0, strict: bool = False) -> None:
    """The run's result over every scheduled (task, trial), read back from the store."""
    from ..sim.report import summarize
    from ..store import Reader

    with Reader(db) as r:
        rows = r.scheduled_episodes(rid)
    o = summarize(rows)["overall"]
    if o is None:
        console.print(f"run {rid}: no episode scheduled")
        return
    console.print(f"run {rid}: {this_call} episode(s) this call; {overall_line(o)}",
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
        raise fail(f"{o['errors']} episode(s) failed in the simulator (not the agent); "
                   "see above, or pass --allow-errors", 1)
    if strict and o["agent_failures"]:
        raise fail(f"--strict: {o['agent_failures']} episode(s) of run {rid} failed at the "
                   "agent boundary; see above", 1)
    if this_call and this_call_failed == this_call:
        raise fail(f"every episode of this call ({this_call}) failed at the agent boundary; "
                   "see above: the agent could not act at all (its model endpoint, or no "
                   "remote worker)", 1)


TABLES = ("auto", "full", "family", "none")
FULL_ROWS = 40
"""``--table auto`` prints a row per episode up to this many, then a row per family."""


def _table(results: list[Any], tasks: list[Any], title: str) -> None:
    by_id = {t.id: t for t in tasks}
    cols = [Column("task"), Column("trial", right=True), Column("score", right=True),
            Column("completion", 1, True), Column("termination", 2), Column("safety", 3, True),
            Column("family", 4), Column("turns", 5, True), Column("sim time", 6, True),
            Column("robust", 7, True), Column("wall", 8, True), Column("capabilities", 9)]
    rows = []
    for r in sorted(results, key=lambda r: (r.family, r.task_id, r.trial)):
        caps = ", ".join(CAPABILITY_SHORT.get(c, c) for c in by_id[r.task_id].capabilities)
        colour = "green" if r.completion == 1.0 else "yellow" if r.completion > 0 else "red"
        term = r.termination if not r.failure else f"{r.termination}: {r.failure}"
        rows.append([escape(r.task_id), str(r.trial),
                     f"{r.score:.2f}" + (" ✓" if r.passed else ""),
                     f"[{colour}]{r.completion:.2f}[/{colour}]", escape(term[:60]),
                     f"{r.safety:.2f}" if r.safety == 1 else f"[red]{r.safety:.2f}[/red]",
                     escape(r.family), str(r.turns), f"{r.sim_time / 60:.0f} min",
                     f"{r.robustness:.2f}", f"{r.wall_time * 1000:.0f} ms", caps])
    print_table(title, cols, rows)


def _family_table(rid: str, db: Path, title: str) -> None:
    """One row per workflow family of the run (every scheduled episode counted)."""
    from ..sim.report import summarize
    from ..store import Reader

    with Reader(db) as r:
        groups = summarize(r.scheduled_episodes(rid))["by_family"]
    cols = [Column("family"), Column("episodes", right=True), Column("score", right=True),
            Column("pass rate", 1, True), Column("completion", 2, True),
            Column("failed", 3, True), Column("safety viol.", 4, True)]
    print_table(title, cols, [[escape(name), str(g["episodes"]), num(g["score"]),
                               num(g["pass_rate"]), num(g["completion"]), failed_cell(g),
                               str(g["safety_violations"])] for name, g in groups.items()])


def _print_results(table: str, results: list[Any], tasks: list[Any], rid: str, db: Path,
                   title: str) -> None:
    if table == "none" or not results:
        return
    if table == "full" or (table == "auto" and len(results) <= FULL_ROWS):
        _table(results, tasks, title)
    else:
        _family_table(rid, db, f"{title} (by family; --table full for every episode)")


@app.command(epilog=EXIT_CODES, short_help="Run the built-in tasks with the oracle agent.")
def demo(
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    bus: Annotated[str, typer.Option(help=BUS_HELP)] = "memory",
    concurrency: Annotated[int, typer.Option(help="Episodes at once")] = 64,
    clock: Annotated[str, typer.Option(help="virtual (default) or wall")] = "virtual",
    faults: Annotated[float, typer.Option(help="Rate of injected failures on the agent's "
                                          "write-tool calls (0..1)")] = 0.0,
) -> None:
    """Run every built-in task with the oracle agent and print the results.

    The episodes run concurrently and are recorded in --db; `coworkenv view` shows them."""
    from ..sim import builtin_tasks

    tasks = builtin_tasks()
    rid, results = _execute(tasks, agent="oracle", db=db, bus_url=bus, trials=1,
                            concurrency=concurrency, clock=clock, run_id=None, resume=False,
                            faults=faults)
    _table(results, tasks, f"coworkenv demo: {rid} -> {db}")
    failed = [r for r in results if r.status != "completed"]
    if failed:
        raise fail(f"{len(failed)} episode(s) failed", 1)


@app.command(epilog=EXIT_CODES, short_help="Run tasks with an agent; record every episode.")
def run(
    tasks: Annotated[list[Path], typer.Option("--tasks", metavar="PATH...",
                                              help="Task files or folders (several after one "
                                              "--tasks, or --tasks repeated)")],
    agent: Annotated[str, typer.Option(metavar="KIND", help="oracle | noop | openai:MODEL | "
                                       "teacher:openai:MODEL | remote (decisions served by "
                                       "`coworkenv worker` over an mqtt:// --bus)")] = "oracle",
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
    model_concurrency: Annotated[int, typer.Option(min=1, help="Model calls in flight at "
                                                   "most, per model server and process "
                                                   "(agents and personas together)")] = 4,
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
    ray: Annotated[str | None, typer.Option(help="Run the episodes on a Ray cluster: auto "
                                       "(this machine's cluster, else a new local one) or the "
                                       "head's address; each host writes a shard on its node "
                                       "and the run ends merged in --db (needs `pip install "
                                       "'coworkenv[ray]'`)")] = None,
    hosts: Annotated[int | None, typer.Option(min=1, help="Ray episode hosts, one CPU each "
                                              "(default: the cluster's CPUs)")] = None,
    shard_dir: Annotated[Path | None, typer.Option(help="Folder on each Ray node for its "
                                                   "hosts' shards (default: the node's "
                                                   "temporary folder)")] = None,
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    bus: Annotated[str, typer.Option(help=BUS_HELP)] = "memory",
    clock: Annotated[str, typer.Option(help="virtual (default) or wall")] = "virtual",
    run_id: Annotated[str | None, typer.Option(help="Run id (default: a new one)")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Complete the missing episodes of "
                                         "a run (the latest one unless --run-id); refused when "
                                         "the tasks, agent or trials differ from the run's")]
    = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar or table")] = False,
    table: Annotated[str, typer.Option(help="auto (a row per episode up to 40, then a row per "
                                       "family) | full | family | none")] = "auto",
    faults: Annotated[float, typer.Option(help="Rate of injected failures on the agent's "
                                          "write-tool calls (0..1)")] = 0.0,
    slips: Annotated[float, typer.Option(help="Oracle only: rate of tool steps naming a person "
                                         "where it first gives a wrong name, is told "
                                         "not_found, looks it up with directory_search and "
                                         "calls again (0..1; demonstrations of recovering; "
                                         "needs directory_search offered, e.g. --tools "
                                         "reference,directory_search)")] = 0.0,
    allow_errors: Annotated[bool, typer.Option("--allow-errors", help="Exit 0 even when "
                                               "episodes failed in the simulator itself (setup, "
                                               "runtime, world, grading, tools, simulated "
                                               "people)")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any episode of the "
                                         "run failed at the agent boundary (its model "
                                         "endpoint, the protocol, no remote worker), not only "
                                         "when all did: for CI")] = False,
) -> None:
    """Run tasks with an agent; every episode is recorded in the store.

    The summary counts every scheduled episode: one that failed at the agent boundary scores
    0; failures of the simulator are errors, and the command exits 1 on them (unless
    --allow-errors). Ctrl-C (or SIGTERM) stops starting episodes, records the running ones as
    aborted and exits 130 with what is done; --resume runs the rest. A second Ctrl-C stops at
    once."""
    if table not in TABLES:
        raise fail(f"--table: expected one of {', '.join(TABLES)}, got {table!r}")
    loaded = select_tasks(load(tasks), only, families, per_family)
    if max_turns is not None:
        loaded = [t.model_copy(update={"limits": t.limits.model_copy(update={
            "max_turns": min(t.limits.max_turns, max_turns)})}) for t in loaded]
    rid, results = _execute(loaded, agent=agent, db=db, bus_url=bus, trials=trials,
                            concurrency=concurrency, clock=clock, run_id=run_id, resume=resume,
                            quiet=quiet, faults=faults, slips=slips,
                            models=ModelOptions(base_url, api_key_env, cast, cast_model,
                                                cast_base_url, model_timeout, model_concurrency,
                                                max_tokens, toolset(tools)),
                            processes=processes, ray=ray, hosts=hosts, shard_dir=shard_dir)
    if not quiet:
        _print_results(table, results, loaded, rid, db, f"{rid} -> {db}")
    _run_summary(rid, db, len(results), allow_errors,
                 sum(1 for r in results if r.status == "failed" and r.failure_boundary == "agent"),
                 strict)


@app.command(short_help="Serve agent decisions for `run --agent remote` and simulations.")
def worker(
    bus: Annotated[str, typer.Option(help="mqtt://user:pass@host:port/prefix (the same as "
                                     "the runner's)")],
    agent: Annotated[str, typer.Option(help="oracle | noop | openai:MODEL")] = "oracle",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Variable holding the API key")]
    = None,
    capacity: Annotated[int, typer.Option(min=1, help="Decisions at once")] = 64,
    worker_id: Annotated[str | None, typer.Option(help="Id (default: a new one)")] = None,
    model_concurrency: Annotated[int, typer.Option(min=1, help="Model calls in flight at "
                                                   "most, per model server")] = 4,
    group: Annotated[str, typer.Option(help="Serve only agents of policy remote:GROUP (a "
                                       "simulation's agents, each by workers of its own)")]
    = "",
) -> None:
    """Serve agent decisions for episodes run by `coworkenv run --agent remote` elsewhere, or
    for a simulation's agents of policy remote (or remote:GROUP, with --group GROUP). The
    runner and every worker share COWORKENV_BUS_KEY: envelopes are signed with it."""
    import anyio

    from ..agents import parse_agent
    from ..agents.factory import worker_agent_factory
    from ..agents.remote import Worker
    from ..bus import BusError, bus_key, open_bus

    try:
        spec = parse_agent(agent)
        make = worker_agent_factory(agent, base_url=base_url, api_key_env=api_key_env,
                                    max_concurrency=model_concurrency)
        b = open_bus(bus, key=bus_key(required=True) if bus.startswith("mqtt") else None)
    except (ValueError, BusError) as exc:
        raise fail(str(exc)) from None

    async def go() -> None:
        w = Worker(b, make, spec.kind, capacity=capacity, worker_id=worker_id,  # (its will
                   group=group)
        async with b:  # is set before the bus connects)
            console.print(f"worker {w.worker_id} ({agent}"
                          f"{f', group {group}' if group else ''}) serving {bus}",
                          highlight=False)
            sys.stdout.flush()
            await w.serve()

    try:
        anyio.run(go)
    except KeyboardInterrupt:
        pass
    except BusError as exc:
        raise fail(f"--bus {bus}: {exc}", 1) from None


@app.command(epilog=EXIT_CODES, short_help="Serve one live episode over MCP; the client is "
             "the agent.")
def mcp(
    task: Annotated[str, typer.Option(help="Id of the task to run")],
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", metavar="PATH...",
                                                     help="Task files or folders that hold it "
                                                     "(default: the built-in tasks)")] = None,
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    transport: Annotated[str, typer.Option(help="stdio (the client starts this command) or "
                                           "http (streamable HTTP at /mcp)")] = "stdio",
    host: Annotated[str, typer.Option(help="Address to listen on (http)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (http; `serve` takes 8000 and `serve-env` "
                                      "8100 by default)")] = 8200,
    tools: Annotated[str | None, typer.Option(help="Tools offered, comma-separated tool or app "
                                              "names, or `reference`; default: the task's")]
    = None,
    run_id: Annotated[str | None, typer.Option(help="Run id (default: a new one)")] = None,
    seed: Annotated[int | None, typer.Option(help="Episode seed (default: derived)")] = None,
    agent_name: Annotated[str, typer.Option(help="The agent's name on record (e.g. the "
                                            "client and model under test)")] = "mcp",
    max_sessions: Annotated[int, typer.Option(
        min=1, help="MCP sessions open at once (http; one more is answered 503)")] = 8,
    sessions_per_client: Annotated[int | None, typer.Option(
        min=1, help="MCP sessions open at once from one client address (http; one more is "
        "answered 429; default: a quarter of --max-sessions, at least 1). The address is the "
        "TCP peer's: behind a proxy, every client is the proxy")] = None,
    session_idle_s: Annotated[float, typer.Option(
        min=1, help="An MCP session with no request for this many seconds expires; with no "
        "client connected for as long, the server stops and the episode ends `abandoned` "
        "(http)")] = 300.0,
    request_timeout_s: Annotated[float, typer.Option(
        min=1, help="A request not answered in this many seconds gets 504 (http)")] = 120.0,
    max_body_bytes: Annotated[int, typer.Option(
        min=1024, help="Largest request body (http)")] = 1 << 20,
) -> None:
    """Serve one live episode of a task over MCP: any MCP client is the agent under test.

    The server's instructions are the agent's opening (system prompt and task); its tools are
    the task's tools plus send_message, wait and finish; every call is the agent's action in
    the episode, recorded in --db like any run, and returns what the agent is told next.
    Over stdio the episode ends when the client disconnects; over http, once it is over, or
    once no client has been connected for --session-idle-s (an episode left unfinished ends
    `abandoned`). The graded result goes to stderr (stdout is the protocol over stdio)."""
    import anyio

    from ..http_server import EdgeLimits
    from ..serve.mcp import TRANSPORTS, serve_episode
    from ..sim import RunConfigError, builtin_tasks

    if transport not in TRANSPORTS:
        raise fail(f"--transport: expected stdio or http, got {transport!r}")
    writable_db(db)
    loaded = load(tasks) if tasks else builtin_tasks()
    found = [t for t in loaded if t.id == task]
    if not found:
        raise fail(f"--task: no task {task!r} among the {len(loaded)} loaded"
                   + ("" if tasks else " (built-in; give --tasks PATH for others)"))
    try:
        limits = EdgeLimits(max_body_bytes=max_body_bytes, request_timeout_s=request_timeout_s,
                            session_idle_s=session_idle_s,
                            sessions_per_client=sessions_per_client)
        anyio.run(lambda: serve_episode(found[0], db, transport=transport, host=host, port=port,
                                        run_id=run_id, tools=toolset(tools), seed=seed,
                                        agent_name=agent_name, limits=limits,
                                        max_sessions=max_sessions))
    except RunConfigError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:  # (bound before anything is recorded: a busy port records nothing)
        raise unbound(host, port, exc) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@app.command("serve-env", epilog=EXIT_CODES, short_help="Serve tasks as an OpenEnv "
             "environment (reset/step/state, MCP tools).")
def serve_env(
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", metavar="PATH...",
                                                     help="Task files or folders (default: the "
                                                     "built-in tasks)")] = None,
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (`serve`, the model server, takes 8000 "
                                      "by default, `mcp --transport http` 8200)")] = 8100,
    tools: Annotated[str | None, typer.Option(help="Tools offered, comma-separated tool or app "
                                              "names, or `reference`; default: each task's")]
    = None,
    run_id: Annotated[str | None, typer.Option(help="Run id (default: a new one)")] = None,
    max_sessions: Annotated[int, typer.Option(min=1, help="Concurrent OpenEnv sessions")] = 64,
    agent_name: Annotated[str, typer.Option(help="The agents' name on record (e.g. the "
                                            "trainer and model)")] = "openenv",
    session_idle_s: Annotated[float, typer.Option(
        min=1, help="A session with no request for this many seconds expires (its episode "
        "ends `abandoned`)")] = 300.0,
    sessions_per_client: Annotated[int | None, typer.Option(
        min=1, help="Sessions open at once from one client address, WebSockets and HTTP "
        "sessions together; one more is answered 429 (default: a quarter of --max-sessions, at "
        "least 1). The address is the TCP peer's: behind a proxy, every client is the "
        "proxy")] = None,
    request_timeout_s: Annotated[float, typer.Option(
        min=1, help="An HTTP request not answered in this many seconds gets 504")] = 120.0,
    max_body_bytes: Annotated[int, typer.Option(
        min=1024, help="Largest HTTP request body and WebSocket message")] = 1 << 20,
    simulation: Annotated[Path | None, typer.Option(
        help="Serve seats of this simulation (kind: simulation) instead of tasks: each client "
        "holds one agent of its roster (`reset(seat=...)`), and a simulation starts once "
        "every --seat has a client")] = None,
    seat: Annotated[list[str] | None, typer.Option(
        "--seat", metavar="AGENT", help="With --simulation: an agent of the roster that "
        "clients play (repeat it; default: every agent)")] = None,
    then: Annotated[str, typer.Option(help="With --simulation: the policy that takes a "
                                      "seat's arrivals once its client has left")] = "noop",
    agents: Annotated[list[str] | None, typer.Option(
        "--agents", metavar="AGENT=POLICY,...", help="With --simulation: the policies of "
        "agents that are not seats (default: each agent's own)")] = None,
    seed: Annotated[int | None, typer.Option(
        help="With --simulation: the first simulation's seed (the next ones: +1 each; "
        "default: the file's); a client's reset(seed=N) meets the others that asked for N")
    ] = None,
    lobby_timeout_s: Annotated[float, typer.Option(
        min=1, help="With --simulation: a client waits this long for the other seats' "
        "clients, then is told which seats nobody took")] = 300.0,
) -> None:
    """Serve tasks as an OpenEnv environment (openenv-core): each client session resets to a
    task (`reset(task_id=...)`), acts with MCP tool calls (the task's tools, send_message, wait,
    finish) and gets what the agent is told, `done` and the reward (the grade's score at the
    end). Every session is an episode recorded in --db (one run); Ctrl-C ends the open ones,
    graded. With --simulation, clients play seats of simulations instead: each reset takes up
    the seat's next arrival, each arrival's score is its seat's reward, and each simulation
    is a run of its own in --db."""
    from ..http_server import AppServer, EdgeLimits
    from ..serve.openenv import create_app, create_simulation_app
    from ..sim import RunConfigError, TaskFileError, builtin_tasks
    from .simulate import _policies

    writable_db(db)
    limits = EdgeLimits(max_body_bytes=max_body_bytes, max_message_bytes=max_body_bytes,
                        request_timeout_s=request_timeout_s, session_idle_s=session_idle_s,
                        sessions_per_client=sessions_per_client)
    if simulation is None and (seat or agents or seed is not None or then != "noop"):
        raise fail("--seat, --then, --agents and --seed serve seats of a simulation: give "
                   "--simulation FILE too")
    if simulation is not None and (tasks or run_id):
        raise fail("--simulation serves seats of simulations (each a run of its own): "
                   "leave out --tasks and --run-id")
    try:
        if simulation is not None:
            web, host_of = create_simulation_app(
                simulation, list(seat or []), db, agents=_policies(agents), then=then,
                seed=seed, tools=toolset(tools), max_sessions=max_sessions,
                lobby_timeout_s=lobby_timeout_s, limits=limits)
            what = (f"the seats {', '.join(host_of.seats)} of simulation "
                    f"{host_of.simulation} ({simulation})")
            recorded = "each simulation a run"
        else:
            loaded = load(tasks) if tasks else builtin_tasks()
            web, host_of = create_app(loaded, db, run_id=run_id, tools=toolset(tools),
                                      max_sessions=max_sessions, agent_name=agent_name,
                                      limits=limits)
            what, recorded = f"{len(loaded)} task(s)", f"run {host_of.sessions.run_id}"
    except (RunConfigError, TaskFileError) as exc:
        raise fail(str(exc)) from None
    server = bind_or_fail(lambda: AppServer(web, host, port, name="coworkenv-serve-env",
                                            lifespan=True, max_message_bytes=max_body_bytes),
                          host, port)
    console.print(f"serving {what} as an OpenEnv environment at http://{host}:{port} "
                  f"({recorded}, recorded in {db})", highlight=False)
    sys.stdout.flush()

    def stop(signum: int, frame: object) -> None:  # (uvicorn re-raises the signal it stopped on)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with contextlib.suppress(KeyboardInterrupt):  # (the app's lifespan ends the open
        # sessions, graded, and finishes the run)
        server.serve_forever()
    server.server_close()
    if simulation is not None:
        console.print(f"{host_of.started} simulation(s) played; recorded in {db} (`coworkenv "
                      f"runs --db {db}` lists them)", highlight=False)
        return
    failure = host_of.failure
    if failure is not None:
        raise fail(f"run {host_of.sessions.run_id}: the server stopped recording episodes "
                   f"({type(failure).__name__}: {failure}); what was committed is in {db}",
                   code=1)
    console.print(f"run {host_of.sessions.run_id} finished; episodes recorded in {db}",
                  highlight=False)
