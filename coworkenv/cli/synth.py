"""Making and checking tasks: `synth`, `validate`, `schema`, `tools`, `apps`, `primitives`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ._common import (
    app,
    console,
    err,
    fail,
    output_file,
    reachable,
)


@app.command(short_help="List the workspace's tools (the JSON schemas with --json).")
def tools(
    as_json: Annotated[bool, typer.Option("--json", help="The OpenAI function-calling schemas "
                                          "(a JSON list) instead of a table")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="table (a row a tool: name, app, "
                                            "what it does in one line), openai (the JSON "
                                            "schemas, as --json) or markdown (arguments and "
                                            "whole descriptions too); default: table")] = None,
) -> None:
    """The workspace's tools, installed apps' included: a table by default; the OpenAI
    function-calling schemas an agent is offered with --json; a markdown table with
    --format markdown."""
    from ..workspace import REGISTRY, markdown_table, openai_tools

    if as_json and fmt not in (None, "openai"):
        raise fail(f"--json: the JSON schemas, not a {fmt} table; give one of --json and "
                   "--format")
    fmt = "openai" if as_json else fmt or "table"
    if fmt == "openai":
        sys.stdout.write(json.dumps(openai_tools(), indent=2) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(markdown_table() + "\n")
    elif fmt == "table":
        from rich.table import Table

        rows = [(t.name, t.app, _first_sentence(t.description)) for t in REGISTRY.values()]
        widths = [max(len(r[i]) for r in rows) for i in (0, 1)]
        room = max(20, console.width - sum(w + 3 for w in widths) - 4)  # (cells, borders)
        table = Table("tool", "app", "what it does (one line)")
        for name, app_name, line in rows:  # (names whole; a long line cut to the room left)
            table.add_row(name, app_name, line if len(line) <= room else line[:room - 1] + "…")
        console.print(table)
        console.print(f"{len(rows)} tools of {len({r[1] for r in rows})} apps; --json for "
                      "their schemas, --format markdown for the whole", highlight=False)
    else:
        raise fail(f"--format: expected 'table', 'openai' or 'markdown', got {fmt!r}")


def _first_sentence(text: str) -> str:
    """A tool's description in one line: its first sentence."""
    return re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]


@app.command("apps", short_help="List the workspace's apps; check one against the contract.")
def apps_(
    check: Annotated[list[str] | None, typer.Option("--check", metavar="APP", help="Run the "
                                                    "app contract suite on this app "
                                                    "(repeatable)")] = None,
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", help="Task files or folders "
                                                     "whose reference solutions --check runs "
                                                     "(those that use the app)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table")] = False,
) -> None:
    """The installed apps (name, default or not, tables, tools, check and safety-rule kinds);
    with --check, the app contract
    suite on each named app: the load-time contract, then its tasks' reference solutions run
    by the oracle, replayed and compared with the live state (exit 1 on any problem)."""
    from rich.table import Table

    from ..workspace import REGISTRY
    from ..workspace.apps import installed

    found = installed()
    if not check:
        counts = {a.name: sum(1 for t in REGISTRY.values() if t.app == a.name) for a in found}
        if as_json:
            sys.stdout.write(json.dumps([
                {"app": a.name, "default": a.default, "tables": sorted(a.tables),
                 "tools": counts[a.name], "checks": sorted(a.checks), "rules": sorted(a.rules),
                 "description": a.description} for a in found],
                indent=2) + "\n")
            return
        table = Table("app", "default", "tables", "tools", "check and rule kinds",
                      "description")
        for a in found:
            table.add_row(a.name, "yes" if a.default else "no", ", ".join(sorted(a.tables)),
                          str(counts[a.name]), ", ".join([*sorted(a.checks), *sorted(a.rules)]),
                          a.description)
        console.print(table)
        return
    from ..errors import CoworkenvError
    from ..runtime.contract import ContractReport, check_app_contract

    names = {a.name for a in found}
    unknown = [c for c in check if c not in names]
    if unknown:
        raise fail(f"--check: no installed app {unknown[0]!r} (installed: "
                   f"{', '.join(sorted(names))})")
    for path in tasks or []:
        if not path.exists():
            raise fail(f"--tasks {path}: no such file or folder")
    reports: list[ContractReport] = []
    for name in check:
        try:
            reports.append(check_app_contract(name, list(tasks or [])))
        except CoworkenvError as exc:
            raise fail(f"--tasks: {exc}") from None
    if as_json:
        sys.stdout.write(json.dumps([{"app": r.app, "ok": r.ok, "tasks": len(r.tasks),
                                      "episodes": r.episodes, "problems": r.problems}
                                     for r in reports], indent=2) + "\n")
    else:
        for r in reports:
            verdict = "keeps the contract" if r.ok else f"breaks the contract ({len(r.problems)})"
            console.print(f"app {r.app}: {verdict}; {len(r.tasks)} task(s) that use it, "
                          f"{r.episodes} episode(s) replayed", highlight=False)
            for p in r.problems:
                console.print(f"  - {escape(p)}", highlight=False)
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


