"""What every command shares: the app, the consoles, one-line failures and the argument
checks (task files, databases, names)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

T = TypeVar("T")

EXIT_CODES = ("Exit codes: 0 everything scheduled ran (an agent that scores 0 is not an error); "
              "1 some episodes failed at the simulator's boundaries, or a generator produced "
              "nothing; 2 usage (a bad option, file or database); 130 interrupted (what "
              "finished is recorded; --resume runs the rest).")

ELSEWHERE = ("As a verifiers environment: `pip install 'coworkenv[verifiers]'` (in a virtual "
             "environment of its own), then `vf-eval coworkenv-verifiers --env.taskset.tasks "
             "examples/tasks --env.taskset.db runs/vf.db -m MODEL --client.base-url URL ...` "
             "(the whole command: docs/how-to/serve.md).\n\nAs an OpenEnv environment: "
             "`coworkenv serve-env`; in a container, the app openenv.yaml names, `uvicorn "
             "coworkenv.serve.openenv:app` (port 8000), serves COWORKENV_TASKS (task files or "
             "folders, separated by the path separator; default: the built-in tasks) into "
             "COWORKENV_DB (default: runs/coworkenv.db).")
"""Where the command line points beyond itself (the top-level help's epilog)."""

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Synthesize, run, grade and export training environments for coworker "
                       "agents.", epilog=f"{EXIT_CODES}\n\n{ELSEWHERE}")
# the terminal's width; COLUMNS when set; 160 when the output is a file or a pipe
console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160,
                  soft_wrap=True)  # (lines of text are not cut; tables fit the width)
err = Console(stderr=True, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        console.print(f"coworkenv {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit")] = False,
) -> None:
    """coworkenv: workspace simulator for training coworker agents."""


DB_HELP = ("SQLite file of the event store: one file (`runs`, `eval`, `replay`, `regrade` "
           "and `view` read several together; `coworkenv merge` joins them into one)")
DBS_HELP = ("SQLite file of the event store, or several read together as one: repeat --db, "
            "or give a folder of *.db files (at most 10; `coworkenv merge` joins any number) "
            "(default: runs/coworkenv.db)")
CAPABILITY_SHORT = {"tool_coordination": "tools", "multi_turn_communication": "multi-turn",
                    "dynamic_workspace_state": "dynamic", "safety_sensitive_handling": "safety"}
BUS_HELP = "memory (default) or mqtt://user:pass@host:port/prefix (all but the host optional)"


FIELDS = ("transport", "bus", "agents", "agent", "base_url", "api_key_env", "cast_base_url",
          "cast_model", "cast",
          "clock", "resume", "db", "trials", "concurrency", "processes", "faults", "slips",
          "run_id",
          "only", "families", "per_family", "max_turns", "max_tokens", "model_concurrency",
          "tasks")
"""Library messages name the field they are about; the command line names its flag."""


