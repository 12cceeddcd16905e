"""The README and the documentation site work as written: every command of every ```bash
block (the README's, then each page's in the site's order) runs, in order, in a temporary
folder per part of the site (PARTS: parts run side by side), with small settings for the long
ones; every ```python block runs; the site builds
with ``mkdocs build --strict``; what the pages say of the commands agrees with them. A command
that no rule below covers fails the test, so a new documented command cannot go untested."""

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
import yaml

from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

SKIP = [  # (pattern, why it is not run here)
    (r"^bash scripts/test\.sh", "the test command: this suite is what it runs"),
    (r"^pip install ", "the environment under test is the one scripts/test.sh installs"),
    (r"^python -m llama_cpp\.server", "the local model server: the `model` tests start it"),
    (r"^python bench/episodes\.py --agent openai", "needs that model server"),
    (r"^coworkenv simulate .*http://127\.0\.0\.1:8080", "the bundled model's server, started "
     "just above: tests/agents/test_real_model.py runs its people in a simulation; the "
     "persistent agents on it are minutes a day (the guide gives the figures)"),
    (r"^coworkenv synth .*--generator openai", "a model writes the plans; tests/synth/ drives "
     "this path with a scripted model server"),
    (r"^python bench/tau2_agreement\.py", "needs tau2-bench in its own Python 3.12 venv; "
     "docs/design/tau2_agreement.md is its recorded report"),
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
    (r"^coworkenv train sft", ["--steps", "1", "--measure-rows", "2"]),
    (r"^coworkenv train grpo", ["--steps", "1", "--max-completion-length", "48",
                                "--max-tool-calls", "1"]),
    (r"^coworkenv train seats", ["--steps", "1", "--max-turns", "1", "--max-turn-tokens",
                                 "16"]),
    (r"^coworkenv run (?=.*--per-family).*openai:(pocketworker|base)\b",  # (the tutorial's)
     ["--per-family", "1", "--max-turns", "2", "--max-tokens", "32"]),
    (r"^coworkenv run .*openai:pocketworker-grpo", ["--only", "share-onboarding",
                                                   "--max-turns", "2", "--max-tokens", "32"]),
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
    (r"^python bench/simulate\.py --only large", ["--large-people", "60", "--large-agents",
                                                  "3", "--large-days", "1,5"]),
    (r"^python bench/model_calls\.py", ["--bounds", "1,4", "--seconds", "0.5", "--repeats",
                                        "1", "--endpoints", "2", "--shared-bound", "4"]),
    (r"^python bench/simulate\.py", ["--repeats", "1", "--memory-days", "2", "--many", "3",
                                     "--seeds-n", "2"]),
    (r"^python bench/persistent\.py", ["--days", "4", "--recall-day", "3"]),
    (r"^python bench/sim_server\.py", ["--at-once", "1,2", "--waves", "1", "--latency",
                                        "0.02"]),
    (r"^python bench/all\.py", ["--quick", "--only", "store"]),  # (each runs above)
]
READY = {  # a background command (`... &`) is ready when its output holds this
    "coworkenv worker": "serving", "coworkenv view": "viewer on",
    "coworkenv serve": "serving", "mosquitto_sub": None}


def doc_pages() -> list[Path]:
    """The README, then every page of the site in its navigation's order."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def flat(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in flat(item)]
        if isinstance(nav, dict):
            return [p for v in nav.values() for p in flat(v)]
        return []

    return [ROOT / "README.md", *(ROOT / "docs" / p for p in flat(config["nav"]))]


def readme_commands(pages: list[Path] | None = None) -> list[str]:
    """Every command line of every bash block (continuations joined, comments dropped)."""
    out = []
    text = "\n".join(p.read_text() for p in (pages or doc_pages()))
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
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
    """Runs a part's commands in order in one folder."""
    home: Path
    model_url: str
    broker: tuple[str, int]
    env: dict[str, str] = field(default_factory=dict)
    background: list[subprocess.Popen[str]] = field(default_factory=list)
    ports: dict[int, int] = field(default_factory=dict)  # a documented port -> this walk's
    last_port: int | None = None
    prefix: str = "lab"  # the bus prefix the pages' "lab" stands for (one per walk)

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
        line = line.replace(f"{host}:{port}/lab", f"{host}:{port}/{self.prefix}")
        line = line.replace("'lab/#'", f"'{self.prefix}/#'")
        if line.startswith(("coworkenv serve", "coworkenv view")):  # a free port of its own
            m = re.search(r"--port (\d+)", line)
            assert m and m[1] != "8000", f"a documented server names its port, not 8000 (the " \
                                         f"reader's own model server): {line}"
            self.ports[int(m[1])] = self.last_port = _free_port()
        for documented, real in self.ports.items():  # what those servers serve, there
            line = line.replace(f"--port {documented}", f"--port {real}")
            line = line.replace(f"127.0.0.1:{documented}", f"127.0.0.1:{real}")
        line = line.replace("http://127.0.0.1:8000/v1", self.model_url)  # "your model server"
        line = line.replace("--ray HEAD:6379", "--ray auto")  # a new Ray on this machine
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
            port = self.last_port
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
                f"placeholder {word!r} in {line!r} is not one tests/test_docs.py fills"
        assert "[" not in line.replace("[train]", "").replace("[0]", ""), \
            f"documented command with bracketed options (write them as comments): {line!r}"
        assert " # " not in line, f"a comment set apart by one space is read as part of the " \
                                  f"command (the walk appends its small settings after it; " \
                                  f"set it apart by two): {line!r}"


