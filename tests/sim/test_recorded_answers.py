"""Recorded model answers served again: a model-backed simulation re-run with a run's answers
(``replay_model``) records the very same events with zero model calls, and a changed prompt,
tool or model is reported at the first call whose request differs; a model-backed simulation
killed and resumed asks the model nothing it had recorded, and ends as a run never killed
(the package's scripted OpenAI-compatible server, answering from the request alone)."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.agents import Playbook
from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer, tool
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.sim.simulation import SimulationError
from coworkenv.store import MEASURED, Reader

from .test_cast import _relay, _sim, maya
from .test_simulation import _completed

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]
MONTH = ROOT / "examples" / "simulations" / "month.yaml"


def _recorded(db: Path, run: str) -> int:
    """Model calls a simulation's log holds."""
    with Reader(db) as r:
        return sum(e.kind in MEASURED for e in r.events(f"{run}:@simulation"))


def _status(db: Path, run: str) -> str:
    with sqlite3.connect(db) as c:
        return str(c.execute("SELECT status FROM runs WHERE run_id=?", (run,)).fetchone()[0])


def _original(tmp_path: Path, **extra: Any) -> tuple[Path, Any, int, int]:
    """The cast simulation run live: a model-backed agent asks Maya, whose model answers."""
    sim = _sim(tmp_path, **extra)
    agent = Playbook([(r"Ask Maya how many ops people.*?\(document (D1-\d+)\)", _relay)])
    with ScriptedOpenAIServer(responder=agent) as agents, \
            ScriptedOpenAIServer(responder=maya(14)) as people:
        r = simulate(SimulationConfig(sim, db=tmp_path / "c.db", run_id="c",
                                      base_url=agents.base_url,
                                      cast_base_url=people.base_url, cast_model="persona"))
        return sim, r, agents.served, people.served


def test_a_run_replayed_with_its_answers_records_the_same_events_without_a_model(
        tmp_path: Path) -> None:
    sim, first, agent_calls, person_calls = _original(tmp_path)
    assert first.pass_rate == 1.0 and agent_calls >= 3 and person_calls >= 1
    assert first.model_answers == {"recorded": 0, "live": agent_calls + person_calls}
    # no model server at all: every answer comes from run c's log
    again = simulate(SimulationConfig(sim, db=tmp_path / "c.db", run_id="again",
                                      replay_model="c", cast_model="persona"))
    assert (again.events_hash, again.state_hash) == (first.events_hash, first.state_hash)
    assert [o.passed for o in again.outcomes] == [o.passed for o in first.outcomes]
    assert again.model_answers["recorded"] == agent_calls + person_calls
    assert again.model_answers["live"] == 0
    # from another store, by path
    other = simulate(SimulationConfig(sim, db=tmp_path / "o.db", run_id="o",
                                      replay_model="c", replay_db=tmp_path / "c.db",
                                      cast_model="persona"))
    assert other.events_hash == first.events_hash


def test_a_changed_function_list_is_reported_at_the_first_call_and_the_rerun_fails(
        tmp_path: Path) -> None:
    _original(tmp_path)
    changed = _sim(tmp_path, roster=[{"id": "ea", "person": "assistant",
                                      "policy": "openai:agent", "tools": ["chat_send_dm"]}])
    with pytest.raises(SimulationError, match=r"replay: agent ea's model call 1 \(Mon 02 Mar "
                       r"10:00, event \d+ of run c of .*c\.db\) asks something else than it "
                       r"did: it offers 4 functions where 5 were recorded"):
        simulate(SimulationConfig(changed, db=tmp_path / "c.db", run_id="x",
                                  replay_model="c", cast_model="persona"))
    assert _status(tmp_path / "c.db", "x") == "failed"


def test_a_changed_persona_model_is_reported_at_the_persons_first_call(tmp_path: Path) -> None:
    sim, _first, _agent_calls, _ = _original(tmp_path)
    with pytest.raises(SimulationError, match=r"replay: maya's model call 1 .* model was "
                       r"'persona', now 'another'"):
        simulate(SimulationConfig(sim, db=tmp_path / "c.db", run_id="x", replay_model="c",
                                  cast_model="another"))


