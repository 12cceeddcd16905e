"""Every way a simulation can stop ends its run in a final state (issue 58, item 4): a scenario
script that raises (in its body or a callback) fails the run in one line naming its line; one
that waits for what never comes, or sleeps past the end, is ended by the clock with a failed
check; one that awaits something outside the simulation is cut off, not a hang; a
`SimulationSession` cancelled, left open or left by an exception ends its run `abandoned`,
and what the caller raised (or a usage error) reaches it as itself."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from coworkenv.runtime import Action, Scenario, SimulationConfig, SimulationSession, simulate
from coworkenv.sim import RunConfigError

ROOT = Path(__file__).resolve().parents[2]
HANDOFF = ROOT / "examples" / "simulations" / "handoff.yaml"
CLI = [sys.executable, "-m", "coworkenv.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=90, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "200"})


def one_error(p: subprocess.CompletedProcess[str], code: int) -> str:
    """The one ``error:`` line a stop prints (no traceback)."""
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == code, p.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr[-3000:]
    assert "Traceback" not in p.stderr + p.stdout
    return lines[0]


def statuses(db: Path, run_id: str) -> tuple[str | None, str | None]:
    """The run's status and its simulation episode's (None: not on record)."""
    with sqlite3.connect(db) as c:
        run = c.execute("SELECT status FROM runs WHERE run_id=?", (run_id,)).fetchone()
        sim = c.execute("SELECT status FROM episodes WHERE episode_id=?",
                        (f"{run_id}:@simulation",)).fetchone()
    return (run[0] if run else None), (sim[0] if sim else None)


def running_episodes(db: Path, run_id: str) -> int:
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT count(*) FROM episodes WHERE run_id=? AND "
                             "status='running'", (run_id,)).fetchone()[0])


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"import asyncio\n\nSIMULATION = {str(HANDOFF)!r}\n\n\n"
                    f"async def scenario(sim):\n{body}")
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, x in enumerate(path.read_text().splitlines(), 1) if text in x)


# scenario scripts ------------------------------------------------------------------------
@pytest.mark.timeout(90)
@pytest.mark.parametrize("where", ["callback", "body", "predicate"])
def test_a_script_that_raises_fails_its_run_in_one_line_naming_the_line(
        tmp_path: Path, where: str) -> None:
    """Raised in a ``sim.at`` callback (was: a 351-line traceback, the run left `running`), in
    the script's body (was: the run left `running`, also after --resume), or in a
    ``sim.until`` predicate once the simulation runs."""
    bodies = {"callback": "    sim.at('d1 10:30', lambda: 1 / 0)\n    await sim.sleep(600)\n"
                          "    sim.check('after', True)\n",
              "body": "    await sim.sleep(90)\n    raise RuntimeError('boom')\n",
              "predicate": "    await sim.until(lambda: len(sim.outcomes) >= 1 and "
                           "sim.outcomes[5].passed)\n    sim.check('after', True)\n"}
    raising, what = {"callback": ("1 / 0", "ZeroDivisionError"),
                     "body": ("raise RuntimeError", "scenario script: RuntimeError: boom"),
                     "predicate": ("sim.outcomes[5]", "IndexError")}[where]
    path = script(tmp_path, "boom.py", bodies[where])
    db = tmp_path / "s.db"
    runs = [cli("simulate", str(path), "--db", str(db), "--run-id", "r")]
    if where == "body":
        runs.append(cli("simulate", str(path), "--db", str(db), "--run-id", "r", "--resume"))
    for p in runs:
        line = one_error(p, 1)
        assert f"{path}:{line_of(path, raising)}" in line, line
        assert what in line and "run r failed" in line, line
        assert statuses(db, "r") == ("failed", "aborted")
        assert running_episodes(db, "r") == 0
    shown = cli("runs", "--db", str(db), "--json")
    assert [x["state"] for x in json.loads(shown.stdout)] == ["failed"]  # (not "--resume")
    if where == "callback":  # (stopped there: the simulation did not go on to its end)
        with sqlite3.connect(db) as c:
            last = c.execute("SELECT max(sim_time) FROM events WHERE episode_id='r:@simulation'"
                             ).fetchone()[0]
        assert last < 2 * 3600  # (10:30, the clock starting at 09:00)


@pytest.mark.timeout(90)
def test_a_wait_for_what_never_happens_is_ended_by_the_clock_with_a_failed_check(
        tmp_path: Path) -> None:
    """Was: exit 0, a normal summary, and the check after the wait gone without a word."""
    path = script(tmp_path, "never.py", "    await sim.until(lambda: False)\n"
                  "    sim.check('after', True)\n")
    db = tmp_path / "s.db"
    p = cli("simulate", str(path), "--db", str(db), "--run-id", "r")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    line = next(x for x in p.stdout.splitlines() if "script:ran-to-end" in x)
    assert "FAIL" in line and f"{path}:{line_of(path, 'sim.until')}" in line, line
    assert "script:after" not in p.stdout
    assert statuses(db, "r") == ("finished", "completed")


@pytest.mark.timeout(60)
def test_a_sleep_past_the_end_ends_at_the_end(tmp_path: Path) -> None:
    path = script(tmp_path, "late.py", "    await sim.sleep(60 * 24 * 30)\n"
                  "    sim.check('after', True)\n")
    r = simulate(SimulationConfig(path, db=tmp_path / "s.db", run_id="r"))
    checks = {c.id: c for c in r.checks}
    assert "script:after" not in checks
    ended = checks["script:ran-to-end"]
    assert not ended.passed and f"{path}:{line_of(path, 'sim.sleep')}" in ended.detail
    assert r.sim_seconds < 3 * 86400  # (the clock's day and its drain, not 30 days)
    assert statuses(tmp_path / "s.db", "r") == ("finished", "completed")


@pytest.mark.timeout(60)
def test_a_script_that_awaits_outside_the_simulation_is_cut_off_not_a_hang(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``await asyncio.sleep(10**9)`` (was: a hang, 0 events, the run `running`): after
    ``outside_wait_s`` of wall time the simulation goes on without the script, to its end."""
    monkeypatch.setattr(Scenario, "outside_wait_s", 0.5)
    path = script(tmp_path, "asleep.py", "    await sim.sleep(30)\n"
                  "    await asyncio.sleep(10**9)\n    sim.check('after', True)\n")
    t0 = time.monotonic()
    r = simulate(SimulationConfig(path, db=tmp_path / "s.db", run_id="r"))
    assert time.monotonic() - t0 < 30
    checks = {c.id: c for c in r.checks}
    assert "script:after" not in checks
    cut = checks["script:ran-to-end"]
    assert not cut.passed and "outside the simulation" in cut.detail
    assert f"{path}:{line_of(path, 'asyncio.sleep')}" in cut.detail
    assert len(r.outcomes) == 8  # (every arrival of the day, graded)
    assert statuses(tmp_path / "s.db", "r") == ("finished", "completed")


