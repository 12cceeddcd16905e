"""The episode runtime: the demo tasks, determinism, virtual time, quiescence, crash+resume."""

from __future__ import annotations

import gc
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.agents import agent_factory, scripted_cast
from coworkenv.bus import Envelope, MemoryBus, MqttBus, new_id
from coworkenv.sim import (
    Actor,
    ActorContext,
    EpisodeKernel,
    EpisodeSpec,
    RunOptions,
    VirtualClock,
    builtin_tasks,
    events_hash,
    parse_task,
    run_episodes,
    run_in_processes,
)
from coworkenv.store import EventStore, Reader
from coworkenv.workspace import replay_events

from .conftest import run_sync

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]


def test_oracle_completes_every_builtin_task(tmp_path: Path) -> None:
    tasks = builtin_tasks()
    assert len(tasks) >= 12
    assert len({t.family for t in tasks}) >= 4
    caps = {c for t in tasks for c in t.capabilities}
    assert {"tool_coordination", "multi_turn_communication", "dynamic_workspace_state"} <= caps
    results = run_sync(tasks, tmp_path / "o.db")
    assert {r.task_id: (r.status, r.completion) for r in results} == {
        t.id: ("completed", 1.0) for t in tasks}
    assert all(r.termination == "agent_finished" for r in results)


def test_noop_fails_every_builtin_task(tmp_path: Path) -> None:
    results = run_sync(builtin_tasks(), tmp_path / "n.db", agent="noop")
    assert all(r.status == "completed" for r in results)
    assert all(r.completion < 1.0 for r in results), [(r.task_id, r.completion) for r in results]


def test_same_hashes_alone_or_among_200(tmp_path: Path) -> None:
    tasks = builtin_tasks()
    alone = run_sync(tasks, tmp_path / "a.db", trials=20, concurrency=1)
    crowd = run_sync(tasks, tmp_path / "b.db", trials=20, concurrency=200)
    assert len(alone) == len(crowd) == len(tasks) * 20

    def key(rs: list[Any]) -> dict[tuple[str, int], tuple[str, str]]:
        return {(r.task_id, r.trial): (r.events_hash, r.state_hash) for r in rs}

    assert key(alone) == key(crowd)
    # trials differ in their seeds (coworker delays), so hashes are not trivially equal
    assert len({r.events_hash for r in alone if r.task_id == "report-q3-travel"}) > 1


