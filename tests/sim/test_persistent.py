"""Persistent seats: one agent for a seat over the whole simulation, behind the package's
scripted OpenAI-compatible server (a scripted model that follows a plan per request, chosen
by the request's words, as replies and results come back)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.agents import Playbook
from coworkenv.agents.fake_openai import ScriptedOpenAIServer
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.store import Reader

ROOT = Path(__file__).resolve().parents[2]
SIMS = ROOT / "examples" / "simulations"
Step = tuple[str, Any]
Plan = Callable[[re.Match[str], list[dict[str, Any]]], list[Step]]


def _company(tmp_path: Path) -> None:
    shutil.copytree(SIMS / "companies", tmp_path / "companies", dirs_exist_ok=True)


def _sim(tmp_path: Path, **fields: Any) -> Path:
    _company(tmp_path)
    sim = {"kind": "simulation", "company": "northwind",
           "clock": {"start": "2026-03-02T09:00:00-05:00", "days": 3},
           "tasks": [str(SIMS / "northwind-requests.yaml"),
                     str(SIMS / "remember-requests.yaml")], **fields}
    path = tmp_path / f"{fields['id']}.yaml"
    path.write_text(yaml.safe_dump(sim))
    return path


# plans -------------------------------------------------------------------------------------
def remember(hit: re.Match[str], messages: list[dict[str, Any]]) -> list[Step]:
    return [("memory_write", {"key": "Acme Supplies remittance account",
                              "text": "Acme Supplies' account ends in 4471"}),
            ("chat_send_dm", {"to": "tom", "text": "Noted: the account now ends in 4471."}),
            ("finish", {})]


def pay_from_what_it_saw(hit: re.Match[str], messages: list[dict[str, Any]]) -> list[Step]:
    """The account as the conversation still holds it (day 1's request, two days on)."""
    said = " ".join(str(m.get("content")) for m in messages)
    digits = re.search(r"ends in (\d{4})", said)
    account = digits[1] if digits else "????"
    return [("email_send", {"to": ["ana"], "subject": "INV-2291",
                            "body": f"Pay INV-2291 to the account ending {account}."}),
            ("finish", {})]


def ask_maya(hit: re.Match[str], messages: list[dict[str, Any]]) -> list[Step]:
    doc = hit[1]

    def edit(messages: list[dict[str, Any]]) -> dict[str, Any]:
        reply = next(str(m["content"]) for m in reversed(messages)
                     if "from maya" in str(m.get("content")))
        n = re.search(r"\b(\d+)\b", reply.split("]", 1)[1])
        return {"doc_id": doc, "append": f" Ops on site this week: {n[1] if n else '?'} people."}
    return [("chat_send_dm", {"to": "maya", "text": "How many ops people are on site this week?"}),
            ("wait", {}), ("docs_edit", edit), ("finish", {})]  # type: ignore[list-item]


def book(day: int) -> Plan:
    def plan(hit: re.Match[str], messages: list[dict[str, Any]]) -> list[Step]:
        mail = hit[1]
        return [("email_read", {"email_id": mail}),
                ("calendar_create_event", {"title": f"Ops review ({mail})",
                                           "start": f"2026-03-{day}T10:00:00",
                                           "end": f"2026-03-{day}T10:30:00",
                                           "timezone": "America/New_York",
                                           "attendees": ["elena", "maya"]}),
                ("email_reply", {"email_id": mail, "body": f"Booked 'Ops review ({mail})' with "
                                 f"Maya for March {day}, 10:00-10:30 New York time."}),
                ("finish", {})]
    return plan


ASK = r"Ask Maya how many ops people.*?\(document (D1-\d+)\)"
MEETING = r"See my email (E1-\d+): book the meeting"


# tests -------------------------------------------------------------------------------------
def test_a_persistent_seats_request_on_day_3_holds_what_it_saw_on_day_1(tmp_path: Path) -> None:
    sim = _sim(tmp_path, id="three-days",
               roster=[{"id": "fin", "person": "finops", "policy": "openai:scripted",
                        "tools": ["memory_write", "chat_send_dm", "email_send"]}],
               workload=[{"task": "fin-remember-account", "to": "fin", "at": ["d1 09:30"]},
                         {"task": "fin-pay-acme", "to": "fin", "at": ["d3 10:00"]}])
    playbook = Playbook([(r"Acme Supplies changed their remittance account", remember),
                         (r"invoice INV-2291", pay_from_what_it_saw)])
    with ScriptedOpenAIServer(responder=playbook, count_tokens=True) as srv:
        r = simulate(SimulationConfig(sim, db=tmp_path / "s.db", run_id="p",
                                      base_url=srv.base_url))
        day3 = next(q for q in srv.requests if "INV-2291" in json.dumps(q["messages"][-1]))
    # one conversation: the day-3 request holds day 1's request and the agent's own turns
    assert "ends in 4471" in json.dumps(day3["messages"])
    assert day3["messages"][0]["role"] == "system" and "[request a0000 from tom" in \
        json.dumps(day3["messages"])
    assert r.memory == {"fin": "persistent"}
    assert [o.passed for o in r.outcomes] == [True, True], r.outcomes
    use = r.by("agent")["fin"]
    assert use["model_calls"] == len(srv.requests) and use["prompt_max"] > 0
    assert use["attribution"] == {"re": 5}  # (two requests; each action named its own)


@pytest.mark.parametrize("sabotage", [False, True])
def test_two_open_arrivals_interleave_and_each_is_graded_on_its_own(
        tmp_path: Path, sabotage: bool) -> None:
    """Marcus asks for Maya's figure at 10:00 (the agent asks her and waits); Elena's meeting
    comes at 10:05 and is done while Maya has not answered; then Maya answers and the first
    is finished. A meeting booked on the wrong day fails the meeting alone."""
    sim = _sim(tmp_path, id="interleave",
               roster=[{"id": "ea", "person": "assistant", "policy": "openai:scripted",
                        "tools": ["chat_send_dm", "docs_edit", "email_read",
                                  "calendar_create_event", "email_reply"]}],
               people=[{"person": "maya", "response": {"delay_minutes": [20, 20]}}],
               workload=[{"task": "ea-ask-budget", "to": "ea", "at": ["d1 10:00"],
                          "requesters": []},
                         {"task": "ea-meeting", "to": "ea", "at": ["d1 10:05"]}])
    playbook = Playbook([(ASK, ask_maya), (MEETING, book(24 if sabotage else 23))])
    with ScriptedOpenAIServer(responder=playbook) as srv:
        r = simulate(SimulationConfig(sim, db=tmp_path / "s.db", run_id="i",
                                      base_url=srv.base_url))
    by = {o.template: o for o in r.outcomes}
    assert by["ea-ask-budget"].passed
    assert by["ea-meeting"].passed is not sabotage
    with Reader(tmp_path / "s.db") as rd:
        log = list(rd.events("i:@simulation"))
        views = {e.task_id.split(".")[0]: list(rd.events(e.episode_id))
                 for e in rd.episodes("i") if "arrival" in e.outcome}
    credited = [(e.seq, e.payload["arrival"], e.payload.get("tool") or e.payload["action"])
                for e in log if e.kind == "sim.attribution"]
    first = [s for s, a, _ in credited if a == by["ea-ask-budget"].key]
    second = [s for s, a, _ in credited if a == by["ea-meeting"].key]
    assert first[0] < second[0] < second[-1] < first[-1]  # (interleaved)
    # each arrival's episode holds its own actions only
    assert {e.payload["tool"] for e in views["ea-meeting"] if e.kind == "tool_call"
            and e.actor == "agent"} == {"email_read", "calendar_create_event", "email_reply"}
    assert {e.payload["tool"] for e in views["ea-ask-budget"] if e.kind == "tool_call"
            and e.actor == "agent"} == {"chat_send_dm", "docs_edit"}


def test_without_naming_requests_the_links_credit_the_same(tmp_path: Path) -> None:
    """The same interleaving with a model that never passes ``re``: its actions are credited
    from what they touch and what they reply to, with the same grades."""
    sim = _sim(tmp_path, id="links",
               roster=[{"id": "ea", "person": "assistant", "policy": "openai:scripted",
                        "tools": ["chat_send_dm", "docs_edit", "email_read",
                                  "calendar_create_event", "email_reply"]}],
               people=[{"person": "maya", "response": {"delay_minutes": [20, 20]}}],
               workload=[{"task": "ea-ask-budget", "to": "ea", "at": ["d1 10:00"]},
                         {"task": "ea-meeting", "to": "ea", "at": ["d1 10:05"]}])
    playbook = Playbook([(ASK, ask_maya), (MEETING, book(23))], name_requests=False)
    with ScriptedOpenAIServer(responder=playbook) as srv:
        r = simulate(SimulationConfig(sim, db=tmp_path / "s.db", base_url=srv.base_url))
    assert all(o.passed for o in r.outcomes), r.outcomes
    credit = r.attribution["ea"]
    assert "re" not in credit and credit.get("entity", 0) >= 4, credit


def test_the_week_with_persistent_oracles_passes_by_links_alone(tmp_path: Path) -> None:
    """The week, every seat persistent, the oracle naming no request: every arrival and the
    SLA pass, and what could not be credited from a link is counted, not hidden."""
    r = simulate(SimulationConfig(SIMS / "week.yaml", agent="oracle", memory="persistent",
                                  links_only=True, db=tmp_path / "s.db"))
    assert len(r.outcomes) >= 300 and r.passed, [o for o in r.outcomes if not o.passed][:3]
    for seat, credit in r.attribution.items():
        assert "re" not in credit
        assert credit.get("entity", 0) + credit.get("reply", 0) > 0.9 * sum(credit.values()), \
            (seat, credit)
    # each arrival's episode replays to the workspace it was graded on, and regrades the same
    from coworkenv.workspace import replay_events

    with Reader(tmp_path / "s.db") as rd:
        episodes = [e for e in rd.episodes(r.run_id) if "arrival" in e.outcome]
        for e in episodes[::20]:
            assert replay_events(rd.events(e.episode_id)).state_hash() == e.state_hash
    p = subprocess.run([sys.executable, "-m", "coworkenv.cli", "regrade", "--db",
                        str(tmp_path / "s.db"), "--run", r.run_id], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and f"regraded {len(episodes)} episode(s): 0 changed" in p.stdout


def test_a_persistent_seat_refused_where_it_cannot_be(tmp_path: Path) -> None:
    from coworkenv.sim import RunConfigError

    sim = _sim(tmp_path, id="refused",
               roster=[{"id": "fin", "person": "finops", "policy": "openai:m",
                        "context": {"budget_tokens": 4000}}],
               workload=[{"task": "fin-remember-account", "to": "fin", "at": ["d1 09:30"]}])
    with pytest.raises(RunConfigError, match=r"roster\[0\]\.context\.budget_tokens: 4000 "
                       r"leaves no room: agent 'fin' has \d+ functions"):
        simulate(SimulationConfig(sim, db=tmp_path / "x.db", base_url="http://127.0.0.1:9/v1"))
    assert not (tmp_path / "x.db").exists()
    with pytest.raises(RunConfigError, match=r"memory: expected persistent or per_arrival"):
        simulate(SimulationConfig(sim, db=tmp_path / "x.db", memory="forever"))


def test_twenty_days_stay_under_the_budget_and_day_1_is_recalled_on_day_15() -> None:
    """bench/persistent.py: 20 working days, one model-backed agent (a scripted model) with
    an 8,000-token budget: the largest prompt stays under it, day 1's request has left the
    prompt by day 15, and the note written on day 1 comes back from memory on day 15."""
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "persistent.py"), "--days", "20",
                        "--recall-day", "15", "--trims", "oldest", "--per-hour", "0.2"],
                       capture_output=True,
                       text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads(p.stdout)["runs"][0]
    assert run["under_budget"] and run["largest_prompt_estimate"] <= 8000, run
    assert run["context_cuts"] > 10 and not run["day1_request_in_recall_prompt"], run
    assert run["note_found_in_memory"] and run["recall_passed"], run
    assert run["arrivals"] > 150 and run["pass_rate"] > 0.95, run


