"""A broker restart in the middle of a run loses no episode (a Mosquitto of our own, stopped
and started again 3 s later): episodes that start during the outage wait for the reconnect,
remote workers whose wills the broker publishes as it goes down are not taken for dead, and
a request whose answer a killed broker forgot is asked again."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from coworkenv.bus import new_id

from ..conftest import Broker
from .test_remote import CLI, ROOT, cleanup, shared_key, start_workers  # noqa: F401

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
TRIALS = 30
TASKS = "coworkenv/builtin_tasks"




def _completed(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as c:
            return int(c.execute("SELECT count(*) FROM episodes WHERE status='completed'"
                                 ).fetchone()[0])
    except sqlite3.Error:
        return 0


def _restart_mid_run(broker: Broker, db: Path, runner: subprocess.Popen[str], sig: int) -> int:
    """Stop the broker once the run is under way, start it again 3 s later; the episodes
    completed when it went down."""
    deadline = time.monotonic() + 120
    while _completed(db) < 20 and time.monotonic() < deadline and runner.poll() is None:
        time.sleep(0.05)
    before = _completed(db)
    assert runner.poll() is None, "the run ended before the broker could be stopped"
    broker.stop(sig)
    print(f"broker stopped ({signal.Signals(sig).name}) after {before} episodes", flush=True)
    time.sleep(3)
    broker.start()
    return before


def _outcome(db: Path) -> tuple[dict[str, int], list[str], int]:
    with sqlite3.connect(db) as c:
        statuses = dict(c.execute("SELECT status, count(*) FROM episodes GROUP BY 1"))
        failures = [r[0] for r in c.execute("SELECT failure FROM episodes "
                                            "WHERE status != 'completed'")]
        graded = c.execute("SELECT count(*) FROM grades").fetchone()[0]
    return statuses, failures, graded


def _n() -> int:
    from coworkenv.sim import builtin_tasks

    return len(builtin_tasks()) * TRIALS


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_episodes_ride_out_a_broker_restart(tmp_path: Path, own_broker: Broker,
                                            sig: int) -> None:
    """In-process agents on the MQTT bus: the episodes that open their subscriptions while
    the broker is away wait for it (they failed at once, with 'The client is not currently
    connected', before)."""
    db = tmp_path / "restart.db"
    runner = subprocess.Popen(
        [*CLI, "run", "--tasks", TASKS, "--trials", str(TRIALS), "--bus",
         f"mqtt://127.0.0.1:{own_broker.port}/cwrestart-{new_id()[:8]}", "--db", str(db),
         "--quiet"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        before = _restart_mid_run(own_broker, db, runner, sig)
        _, err = runner.communicate(timeout=300)
    finally:
        if runner.poll() is None:
            runner.kill()
    statuses, failures, graded = _outcome(db)
    assert runner.returncode == 0, err[-3000:]
    assert before < _n()
    assert failures == [] and statuses == {"completed": _n()} and graded == _n()


def test_remote_workers_ride_out_a_killed_broker(tmp_path: Path, own_broker: Broker,
                                                 cleanup: list[subprocess.Popen[str]]  # noqa: F811
                                                 ) -> None:
    """Agents served by `coworkenv worker`: the broker is killed (what it had taken and not
    yet written is lost); every episode completes at its first attempt."""
    bus = f"mqtt://127.0.0.1:{own_broker.port}/cwrestart-{new_id()[:8]}"
    cleanup += start_workers(bus, "wA", "wB")
    db = tmp_path / "remote.db"
    runner = subprocess.Popen(
        [*CLI, "run", "--tasks", TASKS, "--trials", str(TRIALS), "--agent", "remote", "--bus",
         bus, "--db", str(db), "--quiet"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    cleanup.append(runner)
    _restart_mid_run(own_broker, db, runner, signal.SIGKILL)
    _, err = runner.communicate(timeout=300)
    statuses, failures, graded = _outcome(db)
    assert runner.returncode == 0, err[-3000:]
    # no attempt failed: neither the wills published as the broker went down nor the
    # requests and answers it forgot cost an episode
    assert failures == [] and statuses == {"completed": _n()} and graded == _n()