@app.command("primitives", short_help="List the workflow primitives; check one against the "
             "contract.")
def primitives_(
    check: Annotated[list[str] | None, typer.Option("--check", metavar="NAME", help="Run the "
                                                    "primitive contract check on this "
                                                    "primitive (repeatable)")] = None,
    requirement: Annotated[Path | None, typer.Option("--requirement", help="A requirement "
                                                     "file (.yaml or .bpmn) --check composes "
                                                     "with (default: the primitive's own "
                                                     "example, else every built-in app)")] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Tasks --check composes per "
                                       "variant")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table")] = False,
) -> None:
    """The registered workflow primitives (entry points ``coworkenv.primitives``: name, phase,
    apps, capabilities, variants, what must come before, where it comes from); with --check,
    the primitive contract check on each named primitive: for every variant it can draw, the
    smallest plan with it is composed with --seeds seeds and each task validated as
    ``coworkenv synth`` does (the oracle passes, a no-op agent fails, every mutant of the
    reference is killed). Exit 1 on any problem."""
    from importlib.metadata import entry_points

    from rich.table import Table

    from ..synth import PRIMITIVES, PrimitiveError, check_primitive_contract, load_requirement
    from ..synth.primitive import GROUP

    try:
        names = list(PRIMITIVES)
    except PrimitiveError as exc:
        raise fail(str(exc)) from None
    origin = {ep.name: ep.value.split(":")[0] for ep in entry_points(group=GROUP)}

    if not check:
        if as_json:
            sys.stdout.write(json.dumps([
                {"primitive": n, "phase": p.phase, "apps": [sorted(a) for a in p.apps],
                 "capabilities": list(p.capabilities), "variants": dict(p.variants),
                 "needs": list(p.needs), "last": p.last, "drawn": p.drawn,
                 "module": origin.get(n, ""), "provides": p.provides, "grading": p.grading}
                for n, p in PRIMITIVES.items()], indent=2) + "\n")
            return
        table = Table("primitive", "phase", "apps", "variants", "after", "module")
        for n, p in PRIMITIVES.items():
            table.add_row(n, p.phase, p.app_sets() or "any", ", ".join(p.variants),
                          ", ".join(p.needs),
                          origin.get(n, ""))
        console.print(table)
        return
    unknown = [c for c in check if c not in names]
    if unknown:
        raise fail(f"--check: no registered primitive {unknown[0]!r} (registered: "
                   f"{', '.join(sorted(names))})")
    req = None
    if requirement is not None:
        if not requirement.exists():
            raise fail(f"--requirement {requirement}: no such file")
        try:
            req = load_requirement(requirement)
        except Exception as exc:
            raise fail(f"--requirement {requirement}: {exc}") from None
    reports = []
    for name in check:
        try:
            reports.append(check_primitive_contract(
                name, req, seeds, progress=None if as_json else
                lambda line: err.print(f"  {escape(line)}", highlight=False)))
        except Exception as exc:  # a requirement file the check cannot read, say
            raise fail(f"--check {name}: {type(exc).__name__}: {exc}") from None
    if as_json:
        sys.stdout.write(json.dumps([{"primitive": r.primitive, "ok": r.ok,
                                      "requirement": r.requirement, "plans": r.plans,
                                      "tasks": r.tasks, "accepted": r.accepted,
                                      "mutants": r.mutants, "problems": r.problems}
                                     for r in reports], indent=2) + "\n")
    else:
        for r in reports:
            verdict = "keeps the contract" if r.ok else f"breaks the contract ({len(r.problems)})"
            console.print(f"primitive {r.primitive}: {verdict}; {r.accepted}/{r.tasks} task(s) "
                          f"valid over {len(r.plans)} plan(s) ({', '.join(r.plans)}), "
                          f"{r.mutants} mutant(s) killed or accepted", highlight=False)
            for line in r.problems:
                console.print(f"  - {escape(line)}", highlight=False)
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


