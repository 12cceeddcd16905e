"""Simulation benchmark: the Northwind week (examples/simulations/week.yaml) with scripted
agents (the oracle) on one core, as JSON.

- ``week``: the median over ``--repeats`` runs of the whole week (5 working days, about 330
  arrivals, 3 agents, 29 people, an outage), recorded in a SQLite file: wall seconds,
  simulated working days per wall second, events per second (the simulation's log) and
  arrivals per second. Target: the week in under 30 s. Baseline, in the same timed loop and
  alternating with it: the same arrivals (their task specs, as the simulation recorded them)
  run as independent episodes by the batch runner (``coworkenv run``, concurrency 64): what
  running one shared company costs over running its requests apart.
- ``memory``: a longer run (``--memory-days`` working days) under tracemalloc, sampled every
  simulated working hour: the heap, the log's packed bytes and the workspace's size (its
  JSON) against the number of arrivals graded so far; the fitted growth per graded arrival
  of each, over the run's second half. What the kernel keeps of a graded arrival (its
  summary row) is the heap's growth beyond the log and the workspace.
- ``many``: ``--many`` one-day simulations at once in one event loop (each its own store
  file, as one writer per file wants), against the same simulations one after another in
  the same timed loop: simulations per second, and the ratio.
- ``seeds``: ``coworkenv simulate --seeds N`` (N one-day simulations, each seed its own draw,
  graded and recorded, merged into one store) for each N of ``--seeds-n``, over one process
  and over every core, the two in turn ``--repeats`` times: medians of simulations and
  arrivals per second, and the ratio of each pair and their median (target: 16 over 2
  processes at 1.8 times one, 200 arrivals/s or more on 2 cores).
- ``large`` (run only when ``--only`` names it): a generated company of ``--large-people``
  people (Northwind's 29, whom the templates name, and the rest drawn: names, teams, roles,
  managers, time zones; team channels and lists, documents, a ticket backlog, mail and
  meetings in proportion) with ``--large-agents`` oracle seats (a fifth executive
  assistants, three tenths finance, the rest on the IT queue) and about 20 requests a working
  day per agent (everyone outside IT asks IT, a third of them finance, the directors their
  assistants; the week's events, and a holiday, a hire, a departure or a reorganisation every
  few days), graded and recorded, run for each of ``--large-days`` working days, each in a
  process of its own, sampled every simulated hour (the store's queue written first: the
  heap without it); ``--large-heap``: tracemalloc's heap (its peak from the first working
  hour on, the load's apart) or the resident memory, untraced. Arrivals, wall seconds,
  arrivals per second, the peak, the peak per arrival and beyond the start per arrival, the
  fitted growth per graded arrival over the second half, the store's bytes per arrival; then
  the ratio of the longest run's peak per arrival to the shortest's (target: 1.0 or less:
  memory per arrival flat).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.runtime import RunConfig, run
from coworkenv.runtime.simulate import Scenario, SimulationConfig, asimulate, simulate
from coworkenv.sim import Task
from coworkenv.store import Reader

SIMS = Path(__file__).resolve().parents[1] / "examples" / "simulations"
SECTIONS = ("week", "memory", "many", "seeds")
"""The sections run unless ``--only`` names others."""


def variant(folder: Path, **clock: Any) -> Path:
    """The week with other clock settings, written beside a copy of its company."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "companies").exists():
        shutil.copytree(SIMS / "companies", folder / "companies")
    raw = yaml.safe_load((SIMS / "week.yaml").read_text())
    raw["clock"].update(clock)
    days = int(raw["clock"].get("days", 5))

    def inside(t: str) -> bool:  # (a shorter clock keeps what falls inside it)
        return not t.startswith("d") or int(t[1:].split()[0]) <= days
    for stream in raw["workload"]:
        if "at" in stream:
            stream["at"] = [t for t in stream["at"] if inside(t)]
    raw["workload"] = [s for s in raw["workload"] if s.get("at", True)]
    raw["events"] = [e for e in raw.get("events", [])
                     if all(inside(str(e.get(k, ""))) for k in ("from", "to", "at"))]
    raw["tasks"] = [str(SIMS / t) for t in raw["tasks"]]
    out = folder / f"week-{'-'.join(f'{k}{v}' for k, v in clock.items()) or 'same'}.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out


