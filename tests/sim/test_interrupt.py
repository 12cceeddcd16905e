"""Ctrl-C and SIGTERM lose nothing that finished: real signals to a real `coworkenv run`, in
one and in two processes, on the memory bus and over Mosquitto; then `--resume` finishes the
run with every (task, trial) completed exactly once."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest

from coworkenv.sim import Interrupt

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]
TASKS = ROOT / "coworkenv" / "builtin_tasks"
TRIALS = {"memory": 50, "mqtt": 15}
"""20 tasks: 1,000 episodes on the memory bus, 300 over MQTT (slower: a broker round trip
per message), seconds of work either way; the signal comes early."""


def _count(db: Path, where: str) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
            return int(c.execute(f"SELECT count(*) FROM episodes WHERE {where}").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0


def _trials(bus: str) -> int:
    return TRIALS["memory" if bus == "memory" else "mqtt"]


def _start(tmp: Path, bus: str, processes: int) -> tuple[subprocess.Popen[bytes], Path]:
    db = tmp / "r.db"
    cmd = [*CLI, "run", "--tasks", str(TASKS), "--trials", str(_trials(bus)), "--concurrency", "4",
           "--processes", str(processes), "--bus", bus, "--db", str(db), "--run-id", "r1"]
    proc = subprocess.Popen(cmd, cwd=tmp, stdout=(tmp / "out.txt").open("wb"),
                            stderr=(tmp / "err.txt").open("wb"), stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _count(db, "status='completed'") < 30:  # some work done, most of it left
        assert proc.poll() is None, (tmp / "err.txt").read_text()
        assert time.monotonic() < deadline, "the run did not get going"
        time.sleep(0.05)
    return proc, db


def _resume_and_check(tmp: Path, db: Path, bus: str, processes: int, done: int) -> None:
    scheduled = 20 * _trials(bus)
    again = subprocess.run([*CLI, "run", "--tasks", str(TASKS), "--trials", str(_trials(bus)),
                            "--processes", str(processes), "--bus", bus, "--db", str(db),
                            "--run-id", "r1", "--resume", "--quiet"], cwd=tmp,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"resuming run r1: {done} of {scheduled} (task, trial) pairs recorded, " \
           f"{scheduled - done} to run" in again.stderr
    with sqlite3.connect(db) as c:
        twice = c.execute("SELECT task_id, trial FROM episodes WHERE status='completed' "
                          "GROUP BY 1, 2 HAVING count(*) > 1").fetchall()
        assert twice == []
        assert c.execute("SELECT count(*) FROM episodes WHERE status='completed'"
                         ).fetchone()[0] == scheduled
        assert c.execute("SELECT count(*) FROM episodes WHERE status='running'"
                         ).fetchone()[0] == 0


@pytest.mark.parametrize(("bus", "processes", "sig"), [
    ("memory", 1, signal.SIGINT), ("memory", 2, signal.SIGTERM),
    ("mqtt", 1, signal.SIGTERM), ("mqtt", 2, signal.SIGINT)])
def test_a_signal_stops_the_run_and_keeps_what_finished(
        tmp_path: Path, broker: tuple[str, int], bus: str, processes: int,
        sig: signal.Signals) -> None:
    url = bus if bus == "memory" else \
        f"mqtt://{broker[0]}:{broker[1]}/intr{uuid.uuid4().hex[:8]}"
    proc, db = _start(tmp_path, url, processes)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 130
    err = (tmp_path / "err.txt").read_text()
    assert "Traceback" not in err, err
    assert "stopping: no new episode starts" in err
    m = re.search(r"interrupted: (\d+) of (\d+) \(task, trial\) pairs of run r1 are done and "
                  r"recorded in .*; finish with `coworkenv run .*--run-id r1 --resume`", err)
    assert m, err
    done, scheduled = int(m[1]), int(m[2])
    assert scheduled == 20 * _trials(url) and 30 <= done < scheduled
    # what it says is what the store holds, and the progress bar counted only that
    assert _count(db, "status='completed'") == done
    assert _count(db, "status='running'") == 0
    bar = re.findall(rf"(\d+)/{scheduled}\b", err)
    assert bar and int(bar[-1]) == done, err
    _resume_and_check(tmp_path, db, url, processes, done)


def test_signals_request_once_then_call_on_second() -> None:
    """The first signal requests the stop and cancels running work; a repeat within
    ``repeat_after`` is the same request delivered twice; a later one is the second."""
    seconds: list[int] = []
    stop = Interrupt((signal.SIGUSR1,), on_second=seconds.append, repeat_after=0.2)
    heard: list[int | None] = []
    stop.on_request(heard.append)

    async def go() -> bool:
        async with stop.listening():
            with stop.cancels() as scope:
                signal.raise_signal(signal.SIGUSR1)
                await anyio.sleep(5)  # cancelled by the request
            signal.raise_signal(signal.SIGUSR1)  # a duplicate: ignored
            await anyio.sleep(0.3)
            signal.raise_signal(signal.SIGUSR1)  # the second
            await anyio.sleep(0.1)
        return scope.cancelled_caught

    before = signal.getsignal(signal.SIGUSR1)
    try:
        assert anyio.run(go)
        assert stop.requested and stop.signum == signal.SIGUSR1
        assert heard == [signal.SIGUSR1] and seconds == [signal.SIGUSR1]
        # after the block (the loop is gone), a further signal is still a second one
        signal.raise_signal(signal.SIGUSR1)
        assert seconds == [signal.SIGUSR1, signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, before)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_second_ctrl_c_leaves_a_store_that_resumes(tmp_path: Path, processes: int) -> None:
    proc, db = _start(tmp_path, "memory", processes)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # (a repeat within 0.25 s is the same request delivered twice)
    if proc.poll() is None:  # (the first may have finished its job already)
        proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=60)
    err = (tmp_path / "err.txt").read_text()
    # (a signal that lands in the interpreter's last steps of exiting ends it by the signal
    # itself, which a shell reports as 130 too)
    assert rc in (130, -signal.SIGINT), err
    assert "Traceback" not in err, err
    if rc == 130:  # (the second stopped it at once, or the first's run had ended already)
        assert "second interrupt: stopping at once" in err or "interrupted: " in err, err
    else:  # (the second landed in the interpreter's last steps: the first's notice is there)
        assert "stopping: no new episode starts" in err, err
    time.sleep(0.5)  # (children killed with the parent are gone)
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # episodes cut short stay 'running' until the resume marks them aborted and runs them
    _resume_and_check(tmp_path, db, "memory", processes, _count(
        db, "status='completed'"))
