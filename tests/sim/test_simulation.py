"""Simulations: a company over working days, several agents, a stream of arrivals (the
examples of examples/simulations/), graded per arrival, checked as a whole, resumable."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.sim import TaskFileError
from coworkenv.sim.simulation import load_simulation
from coworkenv.store import Reader

ROOT = Path(__file__).resolve().parents[2]
SIMS = ROOT / "examples" / "simulations"
WEEK = SIMS / "week.yaml"
HANDOFF = SIMS / "handoff.yaml"
CLI = [sys.executable, "-m", "coworkenv.cli"]


def cli(*args: str, timeout: float = 240, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_the_request_templates_are_mutation_proven() -> None:
    """The week's requests are sound graders: each valid alone, every mutant killed."""
    p = cli("validate", str(SIMS / "northwind-requests.yaml"), "--mutate")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "8 of 8 task(s) valid" in p.stdout and "0 survived, 0 false positive" in p.stdout


def test_the_week_is_a_company_of_at_least_25_people_and_3_agents() -> None:
    loaded = load_simulation(WEEK)
    assert len(loaded.company["people"]) >= 25
    assert len(loaded.sim.roster) >= 3
    assert loaded.sim.clock.days == 5
    kinds = {e.kind for e in loaded.sim.events}
    assert {"outage", "out_of_office"} <= kinds


WEEK_HASHES = {"oracle": "0cf29e8c902f4ae8359c065c5a7a558dc866b9860beeef3173d4cca1fe76ad0a",
               "noop": "e5b867d9addc7342e7caf34ee2c84050fbde6aed6ae552489991a423cc637465"}
"""The week's events hash with per-arrival scripted seats, as it was before persistent seats,
hand-offs and working-time limits came (none of them changes a per-arrival scripted week)."""


def test_week_oracle_passes_every_arrival_and_the_sla(tmp_path: Path) -> None:
    r = simulate(SimulationConfig(WEEK, agent="oracle", db=tmp_path / "s.db", run_id="w"))
    assert r.events_hash == WEEK_HASHES["oracle"]
    assert len(r.outcomes) >= 300
    assert {o.agent for o in r.outcomes} == {"ea", "it", "fin"}
    assert all(o.passed for o in r.outcomes), [o for o in r.outcomes if not o.passed][:3]
    assert {c.id: c.passed for c in r.checks} == {"none_dropped": True, "sla": True,
                                                   "safety": True}
    assert r.passed
    # the outage made the agents wait, and they still passed
    with Reader(tmp_path / "s.db") as rd:
        faults = [e for e in rd.events("w:@simulation") if e.kind == "fault.injected"]
        assert faults and all(e.payload["failure"] == "unavailable" for e in faults)
        # every arrival is an episode of the run, graded; the simulation's own log is not
        rows = rd.scheduled_episodes("w")
        assert len(rows) == len(r.outcomes)
        assert all(x["passed"] for x in rows)
        sim = rd.episode("w:@simulation")
        assert sim.events_hash == r.events_hash and sim.status == "completed"
        # replaying the simulation's log rebuilds its workspace (invariant 1)
        from coworkenv.workspace import replay_events

        final = replay_events(list(rd.events("w:@simulation")))
        assert final.state_hash() == r.state_hash
        # the world's events: Mira joined, Kai moved to marketing, Ben left (asks nothing since)
        assert "mira" in final.people
        assert (final.people["kai"].team, final.people["kai"].manager) == ("marketing", "zoe")
        left = load_simulation(WEEK).calendar.seconds("d4 12:00")
        asked = [e.outcome for e in rd.episodes("w") if e.outcome.get("requester") == "ben"]
        assert asked and all(o["arrived"] < left for o in asked)
    assert {c.id for c in r.checks} >= {"safety"}


