"""Every user mistake is one line on stderr, with the argument and the fix, a meaningful exit
code, no traceback, and no file left behind."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "coworkenv.cli"]
TASKS = str(ROOT / "coworkenv" / "builtin_tasks")
REQ = str(ROOT / "examples" / "workflows" / "finance-approvals.yaml")
DEAD = "http://127.0.0.1:9/v1"  # (the discard port: nothing listens)

# (arguments, exit code, what the one line must say); run in a folder holding `adir/` (an
# empty folder), `README.md` (not a database) and `ok.db` (a store with one demo run)
CASES: list[tuple[list[str], int, str]] = [
    (["validate", "adir"], 2, "adir: a folder without task files"),
    (["validate", "nope.yaml"], 2, "nope.yaml: no such file or folder"),
    (["synth", "adir", "--out", "s.jsonl"], 2, "adir: is a folder"),
    (["synth", REQ, "--out", "adir", "--n", "1"], 2, "--out adir: is a folder"),
    (["synth", REQ, "--out", "s.jsonl", "--generator", "openai", "--model", "m",
      "--base-url", DEAD], 2, f"--base-url {DEAD}: no server answers"),
    (["synth", REQ, "--out", "s.jsonl", "--stages", "1-3"], 2,
     "--stages: expected 2 <= LO <= HI <= 12"),
    (["synth", REQ, "--out", "s.jsonl", "--stages", "two"], 2, "--stages: expected LO-HI"),
    (["synth", REQ, "--out", "s.jsonl", "--stages", "2-3", "--generator", "families"], 2,
     "--stages: only the procedural generator"),
    (["eval", "--db", "adir"], 2, "--db adir: is a folder"),
    (["eval", "--db", "README.md"], 2, "--db README.md: not an SQLite database"),
    (["eval", "--db", "nope.db"], 2, "--db nope.db: no such file"),
    (["eval", "--db", "ok.db", "--k", "5"], 2, "--k: expected 1..1"),
    (["eval", "--db", "ok.db", "--run", "nope"], 2, "--run 'nope': no such run in ok.db"),
    (["eval", "--db", "ok.db", "--compare", "nope", "other"], 2, "--compare 'nope': no such run"),
    (["eval", "--db", "ok.db", "--set", "oops"], 2, "--set: expected NAME=PATH"),
    (["replay", "--db", "adir", "--episode", "x"], 2, "--db adir: is a folder"),
    (["replay", "--db", "ok.db", "--episode", "x"], 2, "x"),
    (["regrade", "--db", "adir"], 2, "--db adir: is a folder"),
    (["regrade", "--db", "ok.db", "--run", "nope"], 2, "--run 'nope': no such run"),
    (["view", "--db", "nope.db"], 2, "--db nope.db: no such file"),
    (["export", "sft", "--db", "adir", "--out", "ex"], 2, "--db adir: is a folder"),
    (["export", "sft", "--db", "ok.db", "--run", "nope", "--out", "ex"], 2,
     "--run 'nope': no such run"),
    (["export", "sft", "--db", "ok.db", "--out", "README.md"], 2, "--out README.md: is a file"),
    (["export", "sft", "--db", "ok.db", "--out", "ex", "--min-score", "2"], 2,
     "no demonstration to export"),
    (["export", "rl", "--db", "ok.db", "--run", "nope", "--out", "ex"], 2,
     "--run 'nope': no such run"),
    (["run", "--tasks", TASKS, "--db", "adir"], 2, "--db adir: is a folder"),
    (["run", "--tasks", TASKS, "--db", "README.md"], 2, "--db README.md: exists and is not an "
     "SQLite database"),
    (["run", "--tasks", "nope.yaml"], 2, "nope.yaml: no such file or folder"),
    (["run", "--tasks", "adir"], 2, "adir: no .yaml, .yml, .json or .jsonl task files here"),
    (["run", "--tasks", TASKS, "--clock", "slow"], 2, "--clock: expected virtual or wall"),
    (["run", "--tasks", TASKS, "--agent", "bogus"], 2, "--agent: expected"),
    (["run", "--tasks", TASKS, "--bus", "redis://h"], 2, "--bus: expected 'memory'"),
    (["run", "--tasks", TASKS, "--cast", "robots"], 2, "--cast: expected scripted"),
    (["run", "--tasks", TASKS, "--agent", "openai:m", "--base-url", DEAD], 2,
     f"--base-url {DEAD}: no server answers"),
    (["run", "--tasks", TASKS, "--agent", "openai:m"], 2, "--base-url is required"),
    (["run", "--tasks", TASKS, "--only", "nope"], 2, "--only: no task ['nope']"),
    (["run", "--tasks", TASKS, "--families", "nope"], 2, "--families: no task of family"),
    (["run", "--tasks", TASKS, "--table", "wide"], 2, "--table: expected one of"),
    (["run", "--tasks", TASKS, "--faults", "2"], 2, "--faults: expected a rate"),
    (["run", "--tasks", TASKS, "--slips", "2"], 2, "--slips: expected a rate"),
    (["run", "--tasks", TASKS, "--agent", "noop", "--slips", "0.5"], 2,
     "--slips: only the oracle agent slips"),
    (["run", "--tasks", TASKS, "--tools", "fax"], 2, "--tools: ['fax'] are neither"),
    (["run", "--tasks", TASKS, "--run-id", "a/b"], 2, "run id 'a/b'"),
    (["run", "--tasks", TASKS, "--db", "fresh.db", "--resume"], 2,
     "--resume: fresh.db does not exist"),
    (["train", "sft", "--model", "m", "--data", "adir", "--out", "ck", "--truncation",
      "middle"], 2, "--truncation: expected keep_start or keep_end, got 'middle'"),
    (["tools", "--format", "xml"], 2, "--format: expected"),
    (["schema", "workflow"], 2, "schema: expected 'task'"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one demo run, made once and copied into each case's folder."""
    where = tmp_path_factory.mktemp("ok")
    subprocess.run([*CLI, "demo", "--db", str(where / "ok.db")], cwd=where, check=True,
                   capture_output=True, timeout=300)
    return where / "ok.db"


