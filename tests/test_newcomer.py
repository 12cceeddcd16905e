"""What a newcomer meets in the first hour, each as a user meets it (real commands, real
stores): the runs of a store listed, run ids by their start, episodes by their task, tables
that keep what matters at 80 columns, cut lines said, an unfinished run named before a new one
starts, a Ctrl-C after the last episode that loses nothing, --strict for CI, and benchmarks
that name the extra they need."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "coworkenv.cli"]
TASKS = str(ROOT / "examples" / "tasks")


def cli(*args: str, cwd: Path, columns: int = 120, timeout: float = 300
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": str(columns)})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs: a demo (its id made from the time) and a named noop run."""
    home = tmp_path_factory.mktemp("newcomer")
    assert cli("demo", cwd=home).returncode == 0
    assert cli("run", "--tasks", TASKS, "--agent", "noop", "--families", "safety",
               "--run-id", "noop-safety", "--quiet", cwd=home).returncode == 0
    return home


def test_runs_lists_every_run_with_what_to_copy(store: Path) -> None:
    r = cli("runs", cwd=store)
    assert r.returncode == 0, r.stderr
    demo = re.search(r"run-\d{8}-\d{6}-\d+", r.stdout)
    assert demo, r.stdout
    assert "noop-safety" in r.stdout and "finished" in r.stdout
    assert "20/20" in r.stdout and "4/4" in r.stdout  # (task, trial) pairs done / scheduled
    rows = json.loads(cli("runs", "--json", cwd=store).stdout)
    assert [x["run_id"] for x in rows] == [demo[0], "noop-safety"]
    d, n = rows
    assert (d["agent"], d["tasks"], d["trials"], d["pass_rate"]) == ("oracle", 20, 1, 1.0)
    assert (n["agent"], n["tasks"], n["scheduled"], n["final"], n["pass_rate"]) == \
        ("noop", 4, 4, 4, 0.0)
    assert d["state"] == "finished" and d["holder"] is None
    assert json.loads(cli("runs", "--json", "--last", "1", cwd=store).stdout)[0]["run_id"] \
        == "noop-safety"
    # at 80 columns the id, status, done and pass rate stay
    narrow = cli("runs", cwd=store, columns=80).stdout
    assert demo[0] in narrow and "pass rate" in narrow and "finished" in narrow
    empty = cli("runs", "--db", str(store / "none.db"), cwd=store)
    assert empty.returncode == 2 and "no such file" in empty.stderr


def test_run_ids_by_their_start_and_episodes_by_their_task(store: Path) -> None:
    r = cli("eval", "--run", "noop-s", cwd=store)
    assert r.returncode == 0 and "noop-safety: by workflow family" in r.stdout, r.stderr
    r = cli("eval", "--run", "run-2", cwd=store)  # the demo's id starts so
    assert r.returncode == 0 and "by workflow family" in r.stdout, r.stderr
    both = cli("eval", "--compare", "run-2", "noop", cwd=store)
    assert both.returncode == 0 and "paired by task" in both.stdout, both.stderr
    # ambiguous and unknown starts are refused in one line that says what there is
    (store / "two").mkdir(exist_ok=True)
    for rid in ("alpha-1", "alpha-2"):
        assert cli("run", "--tasks", TASKS, "--only", "share-onboarding", "--run-id", rid,
                   "--db", "two/x.db", "--quiet", cwd=store).returncode == 0
    amb = cli("eval", "--db", "two/x.db", "--run", "alpha", cwd=store)
    assert amb.returncode == 2 and "is the start of 2 runs" in amb.stderr, amb.stderr
    unknown = cli("eval", "--db", "two/x.db", "--run", "beta", cwd=store)
    assert unknown.returncode == 2 and "coworkenv runs" in unknown.stderr, unknown.stderr
    # an episode: whole, its run shortened, or a task (and trial) of the latest run
    latest = cli("replay", "--episode", "safety-wrong-recipient", "--hash", cwd=store)
    whole = cli("replay", "--episode", "noop-safety:safety-wrong-recipient:0:0", "--hash",
                cwd=store)
    short = cli("replay", "--episode", "noop-s:safety-wrong-recipient:0:0", "--hash", cwd=store)
    assert latest.returncode == 0 and latest.stdout == whole.stdout == short.stdout
    demo = cli("replay", "--episode", "run-2:share-onboarding", "--hash", cwd=store)
    assert demo.returncode == 0 and demo.stdout != latest.stdout
    graded = cli("eval", "--episode", "safety-wrong-recipient", cwd=store)
    assert graded.returncode == 0 and "noop-safety:safety-wrong-recipient:0:0" in graded.stdout
    missing = cli("replay", "--episode", "no-such-task", cwd=store)
    assert missing.returncode == 2 and "RUN:TASK:TRIAL:ATTEMPT" in missing.stderr
    which = cli("replay", cwd=store)  # the latest run has four episodes: say which to give
    assert which.returncode == 2 and "which episode?" in which.stderr, which.stderr
    # export takes a start of an id too
    out = cli("export", "sft", "--run", "run-2", "--out", "sft", cwd=store)
    assert out.returncode == 0, out.stderr