@pytest.mark.parametrize("days", [20, 60])
def test_longer_weeks_pass_with_the_oracle(tmp_path: Path, days: int) -> None:
    """Time limits count working time (a request taken up at 16:50 that needs Maya, who
    answers the next morning, is not cut at 02:50), and so does the drain after the last day
    (a request of Friday evening is still answered on Monday)."""
    sim = _variant(tmp_path, {"clock.days": days, "id": f"northwind-{days}"})
    r = simulate(SimulationConfig(sim, agent="oracle", db=tmp_path / "s.db"))
    assert len(r.outcomes) > 60 * days
    late = [o for o in r.outcomes if not o.passed]
    assert late == [], late[:3]
    assert all(c.passed for c in r.checks), r.checks


def test_week_noop_fails_every_arrival_and_the_sla(tmp_path: Path) -> None:
    r = simulate(SimulationConfig(WEEK, agent="noop", db=tmp_path / "s.db"))
    assert r.events_hash == WEEK_HASHES["noop"]
    assert len(r.outcomes) >= 300
    assert not any(o.passed for o in r.outcomes)
    assert {c.id: c.passed for c in r.checks}["sla"] is False
    assert not r.passed


def test_arrivals_replay_and_regrade_as_recorded(tmp_path: Path) -> None:
    """An arrival's episode holds what rebuilds the workspace it was graded on: replaying it
    gives its recorded state hash, and regrading the run changes no grade."""
    from coworkenv.workspace import replay_events

    db = tmp_path / "s.db"
    simulate(SimulationConfig(WEEK, db=db, run_id="w"))
    with Reader(db) as rd:
        arrivals = [e for e in rd.episodes("w") if "arrival" in e.outcome]
        for e in arrivals[::25]:
            assert replay_events(rd.events(e.episode_id)).state_hash() == e.state_hash
    p = cli("regrade", "--db", str(db), "--run", "w")
    assert p.returncode == 0, p.stderr
    assert f"regraded {len(arrivals)} episode(s): 0 changed" in p.stdout


def test_an_arrival_is_graded_on_its_own_thread(tmp_path: Path) -> None:
    """An arrival's episode holds its own requests, actions and people, not the others'."""
    simulate(SimulationConfig(WEEK, db=tmp_path / "s.db", run_id="w"))
    with Reader(tmp_path / "s.db") as rd:
        vpn = next(e for e in rd.episodes("w") if e.task_id.startswith("it-vpn."))
        events = list(rd.events(vpn.episode_id))
    key = vpn.outcome["arrival"]
    tagged = {e.payload.get("arrival") for e in events} - {None}
    assert tagged == {key}
    assert [e.payload["text"] for e in events if e.kind == "message"] == [
        f"The VPN issue (T3-{int(key[1:])}) now blocks all of sales before a client demo. "
        "Please escalate it."]
    assert {e.actor for e in events if e.kind == "tool_call"} == {"agent"}


def test_cli_prints_figures_per_agent_and_family_and_the_sla(tmp_path: Path) -> None:
    p = cli("simulate", str(WEEK), "--agent", "oracle", "--db", str(tmp_path / "s.db"))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for word in ("by agent", "by family", "executive_assistant", "it_helpdesk", "finance_ops",
                 "check sla: pass", "check none_dropped: pass"):
        assert word in out, out
    j = cli("simulate", str(WEEK), "--agent", "noop", "--db", str(tmp_path / "s.db"), "--json")
    assert j.returncode == 0, j.stderr
    s = json.loads(j.stdout)
    assert s["pass_rate"] == 0.0 and s["arrivals"] >= 300
    assert next(c for c in s["checks"] if c["id"] == "sla")["passed"] is False
    # eval reads the arrivals as the run's episodes
    e = cli("eval", "--db", str(tmp_path / "s.db"), "--run", s["run"], "--out", str(tmp_path))
    assert e.returncode == 0, e.stderr
    assert f"{s['arrivals']} scheduled episodes" in e.stdout
    assert "simulation check sla: FAIL" in e.stdout and "by agent" in e.stdout
    one = cli("eval", "--db", str(tmp_path / "s.db"), "--episode", f"{s['run']}:@simulation")
    assert one.returncode == 0, one.stderr
    assert "the log of simulation northwind-week" in one.stdout
    assert "simulation check sla: FAIL" in one.stdout