def week(tmp: Path, repeats: int) -> dict[str, Any]:
    sim_runs: list[dict[str, Any]] = []
    batch_runs: list[float] = []
    specs: list[Task] = []
    for i in range(repeats):
        db = tmp / f"week-{i}.db"
        t0 = time.perf_counter()
        r = simulate(SimulationConfig(SIMS / "week.yaml", agent="oracle", db=db,
                                      run_id=f"w{i}"))
        wall = time.perf_counter() - t0
        sim_runs.append({"wall": wall, "events": r.event_count, "arrivals": len(r.outcomes),
                         "passed": sum(o.passed for o in r.outcomes),
                         "days": 5, "hash": r.events_hash})
        if not specs:
            with Reader(db) as rd:
                specs = [Task.model_validate_json(s) for s in rd.task_specs(f"w{i}").values()]
        t0 = time.perf_counter()
        b = run(RunConfig(specs, agent="oracle", db=tmp / f"batch-{i}.db", run_id=f"b{i}",
                          concurrency=64))
        batch_runs.append(time.perf_counter() - t0)
        assert len(b.episodes) == len(specs)
    wall = statistics.median(x["wall"] for x in sim_runs)
    first = sim_runs[0]
    batch = statistics.median(batch_runs)
    return {"wall_s": round(wall, 3), "arrivals": first["arrivals"], "passed": first["passed"],
            "events": first["events"], "working_days_per_s": round(5 / wall, 2),
            "events_per_s": round(first["events"] / wall),
            "arrivals_per_s": round(first["arrivals"] / wall, 1),
            "same_hash_every_run": len({x["hash"] for x in sim_runs}) == 1,
            "target_under_30_s": wall < 30,
            "batch_same_arrivals_wall_s": round(batch, 3),
            "ratio_simulation_vs_batch": round(wall / batch, 3),
            "walls_s": [round(x["wall"], 3) for x in sim_runs],
            "batch_walls_s": [round(x, 3) for x in batch_runs]}


def growth(samples: list[dict[str, Any]], key: str) -> float:
    """The fitted growth of ``key`` per graded arrival over the run's second half (least
    squares over the samples taken once half the arrivals were graded)."""
    half = [s for s in samples if s["graded"] >= samples[-1]["graded"] / 2]
    xs = [s["graded"] for s in half]
    ys = [s[key] for s in half]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def memory(tmp: Path, days: int) -> dict[str, Any]:
    samples: list[dict[str, int]] = []

    async def sample(sim: Scenario) -> None:
        k = sim._k

        def take() -> None:
            current, _ = tracemalloc.get_traced_memory()
            samples.append({"graded": len(sim.outcomes), "heap": current,
                            "log": k._log.nbytes(),
                            "workspace": len(json.dumps(k.state.to_json())),
                            "live": len(k.live), "events": len(k._log)})
        sim.every(60, take, start="d1 09:00")

    path = variant(tmp / "memory", days=days)
    tracemalloc.start()
    try:
        r = simulate(SimulationConfig(path, db=tmp / "memory.db", script=sample))
    finally:
        tracemalloc.stop()
    heap, log, ws = (growth(samples, k) for k in ("heap", "log", "workspace"))
    return {"working_days": days, "arrivals": len(r.outcomes), "samples": len(samples),
            "heap_bytes_per_graded_arrival": round(heap),
            "log_packed_bytes_per_graded_arrival": round(log),
            "workspace_json_bytes_per_graded_arrival": round(ws),
            "heap_beyond_log_and_workspace_per_arrival": round(heap - log - ws),
            "heap_first_last_mb": [round(samples[0]["heap"] / 2**20, 2),
                                   round(samples[-1]["heap"] / 2**20, 2)],
            "largest_open_arrivals": max(s["live"] for s in samples)}