@pytest.mark.parametrize("thinking", ["none", "tokens"])
def test_simulated_time_passes_while_the_model_thinks(tmp_path: Path, thinking: str) -> None:
    """``time: {thinking: tokens}``: each call's completion tokens (as the server counts
    them) times ``seconds_per_token`` pass before the actions it decided."""
    sim = _sim(tmp_path, id=f"think-{thinking}",
               roster=[{"id": "fin", "person": "finops", "policy": "openai:scripted",
                        "tools": ["memory_write", "chat_send_dm"]}],
               time={"thinking": thinking, "seconds_per_token": 6},
               workload=[{"task": "fin-remember-account", "to": "fin", "at": ["d1 09:30"]}])
    playbook = Playbook([(r"Acme Supplies changed their remittance account", remember)])
    with ScriptedOpenAIServer(responder=playbook, count_tokens=True) as srv:
        simulate(SimulationConfig(sim, db=tmp_path / "t.db", run_id="t", base_url=srv.base_url))
    with Reader(tmp_path / "t.db") as rd:
        log = list(rd.events("t:@simulation"))
    task = next(e for e in log if e.kind == "task")
    call = next(e for e in log if e.kind == "agent.model_call")
    act = next(e for e in log if e.kind == "tool_call" and e.actor == "agent.fin")
    think = call.payload["usage"]["completion_tokens"] * 6 if thinking == "tokens" else 0
    assert act.sim_time - task.sim_time == pytest.approx(30 + think)  # (+ action_minutes)


