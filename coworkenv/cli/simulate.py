"""Simulations: `simulate` (a company over days, several agents, a stream of requests)."""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import (
    BUS_HELP,
    DB_HELP,
    PRICE_HELP,
    Column,
    app,
    console,
    err,
    fail,
    parse_price,
    print_table,
    writable_db,
)

SIM_EXIT = ("Exit codes: 0 the simulation ran to its end (agents that score 0 are not an "
            "error); 1 the simulation itself failed (a scenario script's error); 2 usage (a "
            "bad option or simulation file, said in one line); 130 interrupted (what ran is "
            "recorded; --resume goes on).")


def _policies(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or []:
        for part in v.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise fail(f"--agents: expected AGENT=POLICY (e.g. fin=noop), got {part!r}")
            k, _, pol = part.partition("=")
            out[k.strip()] = pol.strip()
    return out


@app.command(epilog=SIM_EXIT, short_help="Run a simulation: a company over days, several agents.")
def simulate(
    file: Annotated[Path, typer.Argument(help="A simulation file (kind: simulation) or a "
                                         "scenario script (.py)")],
    agent: Annotated[str | None, typer.Option(help="One policy for every agent: oracle | noop "
                                              "| openai:MODEL | teacher:openai:MODEL | remote "
                                              "| remote:GROUP (served by `coworkenv worker "
                                              "--group GROUP`; default: each agent's own)")]
    = None,
    agents: Annotated[list[str] | None, typer.Option(
        help="AGENT=POLICY for one agent of the roster (repeatable, or comma-separated)")]
    = None,
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    bus: Annotated[str, typer.Option(help=BUS_HELP)] = "memory",
    run_id: Annotated[str | None, typer.Option(help="Run id (default: sim-<time>)")] = None,
    resume: Annotated[bool, typer.Option(help="Go on with an interrupted simulation (--run-id, "
                                         "else the latest of this simulation in --db)")]
    = False,
    cast: Annotated[str | None, typer.Option(
        help="scripted or llm: who plays the people (default: the simulation's cast; llm: "
             "a model answers as each person's persona from their facts and calendar)")]
    = None,
    cast_model: Annotated[str | None, typer.Option(help="The people's model name")] = None,
    cast_base_url: Annotated[str | None, typer.Option(
        help="The people's OpenAI-compatible endpoint (default: --base-url)")] = None,
    days: Annotated[int | None, typer.Option(
        help="Run only the first N working days of the clock (fixed-time arrivals and world "
             "events after them left out): a first look at a long simulation")] = None,
    memory: Annotated[str | None, typer.Option(
        help="persistent (one agent per seat for the whole run, one conversation) or "
             "per_arrival (a new agent for each request) for every agent; default: each "
             "seat's own memory, else persistent for model-backed policies")] = None,
    links_only: Annotated[bool, typer.Option(
        "--links-only", help="Persistent oracles name no request: each of their actions is "
        "credited from the workspace's links alone (a check of attribution)")] = False,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint of "
                                                 "model-backed agents")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Environment variable holding the "
                                                    "API key")] = None,
    max_tokens: Annotated[int, typer.Option(help="Most tokens a model-backed agent's reply "
                                            "may have")] = 512,
    model_timeout: Annotated[float, typer.Option(help="Seconds one model call may take before "
                                                 "it is retried")] = 120.0,
    model_concurrency: Annotated[int, typer.Option(
        min=1, help="Model calls in flight at most, per model server, in each process: every "
        "agent, model-played person and (with --seeds) simulation of the process shares "
        "it")] = 4,
    max_arg_chars: Annotated[int | None, typer.Option(
        help="Declare the agents' string arguments at most this long (maxLength in their "
             "function schemas): a server that constrains tool calls by their schema "
             "(llama-cpp-python) stops there; with the bundled model, 300")] = None,
    replay_model: Annotated[str | None, typer.Option(
        help="Answer every model call with the answers run RUN recorded (agents' and "
             "people's): the same simulation again with zero model calls; a call whose "
             "request differs from the recorded one (a prompt, a tool, a function changed) "
             "stops the run, naming the call and the difference", metavar="RUN")] = None,
    replay_db: Annotated[Path | None, typer.Option(
        help="The store that holds the --replay-model run (default: --db)")] = None,
    replay_live: Annotated[bool, typer.Option(
        "--replay-live", help="With --replay-model: from the first call the recording does "
        "not hold or whose request differs, go on with the model (--base-url)")] = False,
    seeds: Annotated[int | None, typer.Option(
        help="Run the simulation N times, the workload drawn with seeds S..S+N-1 (S: the "
             "file's seed), each a run of its own (RUN-s<seed>; --run-id names the batch), "
             "recorded in shards beside --db and merged into it at the end")] = None,
    processes: Annotated[int, typer.Option(
        help="With --seeds: OS processes to run the simulations over (each its share in "
             "one event loop)")] = 1,
    concurrency: Annotated[int, typer.Option(
        help="With --seeds: simulations at once in each process or Ray task (model-backed "
             "agents: their calls in flight together)")] = 8,
    ray: Annotated[str | None, typer.Option(
        help="With --seeds: run the simulations on a Ray cluster, auto (this machine's, else "
             "a new local one) or the head's address; each task of one CPU runs "
             "--concurrency of them in a shard on its node, sent back and merged in --db; "
             "the file must be at the same path on every node (needs `pip install "
             "'coworkenv[ray]'`)")] = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Check the file as the run would (its language, templates, company, "
        "times, people, bounds, the policies given) and say what it holds, without running "
        "it or writing anything; exit 1 if it is refused (as coworkenv validate)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    price: Annotated[str | None, typer.Option(
        help=PRICE_HELP, metavar="PROMPT[,COMPLETION]")] = None,
    mutate: Annotated[bool, typer.Option(
        "--mutate", help="Instead of one run: the mutation check of the simulation's "
        "hand-offs (the oracle as written, then a hand-off to the wrong agent, forwarding "
        "another case, a reply that contradicts the decision); exit 1 on a survivor or a "
        "false positive. Runs in a temporary store")] = False,
) -> None:
    """Run a simulation: the roster's agents work through the workload's requests over the
    clock's working days in one shared workspace; every arrival is graded as a task and
    recorded as an episode of the run; the summary gives figures per agent and per family,
    and the simulation's own checks (SLA, nothing dropped, budgets)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ..errors import CoworkenvError
    from ..runtime.simulate import SimulationConfig
    from ..runtime.simulate import simulate as run_simulation
    from ..sim import STOP_SIGNALS, Interrupt, RunInterrupted, TaskFileError
    from ..store import LeaseHeldError

    if mutate:
        _mutation_check(file, as_json)
        return
    if check:
        from .synth import _validate_simulation

        pols = _policies(agents)
        if agent is not None:
            from ..sim.simulation import load_simulation

            with contextlib.suppress(Exception):  # (a broken file: said by the check below)
                pols = {s.id: agent for s in load_simulation(file).sim.roster} | pols
        if not _validate_simulation(file, pols):
            raise typer.Exit(1)
        return
    writable_db(db)
    cost = parse_price(price)
    if memory not in (None, "persistent", "per_arrival"):
        raise fail(f"--memory: expected persistent or per_arrival, got {memory!r}")
    config = SimulationConfig(file, agent=agent, agents=_policies(agents), db=db, bus=bus,
                              run_id=run_id, resume=resume, base_url=base_url,
                              api_key_env=api_key_env, memory=memory, links_only=links_only,
                              days=days, max_tokens=max_tokens, model_timeout=model_timeout,
                              model_concurrency=model_concurrency,
                              max_arg_chars=max_arg_chars, replay_model=replay_model,
                              replay_db=replay_db, replay_live=replay_live, cast=cast,
                              cast_model=cast_model, cast_base_url=cast_base_url)
    if seeds is not None:
        _batch(config, seeds, processes, concurrency, as_json, ray)
        return
    if ray is not None:
        raise fail("--ray: runs several simulations (with --seeds N); one simulation runs in "
                   "one event loop")
    if processes != 1:
        raise fail("--processes: runs several simulations (with --seeds N); one simulation "
                   "runs in one event loop")
    stop = Interrupt(STOP_SIGNALS)
    quiet = as_json or not sys.stderr.isatty()
    loaded = _look(config)
    expected = loaded.expected_arrivals if loaded is not None else 0
    if loaded is not None and not as_json:
        sim = loaded.sim
        people = len(loaded.company.get("people", []))
        console.print(f"{sim.id}: {sim.clock.days} working days, {len(sim.roster)} agents, "
                  f"{people} people; about {expected:,} arrivals expected"
                  + (" (and those its on: triggers make)" if any(
                      st.on is not None for st in sim.workload) else ""), highlight=False)
    progress = Progress(TextColumn("simulating"), BarColumn(), TextColumn(
        "{task.fields[days]}"), TextColumn("{task.fields[graded]} graded"), TimeElapsedColumn(),
                        console=err, disable=quiet, transient=True)
    bar = progress.add_task("sim", total=1.0, days="", graded=0)

    def on_progress(frac: float, graded: int) -> None:
        progress.update(bar, completed=frac, days=f"{frac:.0%} of the days",
                        graded=f"{graded:,} of about {expected:,}" if expected else graded)

    try:
        with progress:
            result = run_simulation(config, interrupt=stop, on_progress=on_progress)
    except RunInterrupted as exc:
        err.print(f"interrupted: simulation run {exc.run_id} is recorded as far as it went in "
                  f"{db}; go on with coworkenv simulate {file} --db {db} --run-id {exc.run_id} "
                  "--resume", highlight=False)
        raise typer.Exit(130) from None
    except (TaskFileError, LeaseHeldError) as exc:
        raise fail(str(exc)) from None
    except CoworkenvError as exc:
        msg = str(exc)
        raise fail(msg, 1 if msg.startswith("scenario script") else 2) from None
    summary = summary_of(result, loaded, cost)
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return
    print_summary(summary)
    from ..viewer.urls import viewer_url

    console.print(f"recorded in {db} (run {result.run_id}); per arrival: coworkenv eval --db "
                  f"{db} --run {result.run_id}; to look at it: coworkenv view --db {db}, then "
                  f"{viewer_url(run=result.run_id)}", highlight=False)


def _batch(config: Any, seeds: int, processes: int, concurrency: int, as_json: bool,
           ray: str | None = None) -> None:
    """``--seeds N``: the simulation N times over ``processes``; a table of the runs and the
    batch's rates."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..errors import CoworkenvError
    from ..runtime.simbatch import simulate_seeds
    from ..runtime.simulate import load_file
    from ..sim import TaskFileError

    if seeds < 1:
        raise fail(f"--seeds: expected at least 1, got {seeds}")
    try:
        first = load_file(config.file, config.script, config.days)[0].sim.seed
    except (TaskFileError, CoworkenvError) as exc:
        raise fail(str(exc)) from None
    progress = Progress(TextColumn("simulations"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err,
                        disable=as_json or not sys.stderr.isatty(), transient=True)
    bar = progress.add_task("batch", total=seeds)
    try:
        with progress:
            batch = simulate_seeds(config, range(first, first + seeds), processes=processes,
                                   concurrency=concurrency, ray=ray,
                                   on_done=lambda _: progress.advance(bar))
    except (TaskFileError, CoworkenvError) as exc:
        raise fail(str(exc)) from None
    out = {"batch": batch.run_id, "simulations": len(batch.runs),
           "finished_earlier": batch.earlier, "processes": processes, "ray": ray,
           "arrivals": batch.arrivals, "pass_rate": round(batch.pass_rate, 4),
           "wall_seconds": round(batch.wall_seconds, 3),
           "simulations_per_s": round(batch.simulations_per_s, 3),
           "arrivals_per_s": round(batch.arrivals_per_s, 1),
           "runs": [summary_of(r) for r in batch.runs]}
    if as_json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    print_table(f"{batch.runs[0].simulation if batch.runs else ''} (batch {batch.run_id}): "
                "by seed", [Column("run"), Column("arrivals", 0, True),
                            Column("pass rate", 0, True), Column("checks"),
                            Column("events hash")],
                [[r.run_id, str(len(r.outcomes)), f"{r.pass_rate:.3f}",
                  " ".join(f"{c.id} {'pass' if c.passed else 'FAIL'}" for c in r.checks),
                  r.events_hash[:16]] for r in batch.runs])
    console.print(f"{len(batch.runs)} simulations, {batch.arrivals} arrivals, pass rate "
                  f"{batch.pass_rate:.3f}, in {batch.wall_seconds:.2f} s over "
                  + (f"Ray ({ray})" if ray else f"{processes} process(es)") +
                  f": {batch.simulations_per_s:.2f} simulations/s, "
                  f"{batch.arrivals_per_s:.1f} arrivals/s"
                  + (f"; finished before: {', '.join(batch.earlier)}" if batch.earlier
                     else ""), highlight=False)
    console.print(f"recorded in {config.db} (runs {batch.run_id}-s<seed>); per arrival: "
                  f"coworkenv eval --db {config.db} --run RUN", highlight=False)


def _mutation_check(file: Path, as_json: bool) -> None:
    from ..errors import CoworkenvError
    from ..runtime.simmutate import mutation_check
    from ..sim import TaskFileError

    try:
        report = mutation_check(file)
    except (TaskFileError, CoworkenvError) as exc:
        raise fail(str(exc)) from None
    killed = sum(m.killed for m in report.mutants)
    applied = sum(m.applied for m in report.mutants)
    if as_json:
        sys.stdout.write(json.dumps({
            "simulation": report.simulation, "arrivals": report.arrivals,
            "false_positives": report.false_positives, "ok": report.ok,
            "mutants": [{"kind": m.kind, "applied": m.applied, "killed": m.killed,
                         "survivors": m.survivors} for m in report.mutants]}, indent=2) + "\n")
    else:
        print_table(f"{report.simulation}: hand-off mutants", [
            Column("mutant"), Column("applied to", 0, True), Column("killed", 0, True),
            Column("survivors")], [[m.kind, str(m.applied), str(m.killed),
                                    ", ".join(m.survivors) or "-"] for m in report.mutants])
        console.print(f"mutants: {applied} applicable, {killed} killed, {applied - killed} "
                      f"survived, {len(report.false_positives)} false positive(s)"
                      + (f" ({', '.join(report.false_positives[:5])})"
                         if report.false_positives else ""), highlight=False)
    if not report.ok:
        raise typer.Exit(1)


def _look(config: Any) -> Any:
    """The simulation file as loaded (for what the run is about to be), or None where it
    cannot be (the run says why)."""
    from ..errors import CoworkenvError
    from ..runtime.simulate import load_file
    from ..sim import TaskFileError

    try:
        return load_file(config.file, config.script, config.days)[0]
    except (TaskFileError, CoworkenvError, OSError):
        return None


def print_model(model: dict[str, Any], title: str = "model use", most_days: int = 14) -> None:
    """The model use by agent (with what one arrival cost: median and most) and by
    simulated day (the busiest ``most_days`` where there are more), and the whole."""
    agents, days, total = model.get("by_agent") or {}, model.get("by_day") or {}, \
        model.get("total") or {}
    if not total.get("calls"):
        return
    priced = "cost" in total

    def money(f: dict[str, Any]) -> list[str]:
        return [f"{f.get('cost', 0.0):.4f}"] if priced else []
    money_col = [Column("cost $", 0, True)] if priced else []

    def arrival(f: dict[str, Any], key: str) -> str:
        a = f.get("per_arrival")
        if not a:
            return "-"
        fmt = "{:.1f}" if key == "model_s" else "{:,.0f}"
        return f"{fmt.format(a[key + '_median'])} / {fmt.format(a[key + '_max'])}"
    print_table(f"{title} by agent", [
        Column("agent"), Column("calls", 0, True), Column("prompt tok", 0, True),
        Column("completion tok", 0, True), Column("model s", 0, True), *money_col,
        Column("calls/arrival med/max", 1, True), Column("tokens/arrival med/max", 1, True),
        Column("s/arrival med/max", 2, True)],
        [[name, f"{f['calls']:,}", f"{f['prompt_tokens']:,}", f"{f['completion_tokens']:,}",
          f"{f['model_s']:.1f}", *money(f), arrival(f, "calls"), arrival(f, "tokens"),
          arrival(f, "model_s")] for name, f in [*agents.items(), ("all", total)]])
    shown = dict(sorted(days.items(), key=lambda kv: -kv[1]["tokens"])[:most_days]) \
        if len(days) > most_days else days
    print_table(f"{title} by simulated day" + (
        f" (the {most_days} busiest of {len(days)}; every day in --json)"
        if len(days) > most_days else ""), [
        Column("day"), Column("calls", 0, True), Column("tokens", 0, True),
        Column("model s", 0, True), *money_col],
        [[day, f"{f['calls']:,}", f"{f['tokens']:,}", f"{f['model_s']:.1f}", *money(f)]
         for day, f in sorted(shown.items())])


def summary_of(result: Any, loaded: Any = None, price: tuple[float, float] | None = None
               ) -> dict[str, Any]:
    from ..runtime.simreport import failed

    days = result.sim_seconds / 86400
    clock: dict[str, Any] = {}
    if loaded is not None:
        cal = loaded.calendar
        clock = {"ended_at": cal.at(result.sim_seconds).isoformat(),
                 "working_day": cal.working_day(result.sim_seconds),
                 "working_days": loaded.sim.clock.days}
    return {**clock,
        "run": result.run_id, "simulation": result.simulation, "arrivals": len(result.outcomes),
        "pass_rate": round(result.pass_rate, 4), "passed": result.passed,
        "by_agent": result.by("agent"), "by_family": result.by("family"),
        "failed": failed(result.outcomes),
        "checks": [{"id": c.id, "passed": c.passed, "detail": c.detail} for c in result.checks],
        "events": result.event_count, "events_hash": result.events_hash,
        "state_hash": result.state_hash, "simulated_days": round(days, 3),
        "wall_seconds": round(result.wall_seconds, 3),
        "backlog_max": max((n for _, n in result.backlog), default=0),
        "model_answers": result.model_answers, "model": result.model(price)}


def _figure_rows(groups: dict[str, dict[str, Any]]) -> list[list[str]]:
    def h(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"
    return [[name, str(f["arrivals"]), str(f["passed"]), f"{f['pass_rate']:.3f}",
             f"{f['score']:.3f}", str(f["completed"]), h(f["response_h_median"]),
             h(f["response_h_p90"]), h(f["response_h_max"])] for name, f in groups.items()]


FIGURE_COLUMNS = [Column("arrivals", 0, True), Column("passed", 2, True),
                  Column("pass rate", 0, True), Column("score", 1, True),
                  Column("completed", 4, True), Column("resp. median h", 3, True),
                  Column("p90 h", 3, True), Column("max h", 5, True)]


def print_agents(by_agent: dict[str, dict[str, Any]]) -> None:
    """Each agent's memory, its largest prompt and how its actions were credited to arrivals
    (persistent agents), where there is any to show (the model use: :func:`print_model`)."""
    rows = []
    for name, f in by_agent.items():
        if f.get("memory") != "persistent" and "model_calls" not in f:
            continue
        credit = f.get("attribution") or {}
        unsure = sum(n for k, n in credit.items() if "ambiguous" in k or k in ("focus", "none"))
        rows.append([name, f.get("memory", ""), str(f.get("prompt_max", 0)),
                     str(sum(credit.values())), str(unsure),
                     ", ".join(f"{k} {n}" for k, n in credit.items()) or "-"])
    if rows:
        print_table("agents", [Column("agent"), Column("memory"),
                               Column("largest prompt", 0, True),
                               Column("actions credited", 0, True),
                               Column("unsure or uncredited", 0, True), Column("credited by")],
                    rows)


def print_summary(s: dict[str, Any]) -> None:
    print_table(f"{s['simulation']} ({s['run']}): by agent", [Column("agent"), *FIGURE_COLUMNS],
                _figure_rows(s["by_agent"]))
    print_agents(s["by_agent"])
    print_model(s.get("model") or {})
    print_table("by family", [Column("family"), *FIGURE_COLUMNS], _figure_rows(s["by_family"]))
    for c in s["checks"]:
        mark = "[green]pass[/green]" if c["passed"] else "[red]FAIL[/red]"
        console.print(f"check {c['id']}: {mark} ({c['detail']})")
    if "ended_at" in s:
        ended = datetime.fromisoformat(s["ended_at"])
        clock = (f"the clock ran to {ended:%a %d %b %H:%M} (working day {s['working_day']} "
                 f"of {s['working_days']})")
    else:
        clock = f"{s['simulated_days']:.2f} calendar days of the clock"
    console.print(f"{s['arrivals']} arrivals, pass rate {s['pass_rate']:.3f}; {clock} in "
                  f"{s['wall_seconds']:.2f} s, {s['events']} events (hash "
                  f"{s['events_hash'][:16]}); at most {s['backlog_max']} arrivals open at one "
                  "time (waiting or in work)", highlight=False)
    bad = s.get("failed") or {}
    if bad.get("arrivals"):
        console.print(f"[red]{bad['arrivals']} arrival(s) failed[/red] (the first: "
                      f"{bad['first']})", highlight=False)
    answers = s.get("model_answers") or {}
    if answers.get("recorded"):
        console.print(f"model answers: {answers['recorded']} served from the recording "
                      f"({answers.get('source')}), {answers.get('live', 0)} asked of the model",
                      highlight=False)
    if answers.get("diverged"):
        console.print(f"[yellow]diverged[/yellow]: {answers['diverged']}", highlight=False)