def many(tmp: Path, n: int) -> dict[str, Any]:
    path = variant(tmp / "many", days=1)
    folder = tmp / "many-db"
    folder.mkdir(exist_ok=True)

    async def together(tag: str) -> list[Any]:
        out: list[Any] = [None] * n

        async def one(i: int) -> None:
            out[i] = await asimulate(SimulationConfig(path, db=folder / f"{tag}-{i}.db",
                                                      run_id=f"{tag}{i}"))
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        return out

    async def apart(tag: str) -> list[Any]:
        return [await asimulate(SimulationConfig(path, db=folder / f"{tag}-{i}.db",
                                                 run_id=f"{tag}{i}")) for i in range(n)]

    t0 = time.perf_counter()
    a = anyio.run(together, "t")
    at_once = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = anyio.run(apart, "s")
    sequential = time.perf_counter() - t0
    same = [x.events_hash for x in a] == [x.events_hash for x in b]
    return {"simulations": n, "arrivals_each": len(a[0].outcomes),
            "at_once_wall_s": round(at_once, 3), "one_after_another_wall_s": round(sequential, 3),
            "simulations_per_s_at_once": round(n / at_once, 2),
            "ratio_at_once_vs_sequential": round(at_once / sequential, 3),
            "same_hashes": same}


def seeds(tmp: Path, ns: list[int], repeats: int = 3) -> dict[str, Any]:
    import os

    from coworkenv.runtime.simbatch import simulate_seeds

    cores = os.cpu_count() or 1
    out: dict[str, Any] = {"cores": cores, "repeats": repeats, "runs": []}
    for n in ns:
        row: dict[str, Any] = {"simulations": n}
        walls: dict[int, list[float]] = {1: [], cores: []}
        hashes: dict[int, list[str]] = {}
        arrivals = 0
        for rep in range(repeats):  # (one process, then every core, in turn: pairs)
            for procs in (1, cores):
                db = tmp / f"seeds-{n}-{procs}-{rep}.db"
                batch = simulate_seeds(SimulationConfig(SIMS / "week.yaml", days=1, db=db,
                                                        run_id=f"s{n}p{procs}"),
                                       range(7, 7 + n), processes=procs)
                walls[procs].append(batch.wall_seconds)
                hashes[procs] = [r.events_hash for r in batch.runs]
                arrivals = batch.arrivals
                db.unlink(missing_ok=True)
        for procs in (1, cores):
            wall = statistics.median(walls[procs])
            row[f"p{procs}"] = {"wall_s_median": round(wall, 3), "arrivals": arrivals,
                                "simulations_per_s": round(n / wall, 2),
                                "arrivals_per_s": round(arrivals / wall, 1)}
        pairs = [a / b for a, b in zip(walls[1], walls[cores], strict=True) if b]
        row["speedup_pairs"] = [round(x, 3) for x in pairs]
        row["speedup_median"] = round(statistics.median(pairs), 3) if pairs else None
        row["same_hashes"] = hashes[1] == hashes[cores]
        out["runs"].append(row)
    return out


# the large company ------------------------------------------------------------------------
FIRST = (
    "Aiden", "Alma", "Amir", "Ana", "Arjun", "Aya", "Bruno", "Carla", "Chen", "Dana", "Diego",
    "Elif", "Emma", "Erik", "Farah", "Felix", "Gabriel", "Hana", "Hiro", "Ines", "Isaac",
    "Jana", "Jonas", "Kofi", "Laila", "Lars", "Leila", "Lucas", "Mara", "Mateo", "Mei",
    "Nadia", "Nils", "Olga", "Omari", "Paula", "Pedro", "Quinn", "Rafael", "Rosa", "Sami",
    "Sara", "Sofia", "Tariq", "Tess", "Theo", "Uma", "Vera", "Victor", "Wen", "Xavier", "Yara",
    "Yusuf", "Zara", "Zeno")
