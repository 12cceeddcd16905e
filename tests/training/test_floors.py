"""The dependency floors in pyproject.toml are versions that work: a fresh virtual environment
with every lower bound of the core and ``train`` dependencies installed exactly (``==`` the
floor), then what a user does with them: the CLI, runs on the memory and MQTT buses, an
OpenAI-compatible agent, SFT export, one real SFT step (with and without LoRA) and one real
GRPO step with TRL's ``environment_factory``, and the bus and CLI tests.

torch is the exception: its floor (2.3) has no CPU build on this machine's disk, and any
other torch pulls a CUDA build of several GB, so the environment gets torch 2.13.0 as the
suite's does. Old libraries beside new transitive dependencies warn (DeprecationWarning);
that is not a failure of the floors, so the pytest part runs with those warnings shown, not
raised.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
import venv
from importlib.metadata import version
from pathlib import Path

import pytest

from coworkenv.agents.fake_openai import ScriptedOpenAIServer, tool

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parents[2]
GGUF = Path(os.environ.get("COWORKENV_TEST_GGUF",
                           REPO / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
FLOOR = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9A-Za-z.]*)")


def floors() -> dict[str, str]:
    """Each core and ``train`` dependency's lower bound (torch aside: see the module doc)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    out = {}
    for req in [*project["dependencies"], *project["optional-dependencies"]["train"]]:
        m = FLOOR.match(req)
        assert m, f"pyproject.toml: {req!r} has no lower bound (>=)"
        if m.group(1) != "torch":
            out[m.group(1)] = m.group(2)
    return out


def _say(text: str) -> None:
    print(f"[floors] {text}", file=sys.stderr, flush=True)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def floor_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("floors")
    pins = floors()
    (where / "floors.txt").write_text("".join(f"{n}=={v}\n" for n, v in pins.items()))
    venv.EnvBuilder(with_pip=True).create(where / "venv")
    python = where / "venv" / "bin" / "python"
    t0 = time.monotonic()
    _say(f"installing the floors into {where / 'venv'}: {pins}")
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "torch==2.13.0"], check=True, stdin=subprocess.DEVNULL, timeout=1200)
    subprocess.run([*pip, "-c", str(where / "floors.txt"), "-e", f"{REPO}[train]", "pytest",
                    "pytest-timeout", "hypothesis", "jsonschema"],
                   check=True, stdin=subprocess.DEVNULL, timeout=1800)
    _say(f"installed in {time.monotonic() - t0:.0f} s")
    return python


def run(python: Path, *args: str, cwd: Path, timeout: float = 600) -> str:
    t0 = time.monotonic()
    proc = subprocess.run([str(python.parent / "coworkenv"), *args], cwd=cwd,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=timeout, env={**os.environ, "COLUMNS": "100"})
    _say(f"coworkenv {' '.join(args[:2])}: rc {proc.returncode} in "
         f"{time.monotonic() - t0:.0f} s")
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-4000:])
    return proc.stdout + proc.stderr


def test_the_floors_are_what_is_installed(floor_env: Path) -> None:
    code = ("import json, sys; from importlib.metadata import version; "
            "print(json.dumps({n: version(n) for n in sys.argv[1:]}))")
    pins = floors()
    got = json.loads(subprocess.run([str(floor_env), "-c", code, *pins], check=True,
                                    capture_output=True, text=True).stdout)
    # (a floor of "2.7" installs as 2.7.0: compare release numbers, zero-padded)
    def release(v: str) -> tuple[int, ...]:
        parts = [int(p) for p in re.findall(r"\d+", v.split("+")[0])[:3]]
        return tuple(parts + [0] * (3 - len(parts)))

    assert {n: release(v) for n, v in got.items()} == {n: release(v) for n, v in pins.items()}
    # and the suite's own environment is above every floor (the floors are not a wish)
    assert all(release(version(n)) >= release(v) for n, v in pins.items())


def test_runs_export_and_training_work_at_the_floors(floor_env: Path, tmp_path: Path) -> None:
    assert GGUF.exists(), f"{GGUF}: the offline model is missing (scripts/test.sh fetches it)"
    tasks = str(REPO / "examples/tasks")
    out = run(floor_env, "run", "--tasks", tasks, "--agent", "oracle", "--tools", "reference",
              "--run-id", "teach", "--db", "runs.db", cwd=tmp_path)
    assert "pass rate 1.000" in out
    broker = os.environ.get("COWORKENV_TEST_BROKER", "127.0.0.1:1883")
    out = run(floor_env, "run", "--tasks", tasks, "--families", "doc_sharing", "--agent",
              "oracle", "--bus", f"mqtt://{broker}", "--run-id", "over-mqtt", "--db", "runs.db",
              cwd=tmp_path)
    assert "pass rate 1.000" in out
    script = [tool("directory_get_person", person="kai"), tool("finish", summary="done")]
    with ScriptedOpenAIServer(script, default=tool("finish", summary="done")) as srv:
        run(floor_env, "run", "--tasks", tasks, "--only", "share-onboarding", "--agent",
            "openai:m", "--base-url", srv.base_url, "--run-id", "model", "--db", "runs.db",
            cwd=tmp_path)
        assert len(srv.requests) >= 2
    run(floor_env, "export", "sft", "--db", "runs.db", "--run", "teach", "--out", "data/sft",
        cwd=tmp_path)
    for extra in ([], ["--lora"]):
        out = run(floor_env, "train", "sft", "--model", str(GGUF), "--data", "data/sft",
                  "--out", f"ckpt/sft{''.join(extra)}", "--steps", "1", "--max-length", "768",
                  *extra, cwd=tmp_path)
        losses = json.loads((tmp_path / f"ckpt/sft{''.join(extra)}/coworkenv-sft.json")
                            .read_text())["losses"]
        assert len(losses) == 1 and losses[0] > 0, out[-2000:]  # (0: no answer token seen)
        # what it does is said before the first step: the rows, the model, the measuring
        said = [x for x in out.splitlines() if x.startswith("train sft: ")]
        assert re.match(r"train sft: \d+ demonstration row\(s\) in data/sft/train\.jsonl", said[0])
        assert said[1].startswith(f"train sft: loading {GGUF}") and "training: 1 step(s)" in \
            " ".join(said[2:]), said
    out = run(floor_env, "train", "grpo", "--model", "ckpt/sft", "--tasks", tasks,
              "--held-out", "doc_sharing,safety", "--out", "ckpt/grpo", "--db", "runs.db",
              "--steps", "1", "--max-completion-length", "48", "--max-tool-calls", "1",
              cwd=tmp_path)
    assert "trained 1 GRPO steps" in out and (tmp_path / "ckpt/grpo").is_dir()


def test_the_bus_and_cli_tests_pass_at_the_floors(floor_env: Path) -> None:
    t0 = time.monotonic()
    proc = subprocess.run([str(floor_env), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-m", "not slow", "-W", "default::DeprecationWarning",
                           "tests/bus", "tests/test_cli_basics.py", "tests/store",
                           "tests/training/test_environment.py"],
                          cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=1200)
    _say(f"pytest at the floors: rc {proc.returncode} in {time.monotonic() - t0:.0f} s: "
         f"{proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ''}")
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
