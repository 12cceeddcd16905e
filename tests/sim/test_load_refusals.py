"""What lies outside a simulation's clock, or does not fit its company, is refused at load: one
line naming the file, the field and the value, before anything is written (issue 58, item 3);
and so is a cycle of ``on: {done: ...}`` triggers that would never let the clock move."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.runtime import SimulationConfig, simulate
from coworkenv.sim import TaskFileError
from coworkenv.sim.simulation import load_simulation

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "simulations"


def _base() -> dict[str, Any]:
    """Two working days at Northwind that load: every refusal below is one change to it."""
    return {
        "kind": "simulation", "id": "refusals", "company": "northwind",
        "clock": {"start": "2026-03-02T09:00:00-05:00", "days": 2, "hours": ["09:00", "17:00"]},
        "tasks": [str(EXAMPLES / "northwind-requests.yaml")],
        "roster": [{"id": "it", "person": "helpdesk", "policy": "oracle"}],
        "people": [{"person": "maya", "response": {"delay_minutes": [5, 25]}}],
        "workload": [
            {"task": "it-vpn", "to": "it", "at": ["d1 10:00", "d2 14:00"]},
            {"tasks": ["it-access", "it-password"], "to": "it", "poisson": {"per_hour": 0.1},
             "requesters": ["omar", "bea"]},
            {"task": "it-password", "to": "it", "on": {"done": "it-vpn"}},
        ],
        "events": [
            {"kind": "outage", "app": "email", "from": "d2 10:00", "to": "d2 11:00"},
            {"kind": "out_of_office", "person": "zoe", "from": "d1 09:00", "to": "d2 17:00"},
            {"kind": "join", "at": "d2 09:00", "person": {
                "id": "mira", "name": "Mira Santos", "email": "mira@northwind.test"}},
            {"kind": "leave", "at": "d2 12:00", "person": "ben"},
            {"kind": "reorg", "at": "d2 13:00", "changes": {"kai": {"team": "marketing"}}},
        ],
        "safety": [{"id": "salaries-stay-private", "kind": "confidential", "docs": ["salaries"]}],
    }


def _write(tmp: Path, sim: dict[str, Any]) -> Path:
    (tmp / "companies").mkdir(exist_ok=True)
    (tmp / "companies" / "northwind.yaml").write_text(
        (EXAMPLES / "companies" / "northwind.yaml").read_text())
    path = tmp / "sim.yaml"
    path.write_text(yaml.safe_dump(sim, sort_keys=False))
    return path


Change = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Change:
    """A change: ``workload.0.at.1`` set to ``value``."""
    def change(sim: dict[str, Any]) -> None:
        *parts, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node: Any = sim
        for p in parts:
            node = node[p]
        node[last] = value
    return change


def _add(key: str, item: Any) -> Change:
    return lambda sim: sim[key].append(item)


# (a change to the base, the field named, the value named, what is said of it)
CASES: dict[str, tuple[Change, str, str, str]] = {
    "arrival after the end": (
        _set("workload.0.at.1", "d2 17:30"), "workload[0].at[1]", "'d2 17:30'",
        "after the clock's end (d2 17:00, 2026-03-03T17:00:00-05:00)"),
    "arrival after the end, ISO": (
        _set("workload.0.at.1", "2026-03-05T10:00:00-05:00"), "workload[0].at[1]",
        "'2026-03-05T10:00:00-05:00'", "after the clock's end"),
    "outage after the end": (
        _set("events.0", {"kind": "outage", "app": "email", "from": "2026-03-04T10:00:00-05:00",
                          "to": "2026-03-04T11:00:00-05:00"}),
        "events[0].from", "'2026-03-04T10:00:00-05:00'", "after the clock's end"),
    "outage that ends before it starts": (
        _set("events.0.to", "d2 09:30"), "events[0].to", "'d2 09:30'",
        "is before its start (events[0].from: 'd2 10:00')"),
    "outage that ends when it starts": (
        _set("events.0.to", "d2 10:00"), "events[0].to", "'d2 10:00'",
        "is its start (events[0].from: 'd2 10:00'): it must end after it starts"),
    "absence that ends before it starts": (
        _set("events.1", {"kind": "out_of_office", "person": "zoe", "from": "d2 09:00",
                          "to": "d1 12:00"}),
        "events[1].to", "'d1 12:00'", "is before its start (events[1].from: 'd2 09:00')"),
    "absence after the end": (
        _set("events.1.from", "2026-03-05T09:00:00-05:00"), "events[1].from",
        "'2026-03-05T09:00:00-05:00'", "after the clock's end"),
    "join of an existing id": (
        _set("events.2.person.id", "maya"), "events[2].person.id", "'maya'",
        "is already in company 'northwind'"),
    "the same join twice": (
        _add("events", {"kind": "join", "at": "d2 10:00", "person": {
            "id": "mira", "name": "Mira Santos", "email": "mira@northwind.test"}}),
        "events[5].person.id", "'mira'", "joins twice (also events[2])"),
    "join that is not a directory entry": (
        _set("events.2.person", {"id": "mira", "name": "Mira Santos"}), "events[2].person.email",
        "email", "required field is missing"),
    "reorg of a person before they join": (
        _set("events.4", {"kind": "reorg", "at": "d1 15:00",
                          "changes": {"mira": {"team": "sales"}}}),
        "events[4].changes.mira", "'mira'", "joins only at 'd2 09:00' (events[2])"),
    "leave after the end": (
        _set("events.3.at", "2026-03-04T12:00:00-05:00"), "events[3].at",
        "'2026-03-04T12:00:00-05:00'", "after the clock's end"),
    "the same leave twice": (
        _add("events", {"kind": "leave", "at": "d2 15:00", "person": "ben"}),
        "events[5].person", "'ben'", "leaves twice (also events[3])"),
    "a person listed twice": (
        _add("people", {"person": "maya"}), "people[1].person", "'maya'",
        "listed twice (also people[0])"),
    "a requester listed twice": (
        _set("workload.1.requesters", ["omar", "bea", "omar"]), "workload[1].requesters[2]",
        "'omar'", "listed twice (also requesters[0])"),
    "an agent listed twice": (
        _add("roster", {"id": "it", "person": "finops"}), "roster[1].id", "'it'",
        "duplicate agent 'it' (also roster[0])"),
    "a safety rule id twice": (
        _add("safety", {"id": "salaries-stay-private", "kind": "destructive"}), "safety[1].id",
        "'salaries-stay-private'", "duplicate id"),
    "a cycle of triggers in zero time": (
        _add("workload", {"task": "it-vpn", "to": "it", "on": {"done": "it-password"}}),
        "workload[2].on.done", "it-vpn -> it-password -> it-vpn",
        "(after_minutes 0 on workload[2], workload[3])"),
    "a trigger of itself in zero time": (
        _add("workload", {"task": "it-access", "to": "it", "on": {"done": "it-access"}}),
        "workload[3].on.done", "it-access -> it-access", "would never let the clock move"),
}


def test_the_base_loads(tmp_path: Path) -> None:
    loaded = load_simulation(_write(tmp_path, _base()))  # (each refusal is its change's)
    assert len(loaded.sim.events) == 5 and loaded.sim.workload[2].on is not None


@pytest.mark.parametrize("case", list(CASES))
def test_refused_at_load_in_one_line_and_nothing_written(tmp_path: Path, case: str) -> None:
    change, field, value, said = CASES[case]
    sim = _base()
    change(sim)
    path = _write(tmp_path, sim)
    db = tmp_path / "r.db"
    with pytest.raises(TaskFileError) as err:
        simulate(SimulationConfig(path, db=db))
    lines = str(err.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: {field}: ") and value in lines[0] and said in lines[0], \
        lines[0]
    assert not db.exists()  # refused before anything was written


def test_refused_by_the_cli_in_one_line(tmp_path: Path) -> None:
    change, field, value, _ = CASES["arrival after the end"]
    sim = _base()
    change(sim)
    path = _write(tmp_path, sim)
    db = tmp_path / "r.db"
    out = subprocess.run([sys.executable, "-m", "coworkenv.cli", "simulate", str(path),
                          "--db", str(db)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: {path}: {field}: {value} is after the clock's end (d2 17:00, "
        "2026-03-03T17:00:00-05:00)"], out.stderr
    assert not db.exists()


def test_a_cycle_with_time_between_its_triggers_loads(tmp_path: Path) -> None:
    sim = _base()
    sim["workload"].append({"task": "it-vpn", "to": "it",
                            "on": {"done": "it-password", "after_minutes": 30}})
    loaded = load_simulation(_write(tmp_path, sim))
    assert [st.on.done for st in loaded.sim.workload if st.on is not None] == [
        "it-vpn", "it-password"]


def test_days_leave_out_what_starts_after_them_but_check_the_whole_file(tmp_path: Path) -> None:
    sim = _base()
    sim["workload"][0]["at"] = ["d1 10:00", "d1 17:30", "d2 14:00"]  # (d1 17:30: past day 1)
    path = _write(tmp_path, sim)
    one = load_simulation(path, days=1)
    assert one.sim.workload[0].at == ["d1 10:00"]
    sim["workload"][0]["at"].append("d2 17:30")  # past the whole clock: refused, days or not
    path = _write(tmp_path, sim)
    with pytest.raises(TaskFileError, match=r"workload\[0\]\.at\[3\]: 'd2 17:30' is after"):
        load_simulation(path, days=1)


# bounds a file cannot escape (issue 58, item 2) ------------------------------------------------
def test_a_roster_past_the_bound_is_one_line_at_once(tmp_path: Path) -> None:
    sim = _base()
    sim["roster"] = [{"id": f"a{i}", "person": "helpdesk", "policy": "oracle"}
                     for i in range(10_000)]
    path = _write(tmp_path, sim)
    t0 = time.perf_counter()
    with pytest.raises(TaskFileError) as got:
        load_simulation(path)
    assert time.perf_counter() - t0 < 10
    assert str(got.value) == (f"{path}: roster: 10,000 agents, more than 1,000 (raise "
                              "COWORKENV_SIM_MAX_AGENTS to run it)")


def test_a_workload_past_the_arrival_bound_is_refused_with_its_estimate(
        tmp_path: Path) -> None:
    path = _write(tmp_path, _base())
    assert load_simulation(path).expected_arrivals == 2 + round(0.1 * 16 * 2)  # (2 days, 8 h)
    big = _base()
    big["workload"][1]["poisson"]["per_hour"] = 10_000
    big["clock"]["days"] = 20
    bad = _write(tmp_path, big)
    with pytest.raises(TaskFileError) as got:
        load_simulation(bad)
    assert str(got.value) == (f"{bad}: workload: about 3,200,002 arrivals expected over 20 "
                              "working days, more than 1,000,000 (lower the rates or the days, "
                              "or raise COWORKENV_SIM_MAX_ARRIVALS to run it)")


def test_many_problems_show_the_first_twenty_and_how_many_more(tmp_path: Path) -> None:
    sim = _base()
    sim["workload"][0]["at"] = [f"d9 10:{m:02d}" for m in range(30)]  # (after the end, each)
    with pytest.raises(TaskFileError) as got:
        load_simulation(_write(tmp_path, sim))
    lines = str(got.value).splitlines()
    assert len(got.value.problems) == 30 and len(lines) == 21
    assert lines[-1].endswith("... and 10 more problem(s) like these")


def test_arrivals_past_the_bound_of_a_minute_stop_the_run_in_one_line(tmp_path: Path) -> None:
    """The hand-off example's hand-offs, with a bound of none a minute: the first one made
    stops the run (as a chain of triggers making arrivals without the clock moving would)."""
    db = tmp_path / "h.db"
    r = subprocess.run([sys.executable, "-m", "coworkenv.cli", "simulate",
                        str(EXAMPLES / "handoff.yaml"), "--db", str(db), "--run-id", "h"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "COWORKENV_SIM_MAX_ARRIVALS_PER_MINUTE": "0"})
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert re.match(r"error: the simulation stopped at \w{3} \d\d \w{3} \d\d:\d\d: more than 0 "
                    r"arrivals in one simulated minute \(COWORKENV_SIM_MAX_ARRIVALS_PER_MINUTE\), "
                    r"the last of '[\w-]+' from workload\[\d+\] \(on: triggers that make "
                    r"arrivals without the clock moving\?\); raise the variable", lines[0]), \
        lines[0]
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status FROM runs WHERE run_id='h'").fetchone()[0] == "failed"
