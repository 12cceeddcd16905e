"""The README works as written: every command of every ```bash block runs, in order, in a
temporary folder, with small settings for the long ones. A command that no rule below covers
fails the test, so a new README command cannot go untested."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

SKIP = [  # (pattern, why it is not run here)
    (r"^bash scripts/test\.sh", "the test command: this suite is what it runs"),
    (r"^pip install ", "the environment under test is the one scripts/test.sh installs"),
    (r"^python -m llama_cpp\.server", "the local model server: the `model` tests start it"),
    (r"^python bench/episodes\.py --agent openai", "needs that model server"),
    (r"^coworkenv synth .*--generator openai", "a model writes the plans; tests/synth/ drives "
     "this path with a scripted model server"),
    (r"^python bench/tau2_agreement\.py", "needs tau2-bench in its own Python 3.12 venv; "
     "docs/tau2_agreement.md is its recorded report"),
    (r"^python bench/serve\.py", "tests/training/test_serve.py runs it, small, and checks "
     "its JSON"),
    (r"^vf-eval coworkenv-verifiers", "verifiers needs its own environment (it pins mcp 2.0): "
     "tests/test_verifiers.py runs this command there against a scripted model server"),
]
SMALLER = [  # (pattern, arguments appended: a later value of an option wins)
    (r"^coworkenv run .*--trials 100", ["--trials", "2"]),
    (r"^coworkenv run .*--ray", ["--hosts", "1"]),  # (Ray on this machine: see concrete())
    (r"^coworkenv synth .*--n 1000", ["--n", "20"]),
    (r"^coworkenv synth .*--n 50", ["--n", "5"]),
    (r"^coworkenv train sft", ["--steps", "1", "--max-length", "768",
                                   "--measure-rows", "2"]),
    (r"^coworkenv train grpo", ["--steps", "1", "--max-completion-length", "48",
                                "--max-tool-calls", "1"]),
    (r"^coworkenv run .*openai:pocketworker", ["--only", "share-onboarding", "--max-turns", "2",
                                               "--max-tokens", "32"]),
    (r"^python bench/store\.py", ["--events", "2000", "--repeats", "1"]),
    (r"^python bench/bus\.py", ["--messages", "2000", "--mqtt-messages", "200",
                                "--repeats", "1", "--episodes", "20", "--turns", "5",
                                "--run-episodes", "16", "--run-steps", "5"]),
    (r"^python bench/episodes\.py", ["--trials", "1", "--episodes", "20", "--steps", "10",
                                     "--think", "0.001", "--repeats", "1", "--lengths",
                                     "5,10", "--marginal-episodes", "5"]),
    (r"^python bench/replay\.py", ["--episodes", "40", "--steps", "10"]),
    (r"^python bench/grading\.py", ["--synth", "3", "--repeats", "1"]),
    (r"^python bench/synth\.py", ["--tasks", "5", "--repeats", "1"]),
    (r"^python bench/sessions\.py", ["--sessions", "8", "--steps", "4"]),
    (r"^python bench/scale\.py", ["--episodes", "16", "--rounds", "1", "--engines",
                                  "processes-1,ray-1"]),
    (r"^python bench/simulate\.py", ["--repeats", "1", "--memory-days", "2", "--many", "3"]),
    (r"^python bench/all\.py", ["--quick", "--only", "store"]),  # (each runs above)
]
READY = {  # a background command (`... &`) is ready when its output holds this
    "coworkenv worker": "serving", "coworkenv view": "viewer on",
    "coworkenv serve": "serving", "mosquitto_sub": None}


def readme_commands() -> list[str]:
    """Every command line of every bash block (continuations joined, comments dropped)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s{2,}#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                out.append(re.sub(r"\s+", " ", line))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Walk:
    """Runs the README's commands in order in one folder."""
    home: Path
    model_url: str
    broker: tuple[str, int]
    env: dict[str, str] = field(default_factory=dict)
    background: list[subprocess.Popen[str]] = field(default_factory=list)
    served: int | None = None
    env_port: int | None = None

    def episode(self) -> str:
        """The longest completed episode recorded so far (for --episode, --at, --diff)."""
        with sqlite3.connect(self.home / "runs" / "coworkenv.db") as c:
            return str(c.execute("SELECT episode_id FROM episodes WHERE status='completed' "
                                 "ORDER BY event_count DESC LIMIT 1").fetchone()[0])

    def runs(self) -> list[str]:
        with sqlite3.connect(self.home / "runs" / "coworkenv.db") as c:
            return [r[0] for r in c.execute("SELECT run_id FROM runs ORDER BY created_at")]

    def concrete(self, line: str) -> str:
        """The README's placeholders as values of this walk."""
        host, port = self.broker
        line = line.replace("HOST:1883", f"{host}:{port}").replace("127.0.0.1:1883",
                                                                  f"{host}:{port}")
        if self.served is not None:  # the model `coworkenv serve` serves, on its own port
            line = line.replace("--port 8000", f"--port {self.served}")
            line = line.replace("http://127.0.0.1:8000/v1", f"http://127.0.0.1:{self.served}/v1")
        line = line.replace("http://127.0.0.1:8000/v1", self.model_url)
        line = line.replace("--ray HEAD:6379", "--ray auto")  # a new Ray on this machine
        if line.startswith("coworkenv serve-env"):
            self.env_port = _free_port()
            line = line.replace("--port 8100", f"--port {self.env_port}")
        elif line.startswith("coworkenv serve"):
            self.served = _free_port()
            line = line.replace("--port 8000", f"--port {self.served}")
        if re.search(r"RUN:TASK:TRIAL:ATTEMPT|EPISODE_ID|--episode ID\b", line):
            ep = self.episode()
            line = line.replace("RUN:TASK:TRIAL:ATTEMPT", ep).replace("EPISODE_ID", ep)
            line = re.sub(r"--episode ID\b", f"--episode {ep}", line)
        if "RUN_A" in line:
            a, b = self.runs()[:2]
            line = line.replace("RUN_A", a).replace("RUN_B", b)
        line = re.sub(r"--run RUN\b", lambda _: f"--run {self.runs()[-1]}", line)
        return line.replace("openai:MODEL_B", "openai:m2").replace("openai:MODEL", "openai:m")

    def run(self, line: str) -> None:
        for pattern, why in SKIP:
            if re.search(pattern, line):
                print(f"skipped: {line}  ({why})", flush=True)
                return
        cmd = self.concrete(line)
        for pattern, extra in SMALLER:
            if re.search(pattern, line):
                cmd = cmd.rstrip("& ") + " " + " ".join(extra) + (" &" if cmd.endswith("&")
                                                                  else "")
        print(f"$ {cmd}", flush=True)
        if cmd.startswith("export "):
            name = cmd.split()[1].split("=")[0]
            value = subprocess.run(["bash", "-c", f"{cmd}\nprintf %s \"${name}\""],
                                   cwd=self.home, env=self.env, capture_output=True, text=True,
                                   check=True).stdout
            self.env[name] = value
            return
        if cmd.endswith("&"):
            self.start(cmd.rstrip("& "))
            return
        t0 = time.monotonic()
        r = subprocess.run(["bash", "-c", cmd], cwd=self.home, env=self.env, text=True,
                           capture_output=True, timeout=900, stdin=subprocess.DEVNULL)
        print(f"  exit {r.returncode} in {time.monotonic() - t0:.1f} s", flush=True)
        assert r.returncode == 0, f"README command failed: {cmd}\n{r.stdout[-3000:]}\n" \
                                  f"{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr, r.stderr

    def start(self, cmd: str) -> None:
        log = self.home / f"bg{len(self.background)}.log"
        proc = subprocess.Popen(["bash", "-c", f"exec {cmd}"], cwd=self.home, env=self.env,
                                stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL)
        self.background.append(proc)
        ready = next(v for k, v in READY.items() if cmd.startswith(k))
        deadline = time.monotonic() + 300
        while ready is not None and ready not in log.read_text():
            assert proc.poll() is None, f"{cmd} exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{cmd} never got ready: {log.read_text()}"
            time.sleep(0.2)
        if cmd.startswith("coworkenv serve"):
            port = self.env_port if cmd.startswith("coworkenv serve-env") else self.served
            while True:  # (the banner comes just before it listens)
                try:
                    socket.create_connection(("127.0.0.1", port or 0), 1).close()
                    break
                except OSError:
                    assert proc.poll() is None, log.read_text()
                    time.sleep(0.2)
        time.sleep(0.5)
        assert proc.poll() is None, f"{cmd} exited: {log.read_text()[-3000:]}"

    def stop(self) -> None:
        for proc in self.background:
            proc.terminate()
        for proc in self.background:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_every_readme_command_is_covered() -> None:
    """A quick check of the rules alone: each placeholder the README uses is one the walk
    knows; nothing is left to guess."""
    known = {"MODEL", "MODEL_B", "HOST", "HEAD", "RUN", "RUN_A", "RUN_B", "EPISODE_ID", "ID"}
    for line in readme_commands():
        if any(re.search(p, line) for p, _ in SKIP):
            continue
        for word in re.findall(r"\b[A-Z][A-Z_]{1,}\b", line.replace("RUN:TASK:TRIAL:ATTEMPT",
                                                                        "ID")):
            assert word in known or word.startswith("COWORKENV_") or word in ("README",), \
                f"README placeholder {word!r} in {line!r} is not one tests/test_readme.py fills"
        assert "[" not in line.replace("[train]", "").replace("[0]", ""), \
            f"README command with bracketed options (write them as comments): {line!r}"


