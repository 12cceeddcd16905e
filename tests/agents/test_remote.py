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