def _files(folder: Path) -> set[str]:
    # (-wal and -shm: SQLite's own files beside a database that was opened)
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if not p.name.endswith(("-wal", "-shm"))}


def test_a_run_id_in_use_is_refused_before_anything_runs(tmp_path: Path, store: Path) -> None:
    """Its episode ids would be the recorded run's: the store used to refuse them midway, a
    traceback and a half-written run."""
    shutil.copy(store, tmp_path / "ok.db")
    with sqlite3.connect(tmp_path / "ok.db") as c:
        (run_id,) = c.execute("SELECT run_id FROM runs").fetchone()
        before = c.execute("SELECT count(*) FROM events").fetchone()
    r = subprocess.run([*CLI, "run", "--tasks", TASKS, "--db", "ok.db", "--run-id", run_id],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"error: --run-id: run {run_id!r} is already recorded in "
                                "ok.db; resume it to complete its missing episodes, or give a "
                                "new run id")
    with sqlite3.connect(tmp_path / "ok.db") as c:
        assert c.execute("SELECT count(*) FROM events").fetchone() == before


@pytest.mark.parametrize(("args", "code", "says"), CASES,
                         ids=[" ".join(a[:3]).replace(str(ROOT), "") for a, _, _ in CASES])
def test_a_mistake_is_one_line_and_leaves_nothing(tmp_path: Path, store: Path, args: list[str],
                                                  code: int, says: str) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "README.md").write_text("# not a database\n")
    shutil.copy(store, tmp_path / "ok.db")
    before = _files(tmp_path)
    r = subprocess.run([*CLI, *args], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert says in lines[0], lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert _files(tmp_path) == before, "left behind: " + str(_files(tmp_path) - before)


def test_exit_codes_say_what_happened(tmp_path: Path) -> None:
    """0: everything ran (an agent that scores 0 is not an error); 1: every episode failed at
    the agent (its model answers only errors)."""
    from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer

    base = [*CLI, "run", "--tasks", TASKS, "--only", "sched-conflict-move", "--quiet"]
    noop = subprocess.run([*base, "--agent", "noop", "--db", "n.db"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert noop.returncode == 0 and "score 0.000" in noop.stdout, noop.stderr
    with ScriptedOpenAIServer(default=Reply(status=400)) as srv:
        broken = subprocess.run([*base, "--agent", "openai:m", "--base-url", srv.base_url,
                                 "--db", "b.db"], cwd=tmp_path, capture_output=True, text=True,
                                timeout=120)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "every episode of this call (1) failed at the agent boundary" in broken.stderr


def test_library_messages_name_fields() -> None:
    """The library says which field is wrong; only the command line speaks of flags (the
    rows above show the same mistakes as flags)."""
    from coworkenv.agents import parse_agent
    from coworkenv.agents.factory import cast_factory
    from coworkenv.bus import BusURLError, open_bus
    from coworkenv.sim import make_clock

    with pytest.raises(ValueError, match=r"^agent: expected"):
        parse_agent("bogus")
    with pytest.raises(ValueError, match=r"^cast: expected"):
        cast_factory("robots")
    with pytest.raises(BusURLError, match=r"^bus 'mqtt://': no host"):
        open_bus("mqtt://")
    with pytest.raises(ValueError, match=r"^clock: expected"):
        make_clock("slow")


@pytest.mark.slow
@pytest.mark.model
def test_train_sft_says_when_every_row_is_too_long(tmp_path: Path, store: Path) -> None:
    """Rows cut before the agent's first turn are dropped by TRL; when that is every row,
    one line says so (it was `num_samples=0` from deep inside torch)."""
    gguf = ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf = Path(os.environ.get("COWORKENV_TEST_GGUF", gguf))
    subprocess.run([*CLI, "export", "sft", "--db", str(store), "--out", "data"], cwd=tmp_path,
                   check=True, capture_output=True, timeout=120)
    r = subprocess.run([*CLI, "train", "sft", "--model", str(gguf), "--data", "data", "--out",
                        "ckpt", "--steps", "1", "--max-length", "64"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    lines = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert r.returncode == 2, r.stderr[-3000:]
    assert len(lines) == 1 and "has an assistant turn within max_length 64 tokens" in lines[0]
    assert "Traceback" not in r.stderr
