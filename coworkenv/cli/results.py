"""Reading what runs recorded: `replay`, `runs`, `eval`, `regrade`, `view`, `merge`; and
deleting runs from a store (`runs --delete`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ._common import (
    DBS_HELP,
    PRICE_HELP,
    Column,
    app,
    console,
    db_folder,
    db_label,
    err,
    fail,
    failed_cell,
    known_episode,
    known_run,
    load,
    num,
    open_reader,
    overall_line,
    parse_price,
    print_table,
    unbound,
)


@app.command(short_help="Replay an episode: timeline, time travel, diffs.")
def replay(
    episode: Annotated[str | None, typer.Option(
        help="Episode id RUN:TASK:TRIAL:ATTEMPT (RUN may be the start of the run id), or TASK "
        "or TASK:TRIAL of the latest run that has it (default: the latest run's only episode)")] = None,
    dbs: Annotated[list[Path] | None, typer.Option("--db", help=DBS_HELP)] = None,
    hash_: Annotated[bool, typer.Option("--hash", help="Print the event-sequence hash and the "
                                        "final workspace hash, rebuilt from the log")] = False,
    at: Annotated[int | None, typer.Option(help="Print the workspace as it was at this seq")]
    = None,
    diff: Annotated[tuple[int, int] | None, typer.Option(help="Print what changed between "
                                                         "two seqs: A B")] = None,
    agent_view: Annotated[bool, typer.Option("--agent-view", help="Print the messages the "
                                             "agent saw and produced, in chat format")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of text")] = False,
    full: Annotated[bool, typer.Option("--full", help="Print every line whole (the timeline "
                                       "and diffs cut long payloads and say so)")] = False,
) -> None:
    """Replay an episode from the event log: timeline, time travel, diffs, the agent's view."""

    from ..agents.chat import agent_view as render_agent_view
    from ..sim import events_hash
    from ..store import StoreError
    from ..workspace import replay_events
    from ..workspace.diff import describe_state, diff_states

    reader = open_reader(_dbs(dbs))
    with reader:
        try:
            episode = known_episode(reader, episode)
            reader.episode(episode)
        except StoreError as exc:
            raise fail(str(exc)) from None
        events = list(reader.events(episode))
    last = events[-1].seq if events else -1
    cut = _Cut(full)
    for name, seq in (("--at", at), *(((f"--diff {i + 1}", s) for i, s in
                                       enumerate(diff)) if diff else ())):
        if seq is not None and not 0 <= seq <= last:
            raise fail(f"{name}: seq {seq} is outside this episode (0..{last})")
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
                console.print(f"+ {app_name}/{eid}: "
                              f"{cut(json.dumps(data, ensure_ascii=False), 150)}",
                              highlight=False, markup=False)
            for eid in ch["removed"]:
                console.print(f"- {app_name}/{eid}", highlight=False, markup=False)
            for eid, fields in ch["changed"].items():
                for f, (old, new) in fields.items():
                    console.print(f"~ {app_name}/{eid}.{f}: {cut(json.dumps(old), 70)} -> "
                                  f"{cut(json.dumps(new), 70)}", highlight=False, markup=False)
        cut.note()
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
                          f"{cut(body, 110)}", highlight=False, markup=False)
        cut.note()


@app.command(short_help="List the runs in a store (the place to copy a run id from); "
             "delete some.")