PARTS = {  # a walk of its own per part (own folder, own bus prefix), so the parts run side by
    # side and each fits its own timeout: name -> (pages in the site's order, documented lines of
    # other parts it needs run first)
    "training": (["docs/tutorial.md", "docs/how-to/train.md"],
                 ["coworkenv synth examples/workflows/*.yaml --n 1000 --out tasks.jsonl"]),
    "workspace": (["README.md", "docs/index.md", "docs/how-to/run.md",
                   "docs/how-to/write-a-task.md", "docs/how-to/writing-graders.md",
                   "docs/how-to/evaluate.md", "docs/how-to/event-log.md",
                   "docs/how-to/synthesize.md", "docs/how-to/app-plugin.md",
                   "docs/how-to/primitive-plugin.md", "docs/reference/tools.md",
                   "docs/design/bus.md"], []),
    "simulations": (["docs/how-to/simulations.md", "docs/how-to/agents.md",
                     "docs/how-to/serve.md"], []),
    "benchmarks": (["docs/design/performance.md"], []),
}


def part_commands(name: str) -> list[str]:
    """A part's commands: what its pages show, in the site's order, after the lines it needs
    (the README's first line is the fresh install, a test of its own)."""
    pages, needs = PARTS[name]
    first = readme_commands()[0]
    ordered = [p for p in doc_pages() if str(p.relative_to(ROOT)) in pages]
    return [*needs, *(c for c in readme_commands(ordered) if c != first)]


