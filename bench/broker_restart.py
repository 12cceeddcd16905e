"""Broker restart benchmark: a run loses nothing when its MQTT broker goes away for seconds.

A Mosquitto of its own (persistence on, a free port) carries the run's bus; once the run is
under way (``--after`` episodes completed), the broker is stopped (``--signal``: KILL, which
loses what it had taken and not yet written, or TERM, a clean restart), and started again
``--outage`` seconds later. Two runs, each ``--trials`` trials of the built-in tasks (2,000
episodes by default): agents in the runner's process (``oracle``), and agents served by two
``coworkenv worker`` processes (``remote``). Reports per run (one JSON object): scheduled
episodes, attempts by status (a failed attempt is retried, so "failed" counts what the outage
cost even when every episode ends graded), graded, completed when the broker went down, the
outage, the run's wall time and exit code.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port

from coworkenv.sim import builtin_tasks

CLI = [sys.executable, "-m", "coworkenv.cli"]



class Broker:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        (workdir / "data").mkdir()
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text(f"user {getpass.getuser()}\nlistener {self.port} 127.0.0.1\n"
                             f"allow_anonymous true\npersistence true\n"
                             f"persistence_location {workdir / 'data'}/\n"
                             f"max_queued_messages 100000\n"
                             f"log_dest file {workdir / 'broker.log'}\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([shutil.which("mosquitto") or "/usr/sbin/mosquitto",
                                      "-c", str(self.conf)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start")

    def stop(self, sig: int) -> None:
        if self.proc is not None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
            self.proc = None


def completed(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as c:
            return int(c.execute("SELECT count(*) FROM episodes WHERE status='completed'"
                                 ).fetchone()[0])
    except sqlite3.Error:
        return 0


def one_run(agent: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    work = tmp / agent
    work.mkdir()
    broker = Broker(work)
    broker.start()
    bus = f"mqtt://127.0.0.1:{broker.port}/restart"
    env = {**os.environ, "COWORKENV_BUS_KEY": secrets.token_hex(16)}
    workers = []
    if agent == "remote":
        for w in ("wA", "wB"):
            p = subprocess.Popen([*CLI, "worker", "--bus", bus, "--worker-id", w,
                                  "--capacity", "128"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            assert p.stdout is not None
            p.stdout.readline()  # "serving ..."
            workers.append(p)
    db = work / "run.db"
    t0 = time.monotonic()
    runner = subprocess.Popen([*CLI, "run", "--tasks", "coworkenv/builtin_tasks", "--trials",
                               str(args.trials), "--agent", "oracle" if agent == "oracle"
                               else "remote", "--bus", bus, "--db", str(db), "--quiet"],
                              env=env, cwd=Path(__file__).resolve().parents[1],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while completed(db) < args.after and runner.poll() is None:
            time.sleep(0.05)
        before = completed(db)
        down = time.monotonic() - t0
        broker.stop(getattr(signal, f"SIG{args.signal}"))
        time.sleep(args.outage)
        broker.start()
        _, err = runner.communicate(timeout=1800)
    finally:
        for p in [runner, *workers]:
            if p.poll() is None:
                p.kill()
                p.wait()
        broker.stop(signal.SIGKILL)
    with sqlite3.connect(db) as c:
        statuses = dict(c.execute("SELECT status, count(*) FROM episodes GROUP BY 1"))
        graded = c.execute("SELECT count(*) FROM grades").fetchone()[0]
        failures = [r[0] for r in c.execute(
            "SELECT failure FROM episodes WHERE status != 'completed' LIMIT 3")]
    return {"scheduled": len(builtin_tasks()) * args.trials, "attempts_by_status": statuses,
            "graded": graded, "completed_when_broker_went_down": before,
            "broker_down_at_s": round(down, 2), "outage_s": args.outage,
            "signal": args.signal, "wall_s": round(time.monotonic() - t0, 1),
            "exit_code": runner.returncode, "first_failures": failures,
            "stderr_tail": err[-500:] if runner.returncode else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=100, help="per built-in task (20 tasks)")
    ap.add_argument("--after", type=int, default=100,
                    help="episodes completed before the broker goes down")
    ap.add_argument("--outage", type=float, default=3.0, help="seconds the broker is away")
    ap.add_argument("--signal", choices=["KILL", "TERM"], default="KILL")
    ap.add_argument("--agents", default="oracle,remote")
    args = ap.parse_args()
    out: dict[str, Any] = {"benchmark": "broker_restart"}
    with tempfile.TemporaryDirectory(prefix="coworkenv-restart-") as tmp:
        for agent in args.agents.split(","):
            out[agent] = one_run(agent.strip(), args, Path(tmp))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
