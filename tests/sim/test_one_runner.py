"""One runner per run: a second runner is refused while the first lives, children die with
their parent, failures of the infrastructure are run again by --resume, and a resume keeps
the run's own options."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coworkenv.sim import builtin_tasks

from ..conftest import Broker

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]
N = len(builtin_tasks())


def _completed(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=10) as c:
            return int(c.execute("SELECT count(*) FROM episodes WHERE status='completed'")
                       .fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _wait(cond: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def _once_each(db: Path, run: str, trials: int) -> None:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT task_id, trial, count(*) FROM episodes WHERE run_id=? AND "
                         "status='completed' GROUP BY 1, 2", (run,)).fetchall()
    assert len(rows) == N * trials and all(n == 1 for *_, n in rows)


def test_a_second_runner_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    """A resume started while the run is running is refused; once the holder is killed, a
    resume takes the run over (the dead holder's lease is stale) and completes it once."""
    db = tmp_path / "r.db"
    args = [*CLI, "run", "--tasks", "examples/tasks", "--trials", "400", "--concurrency", "2",
            "--db", str(db), "--run-id", "R", "--quiet"]
    first = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        _wait(lambda: _completed(db) >= 10, 60)
        second = subprocess.run([*args, "--resume"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60)
        assert first.poll() is None, "the first run ended too soon to test"
        assert second.returncode == 2, second.stderr
        assert "is being run by process" in second.stderr and "Traceback" not in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    again = subprocess.run([*args, "--resume"], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    _once_each(db, "R", 400)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_children_die_with_their_parent_and_resume_completes_the_run(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    args = [*CLI, "run", "--tasks", "examples/tasks", "--trials", "80", "--concurrency", "2",
            "--processes", "2", "--db", str(db), "--run-id", "P", "--quiet"]
    parent = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    _wait(lambda: _completed(db) >= 20, 120)
    kids = _children(parent.pid)
    assert kids, "no child process"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    _wait(lambda: not any(Path(f"/proc/{k}").exists() and
                          "zombie" not in Path(f"/proc/{k}/status").read_text().lower()
                          for k in kids), 15)
    assert _completed(db) < N * 80
    res = subprocess.run([*args, "--resume"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    _once_each(db, "P", 80)


def test_resume_keeps_the_runs_own_options(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    base = [*CLI, "run", "--tasks", "examples/tasks", "--db", str(db), "--run-id", "O",
            "--quiet"]
    assert subprocess.run([*base, "--trials", "2"], cwd=ROOT, capture_output=True,
                          timeout=120).returncode == 0
    for extra, what in ((["--trials", "3"], "trials 3"), (["--trials", "2", "--agent", "noop"],
                                                          "agent 'noop'")):
        res = subprocess.run([*base, *extra, "--resume"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 2 and what in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    other = subprocess.run([*CLI, "run", "--tasks", "examples/benchmark", "--db", str(db),
                            "--run-id", "O", "--trials", "2", "--resume"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert other.returncode == 2 and "other tasks" in other.stderr, other.stderr


@pytest.mark.mqtt
@pytest.mark.slow
def test_a_lost_broker_fails_episodes_that_resume_runs_again(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    broker.start()
    db = tmp_path / "b.db"
    bus = f"mqtt://127.0.0.1:{broker.port}/cwlost?reconnect_timeout=2"
    args = [*CLI, "run", "--tasks", "examples/tasks", "--trials", "30", "--concurrency", "8",
            "--bus", bus, "--db", str(db), "--run-id", "B", "--quiet"]
    try:
        run = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        _wait(lambda: _completed(db) >= 20, 120)
        broker.stop(signal.SIGKILL)  # gone for good, as far as this run can tell
        assert run.wait(120) == 1  # simulator errors: not a success
        assert _completed(db) < N * 30
        broker.start()
        res = subprocess.run([*args, "--resume"], cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, res.stderr
        _once_each(db, "B", 30)
    finally:
        broker.stop(signal.SIGKILL)


def test_resume_says_what_it_will_do(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    base = [*CLI, "run", "--tasks", "examples/tasks", "--db", str(db), "--run-id", "S"]
    assert subprocess.run([*base, "--quiet"], cwd=ROOT, capture_output=True,
                          timeout=120).returncode == 0
    with sqlite3.connect(db) as c:  # as if three had failed in the simulator (not final)
        c.execute("UPDATE episodes SET status='failed', failure_boundary='runtime' WHERE "
                  "rowid IN (SELECT rowid FROM episodes LIMIT 3)")
    res = subprocess.run([*base, "--resume"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"resuming run S: {N - 3} of {N} (task, trial) pairs recorded, 3 to run" in res.stderr
    done = subprocess.run([*base, "--resume"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "run S is finished" in done.stderr, done.stderr
    assert "0 episode(s) this call" in done.stdout and "score 1.000" in done.stdout


def _write_lock_free(db: Path) -> bool:
    conn = sqlite3.connect(db, timeout=0.2, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


@pytest.mark.slow
def test_a_paused_holder_that_lost_its_lease_stops_at_its_next_commit(tmp_path: Path) -> None:
    """The holder is paused (SIGSTOP) past the lease's time, a --resume takes the run over,
    the holder goes on (SIGCONT): the holder's writer finds the lease is another's before its
    next commit and stops, in one line with exit 1; the new runner goes on, and no episode
    is recorded twice."""
    db = tmp_path / "f.db"
    args = [*CLI, "run", "--tasks", "examples/tasks", "--trials", "400", "--concurrency", "2",
            "--db", str(db), "--run-id", "F", "--quiet"]
    first = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    second = None
    try:
        _wait(lambda: _completed(db) >= 10, 60)
        for _ in range(50):  # paused between two commits (paused inside one, it would hold
            first.send_signal(signal.SIGSTOP)  # SQLite's write lock and every writer waits)
            if _write_lock_free(db):
                break
            first.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        time.sleep(17)  # (the lease lives 15 s without a heartbeat)
        before = _completed(db)
        second = subprocess.Popen([*args, "--resume"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            _wait(lambda: _completed(db) >= before + 5, 120)
        except AssertionError:
            second.kill()
            raise AssertionError(f"the resume made no progress: {second.communicate()[1]}") \
                from None
        first.send_signal(signal.SIGCONT)
        _, err = first.communicate(timeout=120)
        assert first.returncode == 1, err[-3000:]
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "lost its lease" in lines[0], err[-3000:]
        assert second.poll() is None, second.stderr.read() if second.stderr else ""
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(10)
    with sqlite3.connect(db) as c:
        twice = c.execute("SELECT task_id, trial, count(*) FROM episodes WHERE run_id='F' AND "
                          "status='completed' GROUP BY 1, 2 HAVING count(*) > 1").fetchall()
    assert twice == []