def runs(
    dbs: Annotated[list[Path] | None, typer.Option(
        "--db", help=DBS_HELP + "; deleting works on one file")] = None,
    last: Annotated[int | None, typer.Option(help="Only the newest N runs")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table")] = False,
    delete: Annotated[list[str] | None, typer.Option(
        metavar="RUN", help="Delete this run (its id or the start of one; repeatable): its "
        "rows in every table (episodes, events, grades, check results, projection, task "
        "specs, lease, the run). A run that a live runner holds is refused")] = None,
    older_than: Annotated[float | None, typer.Option(
        metavar="DAYS", help="Delete the runs that started more than DAYS days ago (with "
        "--keep: only those beyond the newest N)")] = None,
    keep: Annotated[int | None, typer.Option(
        metavar="N", help="Delete all but the newest N runs (runs being run are kept)")]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what --delete, --older-than "
                                          "or --keep would delete, and delete nothing")]
    = False,
    vacuum: Annotated[bool, typer.Option("--vacuum", help="Then give the freed space back "
                                         "(SQLite VACUUM: rewrites the file)")] = False,
) -> None:
    """List the runs of a store, oldest first: id, when it started, agent, tasks x trials,
    status (finished; running, and by whom; failed or abandoned (a simulation that stopped
    with an error, a session left); unfinished: resume it), the scheduled (task,
    trial) pairs done, pass rate and failures. Commands that take --run accept the start of
    an id; an episode id is RUN:TASK:TRIAL:ATTEMPT (attempt > 0: run again by --resume).
    With --delete, --older-than or --keep (or --vacuum alone), delete runs instead: all or
    nothing, one line per run."""
    import datetime

    db = _dbs(dbs)
    if delete or older_than is not None or keep is not None or vacuum:
        if last is not None:
            raise fail("--last: lists runs; it does not go with --delete, --older-than, "
                       "--keep or --vacuum")
        _delete_runs(db, delete or [], older_than, keep, dry_run=dry_run, vacuum=vacuum,
                     as_json=as_json)
        return
    if dry_run:
        raise fail("--dry-run: goes with --delete, --older-than or --keep")
    with open_reader(db) as r:
        rows = r.run_overview()
    if last is not None:
        if last < 1:
            raise fail(f"--last: expected 1 or more, got {last}")
        rows = rows[-last:]
    for x in rows:
        x["state"] = ("finished" if x["status"] == "finished" else
                      f"running ({x['holder']})" if x["holder"] else
                      "failed" if x["status"] == "failed" else
                      "abandoned" if x["status"] == "abandoned" else
                      "unfinished (--resume)")
        x["pass_rate"] = x["passed"] / x["scheduled"] if x["scheduled"] else None
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not rows:
        console.print(f"{db_label(db)}: no run yet (`coworkenv demo` or `coworkenv run` "
                      "records one)")
        return
    cols = [Column("run"), Column("started", 3), Column("agent", 2),
            Column("tasks x trials", 4, True), Column("status", 1), Column("done", 0, True),
            Column("pass rate", 0, True), Column("failed", 5, True)]
    table = []
    for x in rows:
        when = datetime.datetime.fromtimestamp(x["created_at"]).strftime("%Y-%m-%d %H:%M")
        what = (f"simulation {x['simulation']}" if x["simulation"] else
                f"{x['tasks']} x {x['trials']}")
        fails = ", ".join(f"{n} {k}" for n, k in ((x["agent_failures"], "agent"),
                                                    (x["errors"], "error")) if n) or "0"
        table.append([escape(x["run_id"]), when, escape(x["agent"]), what, escape(x["state"]),
                      f"{x['final']}/{x['scheduled']}", num(x["pass_rate"]), fails])
    print_table(f"runs in {db_label(db)}", cols, table)
    console.print("a command's --run takes any unambiguous start of a run id; "
                  "`coworkenv eval --run ID` scores one; `--delete ID` deletes one",
                  highlight=False)


