"""The ``coworkenv`` command: parse, call the library, print."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Synthesize, run, grade and export training environments for coworker "
                       "agents.")
console = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, soft_wrap=True)


@app.callback()
def _root() -> None:
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
BUS_HELP = "memory (default) or mqtt://[user:pass@]host[:port][/prefix]"


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def _load(paths: list[Path]) -> list[Any]:
    from .sim import TaskFileError, load_tasks

    try:
        return load_tasks(paths)
    except TaskFileError as exc:
        raise _fail(str(exc)) from None


def _execute(tasks: list[Any], *, agent: str, db: Path, bus_url: str, trials: int,
             concurrency: int, clock: str, run_id: str | None, resume: bool,
             quiet: bool = False) -> tuple[str, list[Any]]:
    import anyio
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .agents import TEACHERS, agent_factory, scripted_cast
    from .bus import BusError, open_bus
    from .sim import RunOptions, new_run_id, run_episodes
    from .store import EventStore, Reader

    try:
        make_agent = agent_factory(agent)
        bus = open_bus(bus_url)
    except (ValueError, BusError) as exc:
        raise _fail(str(exc)) from None
    if resume and run_id is None:
        if not db.exists():
            raise _fail(f"--resume: {db} does not exist; nothing to resume")
        with Reader(db) as r:
            run_id = r.latest_run()
        if run_id is None:
            raise _fail(f"--resume: {db} holds no run")
    rid = run_id or new_run_id()
    opts = RunOptions(rid, agent, trials, concurrency, clock,
                      "teacher" if agent in TEACHERS else "student", resume)
    total = len(tasks) * trials

    async def go() -> list[Any]:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, disable=quiet, transient=False) as bar:
            job = bar.add_task(f"{rid} ({agent})", total=total)
            async with bus, EventStore(db) as store:
                return await run_episodes(tasks, agent=make_agent, cast=scripted_cast, bus=bus,
                                          store=store, options=opts,
                                          on_done=lambda r: bar.advance(job))

    try:
        results = anyio.run(go)
    except BusError as exc:
        raise _fail(f"--bus {bus_url}: {exc}", 1) from None
    return rid, results


def _table(results: list[Any], tasks: list[Any], title: str) -> None:
    from rich.table import Table

    by_id = {t.id: t for t in tasks}
    table = Table(title=title)
    for col in ("task", "family", "capabilities", "trial", "turns", "sim time", "wall",
                "termination", "completion"):
        table.add_column(col, justify="right" if col in ("turns", "completion", "trial") else
                         "left")
    for r in sorted(results, key=lambda r: (r.family, r.task_id, r.trial)):
        caps = ", ".join(CAPABILITY_SHORT.get(c, c) for c in by_id[r.task_id].capabilities)
        colour = "green" if r.completion == 1.0 else "yellow" if r.completion > 0 else "red"
        table.add_row(r.task_id, r.family, caps, str(r.trial), str(r.turns),
                      f"{r.sim_time / 60:.0f} min", f"{r.wall_time * 1000:.0f} ms",
                      r.termination if not r.failure else f"{r.termination}: {r.failure}",
                      f"[{colour}]{r.completion:.2f}[/{colour}]")
    console.print(table)


@app.command()
def demo(
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    bus: Annotated[str, typer.Option(help=BUS_HELP)] = "memory",
    concurrency: Annotated[int, typer.Option(help="Episodes at once")] = 64,
    clock: Annotated[str, typer.Option(help="virtual (default) or wall")] = "virtual",
) -> None:
    """Run every built-in task with the oracle agent, concurrently, and print the results."""
    from .sim import builtin_tasks

    tasks = builtin_tasks()
    rid, results = _execute(tasks, agent="oracle", db=db, bus_url=bus, trials=1,
                            concurrency=concurrency, clock=clock, run_id=None, resume=False)
    _table(results, tasks, f"coworkenv demo: {rid} -> {db}")
    failed = [r for r in results if r.status != "completed"]
    if failed:
        raise _fail(f"{len(failed)} episode(s) failed", 1)


@app.command()
def run(
    tasks: Annotated[list[Path], typer.Option("--tasks", help="Task files or folders")],
    agent: Annotated[str, typer.Option(help="oracle | noop")] = "oracle",
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task (for pass@k)")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes at once")] = 64,
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    bus: Annotated[str, typer.Option(help=BUS_HELP)] = "memory",
    clock: Annotated[str, typer.Option(help="virtual (default) or wall")] = "virtual",
    run_id: Annotated[str | None, typer.Option(help="Run id (default: a new one)")] = None,
    resume: Annotated[bool, typer.Option(help="Complete the missing episodes of a run (the "
                                         "latest one unless --run-id)")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bar or table")] = False,
) -> None:
    """Run tasks with an agent; every episode is recorded in the store."""
    loaded = _load(tasks)
    rid, results = _execute(loaded, agent=agent, db=db, bus_url=bus, trials=trials,
                            concurrency=concurrency, clock=clock, run_id=run_id, resume=resume,
                            quiet=quiet)
    if not quiet:
        _table(results, loaded, f"{rid} -> {db}")
    done = [r for r in results if r.status == "completed"]
    mean = sum(r.completion for r in done) / len(done) if done else 0.0
    console.print(f"run {rid}: {len(results)} episode(s) this call, mean completion {mean:.3f}")


@app.command()
def replay(
    db: Annotated[Path, typer.Option(help=DB_HELP)],
    episode: Annotated[str, typer.Option(help="Episode id")],
    hash_: Annotated[bool, typer.Option("--hash", help="Print the event-sequence hash and the "
                                        "final workspace hash, rebuilt from the log")] = False,
) -> None:
    """Replay an episode from the event log."""
    from .sim import events_hash
    from .store import Reader, StoreError
    from .workspace import replay_events

    try:
        reader = Reader(db)
        reader.episode(episode)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    with reader:
        events = list(reader.events(episode))
        state = replay_events(events)
        if hash_:
            sys.stdout.write(f"events {events_hash(events)}\nstate {state.state_hash()}\n")
            return
        for e in events:
            if e.kind.startswith("ws.") and e.actor == "setup":
                continue
            body = json.dumps(e.payload, ensure_ascii=False)
            console.print(f"{e.seq:>5} {e.sim_time / 60:>7.1f}m {e.actor:>10} {e.kind:<22} "
                          f"{body[:110]}", highlight=False, markup=False)


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
