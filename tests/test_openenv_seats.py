"""`coworkenv serve-env --simulation FILE --seat ...`: seats of a running simulation as an
OpenEnv environment, each played by its own OpenEnv client (``MCPToolClient``), each arrival's
reward on its own seat; a lobby starts the simulation once every seat has a client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient

from coworkenv.store import Reader

from .conftest import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
HANDOFF = ROOT / "examples" / "simulations" / "handoff.yaml"


async def assistant(url: str, answer: str) -> dict[str, Any]:
    """The assistant's client: its first arrival (asked for the Q3 travel budget), asks
    finance in a DM, waits for the figure and relays it."""
    async with MCPToolClient(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(seat="ea")
        opening = first.observation.result
        assert "Q3 travel budget" in opening["text"], opening
        assert {"chat_send_dm", "email_send", "finish"} <= set(opening["tools"])
        assert opening["state"]["seat"] == "ea" and not first.done

        async def act(name: str, **arguments: Any) -> Any:
            r = await env.step(CallToolAction(tool_name=name, arguments=arguments))
            assert r.observation.error is None, r.observation.error
            return r

        await act("chat_send_dm", to="finops", text="Hi, what is the approved Q3 travel "
                  "budget? Elena is asking.")
        told = ""
        for _ in range(10):  # (until finance's client answers)
            told += (await act("wait")).observation.result["text"]
            if "finops" in told and "$" in told:
                break
        figure = answer if answer in told else "?"
        await act("email_send", to=["elena"], subject="Q3 travel budget",
                  body=f"The approved Q3 travel budget is {figure} (from finance operations).")
        last = await act("finish", summary="relayed finance's figure")
        late = await env.step(CallToolAction(tool_name="wait", arguments={}))
        state = await env.state()
        return {"last": last, "late": late, "state": state}


async def finance(url: str, answer: str) -> dict[str, Any]:
    """Finance's client: the assistant's question reaches it as its first arrival (the
    hand-off); it reads the budget document and answers with ``answer``."""
    async with MCPToolClient(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(seat="fin")
        assert "Executive Assistant wrote: Hi, what is the approved" in \
            first.observation.result["text"]
        for name, arguments in (("docs_read", {"doc_id": "budget-q3"}),
                                ("chat_send_dm", {"to": "assistant", "text":
                                                  f"The approved Q3 travel budget is "
                                                  f"{answer}."})):
            r = await env.step(CallToolAction(tool_name=name, arguments=arguments))
            assert r.observation.error is None and r.reward == 0.0 and not r.done
        return {"last": await env.step(CallToolAction(tool_name="finish",
                                                      arguments={"summary": "answered"}))}


def test_two_openenv_clients_play_two_seats_of_one_simulation(tmp_path: Path) -> None:
    """The assistant and finance of the hand-off simulation, each an OpenEnv client of its own
    seat. Finance answers a wrong figure: its arrival scores 0 and the assistant's (which
    relayed what finance said) 1, each reward on its own seat. The assistant's client connects
    first and waits in the lobby until finance's has come; once both leave, the seats' later
    arrivals go to --then (the oracle) and the simulation runs to its end, one run in --db."""
    db, port = tmp_path / "seats.db", free_port()
    proc = subprocess.Popen([sys.executable, "-m", "coworkenv.cli", "serve-env", "--simulation",
                             str(HANDOFF), "--seat", "ea", "--seat", "fin", "--then", "oracle",
                             "--db", str(db), "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(proc, port)

        async def both() -> tuple[dict[str, Any], dict[str, Any]]:
            ea = asyncio.ensure_future(assistant(url, "$52,000"))
            await asyncio.sleep(1.0)  # (the assistant waits in the lobby meanwhile)
            assert not ea.done()
            fin = await finance(url, "$52,000")
            return await ea, fin

        ea, fin = asyncio.run(asyncio.wait_for(both(), 120))
        deadline = asyncio.run(until_finished(db))
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "serving the seats ea, fin of simulation northwind-handoff" in out, out
    assert "1 simulation(s) played" in out, out
    assert deadline, "the simulation did not run to its end once both clients left"
    last, late = ea["last"], ea["late"]
    assert last.done and last.reward == 1.0, last.observation.result
    result = last.observation.result["state"]
    assert result["seat"] == "ea" and result["task_id"].startswith("ea-travel-budget")
    assert result["passed"] is True and result["simulation"] == "northwind-handoff"
    assert "this arrival is over" in late.observation.error.message
    assert fin["last"].done and fin["last"].reward == 0.0
    assert fin["last"].observation.result["state"]["task_id"].startswith("fin-budget-answer")
    run = result["run"]
    with Reader(db) as rd:
        episodes = rd.episodes(run)
        sim = next(e for e in episodes if e.task_id == "@simulation")
    assert sim.status == "completed" and sim.agent == "ea=session, fin=session"
    by = {}
    for e in episodes:
        by.setdefault(e.task_id.split(".")[0], set()).add(e.agent)
    # the first arrival of each seat was its client's; the rest (after they left): the oracle
    assert by["ea-travel-budget"] == {"session"} and by["fin-budget-answer"] == {"session"}
    assert by["fin-expense-decision"] == {"oracle"}


async def until_finished(db: Path, within: float = 60.0) -> bool:
    """Wait until the one simulation in ``db`` has ended (its run finished)."""
    import sqlite3

    for _ in range(int(within / 0.25)):
        with sqlite3.connect(db) as c:
            rows = c.execute("SELECT status FROM runs").fetchall()
        if rows and all(r[0] not in ("running", "created") for r in rows):
            return True
        await asyncio.sleep(0.25)
    return False


def test_a_lobby_names_the_seats_nobody_took_and_resets_name_what_is_served(
        tmp_path: Path) -> None:
    """A client alone in the lobby is told, after the lobby timeout, which seat nobody took;
    a reset without a seat, with an unknown one or with a task_id is refused, naming the
    seats; serving seats needs a roster agent."""
    from starlette.testclient import TestClient

    from coworkenv.serve.openenv import create_simulation_app
    from coworkenv.sim.errors import RunConfigError

    app, seats = create_simulation_app(HANDOFF, ["ea", "fin"], tmp_path / "l.db",
                                       lobby_timeout_s=1.0)
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        def reset(**data: Any) -> str:
            ws.send_text(json.dumps({"type": "reset", "data": data}))
            return str(ws.receive_json()["data"]["observation"]["error"]["message"])

        assert reset() == "reset needs seat=, one of ['ea', 'fin']"
        assert "seat 'cfo' is not served here (seats: ea, fin)" in reset(seat="cfo")
        assert "task_id 'x': this server serves the seats of simulation 'northwind-handoff'" \
            in reset(task_id="x")
        assert reset(seat="ea") == (
            "no client took seat(s) fin of the simulation with seed 0 within 1 s (it starts "
            "once every seat of ea, fin has a client: reset(seat=...))")
    assert seats.started == 0
    with pytest.raises(RunConfigError, match=r"seat: 'cfo' not in the roster of .*handoff\.yaml "
                       r"\(agents: ea, fin\)"):
        create_simulation_app(HANDOFF, ["cfo"], tmp_path / "l.db")
    with pytest.raises(RunConfigError, match=r"agents: fin: agent: expected oracle .*, got "
                       r"'bogus'"):  # (the others' policies: checked before serving)
        create_simulation_app(HANDOFF, ["ea"], tmp_path / "l.db", agents={"fin": "bogus"})


def test_lobbies_gather_clients_by_seed_and_run_their_simulations_at_once(tmp_path: Path
                                                                          ) -> None:
    """Clients without a seed fill the oldest lobby that lacks their seat, each new lobby the
    next seed from --seed; clients that ask for a seed meet there. Three simulations run at
    once; once every client has let go, each runs to its end (the oracle taking the seats'
    arrivals), each a run of its own with its seed."""
    from coworkenv.serve.simseats import SimulationSeats

    db = tmp_path / "p.db"

    async def main() -> list[Any]:
        seats = SimulationSeats(HANDOFF, ["ea", "fin"], db, then="oracle", seed=5)
        seats.loop = asyncio.get_running_loop()
        asked = [("ea", None), ("ea", None), ("fin", None), ("fin", 9), ("ea", 9),
                 ("fin", None)]
        lobbies = await asyncio.wait_for(asyncio.gather(
            *(seats.join(seat, seed) for seat, seed in asked)), 60)
        assert [lb.seed for lb in lobbies] == [5, 6, 5, 9, 9, 6]
        assert lobbies[0] is lobbies[2] and lobbies[1] is lobbies[5] and \
            lobbies[3] is lobbies[4] and seats.started == 3
        for lobby, (seat, _) in zip(lobbies, asked, strict=True):
            seats.let_go(lobby, seat)
        await asyncio.wait_for(asyncio.gather(*{lb.task for lb in lobbies}), 60)
        return [lb.run_id for lb in lobbies]

    runs = set(asyncio.run(main()))
    assert len(runs) == 3
    with Reader(db) as rd:
        done = {r["run_id"]: r["status"] for r in rd.runs()}
        seeds = {e.seed for run in runs for e in rd.episodes(run) if e.task_id == "@simulation"}
    assert done == dict.fromkeys(runs, "finished") and seeds == {5, 6, 9}