def as_flags(message: str) -> str:
    """``base_url is required`` as ``--base-url is required``."""
    return re.sub(r"^(" + "|".join(FIELDS) + r")\b",
                  lambda m: "--" + m[1].replace("_", "-"), message)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one ``error:`` line (a library message's field as the flag) and return the exit
    to raise."""
    err.print(f"[red]error:[/red] {escape(as_flags(message))}")
    return typer.Exit(code)


def bind_or_fail(make: Callable[[], T], host: str, port: int) -> T:
    """``make()``, a server that binds its socket when made: an address in use or not this
    host's is one line and exit 2, before anything is served or recorded."""
    try:
        return make()
    except OSError as exc:
        raise unbound(host, port, exc) from None


def unbound(host: str, port: int, exc: OSError) -> typer.Exit:
    """The one line for an address a server cannot bind (in use, or not this host's)."""
    return fail(f"--host {host} --port {port}: {exc.strerror or exc}")


def toolset(value: str | None) -> list[str] | None:
    if not value:
        return None
    from ..workspace import REGISTRY

    names = [v.strip() for v in value.split(",") if v.strip()]
    apps = {t.app for t in REGISTRY.values()}
    bad = [n for n in names if n not in REGISTRY and n not in apps and n != "reference"]
    if bad:
        raise fail(f"--tools: {bad} are neither tools nor apps ({', '.join(sorted(apps))}) "
                   "nor `reference` (the tools each task's reference solution calls)")
    return names


def names(value: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when empty)."""
    names = [v.strip() for v in (value or "").split(",") if v.strip()]
    return names or None


def select_tasks(tasks: list[Any], only: list[str] | None, families: str | None,
                 per_family: int | None = None) -> list[Any]:
    """Tasks narrowed by --only (ids), --families and --per-family (the first K of each
    family, in file order); unknown names are an error."""
    from ..runtime import select_tasks as select
    from ..sim import RunConfigError

    try:
        return select(tasks, only, names(families), per_family)
    except RunConfigError as exc:
        raise fail(str(exc)) from None


def load(paths: list[Path]) -> list[Any]:
    from ..sim import TaskFileError, load_tasks

    try:
        return load_tasks(paths)
    except TaskFileError as exc:
        raise fail(str(exc)) from None


def writable_db(db: Path, option: str = "--db") -> Path:
    """A store to record into: new, or an SQLite file; never a folder or another file."""
    from ..runtime import check_db
    from ..sim import RunConfigError

    try:
        return check_db(db, option)
    except RunConfigError as exc:
        raise fail(str(exc)) from None


def output_file(path: Path, option: str) -> Path:
    """A file to write (its folder is made): never a folder."""
    if path.is_dir():
        raise fail(f"{option} {path}: is a folder; give a file name (e.g. "
                   f"{path / 'tasks.jsonl'})")
    if any(p.exists() and not p.is_dir() for p in path.parents):
        raise fail(f"{option} {path}: a parent of it is a file")
    return path


def output_folder(path: Path, option: str) -> Path:
    """A folder to write into (made when missing): never a file."""
    if path.exists() and not path.is_dir():
        raise fail(f"{option} {path}: is a file; give a folder")
    return path


def db_label(dbs: list[Path]) -> str:
    """How to name one store or several shards in a message."""
    return str(dbs[0]) if len(dbs) == 1 else f"{len(dbs)} shards ({', '.join(map(str, dbs))})"


def db_folder(dbs: list[Path]) -> Path:
    """Where reports of a store go by default: next to it (into the folder of shards)."""
    return dbs[0] if dbs[0].is_dir() else dbs[0].parent


def known_run(reader: Any, run_id: str | None, db: Path | str,
              option: str = "--run") -> str:
    """The run asked for, by its id or an unambiguous start of it (default: the latest),
    which must be in the store."""
    from ..store import NotFoundError

    if run_id is None:
        latest: str | None = reader.latest_run()
        if latest is None:
            raise fail(f"--db {db}: holds no run")
        return latest
    try:
        return str(reader.resolve_run(run_id))
    except NotFoundError as exc:
        raise fail(f"{option} {exc}") from None


def known_episode(reader: Any, episode: str | None, option: str = "--episode") -> str:
    """The episode asked for: its id (the run part may be a start of the run's id), or
    TASK[:TRIAL[:ATTEMPT]] of the latest run that has it; none: the latest run's only episode."""
    from ..store import NotFoundError

    if episode is None:
        run = reader.latest_run()
        eps = [e.episode_id for e in reader.episodes(run, limit=6)] if run else []
        if len(eps) == 1:
            return str(eps[0])
        shown = ", ".join(eps[:5]) + (" ..." if len(eps) > 5 else "")
        raise fail(f"{option}: which episode? the latest run {run} has "
                   f"{'several' if eps else 'none'}{f' ({shown})' if eps else ''}; give "
                   "RUN:TASK:TRIAL:ATTEMPT, or TASK (its latest run)")
    try:
        return str(reader.resolve_episode(episode))
    except NotFoundError as exc:
        raise fail(str(exc)) from None


def open_reader(db: Path | list[Path], *, checked: bool = False) -> Any:
    """A reader of the store ``db`` (or of several shards read together); what is wrong with
    it (missing, a folder, not a store) is the one line the store says, under ``--db``.
    ``checked``: its files' integrity too (SQLite's quick_check), for a command that reports
    on the whole store."""
    from ..store import Reader, StoreError

    try:
        reader = Reader(db if isinstance(db, Path) or len(db) != 1 else db[0])
    except StoreError as exc:  # (its message starts with the path)
        raise fail(f"--db {exc}") from None
    if checked:
        try:
            reader.check_integrity()
        except StoreError as exc:
            reader.close()
            raise fail(f"--db {exc}") from None
    return reader


def reachable(base_url: str | None, option: str = "--base-url") -> None:
    """An OpenAI-compatible endpoint answers (any HTTP answer will do): checked before a run
    whose every episode would otherwise fail at its first model call."""
    from ..runtime import EndpointUnreachableError, check_endpoint

    try:
        check_endpoint(base_url, option)
    except EndpointUnreachableError as exc:
        raise fail(str(exc)) from None


def num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def failed_cell(s: dict[str, Any]) -> str:
    """Scheduled episodes without a grade (each scores 0): agent, simulator, never ran."""
    parts = [f"{s[k]} {name}" for k, name in (("agent_failures", "agent"), ("errors", "error"),
                                               ("missing", "missing")) if s[k]]
    return ", ".join(parts) or "0"


def overall_line(o: dict[str, Any]) -> str:
    return (f"{o['episodes']} scheduled episodes ({o['graded']} graded, "
            f"{o['agent_failures']} failed at the agent, {o['errors']} simulator errors, "
            f"{o['missing']} missing): score {o['score']:.3f}, pass rate {o['pass_rate']:.3f}, "
            f"pass@{o['k']} {num(o['pass_at_k'])}, pass^{o['k']} {num(o['pass_hat_k'])} "
            f"(C(c,k)/C(n,k)) {num(o['pass_hat_k_power'])} ((c/n)^k), safety violations "
            f"{o['safety_violations']}")


def spread_multiple(args: Sequence[str]) -> list[str]:
    """``--tasks a.yaml b.yaml`` as ``--tasks a.yaml --tasks b.yaml``: an option that may be
    repeated also takes several values after one flag (click takes one per flag)."""
    cmd: Any = typer.main.get_command(app)  # (typer's own click: read by its attributes)
    i = 0
    while getattr(cmd, "commands", None) and i < len(args):
        sub = cmd.commands.get(args[i])
        if sub is None:
            if args[i].startswith("-"):
                i += 1  # an option of the group itself (--version)
                continue
            break
        cmd, i = sub, i + 1
    multiple = {o for p in cmd.params if getattr(p, "param_type_name", "") == "option"
                and getattr(p, "multiple", False) for o in p.opts}
    out = list(args[:i])
    while i < len(args):
        a = args[i]
        out.append(a)
        i += 1
        if a == "--":
            out += args[i:]
            break
        if a in multiple and i < len(args):
            out.append(args[i])
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                out += [a, args[i]]
                i += 1
    return out


_invoked: list[str] = []


def invoked_args() -> list[str]:
    """The arguments this process was invoked with (after :func:`spread_multiple`)."""
    return list(_invoked)


def main(argv: Sequence[str] | None = None) -> None:
    args = spread_multiple(sys.argv[1:] if argv is None else argv)
    _invoked[:] = args
    try:
        app(args=args, prog_name="coworkenv")
    except KeyboardInterrupt:  # before any episode ran (a run handles its own interrupts)
        err.print("interrupted", highlight=False)
        sys.exit(130)


@dataclass(frozen=True)
class Column:
    """A column of a printed table. ``keep``: the lower, the longer it stays when the
    terminal is narrow (0: never dropped, never cut: ids and the score)."""
    name: str
    keep: int = 0
    right: bool = False


def print_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]],
                out: Console | None = None) -> None:
    """A table that fits the terminal: columns are dropped, least needed first, until the
    rest fit; kept columns are never cut (a too-long id wraps, it is never elided). Cells
    may hold rich markup."""
    from rich.table import Table
    from rich.text import Text

    out = out or console
    widths = [max([len(c.name)] + [Text.from_markup(r[i]).cell_len for r in rows])
              for i, c in enumerate(columns)]
    shown = list(range(len(columns)))

    def width() -> int:  # cells, padding of 1 each side, borders
        return sum(widths[i] + 3 for i in shown) + 1

    while width() > out.width:
        droppable = [i for i in shown if columns[i].keep > 0]
        if not droppable:
            break
        shown.remove(max(droppable, key=lambda i: (columns[i].keep, i)))
    dropped = [c.name for i, c in enumerate(columns) if i not in shown]
    caption = f"(not shown at this width: {', '.join(dropped)})" if dropped else None
    table = Table(title=title, caption=caption)
    fits = width() <= out.width
    for i in shown:
        c = columns[i]
        whole = c.keep == 0 and fits  # (when even the kept ones do not fit, they wrap)
        table.add_column(c.name, justify="right" if c.right else "left",
                         min_width=widths[i] if whole else None, no_wrap=whole,
                         overflow="fold" if c.keep == 0 else "ellipsis")
    for r in rows:
        table.add_row(*(r[i] for i in shown))
    out.print(table)


def parse_price(value: str | None) -> tuple[float, float] | None:
    """``--price PROMPT[,COMPLETION]``: dollars per million tokens (one figure: both)."""
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    try:
        figures = [float(p) for p in parts]
    except ValueError:
        figures = []
    if len(figures) not in (1, 2) or any(not 0 <= f < 1e6 for f in figures):
        raise fail(f"--price: expected dollars per million tokens, PROMPT or PROMPT,COMPLETION "
                   f"(e.g. 0.15,0.60), got {value!r}")
    return (figures[0], figures[-1])


PRICE_HELP = ("Dollars per million prompt and completion tokens (e.g. 0.15,0.60; one figure: "
              "both): the model use is also given in money")