def test_every_page_is_in_one_part() -> None:
    """Each page that shows commands is walked by exactly one part; what a part needs from
    another part's pages is documented there, as written."""
    named = [p for pages, _ in PARTS.values() for p in pages]
    assert len(named) == len(set(named)), named
    for page in doc_pages():
        if readme_commands([page]):
            assert str(page.relative_to(ROOT)) in named, f"{page}: in no part of PARTS"
    every = readme_commands()
    for name, (pages, needs) in PARTS.items():
        assert all((ROOT / p).is_file() for p in pages), name
        for line in needs:
            assert line in every, f"part {name} needs {line!r}, which no page shows"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_first_readme_command_works_on_a_fresh_copy(tmp_path: Path) -> None:
    """The README's first command, on a fresh copy of the project (its own venv, installed from
    scratch): the demo's twenty episodes and its check mark."""
    first = readme_commands()[0]
    fresh = tmp_path / "fresh"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (fresh / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, fresh / f)
    print(f"$ {first}  (in a fresh copy)", flush=True)
    r = subprocess.run(["bash", "-c", first], cwd=fresh, capture_output=True, text=True,
                       timeout=850, env={k: v for k, v in os.environ.items()
                                         if k != "VIRTUAL_ENV"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "20/20" in r.stderr and "✓" in r.stdout


@pytest.mark.slow
@pytest.mark.timeout(1500)  # (tens of commands in a row; the training part trains three times)
@pytest.mark.parametrize("part", [
    pytest.param(name, marks=[pytest.mark.xdist_group("ray")]
                 if name in ("workspace", "benchmarks") else [])
    for name in PARTS])  # (workspace's `--ray auto` would join another test's Ray, such as the
#                          Ray bench/scale.py starts in benchmarks)
def test_the_docs_work_as_written(part: str, tmp_path: Path, broker: tuple[str, int]) -> None:
    """One part's commands in order, in a folder that sees the project's examples, benchmarks
    and model; a model server scripted to finish stands for "your model server"."""
    home = tmp_path / "home"
    home.mkdir()
    for name in ("examples", "bench", ".cache", "scripts"):
        (home / name).symlink_to(ROOT / name)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}
    agent_and_person = Reply(content="Thank you, that is all.",
                             tool_calls=[("finish", '{"summary": "done"}')],
                             finish_reason="tool_calls")
    with ScriptedOpenAIServer(default=agent_and_person) as model:
        walk = Walk(home, model.base_url, broker, env, prefix=f"lab-{part}")
        try:
            for line in part_commands(part):
                walk.run(line)
        finally:
            walk.stop()


def test_python_blocks_run(tmp_path: Path) -> None:
    """Each ```python block of the README and the site runs as written (from a folder holding
    the examples, as the project's root does)."""
    blocks = [(page, b) for page in doc_pages()
              for b in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)]
    assert blocks, "the README and the site show no Python"
    commands = "\n".join(readme_commands())
    from importlib.metadata import entry_points

    checked = {  # a primitive's module is run by a documented `primitives --check` of it
        ep.module.replace(".", "/") + ".py": ep.name
        for ep in entry_points(group="coworkenv.primitives")}
    for page, block in blocks:  # a file shown whole is run by a documented command instead
        for shown in re.findall(r'^--8<-- "([^":]+)', block, re.M):
            assert (ROOT / shown).is_file(), f"{page.name}: shows {shown}, which is not there"
            prim = next((n for m, n in checked.items() if shown.endswith(m)), None)
            assert f"python {shown}" in commands or (
                prim is not None and f"coworkenv primitives --check {prim}" in commands), \
                f"{page.name}: shows {shown}; no documented command runs it"
    blocks = [(p, b) for p, b in blocks if not b.startswith("--8<--")]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for page, block in blocks:
        r = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"{page.name}: python block failed:\n{block}\n{r.stdout}" \
                                  f"{r.stderr}"
        assert r.stdout.strip(), block


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: no broken link, no page left out of the navigation, the
    generated reference (commands, task and simulation languages, tools, the Python API)
    builds; the command reference is the commands' own help."""
    r = subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for command in ("coworkenv runs", "coworkenv export sft", "coworkenv train grpo"):
        assert command in cli, command
    assert "--reward-weights" in cli and "--strict" in cli
    task = (tmp_path / "site" / "reference" / "task-language" / "index.html").read_text()
    assert "EmailSentCheck" in task and "group_itself" in task
    api = (tmp_path / "site" / "reference" / "python-api" / "index.html").read_text()
    assert "RunConfig" in api and "Sessions" in api


def test_documented_defaults_are_the_commands_own() -> None:
    """Where a page says an option's default ("`--reward-weights` (default `1,0,0,0,0`)"),
    it is a default that option has."""
    from coworkenv.docgen import option_defaults

    defaults = option_defaults()
    said = 0
    for page in doc_pages():
        text = re.sub(r"\s+", " ", page.read_text())
        for opt, value in re.findall(r"`(--[a-z][a-z-]*)`[^`.;]{0,40}?\bdefault `([^`]+)`[,)]",
                                     text):
            said += 1
            assert opt in defaults, f"{page.name}: {opt} is no command's option"
            assert value in defaults[opt], \
                f"{page.name}: says {opt} defaults to {value}; the commands: {defaults[opt]}"
    assert said >= 3


def test_servers_default_to_ports_of_their_own() -> None:
    """serve (a model, OpenAI-compatible), serve-env (OpenEnv), mcp over HTTP and the viewer
    each default to a port of its own, the ports the pages use."""
    import typer

    from coworkenv.cli import app

    root = typer.main.get_command(app)
    ports = {name: next(p.default for p in root.commands[name].params  # type: ignore[attr-defined]
                        if p.name == "port") for name in ("serve", "serve-env", "mcp", "view")}
    assert len(set(ports.values())) == 4, ports
    assert ports == {"serve": 8000, "serve-env": 8100, "mcp": 8200, "view": 8765}
    text = "\n".join(p.read_text() for p in doc_pages())
    assert "serve-env" in text and "--port 8100" in text and "--transport http --port 8200" in text


def test_the_readme_is_a_front_door() -> None:
    """Under 200 lines; its two commands first; each costs what it says; links into the site."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    lines = readme_commands([ROOT / "README.md"])
    assert lines[0].startswith("python3 -m venv .venv && .venv/bin/pip install")
    assert lines[0].endswith("coworkenv demo") and lines[1] == "bash scripts/test.sh"
    for page in ("docs/tutorial.md", "docs/how-to/", "docs/reference/", "docs/design/"):
        assert page in text, page