def _delete_runs(dbs: list[Path], named: list[str], older_than: float | None,
                 keep: int | None, *, dry_run: bool, vacuum: bool, as_json: bool) -> None:
    """`runs --delete/--older-than/--keep`: the runs picked, deleted from one store file."""
    import time

    from ..store import LeaseHeldError, StoreError, delete_runs

    if len(dbs) != 1 or dbs[0].is_dir():
        raise fail(f"--db {db_label(dbs)}: deleting works on one store file at a time; give "
                   "one --db FILE")
    if older_than is not None and older_than < 0:
        raise fail(f"--older-than: expected 0 or more days, got {older_than:g}")
    if keep is not None and keep < 0:
        raise fail(f"--keep: expected 0 or more runs, got {keep}")
    db = dbs[0]
    kept: list[str] = []
    with open_reader(db) as r:
        overview = r.run_overview()  # (oldest first)
        picked = [known_run(r, x, db, "--delete") for x in named]
    if older_than is not None or keep is not None:
        cutoff = time.time() - (older_than or 0) * 86400
        newest = {x["run_id"] for x in overview[len(overview) - keep:]} if keep else set()
        for x in overview:
            if x["run_id"] in newest or x["run_id"] in picked or (
                    older_than is not None and x["created_at"] > cutoff):
                continue
            if x["holder"]:  # (a prune leaves a run being run; --delete names it: refused)
                kept.append(f"kept run {x['run_id']}: being run ({x['holder']})")
                continue
            picked.append(x["run_id"])
    for line in kept:
        err.print(line, highlight=False)

    def size() -> int:  # (the file and its write-ahead log)
        return sum(f.stat().st_size for f in (db, db.with_name(db.name + "-wal")) if f.exists())

    before = size()
    try:
        counts = delete_runs(db, picked, dry_run=dry_run, vacuum=vacuum) if picked or vacuum \
            else {}
    except LeaseHeldError as exc:
        raise fail(f"--delete: {exc}") from None
    except StoreError as exc:  # (its message starts with the path)
        raise fail(f"--db {exc}") from None
    if as_json:
        sys.stdout.write(json.dumps({"db": str(db), "dry_run": dry_run, "deleted": counts},
                                    indent=2) + "\n")
        return
    verb = "would delete" if dry_run else "deleted"
    for run_id, n in counts.items():
        console.print(f"{verb} run {run_id}: {n['episodes']} episode(s), {n['events']} "
                      f"event(s), {n['grades']} grade(s), {n['tasks']} task spec(s)",
                      highlight=False)
    left = len(overview) - len(counts)
    vacuumed = f"; vacuumed: {before / 1e6:.1f} MB -> {size() / 1e6:.1f} MB" if vacuum else ""
    console.print(f"{db}: {len(counts)} run(s) {'would be ' if dry_run else ''}deleted, "
                  f"{left} left"
                  f"{' (dry run: nothing deleted)' if dry_run else vacuumed}", highlight=False)


class _Cut:
    """Long payloads cut to a width (ending in …), counted, and said once at the end."""

    def __init__(self, full: bool) -> None:
        self.full, self.count = full, 0

    def __call__(self, text: str, width: int) -> str:
        if self.full or len(text) <= width:
            return text
        self.count += 1
        return text[:width - 1] + "…"

    def note(self) -> None:
        if self.count:
            err.print(f"({self.count} line(s) cut, marked …; --full prints them whole, --json "
                      "prints the data)", highlight=False)


@app.command(short_help="Grade recorded episodes again from their logs.")
def regrade(
    dbs: Annotated[list[Path] | None, typer.Option("--db", help=DBS_HELP)] = None,
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", help="Task files to grade "
                                                     "with (default: the specs the run used)")]
    = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run")] = None,
) -> None:
    """Grade recorded episodes again from the event log, without re-running them."""
    import anyio

    from ..sim.report import regrade_store
    from ..store import EventStore, StoreError, shard_files

    db = _dbs(dbs)
    with open_reader(db) as r:
        if run_id is not None:
            run_id = known_run(r, run_id, db_label(db))
    loaded = load(tasks) if tasks else None

    async def go() -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in shard_files(db):  # each shard keeps the grades of its own episodes
            async with EventStore(f) as store:
                for key, n in (await regrade_store(store, loaded, run_id)).items():
                    counts[key] = counts.get(key, 0) + n
        return counts

    try:
        counts = anyio.run(go)
    except StoreError as exc:
        raise fail(f"--db {exc}") from None
    console.print(f"regraded {counts['episodes']} episode(s): {counts['changed']} changed, "
                  f"{counts['skipped']} skipped (no task spec); {counts['failed']} failed "
                  "episode(s) have no grade and count as 0 in eval")