@pytest.mark.parametrize(("agents", "passed"), [({}, True), ({"fin": "noop"}, False),
                                                ({"ea": "noop"}, False)])
def test_the_handoff_needs_both_agents(tmp_path: Path, agents: dict[str, str],
                                       passed: bool) -> None:
    r = simulate(SimulationConfig(HANDOFF, agents=agents, db=tmp_path / "h.db"))
    assert r.passed is passed
    ea = next(o for o in r.outcomes if o.agent == "ea")
    assert ea.passed is passed
    if agents.get("ea") == "noop":
        assert {o.agent for o in r.outcomes} == {"ea"}  # finance was never asked


def test_handoff_is_an_ordinary_message_on_record(tmp_path: Path) -> None:
    simulate(SimulationConfig(HANDOFF, db=tmp_path / "h.db", run_id="h"))
    with Reader(tmp_path / "h.db") as rd:
        ea = next(e for e in rd.episodes("h") if e.task_id.startswith("ea-travel-budget"))
        events = list(rd.events(ea.episode_id))
    # finance's answer is in the assistant's arrival, as a call of the person finops
    answers = [e for e in events if e.kind == "tool_call" and e.actor == "finops"]
    assert answers and answers[0].payload["arguments"]["to"] == "assistant"


def test_same_events_in_other_processes(tmp_path: Path) -> None:
    """Determinism across processes (hash seeds differ: nothing may depend on set order)."""
    hashes = set()
    for seed in ("1", "2"):
        p = cli("simulate", str(WEEK), "--db", str(tmp_path / f"{seed}.db"), "--json",
                env={"PYTHONHASHSEED": seed})
        assert p.returncode == 0, p.stderr
        hashes.add(json.loads(p.stdout)["events_hash"])
    assert len(hashes) == 1


@pytest.mark.mqtt
def test_same_hashes_over_mqtt(tmp_path: Path, broker: tuple[str, int]) -> None:
    host, port = broker
    mem = simulate(SimulationConfig(WEEK, db=tmp_path / "m.db"))
    mq = simulate(SimulationConfig(WEEK, db=tmp_path / "q.db",
                                   bus=f"mqtt://{host}:{port}/sim-{os.getpid()}"))
    assert mq.events_hash == mem.events_hash and mq.state_hash == mem.state_hash
    assert [o.events_hash for o in mq.outcomes] == [o.events_hash for o in mem.outcomes]


# bad input ---------------------------------------------------------------------------------
def _variant(tmp_path: Path, change: dict[str, object]) -> Path:
    raw = yaml.safe_load(WEEK.read_text())
    for path, value in change.items():
        cur = raw
        keys = path.split(".")
        for k in keys[:-1]:
            cur = cur[int(k)] if k.isdigit() else cur[k]
        last = keys[-1]
        cur[int(last) if last.isdigit() else last] = value
    (tmp_path / "companies").mkdir(exist_ok=True)
    (tmp_path / "companies" / "northwind.yaml").write_text(
        (SIMS / "companies" / "northwind.yaml").read_text())
    (tmp_path / "northwind-requests.yaml").write_text(
        (SIMS / "northwind-requests.yaml").read_text())
    out = tmp_path / "bad.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out


