"""Time in a simulation: waits that name a time, waits woken by the end of the outage the
agent ran into, and thinking time (simulated time that passes while a model answers)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from coworkenv.runtime import Action, SimulationSession

SIMS = Path(__file__).resolve().parents[2] / "examples" / "simulations"


def _outage_day(tmp_path: Path) -> Path:
    """One day at Northwind: mail is down 10:00-11:00, and at 10:05 Kai is locked out and
    wants an email (the IT agent's request needs email_send)."""
    sim = {
        "kind": "simulation", "id": "outage-day", "company": "northwind",
        "clock": {"start": "2026-03-02T09:00:00-05:00", "days": 1},
        "tasks": [str(SIMS / "northwind-requests.yaml")],
        "roster": [{"id": "it", "person": "helpdesk", "policy": "oracle"}],
        "workload": [{"task": "it-password", "to": "it", "at": ["d1 10:05"]}],
        "events": [{"kind": "outage", "app": "email", "from": "d1 10:00", "to": "d1 11:00"}],
    }
    shutil.copytree(SIMS / "companies", tmp_path / "companies", dirs_exist_ok=True)
    path = tmp_path / "outage.yaml"
    path.write_text(yaml.safe_dump(sim))
    return path


@pytest.mark.anyio
async def test_a_session_agent_that_waits_out_an_outage_passes(tmp_path: Path) -> None:
    """The held agent runs into the outage, waits (no time named), is woken when mail is back
    at 11:00, sends, and passes: waiting correctly is no longer a false failure."""
    async with SimulationSession(_outage_day(tmp_path), agent="it", db=tmp_path / "s.db",
                                 run_id="o") as s:
        obs = await s.reset()
        assert "locked out (ticket T2-0)" in obs.text  # (the arrival's own ticket)
        mail = Action.tool("email_send", to=["kai"], subject="Password reset (T2-0)",
                           body="Your password is reset and ticket T2-0 is resolved.")
        obs, _, done, _ = await s.step(mail)
        assert "unavailable" in obs.text and not done
        obs, _, done, _ = await s.step(Action.wait())
        assert "service_restored" in obs.text and "email is available again" in obs.text
        assert not done
        obs, _, _, _ = await s.step(mail)
        assert '"ok": true' in obs.text
        await s.step(Action.tool("tickets_update", ticket_id="T2-0", status="resolved"))
        _, reward, done, info = await s.step(Action.finish())
        assert done and reward == 1.0, info
    assert s.result is not None and s.result.passed
    from coworkenv.store import Reader

    with Reader(tmp_path / "s.db") as r:
        woken = [e for e in r.events("o:@simulation") if e.kind == "notify"
                 and e.payload.get("notification") == "service_restored"]
    assert len(woken) == 1 and woken[0].sim_time == 2 * 3600  # (11:00: two hours in)


@pytest.mark.anyio
async def test_a_wait_that_names_a_time_wakes_the_agent_then(tmp_path: Path) -> None:
    async with SimulationSession(_outage_day(tmp_path), agent="it", db=tmp_path / "s.db",
                                 run_id="w") as s:
        await s.reset()
        obs, _, done, _ = await s.step(Action.wait(until="10:45"))
        assert "[wake] Mon 10:45" in obs.text and not done
        obs, _, done, _ = await s.step(Action.wait(minutes=20))
        assert "[wake] Mon 11:05" in obs.text
        bad = Action.wait(until="teatime").problem()
        assert bad is not None and "until: expected HH:MM or ISO-8601" in bad