def test_a_persistent_agents_demonstrations_are_its_own_calls_exactly(tmp_path: Path) -> None:
    """export sft of a persistent model-backed teacher: one row per model call, under the
    arrival its actions counted for, its prompt exactly what the server was sent."""
    from coworkenv.training.export import export_sft

    sim = _sim(tmp_path, id="teach",
               roster=[{"id": "ea", "person": "assistant", "policy": "teacher:openai:scripted",
                        "tools": ["chat_send_dm", "docs_edit", "email_read",
                                  "calendar_create_event", "email_reply"]}],
               people=[{"person": "maya", "response": {"delay_minutes": [20, 20]}}],
               workload=[{"task": "ea-ask-budget", "to": "ea", "at": ["d1 10:00"]},
                         {"task": "ea-meeting", "to": "ea", "at": ["d1 10:05"]}])
    playbook = Playbook([(ASK, ask_maya), (MEETING, book(23))])
    with ScriptedOpenAIServer(responder=playbook) as srv:
        r = simulate(SimulationConfig(sim, db=tmp_path / "s.db", run_id="t",
                                      base_url=srv.base_url))
        sent = [q["messages"] for q in srv.requests]
    assert r.passed
    stats = export_sft(tmp_path / "s.db", tmp_path / "sft", agent="ea", eval_fraction=0.0)
    rows = [json.loads(x) for x in (tmp_path / "sft" / "train.jsonl").read_text().splitlines()]
    assert stats.written["train"] == len(rows) >= 6
    assert {row["task_id"].split(".")[0] for row in rows} == {"ea-ask-budget", "ea-meeting"}
    for row in rows:
        prompt = row["messages"][:-1]
        assert prompt in sent  # (exactly as the server was sent it)
        assert row["messages"][-1]["role"] == "assistant"
        assert row["untrained"] == [i for i, m in enumerate(prompt) if m["role"] == "assistant"]
        assert any(t["function"]["name"] == "docs_edit" for t in json.loads(row["tools"]))
