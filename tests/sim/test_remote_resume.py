"""A simulation whose agents remote workers serve, killed (kill -9) and resumed: it ends as
the run never killed, and as the agents in process, whichever worker takes each arrival on
each resume; a model-backed worker is served its agent's recorded answers for the prefix
(no model call) and asks the model only for the rest."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from coworkenv.agents.fake_openai import ScriptedOpenAIServer, tool
from coworkenv.bus import new_id
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.store import Reader, events_hash

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]
WEEK = ROOT / "examples" / "simulations" / "week.yaml"


def _ended(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as c:
            return int(c.execute("SELECT count(*) FROM episodes WHERE task_id NOT LIKE '@%' "
                                 "AND status != 'running'").fetchone()[0])
    except sqlite3.Error:
        return 0


def _scores(db: Path, run: str) -> list[tuple[str, float]]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT task_id, score FROM episodes JOIN grades USING (episode_id) "
                         "WHERE run_id=? AND task_id NOT LIKE '@%' ORDER BY task_id",
                         (run,)).fetchall()


def _without_workers(db: Path, run: str) -> str:
    """The simulation's events hash with its ``agent.worker`` events left out (and the rest
    numbered on): what the same run with its agents in process records."""
    with Reader(db) as r:
        kept = [e for e in r.events(f"{run}:@simulation") if e.kind != "agent.worker"]
    return events_hash(replace(e, seq=i) for i, e in enumerate(kept))


@contextmanager
def _workers(broker: tuple[str, int], *extra: str, ids: tuple[str, ...] = ("wA", "wB")
             ) -> Iterator[tuple[str, dict[str, str]]]:
    host, port = broker
    bus = f"mqtt://{host}:{port}/resume-{new_id()[:8]}"
    env = {**os.environ, "COWORKENV_BUS_KEY": new_id()}
    procs = [subprocess.Popen([*CLI, "worker", "--bus", bus, "--worker-id", w, *extra],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for w in ids]
    try:
        for w in procs:
            assert w.stdout is not None and "serving" in w.stdout.readline()
        yield bus, env
    finally:
        for w in procs:
            w.kill()
            w.communicate(timeout=10)


def _killed_three_times(base: list[str], db: Path, env: dict[str, str],
                        stops: tuple[int, ...]) -> dict[str, object]:
    """Run ``base`` killed with SIGKILL once ``stops[i]`` more arrivals have ended, resumed
    each time; the last resume's summary."""
    for i, more in enumerate(stops):
        at = _ended(db) + more
        proc = subprocess.Popen(base + (["--resume"] if i else []), cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while _ended(db) < at and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, f"finished before stop {i} ({_ended(db)} ended)"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    done = subprocess.run([*base, "--resume"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_remote_agents_killed_three_times_end_as_the_agents_in_process(
        tmp_path: Path, broker: tuple[str, int]) -> None:
    local = simulate(SimulationConfig(WEEK, days=1, db=tmp_path / "l.db", run_id="l"))
    with _workers(broker) as (bus, env):
        db = tmp_path / "r.db"
        base = [*CLI, "simulate", str(WEEK), "--days", "1", "--agent", "remote", "--bus", bus,
                "--json"]
        resumed = _killed_three_times([*base, "--db", str(db), "--run-id", "r"], db, env,
                                      (8, 15, 15))
        whole = subprocess.run([*base, "--db", str(tmp_path / "u.db"), "--run-id", "u"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr
    # as the remote run never killed: whichever worker took which arrival, on which resume
    assert resumed["events_hash"] == json.loads(whole.stdout)["events_hash"]
    with Reader(db) as r:
        held = {e.payload["worker"] for e in r.events("r:@simulation")
                if e.kind == "agent.worker"}
    assert held == {"wA", "wB"}
    # and as the agents in process: the same grades, the same events but for which worker
    assert resumed["arrivals"] == len(local.outcomes) > 40
    assert _scores(db, "r") == _scores(tmp_path / "l.db", "l")
    assert _without_workers(db, "r") == local.events_hash
    assert resumed["state_hash"] == local.state_hash


def test_a_model_backed_remote_agent_resumed_asks_the_model_only_after_the_prefix(
        tmp_path: Path, broker: tuple[str, int]) -> None:
    """Workers with a model-backed agent: the resumed runner gives each worker the recorded
    answers of its arrival's calls, so the prefix costs no model call."""
    with ScriptedOpenAIServer(default=tool("finish", summary="done")) as srv, \
            _workers(broker, "--agent", "openai:m", "--base-url", srv.base_url) as (bus, env):
        base = [*CLI, "simulate", str(WEEK), "--days", "1", "--agent", "remote", "--bus", bus,
                "--json"]
        whole = subprocess.run([*base, "--db", str(tmp_path / "u.db"), "--run-id", "u"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert whole.returncode == 0, whole.stderr
        total = srv.served
        db = tmp_path / "r.db"
        first = [*base, "--db", str(db), "--run-id", "r"]
        proc = subprocess.Popen(first, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        while _ended(db) < 20 and proc.poll() is None:
            time.sleep(0.005)
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        with Reader(db) as r:
            prefix = sum(e.kind == "agent.model_call" for e in r.events("r:@simulation"))
        before = srv.served
        done = subprocess.run([*first, "--resume"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    resumed, ref = json.loads(done.stdout), json.loads(whole.stdout)
    assert prefix >= 20
    assert resumed["model_answers"]["recorded"] == prefix
    assert srv.served - before == resumed["model_answers"]["live"] == total - prefix
    assert (resumed["events_hash"], resumed["state_hash"]) == (ref["events_hash"],
                                                               ref["state_hash"])
