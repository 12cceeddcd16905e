"""Several agents of one simulation held from outside at once (``SimulationSession(agent=[...])``):
each stepped by its own client, each arrival's reward to its own seat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.runtime import Action, SimulationSession
from coworkenv.sim.errors import RunConfigError
from coworkenv.store import Reader

HANDOFF = Path(__file__).resolve().parents[2] / "examples" / "simulations" / "handoff.yaml"


@pytest.mark.anyio
@pytest.mark.parametrize(("answer", "passes"), [("$48,500", True), ("$52,000", False)])
async def test_two_agents_each_stepped_by_its_own_client(tmp_path: Path, answer: str,
                                                          passes: bool) -> None:
    """The assistant asks finance (a hand-off), finance answers, the assistant relays it:
    two clients, one per agent, each with its own arrival and reward. A wrong figure from
    finance fails finance's arrival only: the assistant relayed what finance said, which is
    what its agrees_with check asks."""
    got: dict[str, Any] = {}
    async with SimulationSession(HANDOFF, agent=["ea", "fin"], db=tmp_path / "s.db",
                                 run_id="s", then="oracle") as s:
        assert set(s.seats) == {"ea", "fin"}

        async def assistant() -> None:
            ea = s.seats["ea"]
            obs = await ea.reset()
            assert "Q3 travel budget" in obs.text
            await ea.step(Action.tool("chat_send_dm", to="finops", text="Hi, what is the "
                                      "approved Q3 travel budget? Elena is asking."))
            told = ""
            for _ in range(10):  # (until finance answers)
                obs, *_ = await ea.step(Action.wait())
                told += obs.text
                if "finops" in told and "$" in told:
                    break
            figure = answer if answer in told else "?"
            await ea.step(Action.tool("email_send", to=["elena"], subject="Q3 travel budget",
                                      body=f"The approved Q3 travel budget is {figure} (from "
                                           "finance operations)."))
            got["ea"] = await ea.step(Action.finish())

        async def finance() -> None:
            fin = s.seats["fin"]
            obs = await fin.reset()  # (made from the assistant's message: its hand-off)
            assert "Executive Assistant wrote: Hi, what is the approved" in obs.text
            await fin.step(Action.tool("docs_read", doc_id="budget-q3"))
            await fin.step(Action.tool("chat_send_dm", to="assistant",
                                       text=f"The approved Q3 travel budget is {answer}."))
            got["fin"] = await fin.step(Action.finish())

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(assistant)
                tg.start_soon(finance)
        with pytest.raises(RunConfigError, match=r"it holds 2 agents \(ea, fin\): step each "
                           r"through its seat"):
            await s.reset()
    for seat, task, ok in (("ea", "ea-travel-budget", True),
                           ("fin", "fin-budget-answer", passes)):
        _, reward, done, info = got[seat]
        assert done and info["agent"] == seat and info["task_id"].startswith(task)
        assert reward == (1.0 if ok else 0.0), (seat, info)
    assert s.result is not None
    by = {o.template: o for o in s.result.outcomes if o.key in {got["ea"][3]["arrival"],
                                                                 got["fin"][3]["arrival"]}}
    assert {t: o.passed for t, o in by.items()} == {"ea-travel-budget": True,
                                                    "fin-budget-answer": passes}
    with Reader(tmp_path / "s.db") as rd:  # (both on record as held from outside)
        held = {e.task_id.split(":")[0] for e in rd.episodes("s") if e.agent == "session"}
    assert {"ea-travel-budget", "fin-budget-answer"} <= {h.split(".")[0] for h in held}


TWO = HANDOFF.with_name("two-agents.yaml")


@pytest.mark.anyio
async def test_a_seat_let_go_hands_its_later_arrivals_to_then(tmp_path: Path) -> None:
    """Finance is held for its first arrival (Bea's per-diem question), then let go: the
    assistant's hand-off later that morning goes to ``then`` (the oracle), which answers it,
    so the assistant still passes; each seat knows the task of its arrival in hand."""
    got: dict[str, Any] = {}
    async with SimulationSession(TWO, agent=["ea", "fin"], db=tmp_path / "s.db", run_id="r",
                                 then="oracle", seed=3) as s:
        async def finance() -> None:
            fin = s.seats["fin"]
            await fin.reset()
            assert fin.task is not None and fin.task.id.startswith("fin-per-diem")
            assert "email_reply" in {st.tool for st in fin.task.reference
                                     if hasattr(st, "tool")}
            got["fin"] = await fin.step(Action.finish())
            await fin.release()
            assert fin.task is None

        async def assistant() -> None:
            ea = s.seats["ea"]
            await ea.reset()
            assert ea.task is not None and ea.task.id.startswith("ea-travel-budget")
            await ea.step(Action.tool("chat_send_dm", to="finops",
                                      text="Hi, what is the approved Q3 travel budget?"))
            told = ""
            for _ in range(10):
                obs, *_ = await ea.step(Action.wait())
                told += obs.text
                if "48,500" in told:
                    break
            await ea.step(Action.tool("email_send", to=["elena"], subject="Q3 travel budget",
                                      body="The approved Q3 travel budget is $48,500."))
            got["ea"] = await ea.step(Action.finish())

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(finance)
                tg.start_soon(assistant)
    assert got["ea"][1] == 1.0 and got["fin"][1] == 0.0  # (finance answered nobody)
    with Reader(tmp_path / "s.db") as rd:
        episodes = rd.episodes("r")
    by = {e.task_id.split(".")[0]: e.agent for e in episodes}
    assert by == {"@simulation": "ea=session, fin=session", "fin-per-diem": "session",
                  "ea-travel-budget": "session", "fin-budget-answer": "oracle"}
    assert [e.seed for e in episodes if e.task_id == "@simulation"] == [3]  # (its draw)