def test_a_changed_request_text_names_the_message_and_where_it_differs(
        tmp_path: Path) -> None:
    _sim_file, _first, *_ = _original(tmp_path)
    tasks = yaml.safe_load((ROOT / "examples/simulations/northwind-requests.yaml").read_text())
    for t in tasks:
        if t["id"] == "ea-ask-budget":
            t["instruction"] = t["instruction"].replace("Ask Maya", "Please ask Maya", 1)
    (tmp_path / "requests.yaml").write_text(yaml.safe_dump(tasks, sort_keys=False))
    changed = _sim(tmp_path, tasks=[str(tmp_path / "requests.yaml")])
    with pytest.raises(SimulationError) as got:
        simulate(SimulationConfig(changed, db=tmp_path / "c.db", run_id="x",
                                  replay_model="c", cast_model="persona"))
    msg = str(got.value)
    assert "agent ea's model call 1" in msg and "message 1 (user)" in msg
    assert re.search(r"was '[^']*Ask Maya[^']*', now '[^']*Please ask Maya", msg), msg


def test_replay_live_goes_on_with_the_model_from_the_first_difference(
        tmp_path: Path) -> None:
    _original(tmp_path)
    changed = _sim(tmp_path, roster=[{"id": "ea", "person": "assistant",
                                      "policy": "openai:agent", "tools": ["chat_send_dm"]}])
    with ScriptedOpenAIServer(default=tool("finish", summary="done")) as live:
        r = simulate(SimulationConfig(changed, db=tmp_path / "c.db", run_id="y",
                                      replay_model="c", replay_live=True,
                                      base_url=live.base_url, cast_model="persona"))
        assert live.served >= 1
    assert r.model_answers["recorded"] == 0 and r.model_answers["live"] == live.served
    assert "it offers 4 functions where 5 were recorded" in r.model_answers["diverged"]
    assert _status(tmp_path / "c.db", "y") == "finished"


def test_a_changed_grader_regrades_the_same_answers_without_a_model(tmp_path: Path) -> None:
    """What a check says is no part of what the model was asked: the re-run serves every
    recorded answer and only the grade moves."""
    _sim_file, _first, agent_calls, person_calls = _original(tmp_path)
    tasks = yaml.safe_load((ROOT / "examples/simulations/northwind-requests.yaml").read_text())
    for t in tasks:
        if t["id"] == "ea-ask-budget":
            for c in t["checks"]:
                c.update({k: ["a figure nobody wrote"] for k in c if k.endswith("contains")})
    (tmp_path / "requests.yaml").write_text(yaml.safe_dump(tasks, sort_keys=False))
    regraded = simulate(SimulationConfig(_sim(tmp_path, tasks=[str(tmp_path / "requests.yaml")]),
                                         db=tmp_path / "c.db", run_id="g", replay_model="c",
                                         cast_model="persona"))
    assert regraded.model_answers == {"recorded": agent_calls + person_calls, "live": 0,
                                      "source": f"run c of {tmp_path / 'c.db'}"}
    assert [o.passed for o in regraded.outcomes] == [False]


def test_replay_refusals_name_the_run_and_the_store(tmp_path: Path) -> None:
    sim, *_ = _original(tmp_path)
    with pytest.raises(Exception, match=r"replay_model: .*c\.db holds no run 'nope' "
                       r"\(runs: c\)"):
        simulate(SimulationConfig(sim, db=tmp_path / "c.db", run_id="z", replay_model="nope"))
    with pytest.raises(Exception, match=r"replay_db: .*missing\.db: no such file"):
        simulate(SimulationConfig(sim, db=tmp_path / "c.db", run_id="z", replay_model="c",
                                  replay_db=tmp_path / "missing.db"))


# killed and resumed ------------------------------------------------------------------------
def pure(request: dict[str, Any]) -> Reply:
    """A model whose answer is a function of the request alone (so that a resumed run can be
    compared with one never killed): each new request gets a question to its requester and a
    finish; a persistent agent's summary and a person's reply get a fixed text."""
    messages = request["messages"]
    if not request.get("tools"):
        return Reply(content="Earlier: requests handled.", stall_s=0.004)
    told = []
    for m in reversed(messages):
        if m.get("role") == "assistant":
            break
        told.append(str(m.get("content") or "") if m.get("role") == "user" else "")
    calls = []
    for key, who in re.findall(r"\[request (a\d+) from (\w+)", " ".join(reversed(told))):
        calls += [("send_message", json.dumps({"to": who, "re": key,
                                               "text": f"Could you confirm {key}?"})),
                  ("finish", json.dumps({"summary": "done", "re": key}))]
    if not calls:
        return Reply(tool_calls=[("wait", "{}")], finish_reason="tool_calls", stall_s=0.004)
    return Reply(tool_calls=calls, finish_reason="tool_calls", stall_s=0.004)


