"""Hand-offs that carry the work: an arrival caused by an agent's message is built from that
message (the template and case it names), and the sender is graded against what it caused
(``handoff``: it forwarded what was asked; ``agrees_with``: what it told its requester agrees
with the other agent's decision), once that arrival has ended too."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.runtime import Action, SimulationSession
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.store import Reader

SIMS = Path(__file__).resolve().parents[2] / "examples" / "simulations"
HANDOFF = SIMS / "handoff.yaml"


def _approvals(tmp_path: Path, times: list[str]) -> Path:
    """The hand-off example's expense approvals alone."""
    shutil.copytree(SIMS / "companies", tmp_path / "companies", dirs_exist_ok=True)
    sim = yaml.safe_load(HANDOFF.read_text())
    sim["id"] = "approvals"
    sim["tasks"] = [str(SIMS / "handoff-requests.yaml")]
    sim["workload"] = [{"task": "ea-expense-approval", "to": "ea", "at": times},
                       {"tasks": ["fin-budget-answer", "fin-expense-decision"], "to": "fin",
                        "on": {"message": {"from": "assistant", "to": "finops"}}}]
    path = tmp_path / "approvals.yaml"
    path.write_text(yaml.safe_dump(sim))
    return path


def _cases(db: Path, run: str) -> dict[str, dict[str, Any]]:
    with Reader(db) as r:
        return {e.outcome["arrival"]: e.outcome for e in r.episodes(run)
                if "arrival" in e.outcome}