@pytest.mark.slow
@pytest.mark.xdist_group("ray")  # (its `--ray auto` would join another test's Ray)
@pytest.mark.timeout(900)  # (about 50 commands in a row, a fresh install and training included)
def test_the_readme_works_as_written(tmp_path: Path, broker: tuple[str, int]) -> None:
    lines = readme_commands()
    first, rest = lines[0], lines[1:]
    # the first command, on a fresh copy of the project (its own venv, installed from scratch)
    fresh = tmp_path / "fresh"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (fresh / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, fresh / f)
    print(f"$ {first}  (in a fresh copy)", flush=True)
    r = subprocess.run(["bash", "-c", first], cwd=fresh, capture_output=True, text=True,
                       timeout=900, env={k: v for k, v in os.environ.items()
                                         if k != "VIRTUAL_ENV"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "20/20" in r.stderr and "✓" in r.stdout
    # the rest, in order, in a folder that sees the project's examples, benchmarks and model
    home = tmp_path / "home"
    home.mkdir()
    for name in ("examples", "bench", ".cache"):
        (home / name).symlink_to(ROOT / name)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}
    agent_and_person = Reply(content="Thank you, that is all.",
                             tool_calls=[("finish", '{"summary": "done"}')],
                             finish_reason="tool_calls")
    with ScriptedOpenAIServer(default=agent_and_person) as model:
        walk = Walk(home, model.base_url, broker, env)
        try:
            for line in rest:
                walk.run(line)
        finally:
            walk.stop()


def test_readme_python_blocks_run(tmp_path: Path) -> None:
    """Each ```python block of the README runs as written (from a folder holding the
    examples, as the project's root does)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks, "the README shows no Python"
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for block in blocks:
        r = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"README python block failed:\n{block}\n{r.stdout}{r.stderr}"
        assert r.stdout.strip(), block