@pytest.mark.slow
def test_a_model_backed_simulation_killed_and_resumed_asks_only_what_it_had_not_recorded(
        tmp_path: Path) -> None:
    """The month (three persistent model-backed agents, their context summaries) killed with
    kill -9 three times: each resume serves the recorded calls from the store and asks the
    model only for the rest, and the run ends with the hashes and grades of a run never
    killed."""
    with ScriptedOpenAIServer(responder=pure) as srv:
        args = ["simulate", str(MONTH), "--agent", "openai:m", "--base-url", srv.base_url,
                "--json"]
        ref = subprocess.run([*CLI, *args, "--db", str(tmp_path / "u.db"), "--run-id", "u"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert ref.returncode == 0, ref.stderr
        whole = json.loads(ref.stdout)
        total = srv.served
        assert total == whole["model_answers"]["live"] > 200
        db = tmp_path / "r.db"
        base = [*CLI, *args, "--db", str(db), "--run-id", "r"]
        asked = []
        for i, more in enumerate((30, 80, 80)):
            at = _completed(db) + more
            before, prefix = srv.served, _recorded(db, "r") if i else 0
            proc = subprocess.Popen(base + (["--resume"] if i else []), cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 120
            while _completed(db) < at and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            assert proc.poll() is None, f"finished before stop {i} ({_completed(db)} recorded)"
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            asked.append((prefix, srv.served - before))
            assert _status(db, "r") == "running"
        prefix, before = _recorded(db, "r"), srv.served
        done = subprocess.run([*base, "--resume"], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        resumed = json.loads(done.stdout)
        print("kills (recorded calls before, calls asked):", asked, "last resume:", prefix,
              srv.served - before, flush=True)
        # the last resume served every recorded call from the store, and asked the rest
        assert resumed["model_answers"]["recorded"] == prefix > 0
        assert srv.served - before == resumed["model_answers"]["live"] == total - prefix
    assert (resumed["events_hash"], resumed["state_hash"]) == (whole["events_hash"],
                                                               whole["state_hash"])
    assert resumed["arrivals"] == whole["arrivals"]
    with sqlite3.connect(db) as c, sqlite3.connect(tmp_path / "u.db") as u:
        q = ("SELECT task_id, events_hash, score FROM episodes JOIN grades USING (episode_id) "
             "WHERE run_id=? ORDER BY task_id")
        assert c.execute(q, ("r",)).fetchall() == u.execute(q, ("u",)).fetchall()


def test_the_cli_replays_a_run_and_says_where_the_answers_came_from(tmp_path: Path) -> None:
    sim, first, agent_calls, person_calls = _original(tmp_path)
    base = [*CLI, "simulate", str(sim), "--db", str(tmp_path / "c.db"), "--cast-model",
            "persona", "--replay-model", "c"]
    r = subprocess.run([*base, "--run-id", "k", "--json"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["events_hash"] == first.events_hash
    assert out["model_answers"]["recorded"] == agent_calls + person_calls
    shown = subprocess.run([*base, "--run-id", "k2"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert (f"model answers: {agent_calls + person_calls} served from the recording (run c "
            f"of {tmp_path / 'c.db'}), 0 asked of the model") in " ".join(shown.stdout.split())
    bad = subprocess.run([*base[:-1], "nope", "--run-id", "k3"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "holds no run 'nope'" in bad.stderr


# what the model costs ------------------------------------------------------------------------
@pytest.mark.parametrize("tight", [True, False])
def test_a_model_budget_fails_when_the_policy_overspends(tmp_path: Path, tight: bool) -> None:
    """checks.model_budget: the calls made for one arrival and the tokens of a day, checked
    like the SLA (the scripted server counts 110 tokens a call)."""
    limits = {"calls_per_arrival": 2, "tokens_per_day": 300} if tight else \
        {"calls_per_arrival": 50, "tokens_per_day": 100_000}
    _sim_file, r, agent_calls, person_calls = _original(tmp_path, checks={"model_budget": limits})
    checks = {c.id: c for c in r.checks}
    calls, tokens = checks["model_budget:calls_per_arrival"], checks["model_budget:tokens_per_day"]
    assert calls.passed is tokens.passed is not tight, (calls, tokens)
    key = r.outcomes[0].key
    assert f"most {agent_calls + person_calls} ({key})" in calls.detail
    assert f"most {110 * (agent_calls + person_calls)} (2026-03-02)" in tokens.detail
    use = r.model_use
    assert use["ea"]["calls"] == agent_calls and use["people"]["calls"] == person_calls
    assert use["ea"]["latency_ms"] >= 0 and "latency_ms" in use["people"]
    if tight:
        assert calls.detail.startswith(f"1 of 1 arrivals over 2 calls: {key}")
