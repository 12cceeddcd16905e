"""What a store's runs are to the command line beyond listing them: `export sft` takes the
latest run (and says which) unless told `--run ID` or `--all-runs`; `runs --delete`,
`--older-than` and `--keep` delete runs, every row of theirs and nothing else, and refuse
a run a live runner holds; each `--db` says whether it takes one file or several; the
top-level help points at the verifiers and OpenEnv ways in."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from coworkenv.cli import app
from coworkenv.store import RunLease

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "coworkenv.cli"]
TASKS = str(ROOT / "examples" / "tasks")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"})


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Three oracle runs, oldest first: `a` (approvals), `b` (reporting), `c` (approvals)."""
    for run_id, family in (("a", "approvals"), ("b", "reporting"), ("c", "approvals")):
        r = cli("run", "--tasks", TASKS, "--agent", "oracle", "--families", family,
                "--run-id", run_id, "--db", "s.db", "--quiet", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    return tmp_path


def _rows(out: Path) -> list[dict[str, object]]:
    return [json.loads(x) for f in ("train.jsonl", "eval.jsonl")
            for x in (out / f).read_text().splitlines()]


def test_export_takes_the_latest_run_and_says_which(store: Path) -> None:
    r = cli("export", "sft", "--db", "s.db", "--out", "latest", "--eval-fraction", "0",
            cwd=store)
    assert r.returncode == 0, r.stderr
    said = [x for x in r.stdout.splitlines() if x.startswith("exporting")]
    assert said == ["exporting run c, the latest of 3 in s.db (--run ID: another, "
                    "--all-runs: every one)"], r.stdout
    assert {x["run_id"] for x in _rows(store / "latest")} == {"c"}
    assert "run `c`" in (store / "latest" / "README.md").read_text()
    # every run: both families (run c's conversations are run a's again: left out as duplicates)
    r = cli("export", "sft", "--db", "s.db", "--out", "every", "--eval-fraction", "0",
            "--all-runs", cwd=store)
    assert r.returncode == 0, r.stderr
    assert "exporting every run in s.db (3 runs)" in r.stdout
    assert {x["run_id"] for x in _rows(store / "every")} == {"a", "b"}
    assert "every run" in (store / "every" / "README.md").read_text()
    # one named run, by the start of its id; and not both
    r = cli("export", "sft", "--db", "s.db", "--out", "one", "--run", "b", cwd=store)
    assert r.returncode == 0 and "exporting run" not in r.stdout, r.stdout + r.stderr
    assert {x["run_id"] for x in _rows(store / "one")} == {"b"}
    both = cli("export", "sft", "--db", "s.db", "--out", "x", "--run", "b", "--all-runs",
               cwd=store)
    assert both.returncode == 2 and "--all-runs" in both.stderr and "not both" in both.stderr


def _counts(db: Path) -> dict[str, dict[str, int]]:
    """Rows per table of each run: every table of the store, by its run_id column or by the
    episodes of the run (so a table added later and left undeleted fails the test)."""
    with sqlite3.connect(db) as c:
        tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type IN "
                                          "('table', 'view')")]  # (events: a view)
        runs = [r for (r,) in c.execute("SELECT run_id FROM runs")]
        out: dict[str, dict[str, int]] = {}
        for run in runs:
            out[run] = {}
            for t in tables:
                cols = {col[1] for col in c.execute(f"PRAGMA table_info({t})")}
                if "run_id" in cols:
                    sql, args = f"SELECT count(*) FROM {t} WHERE run_id=?", (run,)
                else:
                    assert "episode_id" in cols, f"table {t}: keyed by neither run nor episode"
                    sql = (f"SELECT count(*) FROM {t} WHERE episode_id IN (SELECT episode_id "
                           "FROM episodes WHERE run_id=?) OR episode_id LIKE ?")
                    args = (run, f"{run}:%")
                out[run][t] = c.execute(sql, args).fetchone()[0]
        return out