def _summary_table(title: str, groups: dict[str, Any], label: str) -> None:
    cols = [Column(label), Column("episodes", 0, True), Column("score", 0, True),
            Column("pass rate", 1, True), Column("completion", 2, True),
            Column("failed", 3, True), Column("safety viol.", 4, True),
            Column("pass@k", 5, True), Column("pass^k C(c,k)/C(n,k)", 6, True),
            Column("robustness", 7, True), Column("pass^k (c/n)^k", 8, True)]
    rows = []
    for name, s in groups.items():
        ci = s.get("ci95") or {}
        rows.append([escape(name), str(s["episodes"]), _with_ci(s["score"], ci.get("score")),
                     _with_ci(s["pass_rate"], ci.get("pass_rate")),
                     _with_ci(s["completion"], ci.get("completion")), failed_cell(s),
                     str(s["safety_violations"]), _with_ci(s["pass_at_k"], ci.get("pass_at_k")),
                     _with_ci(s["pass_hat_k"], ci.get("pass_hat_k")), f"{s['robustness']:.3f}",
                     num(s["pass_hat_k_power"])])
    print_table(title, cols, rows)


@app.command("eval", short_help="Scores per set, family and capability, with CIs.")
def eval_(
    dbs: Annotated[list[Path] | None, typer.Option("--db", help=DBS_HELP)] = None,
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
    price: Annotated[str | None, typer.Option(
        help="A simulation's run: " + PRICE_HELP, metavar="PROMPT[,COMPLETION]")] = None,
) -> None:
    """Report scores per set of tasks, workflow family and capability (table, JSON, PNG),
    with 95% bootstrap intervals (tasks resampled with their trials); for a simulation's
    run, its agents' figures, checks and model use (per agent, per arrival, per day)."""
    from ..outputs import atomic_file
    from ..sim.report import chart, summarize, task_sets
    from ..sim.report import compare as compare_runs

    named = _named_sets(sets or [])
    dbl = _dbs(dbs)
    db = db_label(dbl)
    reader = open_reader(dbl, checked=True)
    with reader:
        if episode is not None:
            _show_episode(reader, episode)
            return
        if compare is not None:
            compare = (known_run(reader, compare[0], db, "--compare"),
                       known_run(reader, compare[1], db, "--compare"))
            a, b = (reader.scheduled_episodes(r) for r in compare)
            for rid, rows in zip(compare, (a, b), strict=True):
                if not rows:
                    raise fail(f"--compare: run {rid!r} has no episodes in {db}")
            specs = {**reader.task_specs(compare[0]), **reader.task_specs(compare[1])}
            diff = compare_runs(a, b, task_sets(named, specs))
            _compare_table(compare, diff)
            dest = (out or db_folder(dbl)) / f"compare-{compare[0]}-{compare[1]}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(dest) as f:
                f.write(json.dumps(diff, indent=2))
            console.print(f"wrote {dest}")
            return
        rid = known_run(reader, run_id, db)
        rows = reader.scheduled_episodes(rid)
        membership = task_sets(named, reader.task_specs(rid))
        from ..runtime.simulate import simulation_report

        simulation = simulation_report(reader, rid, parse_price(price))
    if not rows:
        raise fail(f"run {rid!r} has no episodes in {db}")
    trials = min(sum(1 for r in rows if r["task_id"] == t) for t in {r["task_id"] for r in rows})
    if k is not None and not 1 <= k <= trials:
        raise fail(f"--k: expected 1..{trials} (the run has {trials} trial(s) per task), "
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
    console.print(f"overall: {overall_line(o)}", highlight=False)
    if simulation is not None:  # a simulation's run: its agents, response times and checks
        from .simulate import FIGURE_COLUMNS, _figure_rows, print_model

        print_table(f"{rid}: simulation {simulation['simulation']}, by agent",
                    [Column("agent"), *FIGURE_COLUMNS], _figure_rows(simulation["by_agent"]))
        print_model(simulation.get("model") or {}, f"{rid}: model use")
        for c in simulation["checks"]:
            mark = "[green]pass[/green]" if c["passed"] else "[red]FAIL[/red]"
            console.print(f"simulation check {c['id']}: {mark} ({c['detail']})")
    folder = out or db_folder(dbl)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_file(folder / f"eval-{rid}.json") as f:
        f.write(json.dumps({"run": rid, **summary, "episodes": rows,
                            **({"simulation": simulation} if simulation else {})}, indent=2))
    chart(summary, folder / f"eval-{rid}.png", rid)
    console.print(f"wrote {folder / f'eval-{rid}.json'} and {folder / f'eval-{rid}.png'}")


@app.command(short_help="Merge store shards into one store, verified by episode hashes.")
def merge(
    shards: Annotated[list[Path], typer.Argument(help="Shard files, or folders of *.db files",
                                                 show_default=False)],
    into: Annotated[Path, typer.Option(help="The store to merge into (created if missing)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON")] = False,
) -> None:
    """Merge store shards (one per Ray episode host or machine) into one store. Idempotent:
    an episode already there with the same events is skipped; the same episode with other
    events is refused, and the refused shard leaves the target as it was. Every copied
    episode's events hash is checked against the shard's record before and after."""
    from ..store import StoreError, merge_stores

    try:
        stats = merge_stores(shards, into)
    except StoreError as exc:
        raise fail(str(exc)) from None
    if as_json:
        sys.stdout.write(json.dumps(stats.as_dict(), indent=2) + "\n")
        return
    rate = stats.events_added / stats.seconds if stats.seconds else 0.0
    console.print(f"merged {stats.shards} shard(s) into {into}: {stats.episodes_added} "
                  f"episode(s) added, {stats.episodes_replaced} replaced (unfinished there), "
                  f"{stats.episodes_same} already there, {stats.episodes_kept} unfinished "
                  f"left out; {stats.events_added} events in {stats.seconds:.2f}s "
                  f"({rate:,.0f}/s); {stats.verified} episode hashes verified", highlight=False)


def _dbs(given: list[Path] | None) -> list[Path]:
    return given or [Path("runs/coworkenv.db")]


def _named_sets(values: list[str]) -> dict[str, list[Any]]:
    """``--set NAME=PATH`` options as named lists of tasks."""
    named: dict[str, list[Any]] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise fail(f"--set: expected NAME=PATH (e.g. benchmark=examples/benchmark), "
                       f"got {v!r}")
        named[name] = load([Path(path)])
    return named


def _with_ci(value: float | None, ci: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if not ci else f"{value:.3f} [{ci[0]:.2f},{ci[1]:.2f}]"


def _compare_table(runs: tuple[str, str], diff: dict[str, Any]) -> None:
    # (at 80 columns: the group, the difference and both scores; the pass rates go first)
    cols = [Column("group"), Column("tasks", 1, True), Column("score B-A", 0, True),
            Column("score A", 0, True), Column("score B", 0, True), Column("pass B-A", 2, True),
            Column("pass A", 3, True), Column("pass B", 3, True)]
    groups = [("(all)", diff["overall"])]
    groups += [(f"set {n}", d) for n, d in diff["by_set"].items()]
    groups += list(diff["by_family"].items())
    rows = []
    for name, d in groups:
        x, y = d["a"], d["b"]
        rows.append([escape(name), str(d.get("tasks", 0)),
                     _with_ci(d.get("score_delta"), d.get("score_delta_ci95")),
                     num(x["score"]) if x else "-", num(y["score"]) if y else "-",
                     _with_ci(d.get("pass_rate_delta"), d.get("pass_rate_delta_ci95")),
                     num(x["pass_rate"]) if x else "-", num(y["pass_rate"]) if y else "-"])
    print_table(f"{runs[1]} - {runs[0]}, paired by task (95% bootstrap intervals)", cols, rows)


def _show_episode(reader: Any, episode: str) -> None:
    from ..store import StoreError

    try:
        episode = known_episode(reader, episode)
        ep = reader.episode(episode)
    except StoreError as exc:
        raise fail(str(exc)) from None
    if ep.task_id == "@simulation":  # a simulation's own log: its figures and checks
        from ..runtime.simulate import simulation_report
        from .simulate import FIGURE_COLUMNS, _figure_rows

        sim = simulation_report(reader, ep.run_id)
        assert sim is not None
        console.print(f"[bold]{escape(episode)}[/bold]: the log of simulation "
                      f"{escape(str(sim['simulation']))} ({sim['arrivals']} arrivals, "
                      f"{sim['events']} events); each arrival is an episode of run "
                      f"{escape(ep.run_id)}")
        print_table("by agent", [Column("agent"), *FIGURE_COLUMNS],
                    _figure_rows(sim["by_agent"]))
        for c in sim["checks"]:
            mark = "pass" if c["passed"] else "[red]FAIL[/red]"
            console.print(f"simulation check {escape(c['id'])}: {mark} ({escape(c['detail'])})")
        return
    g = reader.grade(episode)
    if g is None:
        raise fail(f"episode {episode!r} has no grade ({ep.status}: {ep.failure})")
    console.print(f"[bold]{escape(episode)}[/bold] task {escape(ep.task_id)} ({ep.family}), "
                  f"{ep.termination}: "
                  f"completion {g['completion']:.3f}, safety {g['safety']:.3f}, robustness "
                  f"{g['robustness']:.3f}, score {g['score']:.3f}, "
                  f"{'passed' if g['passed'] else 'failed'}")
    cols = [Column("item"), Column("result"), Column("detail"), Column("kind", 1),
            Column("event seqs", 2), Column("weight/value", 3, True)]
    rows = [[escape(c["check_id"]), "pass" if c["passed"] else "[red]fail[/red]",
             escape(c["detail"][:70]), escape(c["kind"]), ", ".join(map(str, c["evidence"])),
             f"{c['weight']:g}"] for c in reader.check_results(episode)]
    rows += [[escape(r["id"]), "pass" if r["passed"] else "[red]VIOLATED[/red]",
              escape(r["detail"][:70]), f"safety:{escape(r['kind'])}",
              ", ".join(map(str, r["evidence"])), f"{r['value']:g}"]
             for r in g["detail"].get("rules", [])]
    rob = g["detail"].get("robustness", {})
    rows.append(["robustness", f"{rob.get('failed_calls', 0)} failed / {rob.get('calls', 0)} "
                 "calls", escape(f"recovered {rob.get('recovered_tools', [])} of "
                                 f"{rob.get('failed_tools', [])}"), "robustness",
                 ", ".join(map(str, rob.get("evidence", []))), f"{rob.get('value', 1):g}"])
    print_table("evidence", cols, rows)


@app.command(short_help="Serve the read-only web viewer of a store.")
def view(
    dbs: Annotated[list[Path] | None, typer.Option("--db", help=DBS_HELP)] = None,
    port: Annotated[int, typer.Option(help="Port (0: any free port)")] = 8765,
    host: Annotated[str, typer.Option(help="Address to bind; keep 127.0.0.1 unless you mean "
                                      "to serve other hosts")] = "127.0.0.1",
) -> None:
    """Serve a local, read-only web viewer of the runs and episodes in a database."""
    from ..store import StoreError
    from ..viewer import ViewerServer

    db = _dbs(dbs)
    try:
        server = ViewerServer(db[0] if len(db) == 1 else db, host, port)
    except StoreError as exc:  # (its message starts with the path)
        raise fail(f"--db {exc}") from None
    except OSError as exc:  # the address: in use, or not this host's
        raise unbound(host, port, exc) from None
    h, p = str(server.server_address[0]), server.server_address[1]
    console.print(f"coworkenv viewer on http://{h}:{p}/ (read-only {db_label(db)}); "
                  "Ctrl-C stops it",
                  highlight=False)
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