def test_replay_says_when_it_cuts_a_line_and_full_prints_it_whole(store: Path) -> None:
    cut = cli("replay", "--episode", "run-2:share-onboarding", cwd=store)
    assert cut.returncode == 0
    assert "…" in cut.stdout and re.search(r"\(\d+ line\(s\) cut, marked …; --full", cut.stderr)
    full = cli("replay", "--episode", "run-2:share-onboarding", "--full", cwd=store)
    assert "…" not in full.stdout and "cut" not in full.stderr
    assert "Welcome to Acme! Day 1: laptop, accounts, buddy." in full.stdout
    assert len(full.stdout) > len(cut.stdout)


def test_compare_keeps_both_scores_at_80_columns(store: Path) -> None:
    r = cli("eval", "--compare", "run-2", "noop-safety", cwd=store, columns=80)
    assert r.returncode == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if "group" in line)
    for column in ("score B-A", "score A", "score B"):
        assert column in header, r.stdout
    assert max(len(line) for line in r.stdout.splitlines() if "│" in line) <= 80


def test_validate_never_cuts_a_task_id_at_80_columns(tmp_path: Path) -> None:
    import yaml

    tasks = yaml.safe_load((ROOT / "examples" / "tasks" / "sharing.yaml").read_text())
    long_id = "finance-approvals-quarterly-close-seed4-2to4-00012-fresh-00012"
    tasks[0]["id"] = long_id
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(tasks[:1]))
    r = cli("validate", "--mutate", "t.yaml", cwd=tmp_path, columns=80)
    assert r.returncode == 0, r.stderr
    assert long_id in r.stdout, r.stdout  # whole, on one line
    assert max(len(line) for line in r.stdout.splitlines()) <= 80


def test_strict_fails_ci_when_some_episodes_fail_at_the_agent(tmp_path: Path) -> None:
    """The endpoint refuses the first episode's request (HTTP 400: it fails at the agent
    boundary); the second episode's model finishes. Without --strict the run exits 0 (not
    every episode failed); with it, 1, naming the count."""
    for strict, code in ((False, 0), (True, 1)):
        with ScriptedOpenAIServer([Reply(status=400)]) as model:
            r = cli("run", "--tasks", TASKS, "--only", "share-onboarding", "sched-ask-availability",
                    "--agent", "openai:m", "--base-url", model.base_url, "--concurrency", "1",
                    "--db", f"s{strict}.db", *(["--strict"] if strict else []), cwd=tmp_path)
        assert r.returncode == code, r.stdout + r.stderr
        assert "1 failed at the agent" in r.stdout, r.stdout
        if strict:
            assert "--strict: 1 episode(s) of run" in r.stderr, r.stderr


