"""Remote agent workers over the real Mosquitto: separate processes, results as in-process."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkenv.bus import new_id
from coworkenv.sim import builtin_tasks

from ..sim.conftest import run_sync

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]


@pytest.fixture(autouse=True)
def shared_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The runner and its workers are separate processes: they share the bus key through the
    environment (each test a key of its own)."""
    key = new_id()
    monkeypatch.setenv("COWORKENV_BUS_KEY", key)
    return key


@pytest.fixture
def prefix(broker: tuple[str, int]) -> str:
    host, port = broker
    return f"mqtt://{host}:{port}/cwremote-{new_id()[:8]}"


def start_workers(bus: str, *ids: str) -> list[subprocess.Popen[str]]:
    procs = [subprocess.Popen([*CLI, "worker", "--bus", bus, "--worker-id", w], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for w in ids]
    for p in procs:
        assert p.stdout is not None
        assert "serving" in p.stdout.readline()
    return procs


@pytest.fixture
def cleanup() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def test_two_workers_give_the_in_process_results(tmp_path: Path, prefix: str,
                                                 cleanup: list[subprocess.Popen[str]]) -> None:
    cleanup += start_workers(prefix, "wA", "wB")
    db = tmp_path / "remote.db"
    out = subprocess.run([*CLI, "run", "--tasks", "examples/tasks", "--agent", "remote", "--bus",
                          prefix, "--db", str(db), "--trials", "4", "--quiet"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    local = run_sync(builtin_tasks(), tmp_path / "local.db", trials=4)
    assert len(local) == 4 * len(builtin_tasks())
    with sqlite3.connect(db) as c:
        remote = {(t, k): (h, s) for t, k, h, s in c.execute(
            "SELECT task_id, trial, events_hash, state_hash FROM episodes "
            "WHERE status='completed'")}
    assert remote == {(r.task_id, r.trial): (r.events_hash, r.state_hash) for r in local}


def test_killing_a_worker_mid_run_loses_no_episode(tmp_path: Path, prefix: str,
                                                   cleanup: list[subprocess.Popen[str]]) -> None:
    workers = start_workers(prefix, "wA", "wB")
    cleanup += workers
    db = tmp_path / "kill.db"
    trials = 25
    runner = subprocess.Popen([*CLI, "run", "--tasks", "examples/tasks", "--agent", "remote",
                               "--bus", prefix, "--db", str(db), "--trials", str(trials),
                               "--concurrency", "16", "--quiet"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cleanup.append(runner)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            with sqlite3.connect(db) as c:
                done = c.execute("SELECT count(*) FROM episodes WHERE status='completed'"
                                 ).fetchone()[0]
        except sqlite3.Error:
            continue
        if done >= 40:
            break
    assert runner.poll() is None, "the run ended before a worker could be killed"
    os.kill(workers[0].pid, signal.SIGKILL)
    _, err = runner.communicate(timeout=240)
    assert runner.returncode == 0, err
    n = len(builtin_tasks()) * trials
    with sqlite3.connect(db) as c:
        per_trial = c.execute("SELECT count(*) FROM (SELECT task_id, trial FROM episodes "
                              "WHERE status='completed' GROUP BY 1, 2 HAVING count(*) = 1)"
                              ).fetchone()[0]
        statuses = dict(c.execute("SELECT status, count(*) FROM episodes GROUP BY 1"))
        reasons = [r[0] for r in c.execute("SELECT failure FROM episodes WHERE status='failed'")]
        completion = c.execute("SELECT min(completion) FROM episodes WHERE status='completed'"
                               ).fetchone()[0]
    assert per_trial == n  # every (task, trial) completed exactly once
    assert statuses.get("running", 0) == 0
    assert statuses["completed"] == n
    assert completion == 1.0
    # in-flight episodes of the dead worker failed with a reason, then ran again elsewhere
    assert reasons, "no episode was caught on the killed worker"
    assert all("remote worker wA" in r for r in reasons), reasons
    # told by the broker (the worker's last will), not found out from missing heartbeats
    assert any("last will" in r for r in reasons), reasons


def test_episodes_ended_without_finish_give_the_worker_its_room_back(
        tmp_path: Path, prefix: str, cleanup: list[subprocess.Popen[str]]) -> None:
    """An episode that ends without the agent's finish (here its turns run out) is let go by
    its worker when the runner says so: a worker of capacity 2 serves 6 such episodes in a
    row (it kept each one and, full after 2, refused every claim: the run waited forever)."""
    from coworkenv.agents.fake_openai import ScriptedOpenAIServer, tool

    db = tmp_path / "ended.db"
    with ScriptedOpenAIServer(default=tool("directory_search", query="onboarding")) as model:
        proc = subprocess.Popen([*CLI, "worker", "--bus", prefix, "--worker-id", "wE",
                                 "--capacity", "2", "--agent", "openai:m", "--base-url",
                                 model.base_url], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        cleanup.append(proc)
        assert proc.stdout is not None and "serving" in proc.stdout.readline()
        out = subprocess.run([*CLI, "run", "--tasks", "examples/tasks", "--only",
                              "share-onboarding", "--agent", "remote", "--bus", prefix,
                              "--db", str(db), "--trials", "6", "--max-turns", "1",
                              "--concurrency", "1", "--quiet"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(db) as c:
        ended = c.execute("SELECT status, termination, count(*) FROM episodes GROUP BY 1, 2"
                          ).fetchall()
    assert ended == [("completed", "max_turns", 6)]


def test_remote_runs_need_a_shared_key_and_a_stranger_serves_nothing(
        tmp_path: Path, prefix: str, cleanup: list[subprocess.Popen[str]]) -> None:
    """Without COWORKENV_BUS_KEY neither a worker nor a remote run starts (one line, exit 2);
    a worker holding another key never sees an assignment, so the episodes wait for a worker
    with the run's key and none is served by the stranger."""
    bare = {k: v for k, v in os.environ.items() if k != "COWORKENV_BUS_KEY"}
    for cmd in (["worker", "--bus", prefix],
                ["run", "--tasks", "examples/tasks", "--agent", "remote", "--bus", prefix,
                 "--db", str(tmp_path / "nokey.db")]):
        out = subprocess.run([*CLI, *cmd], cwd=ROOT, capture_output=True, text=True, env=bare,
                             timeout=60)
        assert out.returncode == 2 and "COWORKENV_BUS_KEY" in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    stranger = subprocess.Popen([*CLI, "worker", "--bus", prefix, "--worker-id", "wX"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**bare, "COWORKENV_BUS_KEY": "not-the-run-key"})
    cleanup.append(stranger)
    assert stranger.stdout is not None and "serving" in stranger.stdout.readline()
    db = tmp_path / "stranger.db"
    runner = subprocess.Popen([*CLI, "run", "--tasks", "examples/tasks", "--agent", "remote",
                               "--bus", prefix, "--db", str(db), "--only", "report-q3-travel",
                               "--quiet"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    cleanup.append(runner)
    time.sleep(8)  # the stranger would have served it by now
    assert runner.poll() is None
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM episodes WHERE status='completed'").fetchone() \
            == (0,)
    cleanup += start_workers(prefix, "wA")  # the run's own worker (this test's key)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, err
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM episodes WHERE status='completed'").fetchone() \
            == (1,)


def test_no_worker_names_the_key_as_well_as_the_bus() -> None:
    """With no worker heard, the episode's failure says to start one with the same --bus,
    and that one already running may sign with another key (its heartbeats are refused)."""
    import anyio

    from coworkenv.agents.remote import RemotePool
    from coworkenv.bus import MemoryBus
    from coworkenv.sim import EpisodeFailure

    async def main() -> str:
        async with MemoryBus() as bus, RemotePool(bus, wait_for_worker=0.2) as pool:
            with pytest.raises(EpisodeFailure) as err:
                await pool.assign("r", "r:t:0:0")
            return str(err.value)

    said = anyio.run(main)
    assert "with the same --bus" in said and "COWORKENV_BUS_KEY" in said, said


def test_a_simulation_with_fewer_worker_places_than_open_arrivals_says_so(
        tmp_path: Path, prefix: str, cleanup: list[subprocess.Popen[str]]) -> None:
    """A simulation waits on each arrival's agent before anything else moves, so its open
    arrivals cannot end while another waits for a place: with one worker of capacity 1 and
    the hand-off simulation (the assistant's arrival stays open while finance's comes), the
    finance arrivals fail at once naming the remedy, the simulation runs to its end, and the
    summary says how many failed (before: it waited forever)."""
    import json

    proc = subprocess.Popen([*CLI, "worker", "--bus", prefix, "--worker-id", "wN",
                             "--capacity", "1"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    cleanup.append(proc)
    assert proc.stdout is not None and "serving" in proc.stdout.readline()
    out = subprocess.run([*CLI, "simulate", "examples/simulations/handoff.yaml", "--agent",
                          "remote", "--bus", prefix, "--db", str(tmp_path / "n.db"),
                          "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["arrivals"] == 8 and s["failed"]["arrivals"] == 4, s["failed"]
    first = s["failed"]["first"]
    assert first.startswith("a0004: agent: no room for this arrival") and \
        "1 place(s) (--capacity)" in first and "start more workers" in first, first
