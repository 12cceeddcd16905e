"""The library API: a run from Python (``coworkenv.runtime``), the one the CLI calls."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from coworkenv import CoworkenvError
from coworkenv.runtime import EndpointUnreachableError, RunConfig, RunResult, arun, run
from coworkenv.sim import Interrupt, RunConfigError, RunInterrupted, Task, load_tasks
from coworkenv.store import Reader

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "tasks"


def _hashes(db: Path, run_id: str) -> dict[tuple[str, int], str]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT task_id, trial, events_hash FROM episodes WHERE run_id = ? "
                         "AND status = 'completed'", (run_id,)).fetchall()
    return {(t, n): h for t, n, h in rows}


def test_run_returns_what_the_store_records(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    seen: list[str] = []
    plan: list[tuple[int, int]] = []
    r = run(RunConfig(tasks=[TASKS], db=db, trials=2, families=["doc_sharing", "safety"],
                      run_id="api-1"),
            on_done=lambda e: seen.append(e.task_id), on_plan=lambda s, t: plan.append((s, t)))
    assert isinstance(r, RunResult) and r.run_id == "api-1" and r.db == db
    families = {t.family for t in r.tasks}
    assert families == {"doc_sharing", "safety"}
    assert len(r.episodes) == 2 * len(r.tasks) == len(seen)
    assert plan == [(len(r.episodes), len(r.episodes))]
    assert r.overall["episodes"] == len(r.episodes) and r.overall["score"] == 1.0
    assert set(r.by_family) == families
    with Reader(db) as reader:
        assert len(reader.completed_trials("api-1")) == len(r.episodes)
    assert {(e.task_id, e.trial): e.events_hash for e in r.episodes} == _hashes(db, "api-1")


def test_the_cli_run_is_the_library_run(tmp_path: Path) -> None:
    """The same run through `coworkenv run` and through run(): the same episodes, event for
    event."""
    lib = run(RunConfig(tasks=[TASKS], db=tmp_path / "lib.db", families=["safety"],
                        run_id="same", faults=0.3))
    subprocess.run([sys.executable, "-m", "coworkenv.cli", "run", "--tasks", str(TASKS),
                    "--families", "safety", "--faults", "0.3", "--db", str(tmp_path / "cli.db"),
                    "--run-id", "same", "--quiet"], check=True, capture_output=True,
                   stdin=subprocess.DEVNULL, timeout=300)
    assert _hashes(tmp_path / "cli.db", "same") == _hashes(lib.db, "same")
    assert len(_hashes(lib.db, "same")) == len(lib.episodes) > 0


def test_arun_in_the_callers_loop_with_task_objects(tmp_path: Path) -> None:
    tasks = [t for t in load_tasks([TASKS]) if t.family == "safety"]

    async def main() -> list[RunResult]:
        results: list[RunResult] = []

        async def one(name: str) -> None:
            results.append(await arun(RunConfig(tasks=tasks, db=tmp_path / f"{name}.db",
                                                run_id=name, max_turns=30)))
        async with anyio.create_task_group() as tg:  # two runs at once on one loop
            tg.start_soon(one, "x")
            tg.start_soon(one, "y")
        return results

    results = anyio.run(main)
    assert sorted(r.run_id for r in results) == ["x", "y"]
    x, y = sorted(results, key=lambda r: r.run_id)
    assert _hashes(x.db, "x") == _hashes(y.db, "y") and len(x.episodes) == len(tasks)


def test_resume_through_the_api(tmp_path: Path) -> None:
    from coworkenv.agents import OracleAgent

    db = tmp_path / "r.db"
    stop = Interrupt()
    made = 0

    def agent(task: Task) -> OracleAgent:  # asks to stop as the third episode starts
        nonlocal made
        made += 1
        if made == 3:
            stop.request()
        return OracleAgent(list(task.reference))

    cfg = RunConfig(tasks=[TASKS], agent=agent, agent_name="oracle-x", db=db, trials=2,
                    run_id="res", concurrency=1)
    with pytest.raises(RunInterrupted):
        run(cfg, interrupt=stop)
    with Reader(db) as reader:
        recorded = len(reader.completed_trials("res"))
    total = 2 * len(load_tasks([TASKS]))
    assert 2 <= recorded <= 3 < total
    rest = run(RunConfig(tasks=[TASKS], agent=agent, agent_name="oracle-x", db=db, trials=2,
                         resume=True))  # (the latest run)
    assert rest.run_id == "res"
    assert len(rest.episodes) == total - recorded == rest.overall["episodes"] - recorded
    assert rest.overall["missing"] == 0 and rest.overall["errors"] == 0


def test_processes(tmp_path: Path) -> None:
    one = run(RunConfig(tasks=[TASKS], db=tmp_path / "1.db", run_id="p"))
    two = run(RunConfig(tasks=[TASKS], db=tmp_path / "2.db", run_id="p", processes=2))
    assert _hashes(one.db, "p") == _hashes(two.db, "p")
    assert two.overall["episodes"] == len(two.episodes) == len(one.episodes)


@pytest.mark.parametrize(("fields", "message"), [
    ({"trials": 0}, "trials: must be at least 1, got 0"),
    ({"faults": 1.5}, "faults: expected a rate between 0 and 1, got 1.5"),
    ({"clock": "sundial"}, "clock: expected virtual or wall, got 'sundial'"),
    ({"tasks": []}, "tasks: no task file, folder or task given"),
    ({"max_tokens": 2}, "max_tokens: must be at least 16, got 2"),
])
def test_config_errors_name_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(RunConfigError) as info:
        RunConfig(**{"tasks": [TASKS], **fields})  # type: ignore[arg-type]
    assert str(info.value) == message
    assert isinstance(info.value, CoworkenvError)


def test_run_errors_name_the_field(tmp_path: Path) -> None:
    cases = [
        (RunConfig(tasks=[TASKS], db=tmp_path), f"db {tmp_path}: is a folder"),
        (RunConfig(tasks=[TASKS], db=tmp_path / "x.db", only=["nope"]), "only: no task ['nope']"),
        (RunConfig(tasks=[TASKS], db=tmp_path / "x.db", bus="redis://h"), "bus: expected"),
        (RunConfig(tasks=[TASKS], db=tmp_path / "x.db", agent="openai:m"),
         "base_url is required"),
        (RunConfig(tasks=[TASKS], db=tmp_path / "x.db", run_id="a b"), "run_id: run id 'a b'"),
        (RunConfig(tasks=[TASKS], db=tmp_path / "new.db", resume=True), "resume: "),
    ]
    for cfg, start in cases:
        with pytest.raises(CoworkenvError) as info:
            run(cfg)
        assert str(info.value).startswith(start), (start, str(info.value))
    with pytest.raises(EndpointUnreachableError, match=r"^base_url http://127.0.0.1:9/v1: no "):
        run(RunConfig(tasks=[TASKS], db=tmp_path / "x.db", agent="openai:m",
                      base_url="http://127.0.0.1:9/v1"))
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "new.db").exists()


WIRING = re.compile(r"\b(run_episodes|run_in_processes|run_jobs)\(")
OWN_TESTS = {"tests/sim/test_runtime.py"}  # the runner's own tests call it directly
"""Where a run may be wired by hand: the runner itself (coworkenv/sim), the library API on top
of it (coworkenv/runtime), and the runner's own unit tests."""