# one agent from outside --------------------------------------------------------------------
def on_record(db: Path, run_id: str) -> bool:
    return db.exists() and statuses(db, run_id)[0] is not None


async def _on_record(db: Path, run_id: str) -> None:
    """Wait until the run is committed (the simulation waits for the caller meanwhile)."""
    with anyio.fail_after(20):
        while not on_record(db, run_id):
            await anyio.sleep(0.02)


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_a_cancelled_session_ends_its_run_abandoned(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with anyio.CancelScope() as scope:
        async with SimulationSession(HANDOFF, agent="fin", db=db, run_id="s") as s:
            await s.reset()
            await s.step(Action.tool("docs_read", doc_id="budget-q3"))
            await _on_record(db, "s")
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert statuses(db, "s") == ("abandoned", "aborted")
    assert running_episodes(db, "s") == 0


@pytest.mark.timeout(60)
def test_a_session_left_open_ends_its_run_abandoned_and_says_why_it_cannot_resume(
        tmp_path: Path) -> None:
    """Entered and never left: the event loop's end cancels it (was: the run and its
    simulation episode `running` for ever, and --resume refused in terms of policies)."""
    db = tmp_path / "s.db"

    async def main() -> None:
        s = SimulationSession(HANDOFF, agent="fin", db=db, run_id="s")
        await s.__aenter__()
        await s.reset()
        await _on_record(db, "s")

    anyio.run(main)
    assert statuses(db, "s") == ("abandoned", "aborted")
    assert running_episodes(db, "s") == 0
    with pytest.raises(RunConfigError, match=r"^resume: .*'s' \(abandoned\) held agent 'fin' "
                       r"from outside \(a SimulationSession\)") as err:
        simulate(SimulationConfig(HANDOFF, db=db, run_id="s", resume=True))
    assert "\n" not in str(err.value)
    assert statuses(db, "s") == ("abandoned", "aborted")


class Mine(Exception):
    pass


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_an_exception_inside_a_session_reaches_the_caller_as_itself(
        tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with pytest.raises(Mine) as raised:
        async with SimulationSession(HANDOFF, agent="fin", db=db, run_id="s") as s:
            await s.reset()
            await _on_record(db, "s")
            raise Mine("the trainer's own error")
    assert type(raised.value) is Mine  # (not an exception group)
    assert statuses(db, "s") == ("abandoned", "aborted")


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_a_bad_run_id_is_one_usage_error_before_the_block(tmp_path: Path) -> None:
    entered = False
    with pytest.raises(RunConfigError) as raised:
        async with SimulationSession(HANDOFF, agent="fin", db=tmp_path / "s.db",
                                     run_id="bad id!"):
            entered = True
    assert type(raised.value) is RunConfigError and not entered
    assert str(raised.value).startswith("run id 'bad id!'") and "\n" not in str(raised.value)