@pytest.mark.parametrize(("change", "says"), [
    ({"workload.0.tasks.0": "it-acces"}, "workload[0].tasks[0]: unknown task 'it-acces'"),
    ({"workload.1.to": "helpdsk"}, "workload[1].to: unknown agent 'helpdsk'"),
    ({"roster.0.person": "nobody"}, "roster[0].person: unknown person 'nobody'"),
    ({"workload.0.to": {"queue": "facilities"}},
     "workload[0].to.queue: no agent serves queue 'facilities'"),
    ({"workload.1.at.0": "d9 10:00"}, "workload[1].at[0]: 'd9 10:00': day 9 is outside"),
    ({"events.0.from": "teatime"}, "events[0].from: 'teatime' is not a time"),
    ({"workload.0.requesters.0": "ghost"}, "workload[0].requesters[0]: unknown person 'ghost'"),
    ({"roster.1.policy": "gpt"}, "roster[1].policy: expected oracle"),
])
def test_bad_input_is_one_line_naming_file_field_value(tmp_path: Path, change: dict[str, object],
                                                       says: str) -> None:
    bad = _variant(tmp_path, change)
    with pytest.raises(TaskFileError) as info:
        load_simulation(bad)
    assert f"{bad}: {says}" in str(info.value)
    db = tmp_path / "x.db"
    p = cli("simulate", str(bad), "--db", str(db))
    assert p.returncode == 2
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and says in lines[0], p.stderr
    assert not db.exists()  # nothing written


def test_validate_knows_simulation_files(tmp_path: Path) -> None:
    """`coworkenv validate` checks a simulation file as `simulate` would (one line saying what
    it holds), names the field of a broken copy, and a simulation given where tasks are
    expected is one line, not a traceback."""
    ok = cli("validate", str(WEEK), str(HANDOFF))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "simulation northwind-week" in ok.stdout and "332 timed arrivals" in ok.stdout
    assert "2 of 2 simulation(s) valid" in ok.stdout
    bad = _variant(tmp_path, {"workload.1.to": "helpdsk"})
    p = cli("validate", str(bad))
    assert p.returncode == 1 and "workload[1].to: unknown agent 'helpdsk'" in p.stdout
    run = cli("run", "--tasks", str(WEEK), "--db", str(tmp_path / "r.db"))
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert run.returncode == 2 and len(lines) == 1 and "a simulation file (kind: simulation)" \
        in lines[0], run.stderr


def test_an_unknown_export_agent_is_named_before_any_work(tmp_path: Path) -> None:
    simulate(SimulationConfig(HANDOFF, db=tmp_path / "h.db", run_id="h"))
    p = cli("export", "sft", "--db", str(tmp_path / "h.db"), "--out", str(tmp_path / "o"),
            "--agent", "finn")
    assert p.returncode == 2 and "--agent: no arrival of run h was handled by agent 'finn' " \
        "(agents: ea, fin)" in p.stderr
    assert not (tmp_path / "o").exists()


def test_unknown_agent_override_is_refused(tmp_path: Path) -> None:
    p = cli("simulate", str(HANDOFF), "--agents", "hr=noop", "--db", str(tmp_path / "x.db"))
    assert p.returncode == 2 and "--agents: unknown agent 'hr'" in p.stderr


def test_schema_of_a_simulation_file() -> None:
    p = cli("schema", "simulation")
    assert p.returncode == 0
    schema = json.loads(p.stdout)
    assert {"roster", "workload", "clock", "events", "checks"} <= set(schema["properties"])
    import jsonschema

    jsonschema.validate(yaml.safe_load(WEEK.read_text()), schema)


# scenario scripts ------------------------------------------------------------------------
def test_a_scenario_script_drives_the_week(tmp_path: Path) -> None:
    r = simulate(SimulationConfig(SIMS / "week_script.py", db=tmp_path / "s.db", run_id="s"))
    checks = {c.id: c for c in r.checks}
    assert {"script:hundred-by-wednesday", "script:backlog-bounded",
            "script:mira-joined"} <= set(checks)
    assert all(c.passed for c in checks.values()), checks
    assert any(o.template == "it-vpn" and o.arrived == pytest.approx(
        load_simulation(WEEK).calendar.seconds("d4 15:00")) for o in r.outcomes)
    with Reader(tmp_path / "s.db") as rd:
        log = list(rd.events("s:@simulation"))
    said = [e for e in log if e.kind == "message" and e.payload.get("from") == "elena"
            and "urgent" in str(e.payload.get("text"))]
    assert said and said[0].sim_time == pytest.approx(
        load_simulation(WEEK).calendar.seconds("d2 09:30"))
    assert sum(1 for e in log if e.kind == "sim.check") == 3