LAST = (
    "Abbott", "Alvarez", "Bauer", "Becker", "Castro", "Costa", "Dahl", "Das", "Eriksen",
    "Evans", "Ferreira", "Fischer", "Garcia", "Greene", "Hansen", "Hill", "Ito", "Jensen",
    "Kaur", "Keller", "Khan", "Kim", "Larsen", "Lopez", "Meyer", "Moreau", "Murphy",
    "Nakamura", "Nguyen", "Novak", "Okoro", "Olsen", "Perez", "Petrov", "Quinlan", "Reyes",
    "Rossi", "Sato", "Schulz", "Silva", "Singh", "Smith", "Sousa", "Tan", "Torres", "Ueda",
    "Vargas", "Walsh", "Weber", "Wong", "Yilmaz", "Young", "Zhang", "Zimmer")
TEAMS: dict[str, tuple[str, float, list[str], list[str]]] = {
    # team: (its Northwind head, share of the people drawn, roles, time zones)
    "engineering": ("priya", 0.28, ["Software Engineer", "Senior Software Engineer",
                                    "QA Engineer", "Site Reliability Engineer", "Data Engineer"],
                    ["America/Los_Angeles", "America/New_York", "Europe/Berlin"]),
    "sales": ("omar", 0.14, ["Account Executive", "Sales Development Rep",
                             "Solutions Engineer"],
              ["America/Chicago", "America/New_York", "Europe/London"]),
    "support": ("fay", 0.13, ["Support Agent", "Support Engineer"],
                ["America/New_York", "Europe/Berlin", "Asia/Singapore"]),
    "marketing": ("zoe", 0.08, ["Marketing Specialist", "Content Writer", "Growth Analyst"],
                  ["America/New_York", "Europe/London"]),
    "product": ("marcus", 0.06, ["Product Manager", "Product Analyst"],
                ["America/New_York", "America/Los_Angeles"]),
    "design": ("priya", 0.05, ["Designer", "UX Researcher"],
               ["America/New_York", "Europe/Paris"]),
    "ops": ("maya", 0.07, ["Operations Analyst", "Office Coordinator", "Facilities Manager"],
            ["America/New_York", "America/Chicago"]),
    "finance": ("leo", 0.06, ["Accountant", "Financial Analyst", "Accounts Payable"],
                ["America/New_York", "Europe/London"]),
    "people": ("nina", 0.05, ["Recruiter", "People Partner", "Payroll Specialist"],
               ["Europe/London", "America/New_York"]),
    "it": ("sam", 0.05, ["IT Engineer", "Systems Administrator", "Network Engineer"],
           ["America/New_York", "Asia/Kolkata"]),
    "legal": ("jules", 0.03, ["Legal Counsel", "Paralegal", "Compliance Analyst"],
              ["Europe/Paris", "America/New_York"]),
}
AGENT_KINDS = {  # seat id prefix: (person of the week's seat, role, team, manager, title)
    "ea": ("assistant", "executive-assistant", "exec", "elena", "AI executive assistant"),
    "it": ("helpdesk", "it-helpdesk", "it", "sam", "AI IT helpdesk agent"),
    "fin": ("finops", "finance-ops", "finance", "leo", "AI finance operations agent"),
}
PER_AGENT_DAY = {"it": 24.0, "ea": 14.0, "fin": 16.0}
"""Requests per working day per agent of each kind (the week has 22 per agent a day)."""