def test_each_handoff_is_built_from_the_message_that_caused_it(tmp_path: Path) -> None:
    r = simulate(SimulationConfig(HANDOFF, db=tmp_path / "h.db", run_id="h"))
    assert r.passed, [o for o in r.outcomes if not o.passed]
    assert {c.id: c.passed for c in r.checks}["handoffs"]
    arrivals = _cases(tmp_path / "h.db", "h")
    decisions = [o for o in arrivals.values() if o["template"] == "fin-expense-decision"]
    assert len(decisions) == 3
    for o in decisions:  # the case finance worked on is the one the assistant's request had
        asked = arrivals[o["cause"]]
        assert asked["template"] == "ea-expense-approval"
        assert {k: o["case"][k] for k in ("amount", "item")} == \
            {k: asked["case"][k] for k in ("amount", "item")}
        assert o["outputs"]["decision"] == asked["case"]["decision"]
    budget = next(o for o in arrivals.values() if o["template"] == "fin-budget-answer")
    assert arrivals[budget["cause"]]["template"] == "ea-travel-budget"
    # the cross-arrival grades are in the stored episodes: a regrade gives them again
    p = subprocess.run([sys.executable, "-m", "coworkenv.cli", "regrade", "--db",
                        str(tmp_path / "h.db"), "--run", "h"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "regraded 8 episode(s): 0 changed" in p.stdout, p.stderr


def test_an_injected_request_does_not_shift_what_finance_receives(tmp_path: Path) -> None:
    """An extra request injected among the others (a scenario script): drawn in turn, the
    approver would get the next template's request, not the one forwarded; made from the
    message, every decision is about what was sent, and everything passes."""
    sim = _approvals(tmp_path, ["d1 11:00", "d1 11:00", "d1 13:00"])
    script = tmp_path / "inject.py"
    script.write_text(f"SIMULATION = {str(sim)!r}\n\nasync def scenario(sim):\n"
                      "    sim.add_task('ea-travel-budget', to='ea', at='d1 11:00', "
                      "requester='elena')\n    sim.add_task('ea-expense-approval', to='ea', "
                      "at='d1 11:00')\n")
    r = simulate(SimulationConfig(script, db=tmp_path / "i.db", run_id="i"))
    assert r.passed, [o for o in r.outcomes if not o.passed]
    arrivals = _cases(tmp_path / "i.db", "i")
    made = [o for o in arrivals.values() if o.get("cause")]
    assert len(made) == 5
    for o in made:
        asked = arrivals[o["cause"]]
        if o["template"] == "fin-expense-decision":
            assert o["case"]["amount"] == asked["case"]["amount"]
        else:
            assert asked["template"] == "ea-travel-budget"


async def _play_desk(tmp_path: Path, forward: str, relay: str, to: str = "finops"
                     ) -> tuple[float, Any]:
    """The assistant held from outside on one expense request; ``forward`` and ``relay``
    are format strings of what it sends finance and tells Bea ({amount}, {item}; the other
    case's {other_amount}, {other_item}; finance's {decision} and the {other} one)."""
    async with SimulationSession(_approvals(tmp_path, ["d1 11:00"]), agent="ea",
                                 db=tmp_path / "s.db", run_id="s") as s:
        obs = await s.reset()
        m = re.search(r"my (.+?) expense of (\$[\d,]+) approved", obs.text)
        assert m, obs.text
        item, amount = m[1], m[2]
        other = {"$420": "$3,900", "$1,850": "$3,900", "$3,900": "$420"}[amount]
        other_item = {"$420": "team lunch", "$1,850": "conference pass",
                      "$3,900": "offsite venue deposit"}[other]
        await s.step(Action.tool("chat_send_dm", to=to, text=forward.format(
            amount=amount, item=item, other_amount=other, other_item=other_item)))
        obs, reward, done, _ = await s.step(Action.wait())
        if not done:  # (else nobody answered: its time limit came)
            heard = re.search(r"\b(approved|rejected)\b", obs.text, re.I)
            decision = heard[1].lower() if heard else "approved"
            flip = "rejected" if decision == "approved" else "approved"
            await s.step(Action.tool("chat_send_dm", to="bea", text=relay.format(
                decision=decision, other=flip, amount=amount, item=item)))
            _, reward, done, _ = await s.step(Action.finish())
    assert s.result is not None
    return reward, s.result


@pytest.mark.anyio
async def test_forwarding_what_was_asked_and_relaying_the_decision_passes(
        tmp_path: Path) -> None:
    reward, result = await _play_desk(
        tmp_path, "Please approve {amount} for the {item}.", "Finance says: {decision}.")
    assert reward == 1.0 and result.passed


@pytest.mark.anyio
async def test_the_example_fails_when_finance_gets_another_request_than_asked(
        tmp_path: Path) -> None:
    """The assistant forwards other figures than Bea asked: finance decides what it got
    (and passes), the assistant relays that faithfully, and fails: it handed on another
    request."""
    reward, result = await _play_desk(
        tmp_path, "Please approve {other_amount} for the {other_item}.",
        "Finance says: {decision}.")
    assert reward == 0.0 and not result.passed
    by = {o.template: o for o in result.outcomes}
    assert by["fin-expense-decision"].passed and not by["ea-expense-approval"].passed
    with Reader(tmp_path / "s.db") as r:
        ea = next(e for e in r.episodes("s") if e.task_id.startswith("ea-expense"))
        checks = {c["check_id"]: c for c in r.check_results(ea.episode_id)}
    assert not checks["forwarded"]["passed"] and "not {" in checks["forwarded"]["detail"]


@pytest.mark.anyio
async def test_the_example_fails_when_the_reply_contradicts_the_decision(
        tmp_path: Path) -> None:
    reward, result = await _play_desk(
        tmp_path, "Please approve {amount} for the {item}.", "Finance says: {other}.")
    assert reward == 0.0 and not result.passed
    by = {o.template: o for o in result.outcomes}
    assert by["fin-expense-decision"].passed and not by["ea-expense-approval"].passed


@pytest.mark.anyio
async def test_a_handoff_to_someone_else_is_no_handoff(tmp_path: Path) -> None:
    reward, result = await _play_desk(
        tmp_path, "Please approve {amount} for the {item}.", "Finance says: {decision}.",
        to="leo")
    assert reward == 0.0
    assert [o.template for o in result.outcomes] == ["ea-expense-approval"]


def test_a_message_that_names_no_request_is_recorded_and_fails_the_handoffs(
        tmp_path: Path) -> None:
    """The assistant writes finance about an expense no template's case names: no arrival is
    made, the message is on record, and the simulation's hand-off check fails."""
    sim = _approvals(tmp_path, ["d1 11:00"])
    script = tmp_path / "odd.py"
    script.write_text(f"SIMULATION = {str(sim)!r}\n\nasync def scenario(sim):\n"
                      "    await sim.sleep(30)\n"
                      "    sim.say('assistant', 'finops', 'Can you approve $77 for stamps?')\n")
    r = simulate(SimulationConfig(script, db=tmp_path / "u.db", run_id="u"))
    check = next(c for c in r.checks if c.id == "handoffs")
    assert not check.passed and "1 hand-off messages that named no request" in check.detail
    with Reader(tmp_path / "u.db") as rd:
        odd = [e for e in rd.events("u:@simulation") if e.kind == "sim.handoff_unmatched"]
    assert len(odd) == 1 and "$77" in odd[0].payload["text"]


def test_handoff_mutants_are_killed_with_no_false_positive(tmp_path: Path) -> None:
    """The simulation's mutation check: the assistant's reference played as written passes
    (no false positive); handing to the wrong agent, forwarding other figures, and telling
    the requester the opposite of the decision are each killed."""
    from coworkenv.runtime.simmutate import mutation_check

    report = mutation_check(HANDOFF, db=tmp_path / "m.db")
    assert report.false_positives == [], report.false_positives
    kinds = {m.kind: m for m in report.mutants}
    assert set(kinds) == {"handoff_to_wrong_agent", "handoff_other_case",
                          "reply_contradicts_decision"}
    for m in report.mutants:
        assert m.applied > 0 and m.killed == m.applied, m