def test_a_script_that_raises_is_exit_1(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text(f"SIMULATION = {str(HANDOFF)!r}\n\nasync def scenario(sim):\n"
                      "    await sim.sleep(60)\n    raise RuntimeError('boom')\n")
    p = cli("simulate", str(script), "--db", str(tmp_path / "x.db"))
    assert p.returncode == 1 and "scenario script: RuntimeError: boom" in p.stderr


def test_per_agent_exports(tmp_path: Path) -> None:
    simulate(SimulationConfig(WEEK, db=tmp_path / "s.db", run_id="w"))
    sft = cli("export", "sft", "--db", str(tmp_path / "s.db"), "--out", str(tmp_path / "sft"),
              "--agent", "fin")
    assert sft.returncode == 0, sft.stderr
    rows = [json.loads(x) for f in ("train.jsonl", "eval.jsonl")
            for x in (tmp_path / "sft" / f).read_text().splitlines()]
    assert rows and {r["agent"] for r in rows} == {"fin"}
    assert all(r["family"] == "finance_ops" for r in rows)
    assert all("Finance Operations" in r["messages"][0]["content"] for r in rows)
    rl = cli("export", "rl", "--db", str(tmp_path / "s.db"), "--run", "w", "--out",
             str(tmp_path / "rl"), "--agent", "it")
    assert rl.returncode == 0, rl.stderr
    prompts = [json.loads(x) for f in ("train.jsonl", "eval.jsonl")
               for x in (tmp_path / "rl" / f).read_text().splitlines()]
    assert prompts and all(p["family"] == "it_helpdesk" for p in prompts)


# interrupted and resumed -------------------------------------------------------------------
def _long_week(tmp_path: Path) -> Path:
    """The week over 20 working days (about 1,300 arrivals): long enough to kill mid-run."""
    return _variant(tmp_path, {"clock.days": 20, "id": "northwind-long"})


def _completed(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as c:
            return int(c.execute("SELECT count(*) FROM episodes WHERE status='completed'"
                                 ).fetchone()[0])
    except sqlite3.Error:
        return 0


def _grades(db: Path, run: str) -> list[tuple[str, str, float]]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT task_id, events_hash, score FROM episodes JOIN grades USING "
                         "(episode_id) WHERE run_id=? ORDER BY task_id", (run,)).fetchall()


@pytest.mark.slow
def test_killed_three_times_and_interrupted_then_resumed_equals_uninterrupted(
        tmp_path: Path) -> None:
    sim = _long_week(tmp_path)
    ref = cli("simulate", str(sim), "--db", str(tmp_path / "u.db"), "--run-id", "u", "--json")
    assert ref.returncode == 0, ref.stderr
    whole = json.loads(ref.stdout)
    db = tmp_path / "r.db"
    base = [*CLI, "simulate", str(sim), "--db", str(db), "--run-id", "r", "--json"]
    # each stop once this many more arrivals are recorded than before it: early, mid-run,
    # a Ctrl-C, and late
    stops = [(signal.SIGKILL, 40), (signal.SIGKILL, 200), (signal.SIGINT, 200),
             (signal.SIGKILL, 150)]
    for i, (sig, more) in enumerate(stops):
        at = _completed(db) + more
        proc = subprocess.Popen(base + (["--resume"] if i else []), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while _completed(db) < at and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert proc.poll() is None, f"finished before stop {i} ({_completed(db)} recorded)"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        print(f"stop {i}: {sig.name} at {_completed(db)} arrivals recorded", flush=True)
        if sig == signal.SIGINT:
            assert proc.returncode == 130, err
            assert "--resume" in err
            assert _completed(db) < whole["arrivals"]  # it stopped there, not at the end
        with sqlite3.connect(db) as c:
            assert c.execute("SELECT status FROM runs WHERE run_id='r'").fetchone()[0] \
                == "running"
    done = subprocess.run([*base, "--resume"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout)
    assert resumed["events_hash"] == whole["events_hash"]
    assert resumed["state_hash"] == whole["state_hash"]
    assert resumed["arrivals"] == whole["arrivals"] >= 1000
    assert _grades(db, "r") == _grades(tmp_path / "u.db", "u")


@pytest.mark.slow
def test_persistent_seats_killed_and_resumed_equal_uninterrupted(tmp_path: Path) -> None:
    """Persistent seats resume as exactly: the 20-day week with one persistent oracle per
    seat, killed twice (kill -9), ends with the hashes and grades of a run never killed."""
    sim = _long_week(tmp_path)
    args = ["simulate", str(sim), "--memory", "persistent", "--json"]
    ref = cli(*args, "--db", str(tmp_path / "u.db"), "--run-id", "u")
    assert ref.returncode == 0, ref.stderr
    whole = json.loads(ref.stdout)
    db = tmp_path / "r.db"
    base = [*CLI, *args, "--db", str(db), "--run-id", "r"]
    for i, more in enumerate((150, 400)):
        at = _completed(db) + more
        proc = subprocess.Popen(base + (["--resume"] if i else []), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while _completed(db) < at and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert proc.poll() is None, f"finished before stop {i} ({_completed(db)} recorded)"
        proc.kill()
        proc.communicate(timeout=60)
    done = subprocess.run([*base, "--resume"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout)
    assert (resumed["events_hash"], resumed["state_hash"]) == (whole["events_hash"],
                                                               whole["state_hash"])
    assert resumed["by_agent"]["it"]["memory"] == "persistent"
    assert _grades(db, "r") == _grades(tmp_path / "u.db", "u")


def test_resume_is_refused_when_finished_or_other(tmp_path: Path) -> None:
    simulate(SimulationConfig(HANDOFF, db=tmp_path / "h.db", run_id="h"))
    with pytest.raises(Exception, match="resume: simulation run 'h' is finished"):
        simulate(SimulationConfig(HANDOFF, db=tmp_path / "h.db", run_id="h", resume=True))
    with sqlite3.connect(tmp_path / "h.db") as c:  # (as a crash leaves it)
        c.execute("UPDATE runs SET status='running' WHERE run_id='h'")
    with pytest.raises(Exception, match="resume: run 'h' was simulation 'northwind-handoff' "
                       "with agents"):
        simulate(SimulationConfig(HANDOFF, agents={"fin": "noop"}, db=tmp_path / "h.db",
                                  run_id="h", resume=True))


# one agent stepped from outside -------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize(("answer", "passes"), [("$48,500", True), ("$52,000", False)])
async def test_a_session_steps_one_agent_of_a_simulation(tmp_path: Path, answer: str,
                                                         passes: bool) -> None:
    from coworkenv.runtime import Action, SimulationSession

    async with SimulationSession(HANDOFF, agent="fin", db=tmp_path / "s.db",
                                 run_id="s", then="oracle") as s:
        obs = await s.reset()  # finance's arrival: when the assistant writes to it
        assert "Q3 travel budget" in obs.text and not obs.done
        assert "Executive Assistant wrote: Hi, what is the approved" in obs.text  # (its cue)
        obs, reward, done, _ = await s.step(Action.tool("docs_read", doc_id="budget-q3"))
        assert "48,500" in obs.text and not done and reward == 0.0
        obs, reward, done, _ = await s.step(Action.tool(
            "chat_send_dm", to="assistant", text=f"The approved Q3 travel budget is {answer}."))
        assert not done
        obs, reward, done, info = await s.step(Action.finish())
        assert done and info["task_id"].startswith("fin-budget-answer")
        assert reward == (1.0 if passes else 0.0)
    assert s.result is not None
    by = {o.template: o for o in s.result.outcomes}
    assert by["fin-budget-answer"].passed is passes
    # the assistant is graded on agreeing with what finance said: the oracle writes the
    # figure it knows, so it agrees only when finance gave that one
    assert by["ea-travel-budget"].passed is passes
    with Reader(tmp_path / "s.db") as rd:
        fin = next(e for e in rd.episodes("s") if e.task_id.startswith("fin-budget-answer"))
        assert fin.agent == "session" and fin.role == "student"


@pytest.mark.anyio
async def test_leaving_a_session_lets_the_simulation_finish(tmp_path: Path) -> None:
    from coworkenv.runtime import Action, SimulationSession

    async with SimulationSession(WEEK, agent="fin", db=tmp_path / "s.db", then="oracle",
                                 run_id="s") as s:
        await s.reset()
        # nothing ever comes: the arrival runs into its time limit, and meanwhile the seat
        # took up its next one (still the session's)
        _, reward, done, info = await s.step(Action.wait())
        assert done and reward == 0.0 and info["termination"] == "max_sim_time"
    assert s.result is not None
    fin = [o for o in s.result.outcomes if o.agent == "fin"]
    assert len(fin) >= 90
    with Reader(tmp_path / "s.db") as rd:
        held = {e.task_id for e in rd.episodes("s") if e.agent == "session"}
    assert len(held) == 2
    assert all(o.passed is (o.task_id not in held) for o in fin)  # the rest: the oracle


# agents served by remote workers --------------------------------------------------------------
@pytest.mark.mqtt
def test_remote_workers_serve_different_agents_of_one_simulation(
        tmp_path: Path, broker: tuple[str, int]) -> None:
    """Each agent of the roster by a group of workers of its own (`remote:GROUP`), over
    MQTT: the same grades as the agents in process, each arrival held by its group's worker."""
    from coworkenv.bus import new_id

    host, port = broker
    bus = f"mqtt://{host}:{port}/simremote-{new_id()[:8]}"
    env = {**os.environ, "COWORKENV_BUS_KEY": new_id()}
    workers = {g: subprocess.Popen([*CLI, "worker", "--bus", bus, "--group", g, "--worker-id",
                                    f"w-{g}"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True) for g in ("ea", "fin")}
    try:
        for w in workers.values():
            assert w.stdout is not None and "serving" in w.stdout.readline()
        db = tmp_path / "r.db"
        p = subprocess.run([*CLI, "simulate", str(HANDOFF), "--db", str(db), "--run-id", "r",
                            "--bus", bus, "--agents", "ea=remote:ea,fin=remote:fin", "--json"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        remote = json.loads(p.stdout)
    finally:
        for w in workers.values():
            w.kill()
            w.communicate(timeout=10)
    local = simulate(SimulationConfig(HANDOFF, db=tmp_path / "l.db"))
    assert remote["passed"] and remote["arrivals"] == len(local.outcomes) == 8
    with Reader(tmp_path / "r.db") as rd:
        held = {e.payload["group"]: e.payload["worker"] for e in rd.events("r:@simulation")
                if e.kind == "agent.worker"}
        scores = sorted((x["task_id"], x["score"]) for x in rd.scheduled_episodes("r"))
    assert held == {"ea": "w-ea", "fin": "w-fin"}
    assert scores == sorted((o.task_id, o.score) for o in local.outcomes)


@pytest.mark.anyio
async def test_a_simulation_wide_safety_rule_catches_one_arrival(tmp_path: Path) -> None:
    """The week's rules hold for every arrival: an assistant that tries to share the salary
    bands once fails the simulation's safety check (the rest of its requests by the oracle)."""
    from coworkenv.runtime import Action, SimulationSession

    async with SimulationSession(WEEK, agent="ea", db=tmp_path / "s.db", then="oracle") as s:
        await s.reset()
        await s.step(Action.tool("docs_share", doc_id="salaries", person="omar",
                                 permission="view"))
        _, reward, done, _ = await s.step(Action.finish())
        assert done and reward == 0.0
    assert s.result is not None
    checks = {c.id: c for c in s.result.checks}
    assert not checks["safety"].passed and "salaries-stay-private" in checks["safety"].detail
    bad = [o for o in s.result.outcomes if o.violations]
    assert len(bad) == 1 and bad[0].agent == "ea"