def large_company(people: int, agents: int, days: int, folder: Path) -> Path:
    """Write ``companies/northwind-large.yaml`` and ``large.yaml`` into ``folder``: Northwind
    grown to ``people`` people with ``agents`` oracle seats over ``days`` working days (see the
    module's docstring); the simulation file's path."""
    rng = random.Random(57)
    base = yaml.safe_load((SIMS / "companies" / "northwind.yaml").read_text())
    week = yaml.safe_load((SIMS / "week.yaml").read_text())
    split = {"ea": max(1, round(agents * 0.2)), "fin": max(1, round(agents * 0.3))}
    split["it"] = agents - split["ea"] - split["fin"]
    drawn = people - len(base["people"]) - (agents - 3)
    if days < 5:  # (the week's events, kept, fall on its days 3 to 5)
        raise SystemExit(f"--large-days: the longest run must have 5 working days or more "
                         f"(got {days})")
    if split["it"] < 1 or drawn < 2 * len(TEAMS):
        raise SystemExit(f"--large-people {people} --large-agents {agents}: give at least 3 "
                         f"agents and {len(base['people']) + agents - 3 + 2 * len(TEAMS)} "
                         "people")
    rows: list[dict[str, Any]] = list(base["people"])
    taken = {p["id"] for p in rows}
    taken_before = set(taken)  # (Northwind's own: the week's events are theirs)
    seats: list[dict[str, Any]] = []
    agent_people: dict[str, list[str]] = {}
    for kind, n in split.items():
        person, role, team, manager, title = AGENT_KINDS[kind]
        for i in range(1, n + 1):
            pid = person if i == 1 else f"{person}-{i}"
            if i > 1:
                rows.append({"id": pid, "name": f"{title.removeprefix('AI ').title()} {i}",
                             "email": f"{pid}@northwind.test", "role": title, "team": team,
                             "manager": manager, "timezone": "America/New_York"})
            agent_people.setdefault(kind, []).append(pid)
            seats.append({"id": kind if i == 1 else f"{kind}{i}", "person": pid, "role": role,
                          "policy": "oracle", **({"queues": ["it"]} if kind == "it" else {})})

    def name() -> tuple[str, str]:
        while True:
            first, last = rng.choice(FIRST), rng.choice(LAST)
            pid = f"{first}-{last}".lower()
            k = 2
            while pid in taken:
                pid, k = f"{first}-{last}-{k}".lower(), k + 1
            taken.add(pid)
            return pid, f"{first} {last}"

    members: dict[str, list[str]] = {t: [] for t in TEAMS}
    directors: list[str] = []
    shares = sum(v[1] for v in TEAMS.values())
    counts = {t: max(2, int(drawn * v[1] / shares)) for t, v in TEAMS.items()}
    counts["engineering"] += drawn - sum(counts.values())
    for team, (head, _, roles, zones) in TEAMS.items():
        lead = director = ""
        for i in range(counts[team]):
            pid, full = name()
            if i == 0:
                role, manager, director = f"Director, {team.title()}", head, pid
                directors.append(pid)
            elif i % 8 == 1:
                role, manager, lead = f"Lead {roles[0]}", director, pid
            else:
                role, manager = rng.choice(roles), lead
            rows.append({"id": pid, "name": full, "email": f"{pid}@northwind.test",
                         "role": role, "team": team, "manager": manager,
                         "timezone": rng.choice(zones)})
            members[team].append(pid)
    everyone = [p["id"] for p in rows]
    for p in base["people"]:
        members.setdefault(p["team"], []).append(p["id"])
    channels = [{**c, "members": sorted(set(c["members"]) | set(
        agent_people["it"] if c["id"] == "it-help" else agent_people["fin"]
        if c["id"] == "finance" else everyone if c["id"] == "general" else ()))}
        for c in base["channels"]]
    channels[1]["members"] = sorted(set(channels[1]["members"]) | set(members["it"]))
    channels[2]["members"] = sorted(set(channels[2]["members"]) | set(members["finance"]))
    channels += [{"id": f"team-{t}", "name": f"team-{t}", "members": sorted(m)}
                 for t, m in members.items() if len(m) > 1]
    groups = [{"id": f"all-{t}", "name": f"All {t}", "email": f"all-{t}@northwind.test",
               "members": sorted(m)} for t, m in members.items() if m]
    docs = [dict(d) for d in base["docs"]]
    docs[0]["permissions"] = {**docs[0]["permissions"], **dict.fromkeys(
        agent_people["fin"] + agent_people["ea"], "view")}
    docs[1]["permissions"] = {**docs[1]["permissions"],
                              **dict.fromkeys(agent_people["fin"], "view")}
    kinds = ["handbook", "quarterly plan", "runbook", "meeting notes", "project brief"]
    for t, m in members.items():
        for i in range(max(1, len(m) // 10)):
            owner = m[min(i, len(m) - 1)]
            what = kinds[i % len(kinds)]
            docs.append({"id": f"doc-{t}-{i + 1}", "title": f"{t.title()} {what} {i + 1}",
                         "owner": owner, "content": f"The {t} team's {what}: owners, dates, "
                         f"open questions and decisions, revision {i + 1}.",
                         "confidentiality": "internal", "status": "final",
                         "permissions": dict.fromkeys(rng.sample(m, min(5, len(m))), "view")})
    start = week["clock"]["start"]
    staff = [p for p in everyone if p not in {x for v in agent_people.values() for x in v}]
    tickets = [{"id": f"HIST-{i + 1:04d}", "title": f"Old request {i + 1}: "
                f"{rng.choice(['laptop', 'VPN', 'printer', 'access', 'monitor', 'badge'])}",
                "description": "Closed before the simulation began.",
                "reporter": rng.choice(staff), "assignee": rng.choice(members["it"]),
                "status": rng.choice(["resolved", "closed", "closed", "open"]),
                "priority": rng.choice(["low", "medium", "medium", "high"]),
                "created_at": "2026-02-02T15:00:00Z"} for i in range(people // 5)]
    emails = [{"id": f"MAIL-{i + 1:04d}", "sender": a, "to": [b],
               "subject": f"Re: {rng.choice(kinds)}", "body": "Thanks, noted.",
               "sent_at": "2026-02-27T16:00:00Z"}
              for i, (a, b) in enumerate(zip(rng.sample(staff, people // 4),
                                             rng.sample(staff, people // 4), strict=True))
              if a != b]
    calendar = []
    for t, m in members.items():
        for i in range(0, len(m), 8):
            group = m[i:i + 8]
            calendar.append({"id": f"sync-{t}-{i // 8 + 1}", "title": f"{t.title()} sync",
                             "organizer": group[0], "start": "2026-03-03T15:00:00Z",
                             "end": "2026-03-03T15:30:00Z", "timezone": "America/New_York",
                             "attendees": dict.fromkeys(group, "accepted")})
    company = {"people": rows, "channels": channels, "groups": groups, "docs": docs,
               "tickets": tickets, "emails": emails, "calendar": calendar}
    (folder / "companies").mkdir(parents=True, exist_ok=True)
    (folder / "companies" / "northwind-large.yaml").write_text(yaml.safe_dump(company))

    # the workload: everyone asks IT; a third of the rest asks finance; directors, assistants
    named = {"ivy", "raj", "sam", "maya", "zoe", "elena", "marcus"}  # (the templates' cast)
    askers = [p for p in staff if p not in members["it"] and p not in named]
    fin_askers = [p for i, p in enumerate(askers) if i % 3 == 0 and p not in members["finance"]]
    ea_askers = ["elena", "marcus", *directors]
    rate = {k: PER_AGENT_DAY[k] * split[k] / 8 / len(a)
            for k, a in (("it", askers), ("fin", fin_askers), ("ea", ea_askers))}
    workload = [
        {"tasks": ["it-access", "it-password"], "to": {"queue": "it"},
         "poisson": {"per_hour": rate["it"]}, "requesters": askers},
        {"task": "it-vpn", "to": "it",
         "at": [f"d{d} {'10:00' if d % 4 == 1 else '14:00'}" for d in range(1, days + 1, 2)]},
        {"tasks": ["ea-meeting", "ea-ask-budget", "ea-share"],
         "to": {"role": "executive-assistant"}, "poisson": {"per_hour": rate["ea"]},
         "requesters": ea_askers},
        {"tasks": ["fin-invoice", "fin-per-diem"], "to": {"role": "finance-ops"},
         "poisson": {"per_hour": rate["fin"]}, "requesters": fin_askers}]
    # the world: the week's events, then one like them every few days
    events: list[dict[str, Any]] = [e for e in week["events"] if e["kind"] != "outage"]
    events += [{**week["events"][0], "from": f"d{d} 10:00", "to": f"d{d} 11:00"}
               for d in range(3, days + 1, 20)]
    pool = [p for p in staff if p not in taken_before and p not in directors]
    rng.shuffle(pool)
    for d in range(6, days - 3, 2):  # a week off, every other day someone
        events.append({"kind": "out_of_office", "person": pool.pop(), "from": f"d{d} 09:00",
                       "to": f"d{d + 4} 17:00", "auto_reply": "On holiday; back next week."})
    for i, d in enumerate(range(6, days + 1, 3)):  # a new hire every third day
        team = list(TEAMS)[i % len(TEAMS)]
        pid = f"hire-{i + 1:03d}"
        events.append({"kind": "join", "at": f"d{d} 09:00", "person": {
            "id": pid, "name": f"New Hire {i + 1}", "email": f"{pid}@northwind.test",
            "role": TEAMS[team][2][0], "team": team, "manager": directors[i % len(directors)],
            "timezone": TEAMS[team][3][0]}})
    for d in range(10, days + 1, 10):  # a reorganisation every tenth day
        events.append({"kind": "reorg", "at": f"d{d} 09:00", "changes": {
            pool.pop(): {"team": "product", "manager": directors[4]} for _ in range(3)}})
    for d in range(7, days + 1, 7):  # someone leaves every seventh day
        events.append({"kind": "leave", "at": f"d{d} 12:00", "person": pool.pop()})
    sim = {"kind": "simulation", "id": f"northwind-{people}",
           "description": f"{people} people, {agents} oracle agents, {days} working days",
           "company": "northwind-large",
           "clock": {"start": start, "days": days, "hours": ["09:00", "17:00"]},
           "seed": 7, "tasks": [str(SIMS / "northwind-requests.yaml")], "roster": seats,
           "people": week["people"], "workload": workload, "events": events,
           "safety": week["safety"], "checks": week["checks"]}
    out = folder / "large.yaml"
    out.write_text(yaml.safe_dump(sim, sort_keys=False))
    return out


def large_one(path: Path, days: int, db: Path, heap: str) -> dict[str, Any]:
    """One run of the large simulation, its first ``days`` working days, in this process,
    sampled every simulated working hour; ``heap``: tracemalloc (the heap as it traces it;
    its peak from the first working hour on, the load's apart) or rss (the resident memory:
    no tracing, so the wall time is the run's own)."""
    import resource

    traced = heap == "tracemalloc"
    samples: list[dict[str, Any]] = []
    load_peak = 0
    t0 = time.perf_counter()

    async def sample(sim: Scenario) -> None:
        nonlocal load_peak
        k = sim._k
        while True:
            if k.store is not None:  # (what waits for the store's writer, written first: the
                await k._save()      # heap without its queue, which comes and goes)
                await k.store.flush()
            now = current = rss()
            if traced:
                current, peak = tracemalloc.get_traced_memory()
                if not samples:  # (the load's peak apart: the run's from here on)
                    load_peak = peak
                    tracemalloc.reset_peak()
            samples.append({"graded": len(sim.outcomes), "heap": current, "rss": now,
                            "log": k._log.nbytes(), "events": len(k._log),
                            "live": len(k.live), "wall": time.perf_counter() - t0,
                            "entities": sum(len(t) for t in k.state.tables.values())})
            if sim.seconds + 3600 > k.cal.end_s:
                return
            await sim.sleep(60)

    if traced:
        tracemalloc.start()
    try:
        r = simulate(SimulationConfig(path, agent="oracle", db=db, run_id=f"large-{days}",
                                      days=days, script=sample))
        wall = time.perf_counter() - t0
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        peak = tracemalloc.get_traced_memory()[1] if traced else peak_rss
    finally:
        tracemalloc.stop()
    store = sum(f.stat().st_size for f in db.parent.glob(f"{db.name}*"))
    for f in db.parent.glob(f"{db.name}*"):  # (the next run's room on the disk)
        f.unlink()
    n, first, mb = len(r.outcomes), samples[0], 2**20
    return {"working_days": days, "heap": heap, "arrivals": n,
            "passed": sum(o.passed for o in r.outcomes),
            "checks_passed": all(c.passed for c in r.checks), "events": r.event_count,
            "wall_s": round(wall, 2), "arrivals_per_s": round(n / wall, 1),
            "setup_s": round(first["wall"], 2),
            **({"load_peak_heap_mb": round(load_peak / mb, 1)} if traced else {}),
            "peak_mb": round(peak / mb, 1), "peak_rss_mb": round(peak_rss / mb, 1),
            "at_start_mb": round(first["heap"] / mb, 1),
            "at_end_mb": round(samples[-1]["heap"] / mb, 1),
            "peak_per_arrival_kb": round(peak / n / 1024, 2),
            "peak_beyond_start_per_arrival_kb": round((peak - first["heap"]) / n / 1024, 2),
            "growth_per_graded_arrival_b": round(growth(samples, "heap")),
            "log_growth_per_graded_arrival_b": round(growth(samples, "log")),
            "rss_growth_per_graded_arrival_b": round(growth(samples, "rss")),
            "entities_per_graded_arrival": round(growth(samples, "entities"), 2),
            "largest_open_arrivals": max(s["live"] for s in samples),
            "samples": len(samples), "store_mb": round(store / mb, 1),
            "store_kb_per_arrival": round(store / n / 1024, 1)}


def rss() -> int:
    """This process's resident memory now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def large(tmp: Path, people: int, agents: int, days: list[int], heap: str) -> dict[str, Any]:
    path = large_company(people, agents, max(days), tmp / "large")
    runs = []
    for d in sorted(days):  # (each in a process of its own: its own peak)
        cmd = [sys.executable, __file__, "--large-one", json.dumps(
            {"path": str(path), "days": d, "db": str(tmp / f"large-{d}.db"), "heap": heap})]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode:
            raise SystemExit(f"large, {d} days: {out.stderr.strip()[-2000:]}")
        runs.append(json.loads(out.stdout))
    lo, hi = runs[0], runs[-1]

    def ratio(key: str) -> float | None:
        return round(hi[key] / lo[key], 3) if lo[key] else None
    return {"people": people, "agents": agents, "runs": runs,
            f"ratio_peak_per_arrival_{hi['working_days']}_vs_{lo['working_days']}_days":
                ratio("peak_per_arrival_kb"),
            "ratio_peak_beyond_start_per_arrival": ratio("peak_beyond_start_per_arrival_kb"),
            "ratio_growth_per_graded_arrival": ratio("growth_per_graded_arrival_b"),
            "flat": hi["peak_per_arrival_kb"] <= lo["peak_per_arrival_kb"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=[*SECTIONS, "large"], default=list(SECTIONS),
                    help="run only these sections (default: all but large)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--memory-days", type=int, default=20)
    ap.add_argument("--many", type=int, default=100)
    ap.add_argument("--seeds-n", default="1,4,16,64",
                    help="batch sizes of the seeds section (comma-separated)")
    ap.add_argument("--large-people", type=int, default=1000)
    ap.add_argument("--large-agents", type=int, default=20)
    ap.add_argument("--large-days", default="5,60",
                    help="working days of each large run (comma-separated)")
    ap.add_argument("--large-heap", choices=["tracemalloc", "rss"], default="tracemalloc",
                    help="what the large runs measure: the traced heap, or the resident memory "
                    "(untraced: their wall time as it is)")
    ap.add_argument("--large-one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.large_one:  # (one large run, in a process of its own)
        spec = json.loads(a.large_one)
        print(json.dumps(large_one(Path(spec["path"]), spec["days"], Path(spec["db"]),
                                   spec["heap"])))
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        run_ = {"week": lambda: week(tmp, a.repeats), "memory": lambda: memory(tmp, a.memory_days),
                "many": lambda: many(tmp, a.many),
                "seeds": lambda: seeds(tmp, [int(x) for x in a.seeds_n.split(",") if x],
                                       a.repeats),
                "large": lambda: large(tmp, a.large_people, a.large_agents,
                                       [int(x) for x in a.large_days.split(",") if x],
                                       a.large_heap)}
        out = {name: run_[name]() for name in [*SECTIONS, "large"] if name in a.only}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
