"""What is built in, to look up: `companies` (who works where) and `tasks` (by family)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ._common import app, console, fail, load


@app.command(short_help="List the companies tasks can name; show one's people, teams, "
                        "calendars and documents.")
def companies(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="A company to show in "
                                               "full (default: list them all)")] = None,
    folders: Annotated[list[Path] | None, typer.Option(
        "--dir", metavar="DIR", help="A folder of company files (NAME.yaml), or a task folder "
        "with a companies/ folder (repeatable; ./companies is always looked in)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of tables")] = False,
) -> None:
    """The companies a task or simulation can name with `company: NAME`: those of --dir and
    ./companies, then the built-in ones (acme: the built-in tasks' company) and the
    benchmark's (lumen), with their people, teams and documents counted. With NAME: its people
    (id, name, role, team, manager, time zone), teams, channels, calendars and documents; the
    first file of that name in the order listed. Every field of a company file:
    docs/reference/company-file.md (`coworkenv schema company`)."""
    from ..sim import TaskFileError
    from ..sim.companies import find_companies

    for f in folders or []:
        if not f.is_dir():
            raise fail(f"--dir {f}: no such folder")
    local = [Path("companies")] if Path("companies").is_dir() else []
    found = find_companies([*(folders or []), *local])
    try:
        if name is None:
            rows = [_summary(c.name, c.source, c.path, c.seed()) for c in found]
        else:
            company = next((c for c in found if c.name == name), None)
            if company is None:
                raise fail(f"no company {name!r} (known: "
                           f"{', '.join(sorted({c.name for c in found}))})")
            detail = _detail(company.name, company.source, company.path, company.seed())
    except TaskFileError as exc:
        raise fail(str(exc)) from None
    if name is None:
        if as_json:
            sys.stdout.write(json.dumps(rows, indent=2) + "\n")
            return
        table = Table("company", "people", "teams", "channels", "documents",
                      "calendar events", "from", "file")
        for r in rows:
            table.add_row(r["name"], str(r["people"]), str(r["teams"]), str(r["channels"]),
                          str(r["documents"]), str(r["calendar_events"]), r["source"],
                          r["path"])
        console.print(table)
        console.print("`coworkenv companies NAME` for one's people, teams, calendars and "
                      "documents", highlight=False)
        return
    if as_json:
        sys.stdout.write(json.dumps(detail, indent=2) + "\n")
        return
    _print_detail(detail)


def _summary(name: str, source: str, path: Path, seed: Any) -> dict[str, Any]:
    return {"name": name, "source": source, "path": str(path), "people": len(seed.people),
            "teams": len({p.team for p in seed.people if p.team}),
            "channels": len(seed.channels), "documents": len(seed.docs),
            "calendar_events": len(seed.calendar)}


def _detail(name: str, source: str, path: Path, seed: Any) -> dict[str, Any]:
    teams: dict[str, list[str]] = {}
    for p in seed.people:
        teams.setdefault(p.team or "(none)", []).append(p.id)
    events: Counter[str] = Counter()
    for e in seed.calendar:
        for who in {e.organizer, *e.attendees}:
            events[who] += 1
    return {
        "name": name, "source": source, "path": str(path),
        "people": [p.model_dump(mode="json") for p in seed.people],
        "teams": teams,
        "channels": [{"id": c.id, "name": c.name, "members": c.members,
                      "internal_only": c.internal_only} for c in seed.channels],
        "groups": [{"id": g.id, "email": g.email, "members": g.members} for g in seed.groups],
        "queues": [{"id": q.id, "name": q.name, "members": q.members} for q in seed.queues],
        "calendars": {p.id: events[p.id] for p in seed.people},
        "calendar_events": [{"id": e.id, "title": e.title, "organizer": e.organizer,
                             "start": e.start, "end": e.end,
                             "attendees": sorted(e.attendees)} for e in seed.calendar],
        "documents": [{"id": d.id, "title": d.title, "owner": d.owner,
                       "confidentiality": d.confidentiality} for d in seed.docs],
    }


def _print_detail(d: dict[str, Any]) -> None:
    console.print(f"company {d['name']} ({d['source']}: {d['path']})", highlight=False)
    people = Table("id", "name", "role", "team", "manager", "timezone", "events",
                   title=f"people ({len(d['people'])})")
    for p in d["people"]:
        people.add_row(p["id"], p["name"], p["role"] + (" (external)" if p["external"] else ""),
                       p["team"], p["manager"] or "", p["timezone"], str(d["calendars"][p["id"]]))
    console.print(people)
    teams = Table("team", "people", title=f"teams ({len(d['teams'])})")
    for team, ids in d["teams"].items():
        teams.add_row(team, ", ".join(ids))
    console.print(teams)
    if d["channels"]:
        channels = Table("channel", "members", "internal only",
                         title=f"channels ({len(d['channels'])})")
        for c in d["channels"]:
            channels.add_row(c["id"], ", ".join(c["members"]), "yes" if c["internal_only"] else "no")
        console.print(channels)
    for key, title in (("groups", "groups"), ("queues", "ticket queues")):
        if d[key]:
            console.print(f"{title}: " + "; ".join(f"{escape(g['id'])} ({', '.join(g['members'])})"
                                                    for g in d[key]), highlight=False)
    if d["calendar_events"]:
        cal = Table("id", "title", "organizer", "start", "end", "attendees",
                    title=f"calendar events ({len(d['calendar_events'])})")
        for e in d["calendar_events"]:
            cal.add_row(e["id"], e["title"], e["organizer"], e["start"], e["end"],
                        ", ".join(e["attendees"]))
        console.print(cal)
    else:
        console.print("calendars: no events (every calendar starts empty; a task's seed adds "
                      "its own)", highlight=False)
    if d["documents"]:
        docs = Table("id", "title", "owner", "confidentiality",
                     title=f"documents ({len(d['documents'])})")
        for doc in d["documents"]:
            docs.add_row(doc["id"], doc["title"], doc["owner"], doc["confidentiality"])
        console.print(docs)
    else:
        console.print("documents: none (a task's seed adds its own)", highlight=False)


@app.command(short_help="List the built-in tasks by family (or those of task files).")
def tasks(
    family: Annotated[str | None, typer.Option("--family", metavar="F", help="Only this "
                                               "family's tasks")] = None,
    paths: Annotated[list[Path] | None, typer.Option(
        "--tasks", metavar="PATH...", help="Task files or folders to list instead of the "
        "built-in tasks")] = None,
    bench: Annotated[bool, typer.Option("--benchmark", help="The independent benchmark's "
                                        "tasks (held out of training) instead of the "
                                        "built-in tasks")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table")] = False,
) -> None:
    """The built-in tasks (what `coworkenv demo` runs; examples/tasks), grouped by family:
    family, count, each task's id and the first line of its instruction. --family F lists
    one family; --benchmark the benchmark's tasks (examples/benchmark); --tasks those of task
    files. Run some with `coworkenv run --tasks examples/tasks --families F` or `--only ID`."""
    from ..sim import builtin_tasks
    from ..sim.loader import BENCHMARK

    if bench and paths:
        raise fail("--benchmark: give one of --benchmark and --tasks")
    where = ("the benchmark" if bench else ", ".join(map(str, paths)) if paths
             else "the built-in tasks")
    loaded = load([BENCHMARK]) if bench else load(list(paths)) if paths else builtin_tasks()
    families: dict[str, list[Any]] = {}
    for t in loaded:
        families.setdefault(t.family, []).append(t)
    if family is not None:
        if family not in families:
            raise fail(f"--family: no family {family!r} in {where} (families: "
                       f"{', '.join(sorted(families))})")
        families = {family: families[family]}
    if as_json:
        sys.stdout.write(json.dumps([
            {"family": f, "count": len(ts),
             "tasks": [{"id": t.id, "instruction": t.instruction} for t in ts]}
            for f, ts in sorted(families.items())], indent=2) + "\n")
        return
    table = Table()  # (families and ids whole; an instruction cut to the room left)
    shown = [t for ts in families.values() for t in ts]
    widths = [max(6, *map(len, families)), 5, max(len(t.id) for t in shown)]
    for head, width in zip(("family", "tasks", "id"), widths, strict=True):
        table.add_column(head, no_wrap=True, min_width=width)
    table.add_column("instruction (one line)", no_wrap=True, overflow="ellipsis",
                     max_width=max(20, console.width - sum(w + 3 for w in widths) - 4))
    for f, ts in sorted(families.items()):
        for i, t in enumerate(ts):
            table.add_row(f if i == 0 else "", str(len(ts)) if i == 0 else "", t.id,
                          " ".join(t.instruction.split()), end_section=i == len(ts) - 1)
    console.print(table)
    console.print(f"{len(shown)} task(s) in {len(families)} famil"
                  f"{'y' if len(families) == 1 else 'ies'} of {where}; --json for the whole "
                  "instructions", highlight=False)