def test_delete_removes_every_row_of_the_run_and_no_other(store: Path) -> None:
    db = store / "s.db"
    with sqlite3.connect(db) as c:  # a stale lease of b's (its runner long gone): deleted too
        c.execute("INSERT INTO leases VALUES ('b', 'gone', 1, 'elsewhere', 0, 0)")
    before = _counts(db)
    assert before["b"]["events"] > 0 and before["b"]["grades"] == 3 and before["b"]["leases"] == 1
    dry = cli("runs", "--db", "s.db", "--delete", "b", "--dry-run", cwd=store)
    assert dry.returncode == 0 and "would delete run b: 3 episode(s)" in dry.stdout, dry.stderr
    assert _counts(db) == before
    r = cli("runs", "--db", "s.db", "--delete", "b", "--vacuum", cwd=store)
    assert r.returncode == 0, r.stderr
    assert f"deleted run b: 3 episode(s), {before['b']['events']} event(s)" in r.stdout
    assert "1 run(s) deleted, 2 left; vacuumed" in r.stdout
    after = _counts(db)
    assert set(after) == {"a", "c"} and after == {k: before[k] for k in ("a", "c")}
    with sqlite3.connect(db) as c:  # nothing of b's under any key
        for t in before["b"]:
            assert not c.execute(f"SELECT count(*) FROM {t} WHERE "
                                 + ("run_id='b'" if "run_id" in {col[1] for col in c.execute(
                                     f"PRAGMA table_info({t})")} else "episode_id LIKE 'b:%'")
                                 ).fetchone()[0], t
    # the runs left read as before; the deleted one is no run of the store
    assert [x["run_id"] for x in json.loads(cli("runs", "--db", "s.db", "--json",
                                                cwd=store).stdout)] == ["a", "c"]
    gone = cli("runs", "--db", "s.db", "--delete", "b", cwd=store)
    assert gone.returncode == 2 and "--delete 'b': no such run" in gone.stderr
    # --keep N: all but the newest N
    r = cli("runs", "--db", "s.db", "--keep", "1", cwd=store)
    assert r.returncode == 0 and "deleted run a" in r.stdout, r.stderr
    assert set(_counts(db)) == {"c"}


def test_a_run_held_by_a_live_runner_is_refused(store: Path) -> None:
    db = store / "s.db"
    lease = RunLease(db, "a")
    lease.acquire(heartbeat=False)  # (this process: alive; the heartbeat just written)
    try:
        before = _counts(db)
        assert before["a"]["leases"] == 1
        r = cli("runs", "--db", "s.db", "--delete", "a", "--delete", "b", cwd=store)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert f"run 'a' is being run by process {os.getpid()}" in lines[0]
        assert _counts(db) == before  # all or nothing: b is still there too
        # a prune leaves it, says so, and deletes the rest
        r = cli("runs", "--db", "s.db", "--older-than", "0", cwd=store)
        assert r.returncode == 0, r.stderr
        assert "kept run a: being run" in r.stderr
        assert "2 run(s) deleted, 1 left" in r.stdout
        assert set(_counts(db)) == {"a"}
    finally:
        lease.release()
    assert cli("runs", "--db", "s.db", "--delete", "a", cwd=store).returncode == 0
    assert _counts(db) == {}


def _help(path: list[str]) -> dict[str, str]:
    """Each option's help text of a command, whitespace folded."""
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return {p.name: " ".join((getattr(p, "help", None) or "").split()) for p in cmd.params
            if p.name is not None}


def test_each_db_says_one_file_or_several() -> None:
    for path in (["runs"], ["eval"], ["replay"], ["regrade"], ["view"]):
        assert "or several read together" in _help(path)["dbs"], path
    for path in (["run"], ["demo"], ["simulate"], ["mcp"], ["serve-env"], ["export", "sft"],
                 ["export", "rl"], ["train", "grpo"], ["train", "seats"]):
        text = _help(path)["db"]
        assert "one file" in text and "several" not in text.replace(
            "read several together", ""), (path, text)
    assert "deleting works on one file" in _help(["runs"])["dbs"]
    sft = _help(["export", "sft"])
    assert "default: the latest run" in sft["run_id"] and "Every run" in sft["all_runs"]


def test_the_top_level_help_points_at_verifiers_and_openenv() -> None:
    r = subprocess.run([*CLI, "-h"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "80"})
    flat = " ".join(r.stdout.split())
    assert r.returncode == 0
    assert "vf-eval coworkenv-verifiers --env.taskset.tasks" in flat
    assert "pip install 'coworkenv[verifiers]'" in flat
    assert "uvicorn coworkenv.serve.openenv:app" in flat and "COWORKENV_DB" in flat
    runs = subprocess.run([*CLI, "runs", "-h"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "80"}).stdout
    for option in ("--delete RUN", "--older-than DAYS", "--keep N", "--dry-run", "--vacuum"):
        assert option in runs, option