def _stages(text: str) -> tuple[int, int]:
    """``--stages``: "LO-HI" or "N", 2 <= LO <= HI <= 12."""
    lo, _, hi = text.partition("-")
    try:
        span = (int(lo), int(hi or lo))
    except ValueError:
        raise fail(f"--stages: expected LO-HI (e.g. 2-4), got {text!r}") from None
    if not 2 <= span[0] <= span[1] <= 12:
        raise fail(f"--stages: expected 2 <= LO <= HI <= 12 (a plan is at least one primitive "
                   f"and the report), got {text!r}")
    return span


@app.command(short_help="Generate validated tasks from workflows or BPMN.")
def synth(
    requirements: Annotated[list[Path], typer.Argument(
        metavar="FILE", help="Workflow requirement files (YAML) or BPMN 2.0 process files "
        "(.bpmn)")],
    out: Annotated[Path, typer.Option(help="Where to write the accepted tasks (JSONL)")],
    generator: Annotated[str, typer.Option(help="procedural (plans of workflow primitives, "
                                           "composed) | families (the five fixed plans) | "
                                           "openai (a model proposes the plans) | openai-spec "
                                           "(a model writes whole task specs)")]
    = "procedural",
    n: Annotated[int, typer.Option(min=1, help="Tasks to produce")] = 100,
    max_repairs: Annotated[int, typer.Option(min=0, help="Repair rounds per task")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the procedural generator")] = 0,
    stages: Annotated[str | None, typer.Option(
        metavar="LO-HI", help="Plan length of the procedural generator, in primitives (the "
        "final report counted), e.g. 2-4 for short tasks; default: from each requirement's "
        "difficulty (4 to 12)")] = None,
    fresh_people: Annotated[bool, typer.Option(
        "--fresh-people", help="Procedural generators: each task's colleagues and user get "
        "names drawn for that task (the company's directory written into it), so a model "
        "trained on them reads who a task is about instead of recalling the same ten people")]
    = False,
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

    from ..agents.factory import endpoint
    from ..sim import TaskFileError, builtin_tasks
    from ..synth import (
        OpenAIGenerator,
        OpenAIPlanGenerator,
        ProceduralGenerator,
        load_requirement,
        synthesize,
    )

    output_file(out, "--out")
    try:
        reqs = [load_requirement(p) for p in requirements]
    except TaskFileError as exc:
        raise fail(str(exc)) from None
    gen: Any
    span = _stages(stages) if stages is not None else None
    if span is not None and generator != "procedural":
        raise fail(f"--stages: only the procedural generator draws plans of a length, "
                   f"not --generator {generator}")
    if fresh_people and generator not in ("procedural", "families"):
        raise fail(f"--fresh-people: only the procedural generators draw people, not "
                   f"--generator {generator}")
    if generator in ("procedural", "families"):
        gen = ProceduralGenerator(seed, mode="compose" if generator == "procedural"
                                  else "families", stages=span, fresh_people=fresh_people)
    elif generator in ("openai", "openai-spec"):
        try:
            ep = endpoint(model or "", base_url, api_key_env, max_tokens=max_tokens,
                          max_concurrency=concurrency, timeout=600)
        except ValueError as exc:
            raise fail(str(exc)) from None
        if not model:
            raise fail("--model is required with --generator openai")
        reachable(base_url)
        shown = [json.loads(t.model_dump_json(exclude_defaults=True))
                 for t in builtin_tasks()[:examples]]
        gen = OpenAIPlanGenerator(ep, seed=seed) if generator == "openai" else \
            OpenAIGenerator(ep, shown)
    else:
        raise fail(f"--generator: expected procedural, families, openai or openai-spec, "
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
    from ..outputs import atomic_file, write_file_manifest

    with atomic_file(out) as f:  # whole or not at all, with a manifest loaders check
        for s in specs:
            f.write(json.dumps(s) + "\n")
    write_file_manifest(out, tasks=len(specs))
    summary = stats.to_json()
    with atomic_file(out.with_name(out.name + ".report.json")) as f:
        f.write(json.dumps(summary, indent=2))
    causes = {tuple(r["message"] for r in a.report["rejections"]) for a in attempts}
    if not specs and len(causes) == 1 and len(cause := next(iter(causes))) == 1:
        # one cause for everything (a plugin's data not installed, say): said first, alone
        raise fail(f"the {generator} generator produced no valid task: every attempt failed "
                   f"with {cause[0]}; the attempts are in {attempts_path}", 1)
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
    if not specs:
        raise fail(f"the {generator} generator produced no valid task; the attempts and why "
                   f"each was rejected are in {attempts_path}", 1)


@app.command(short_help="Validate task files; prove graders by mutation.")
def validate(
    files: Annotated[list[Path], typer.Argument(metavar="PATH", help="Task files or folders (YAML, JSON, "
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
    from rich.progress import Progress

    from ..outputs import atomic_file
    from ..sim import TaskFileError
    from ..sim.loader import read_task_items, task_files
    from ..synth import Rejection, Report, validate_task_async

    items: list[tuple[str, Any]] = []
    unreadable: list[tuple[str, Report]] = []
    for path in files:
        if not path.exists():
            raise fail(f"{path}: no such file or folder")
        if path.is_dir() and not task_files(path):
            raise fail(f"{path}: a folder without task files (.yaml, .yml, .json, .jsonl)")
    sims = [p for p in files if is_simulation_file(p)]
    sims_bad = sum(not _validate_simulation(p) for p in sims)
    files = [p for p in files if p not in sims]
    if not files:
        console.print(f"{len(sims) - sims_bad} of {len(sims)} simulation(s) valid")
        if sims_bad:
            raise typer.Exit(1)
        return
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
    first: dict[str, str] = {}  # (one id, one task: what `run` refuses, refused here too)
    for where, r in zip(wheres, reports, strict=True):
        if r.task_id == "?":
            continue
        if r.task_id in first:
            r.accepted = False
            r.rejections.append(Rejection(
                "parse", where, f"id: task {r.task_id!r} is also defined in {first[r.task_id]}"))
        else:
            first[r.task_id] = where
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
    console.print(f"{len(reports) - bad} of {len(reports)} task(s) valid"
                  + (f"; {len(sims) - sims_bad} of {len(sims)} simulation(s)" if sims else ""))
    if bad or sims_bad:
        raise typer.Exit(1)


def is_simulation_file(path: Path) -> bool:
    """A YAML file that says ``kind: simulation``."""
    from ..sim.loader import _SIMULATION

    return path.is_file() and path.suffix in (".yaml", ".yml") and bool(
        _SIMULATION.search(path.read_text(errors="replace")[:4096]))


def _validate_simulation(path: Path, policies: dict[str, str] | None = None) -> bool:
    """A simulation file checked whole as ``simulate`` checks it (its language, templates,
    company, times, people, bounds; ``policies``: those given for its agents): one line saying
    what it holds, or each problem (the first twenty, and how many more)."""
    from ..agents.factory import parse_agent
    from ..sim import TaskFileError
    from ..sim.simulation import load_simulation, timed_arrivals

    try:
        loaded = load_simulation(path)
    except TaskFileError as exc:
        within = "" if exc.file == str(path) else f"{exc.file}: "  # (a template's problem)
        for p in exc.problems[: TaskFileError.SHOWN]:
            console.print(f"[red]rejected[/red] {escape(str(path))}: {escape(within + p)}",
                          highlight=False)
        if len(exc.problems) > TaskFileError.SHOWN:
            console.print(f"[red]rejected[/red] {escape(str(path))}: ... and "
                          f"{len(exc.problems) - TaskFileError.SHOWN:,} more problem(s) like "
                          "these", highlight=False)
        return False
    sim = loaded.sim
    for seat in sim.roster:  # (its policy, as simulate reads it)
        if policies and seat.id in policies:
            try:
                parse_agent(policies[seat.id])
            except ValueError as exc:
                console.print(f"[red]rejected[/red] {escape(str(path))}: agents: {seat.id}: "
                              f"{escape(str(exc))}", highlight=False)
                return False
    timed = len(timed_arrivals(sim, loaded.calendar))
    caused = sum(1 for s in sim.workload if s.on is not None)
    console.print(f"simulation {sim.id} ({path}): valid: {len(loaded.templates)} request "
                  f"templates, {len(sim.roster)} agents, {sim.clock.days} working "
                  f"day{'s' if sim.clock.days != 1 else ''}, "
                  f"{timed} timed arrivals (about {timed / sim.clock.days:.0f} a day)"
                  + (f" and {caused} stream(s) of arrivals caused by events" if caused else ""),
                  highlight=False)
    return True


def _mutation_table(reports: list[Any]) -> None:
    """A row per task: a table where the ids fit whole beside the counts, else a line per
    task (ids are what a user copies: never cut)."""
    from rich.table import Table

    title = "mutation check: sabotaged variants must fail, equivalent ones must pass"
    rows, totals = [], [0, 0, 0, 0]
    for r in reports:
        m = r.mutation
        if m is None:
            rows.append((r.task_id, "-", "-", "not run (the task is rejected before)", "-"))
            continue
        surv = "; ".join(f"{s.id} ({s.description})" + (f" accepted: {s.accepted}"
                                                          if s.accepted else "")
                         for s in m.survivors) or "none"
        fps = "; ".join(f"{f.id} ({f.description}, score {f.score})"
                        for f in m.false_positives) or "0"
        rows.append((r.task_id, str(m.applicable), str(m.killed), surv, fps))
        totals[0] += m.applicable
        totals[1] += m.killed
        totals[2] += len(m.survivors)
        totals[3] += len(m.false_positives)
    longest = max((len(r[0]) for r in rows), default=4)
    if longest + 50 <= console.width:  # the id whole, the counts, room for the survivors
        t = Table(title=title)
        t.add_column("task", no_wrap=True, min_width=longest)
        t.add_column("applicable", justify="right", no_wrap=True)
        t.add_column("killed", justify="right", no_wrap=True)
        t.add_column("survivors", ratio=2, overflow="fold")
        t.add_column("false positives", ratio=1, overflow="fold")
        for row in rows:
            t.add_row(*(escape(c) for c in row))
        console.print(t)
    else:
        console.print(title, highlight=False)
        for task_id, applicable, killed, surv, fps in rows:
            console.print(f"{escape(task_id)}\n  applicable {applicable}, killed {killed}; "
                          f"survivors: {escape(surv)}; false positives: {escape(fps)}",
                          highlight=False)
    console.print(f"mutants: {totals[0]} applicable, {totals[1]} killed, {totals[2]} survived, "
                  f"{totals[3]} false positive(s)", highlight=False)


@app.command(short_help="Print the JSON schema of a task, simulation or company file.")
def schema(
    what: Annotated[str, typer.Argument(help="task | simulation | company")] = "task",
) -> None:
    """Print the JSON schema of a task file, a simulation file or a company file
    (companies/NAME.yaml) (generated from the models)."""
    from ..sim import Task
    from ..sim.companies import company_schema
    from ..sim.simulation import simulation_schema

    if what not in ("task", "simulation", "company"):
        raise fail(f"schema: expected 'task', 'simulation' or 'company', got {what!r}")
    out = (Task.model_json_schema() if what == "task" else simulation_schema()
           if what == "simulation" else company_schema())
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