def test_replay_hash_matches_live(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    results = run_sync(builtin_tasks(), db)
    with Reader(db) as r:
        for res in results:
            events = list(r.events(res.episode_id))
            assert events_hash(events) == res.events_hash
            assert replay_events(events).state_hash() == res.state_hash
            assert r.episode(res.episode_id).events_hash == res.events_hash
    out = subprocess.run([*CLI, "replay", "--db", str(db), "--episode", results[0].episode_id,
                          "--hash"], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["events", results[0].events_hash, "state",
                                  results[0].state_hash]


@pytest.mark.mqtt
def test_mqtt_bus_gives_the_memory_bus_hashes(tmp_path: Path, broker: tuple[str, int]) -> None:
    tasks = builtin_tasks()
    mem = run_sync(tasks, tmp_path / "m.db", trials=2)
    mq = run_sync(tasks, tmp_path / "q.db", trials=2,
                  bus=MqttBus(*broker, prefix=f"cwsim-{new_id()[:8]}"))
    assert {(r.task_id, r.trial): r.events_hash for r in mem} == \
        {(r.task_id, r.trial): r.events_hash for r in mq}
    assert all(r.completion == 1.0 for r in mq)


SLOW_REPLY = {
    "id": "slow-reply", "family": "reporting", "capabilities": ["multi_turn_communication"],
    "company": "acme", "start": "2026-03-02T09:00:00-05:00", "agent": "assistant",
    "user": {"person": "maya"},
    "coworkers": [{"person": "leo", "response": {"delay_minutes": [120, 120],
                                                 "working_hours": None},
                   "facts": [{"key": "b", "value": "The budget is 900.", "keywords": ["budget"]}]}],
    "instruction": "Ask Leo for the budget and tell me.",
    "reference": [
        {"kind": "message", "to": "leo", "text": "What is the budget?"},
        {"kind": "wait", "message_from": "leo"},
        {"kind": "message", "to": "maya", "text": "The budget is 900."},
        {"kind": "finish"}],
    "checks": [{"id": "asked", "kind": "sql", "query": "SELECT 1", "expect": [[1]]}],
}


def test_two_simulated_hours_cost_no_wall_time(tmp_path: Path) -> None:
    task = parse_task(SLOW_REPLY, "inline")
    t0 = time.perf_counter()
    (res,) = run_sync([task], tmp_path / "v.db")
    wall = time.perf_counter() - t0
    assert res.termination == "agent_finished"
    assert res.sim_time == pytest.approx(7200.0)
    assert wall < 1.0, wall
    with Reader(tmp_path / "v.db") as r:
        reply = next(e for e in r.events(res.episode_id)
                     if e.kind == "message" and e.actor == "leo")
    assert reply.sim_time == pytest.approx(7200.0)


class SlowThinker(Actor):
    """An agent whose decision takes real time, while a timer is due one simulated minute on."""

    role = "agent"

    def __init__(self) -> None:
        self.clock_seen: list[float] = []

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind != "task":
            if envelope.kind == "message":
                ctx.finish("done")
            return
        self.clock_seen.append(ctx.now)
        await anyio.sleep(0.3)  # a slow model call, in real time
        self.clock_seen.append(ctx.now)
        ctx.say("maya", "Working on it")


def test_clock_never_jumps_while_an_actor_works() -> None:
    raw = {**SLOW_REPLY, "id": "quiet", "coworkers": [],
           "user": {"person": "maya", "response": {"delay_minutes": [30, 30],
                                                   "working_hours": None},
                    "triggers": [{"at_minutes": 1, "actions": [
                        {"kind": "message", "to": "assistant", "text": "ping at one minute"}]}]}}
    task = parse_task(raw, "inline")
    agent = SlowThinker()
    clock = VirtualClock()

    async def go() -> Any:
        async with MemoryBus("q") as bus:
            kernel = EpisodeKernel(EpisodeSpec(task, "r", "e1"), bus=bus, store=None, agent=agent,
                                   cast=scripted_cast(task), clock=clock)
            return kernel, await kernel.run()

    kernel, res = anyio.run(go)
    assert agent.clock_seen == [0.0, 0.0]  # no jump during the 0.3 s of real work
    kinds = [(e.actor, e.kind, e.sim_time) for e in kernel.events if not e.kind.startswith("ws.")]
    said = kinds.index(("agent", "message", 0.0))
    ping = next(i for i, k in enumerate(kinds) if k[0] == "maya" and k[1] == "message")
    assert said < ping
    assert kinds[ping][2] == 60.0
    assert res.termination == "agent_finished"


def test_bad_task_file_gives_a_clear_error_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: x\n  family: f\n  capabilities: [tool_coordination]\n"
                   "  company: acme\n  start: '2026-03-02T09:00:00Z'\n  agent: assistant\n"
                   "  user: {person: maya}\n  instruction: do it\n"
                   "  reference: [{kind: tool, tool: email_sned, args: {}}]\n"
                   "  checks: [{id: c, kind: ticket, ticket: T1, weight: -1}]\n")
    out = subprocess.run([*CLI, "run", "--tasks", str(bad), "--db", str(tmp_path / "x.db")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert f"{bad}[0]" in out.stderr
    assert "checks[0].weight" in out.stderr
    assert "greater than 0" in out.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a"}\n{not json\n')
    out = subprocess.run([*CLI, "run", "--tasks", str(broken)], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert f"{broken}:2: not JSON" in out.stderr


@pytest.mark.parametrize(("change", "message"), [
    ({"agent": "ghost"}, "agent: unknown person 'ghost'"),
    ({"reference": [{"kind": "tool", "tool": "email_sned"}]}, "unknown tool 'email_sned'"),
    ({"reference": [{"kind": "tool", "tool": "docs_read", "args": {"doc_id": "${s9.id}"}}]},
     "refers to no earlier step"),
    ({"reference": [{"kind": "wait"}]}, "exactly one of message_from, minutes, notification"),
    ({"checks": [{"id": "a", "kind": "sql", "query": "x", "expect": []},
                 {"id": "a", "kind": "sql", "query": "y", "expect": []}]}, "duplicate id 'a'"),
])
def test_task_references_are_validated(change: dict[str, Any], message: str) -> None:
    from coworkenv.sim import TaskFileError

    with pytest.raises(TaskFileError, match=message.replace("$", r"\$").replace("{", r"\{")):
        parse_task({**SLOW_REPLY, **change}, "inline")


@pytest.mark.slow
def _wait_for_completed(db: Path, n: int, deadline: float, *, poll: float) -> None:
    """Until the run being watched has recorded ``n`` completed episodes (or the deadline)."""
    while time.monotonic() < deadline:
        time.sleep(poll)
        try:
            with sqlite3.connect(db) as c:
                done = c.execute("SELECT count(*) FROM episodes WHERE status='completed'"
                                 ).fetchone()[0]
        except sqlite3.Error:
            continue
        if done >= n:
            return


def test_sigkill_then_resume_records_every_episode_once(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    args = [*CLI, "run", "--tasks", "examples/tasks", "--trials", "40", "--concurrency", "4",
            "--db", str(db), "--run-id", "R", "--quiet"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_completed(db, 40, time.monotonic() + 60, poll=0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(db) as c:
        before = c.execute("SELECT count(*) FROM episodes WHERE status='completed'").fetchone()[0]
    assert 0 < before < len(builtin_tasks()) * 40
    subprocess.run([*args[:-1], "--resume"], cwd=ROOT, check=True, capture_output=True)
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT task_id, trial, count(*) FROM episodes "
                         "WHERE run_id='R' AND status='completed' GROUP BY 1, 2").fetchall()
        statuses = dict(c.execute("SELECT status, count(*) FROM episodes GROUP BY 1").fetchall())
        whole = c.execute("SELECT count(*) FROM episodes e WHERE status='completed' AND "
                          "event_count != (SELECT count(*) FROM events v "
                          "WHERE v.episode_id = e.episode_id)").fetchone()[0]
    assert len(rows) == len(builtin_tasks()) * 40
    assert all(n == 1 for *_, n in rows)
    assert set(statuses) <= {"completed", "aborted"}
    assert whole == 0
    with Reader(db) as r:
        done = r.episodes("R", status="completed")
        assert all(e.completion == 1.0 for e in done)


def test_processes_give_the_same_episodes_recorded_once(tmp_path: Path) -> None:
    """Spreading a run over processes changes nothing but speed: the same hashes as one
    process, every (task, trial) once, on one SQLite file, and the run marked finished."""
    tasks = builtin_tasks()
    one = run_sync(tasks, tmp_path / "one.db", trials=4)
    db = tmp_path / "many.db"
    many = run_in_processes(tasks, processes=3, db=db, open_bus=lambda: MemoryBus("t"),
                            agent=agent_factory("oracle"), cast=scripted_cast,
                            options=RunOptions("r1", "oracle", 4, 8))

    def key(rs: list[Any]) -> dict[tuple[str, int], tuple[str, str]]:
        return {(r.task_id, r.trial): (r.events_hash, r.state_hash) for r in rs}

    assert len(many) == len(tasks) * 4
    assert key(many) == key(one)
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT task_id, trial, count(*) FROM episodes WHERE status='completed' "
                         "GROUP BY 1, 2").fetchall()
        status = c.execute("SELECT status FROM runs WHERE run_id='r1'").fetchone()[0]
        whole = c.execute("SELECT count(*) FROM episodes e WHERE event_count != (SELECT "
                          "count(*) FROM events v WHERE v.episode_id = e.episode_id)").fetchone()[0]
    assert len(rows) == len(tasks) * 4 and all(n == 1 for *_, n in rows)
    assert status == "finished" and whole == 0


def test_tuned_gc_is_restored_after_a_run(tmp_path: Path) -> None:
    before = gc.get_threshold()
    run_sync(builtin_tasks()[:2], tmp_path / "gc.db")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_young_collections_wait_longer_with_more_live_episodes() -> None:
    """Every young collection scans what each live episode holds between steps: the threshold
    grows with the episodes a run keeps live (at least 50,000), and is restored after."""
    from coworkenv.sim.runner import YOUNG_PER_EPISODE, tuned_gc

    before = gc.get_threshold()
    with tuned_gc(True, 10):
        assert gc.get_threshold()[0] == max(before[0], 50_000)
    with tuned_gc(True, 5_000):
        assert gc.get_threshold()[0] == YOUNG_PER_EPISODE * 5_000
    with tuned_gc(False, 5_000):
        assert gc.get_threshold() == before
    assert gc.get_threshold() == before


def test_a_finished_episode_is_freed_without_the_garbage_collector(tmp_path: Path) -> None:
    """Under tune_gc a full collection is rare: an episode kept alive by a reference cycle
    would stay in memory long after it finished."""
    gc.collect()
    gc.disable()
    try:
        results = run_sync(builtin_tasks()[:3], tmp_path / "free.db")
        mine = {r.episode_id for r in results}  # (not another test's kernels)
        alive = [o for o in gc.get_objects()
                 if type(o) is EpisodeKernel and o.spec.episode_id in mine]
    finally:
        gc.enable()
    assert len(results) == 3 and all(r.status == "completed" for r in results)
    assert alive == []


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_killed_process_is_reported_and_resume_completes_its_episodes(tmp_path: Path) -> None:
    db = tmp_path / "procs.db"
    trials = 100
    args = [*CLI, "run", "--tasks", "examples/tasks", "--trials", str(trials), "--concurrency",
            "2", "--processes", "2", "--db", str(db), "--run-id", "P", "--quiet"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    children: list[int] = []
    while time.monotonic() < deadline and not children:
        time.sleep(0.1)
        children = _children(proc.pid)
    assert children, "the run started no worker process"
    _wait_for_completed(db, 40, deadline, poll=0.05)  # both processes have recorded some
    assert proc.poll() is None, "the run finished before its worker could be killed"
    os.kill(children[0], signal.SIGKILL)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "coworkenv-shard-1 (exit code -9)" in err and "--resume" in err, err
    assert "Traceback" not in err
    with sqlite3.connect(db) as c:
        before = c.execute("SELECT count(*) FROM episodes WHERE status='completed'").fetchone()[0]
        run_status = c.execute("SELECT status FROM runs WHERE run_id='P'").fetchone()[0]
    assert 0 < before < len(builtin_tasks()) * trials
    assert run_status == "running"  # not marked finished with episodes missing
    subprocess.run([*args[:-1], "--resume"], cwd=ROOT, check=True, capture_output=True)
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT task_id, trial, count(*) FROM episodes "
                         "WHERE run_id='P' AND status='completed' GROUP BY 1, 2").fetchall()
        statuses = dict(c.execute("SELECT status, count(*) FROM episodes GROUP BY 1").fetchall())
        run_status = c.execute("SELECT status FROM runs WHERE run_id='P'").fetchone()[0]
    assert len(rows) == len(builtin_tasks()) * trials
    assert all(n == 1 for *_, n in rows)
    assert set(statuses) <= {"completed", "aborted"}
    assert run_status == "finished"


def test_per_family_takes_the_first_tasks_of_each_family(tmp_path: Path) -> None:
    db = tmp_path / "pf.db"
    subprocess.run([*CLI, "run", "--tasks", "examples/tasks", "--per-family", "2", "--db",
                    str(db), "--run-id", "F", "--quiet"], cwd=ROOT, check=True,
                   capture_output=True)
    tasks = builtin_tasks()
    expected = {f: [t.id for t in tasks if t.family == f][:2] for f in {t.family for t in tasks}}
    with sqlite3.connect(db) as c:
        got = c.execute("SELECT family, task_id FROM episodes ORDER BY family, task_id").fetchall()
    assert sorted(got) == sorted((f, i) for f, ids in expected.items() for i in ids)


def test_an_episode_is_reported_done_only_once_it_is_committed(tmp_path: Path) -> None:
    """What a progress bar (or a parent process) is told is done is in the database: each
    reported episode is read back, from another connection, at the moment it is reported."""
    import sqlite3 as _sqlite3

    db = tmp_path / "durable.db"
    unseen: list[str] = []
    reported: list[str] = []

    def check(r: Any) -> None:
        reported.append(r.episode_id)
        with _sqlite3.connect(db) as c:
            row = c.execute("SELECT status, event_count, (SELECT count(*) FROM events v WHERE "
                            "v.episode_id = e.episode_id) FROM episodes e WHERE episode_id=?",
                            (r.episode_id,)).fetchone()
        if row is None or row[0] != "completed" or row[1] != row[2]:
            unseen.append(r.episode_id)

    async def go() -> None:
        async with MemoryBus("t") as bus, EventStore(db) as store:
            await run_episodes(builtin_tasks(), agent=agent_factory("oracle"),
                               cast=scripted_cast, bus=bus, store=store,
                               options=RunOptions("d1", "oracle", 5, 32), on_done=check)

    anyio.run(go)
    assert len(reported) == 5 * len(builtin_tasks()) and not unseen


def test_max_turns_is_the_most_turns_an_episode_has(tmp_path: Path) -> None:
    """The action past the limit ends the episode and is not a turn (it was counted once:
    `--max-turns 3` reported 4)."""
    tasks = [t.model_copy(update={"limits": t.limits.model_copy(update={"max_turns": 3})})
             for t in builtin_tasks()]
    results = run_sync(tasks, tmp_path / "t.db")
    assert max(r.turns for r in results) == 3
    long = [r for r in results if len(next(t for t in tasks if t.id == r.task_id).reference) > 3]
    assert long and all(r.termination == "max_turns" and r.turns == 3 for r in long)