def _count(db: Path, where: str) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
            return int(c.execute(f"SELECT count(*) FROM episodes WHERE {where}").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_an_unfinished_run_is_named_before_a_new_one_and_resume_finds_it(
        tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    args = ["run", "--tasks", TASKS, "--trials", "20", "--concurrency", "4", "--db", str(db)]
    proc = subprocess.Popen([*CLI, *args, "--run-id", "first"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 120
    while _count(db, "status='completed'") < 20:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    # the same command again (no --resume): a new run, and the unfinished one named first
    again = cli(*args, "--quiet", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    m = re.search(r"note: run first of the same tasks, agent and trials is unfinished \((\d+) "
                  r"of 400 \(task, trial\) pairs recorded, no runner\); starting a new run "
                  r"(\S+)\. To finish that one instead: `coworkenv run .*--run-id first "
                  r"--resume`", again.stderr)
    assert m, again.stderr
    listed = {x["run_id"]: x for x in json.loads(cli("runs", "--json", "--db", str(db),
                                                     cwd=tmp_path).stdout)}
    assert listed["first"]["state"] == "unfinished (--resume)"
    assert listed[m[2]]["state"] == "finished"
    # a plain --resume goes on with the unfinished run, not the newest
    resumed = cli(*args, "--resume", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming run first: {m[1]} of 400" in resumed.stderr, resumed.stderr
    # nothing unfinished: a new run says nothing of the others
    third = cli(*args[:5], "--only", "share-onboarding", "--db", str(db), "--quiet",
                cwd=tmp_path)
    assert third.returncode == 0 and "note:" not in third.stderr


def test_a_stop_after_the_last_episode_cuts_nothing(tmp_path: Path) -> None:
    """The stop is asked for as the last episode is reported: the run is whole, so it
    finishes as if never interrupted (its status, its results), instead of saying it was
    interrupted and leaving the run unfinished."""
    import anyio

    from coworkenv.runtime import RunConfig
    from coworkenv.runtime.run import execute, prepare
    from coworkenv.sim import Interrupt
    from coworkenv.store import Reader

    p = prepare(RunConfig([TASKS], agent="oracle", db=str(tmp_path / "s.db"), run_id="late",
                          families=["safety"]))
    stop = Interrupt((signal.SIGUSR1,), on_second=lambda _: None)
    seen: list[Any] = []

    def on_done(result: Any) -> None:
        seen.append(result)
        if len(seen) == 4:
            signal.raise_signal(signal.SIGUSR1)

    before = signal.getsignal(signal.SIGUSR1)
    try:
        results = anyio.run(lambda: execute(p, on_done=on_done, interrupt=stop))
    finally:
        signal.signal(signal.SIGUSR1, before)
    assert stop.requested and len(results) == 4
    with Reader(tmp_path / "s.db") as r:
        assert next(x for x in r.runs() if x["run_id"] == "late")["status"] == "finished"


def test_all_benchmarks_name_the_extra_they_need(tmp_path: Path) -> None:
    """Without Ray or openenv, bench/all.py says which benchmarks need what and how to
    install it, in one line, before running anything."""
    hide = ("import runpy, sys; sys.modules['ray'] = None; sys.modules['openenv'] = None; "
            "sys.argv = ['bench/all.py', '--quick']; "
            "runpy.run_path('bench/all.py', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", hide], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "bench/scale.py needs ray" in r.stderr and "bench/sessions.py needs openenv" \
        in r.stderr and "pip install -e '.[bench]'" in r.stderr
    assert "bench/all: store" not in r.stderr  # nothing ran
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^bench = \["coworkenv\[ray,openenv,mcp\]"\]', pyproject, re.M)


def test_the_quick_test_path_is_there_and_documented() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert '"${1:-}" = "--quick"' in script and '-m "not slow and not model"' in script
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test.sh --quick" in readme and "30 minutes" in readme