def test_runs_are_built_only_through_the_runtime() -> None:
    """The CLI, the benchmarks, training and the tests build runs with coworkenv.runtime; a
    new hand-wired run (bus + store + run_episodes) elsewhere fails here."""
    offenders = []
    for path in sorted([*ROOT.glob("coworkenv/**/*.py"), *ROOT.glob("bench/*.py"),
                        *ROOT.glob("tests/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("coworkenv/sim/", "coworkenv/runtime/")) or rel in OWN_TESTS:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if WIRING.search(line) and not line.lstrip().startswith(("def ", "#")):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert offenders == [], "runs wired by hand (use coworkenv.runtime):\n" + "\n".join(offenders)


def test_ray_without_the_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from coworkenv.runtime.cluster import ray_module

    monkeypatch.setitem(sys.modules, "ray", None)  # (as where the extra is not installed)
    with pytest.raises(RunConfigError, match=r"pip install 'coworkenv\[ray\]'"):
        ray_module()


def test_benchmarks_use_the_package_not_tests_or_each_other() -> None:
    """Benchmarks import the package's public API only: no helper from tests/ or from
    another benchmark (what they share, such as the load agent, ships in the package)."""
    bad = re.compile(r"^\s*(from|import)\s+(tests|bench)\b")
    offenders = [f"{p.name}:{n}: {line.strip()}" for p in sorted((ROOT / "bench").glob("*.py"))
                 for n, line in enumerate(p.read_text().splitlines(), 1) if bad.match(line)]
    assert offenders == [], "\n".join(offenders)
