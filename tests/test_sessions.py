"""Sessions: episodes driven step by step from outside (``coworkenv.runtime.session``); many at
once on one loop, each a recorded, graded episode that replay and regrade work on."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.runtime.session import Action, Observation, Session, Sessions
from coworkenv.sim import RunConfigError, Task, builtin_tasks
from coworkenv.store import Reader

from .conftest import play_reference


async def drive(s: Session, task: Task) -> tuple[Observation, float, bool, dict[str, Any]]:
    """Play the task's reference solution through step(); return the last step's answer."""
    last: Any = None

    async def act(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        nonlocal last
        last = await s.step(Action.called(name, args))
        return last[0].text, last[2]

    await play_reference(task, act)
    return last  # type: ignore[no-any-return]


def test_many_sessions_on_one_loop_are_recorded_episodes(tmp_path: Path) -> None:
    tasks = builtin_tasks()
    db = tmp_path / "s.db"
    finals: dict[str, tuple[float, bool, dict[str, Any]]] = {}

    async def main() -> None:
        async with Sessions(db, tasks=tasks, run_id="sess") as sessions:
            async def one(task: Task) -> None:
                s = sessions.session()
                first = await s.reset(task.id)
                assert [m["role"] for m in first.messages[:2]] == ["system", "user"]
                assert task.instruction in first.messages[1]["content"]
                assert s.agent is not None
                assert s.agent.told.statistics().max_buffer_size == 1  # bounded
                _, reward, done, info = await drive(s, task)
                finals[task.id] = (reward, done, info)
                after = await s.step(Action.tool("email_list"))  # the episode is over
                assert after[2] and after[3]["error"] == "episode_over"
                assert (await s.close()).score == reward

            async with anyio.create_task_group() as tg:
                for t in tasks:
                    tg.start_soon(one, t)

    anyio.run(main)
    assert set(finals) == {t.id for t in tasks}
    for task_id, (reward, done, info) in finals.items():
        assert done and reward == 1.0, (task_id, info)
        assert info["termination"] == "agent_finished" and info["passed"], info
    with Reader(db) as r:
        graded = r.graded_episodes("sess")
        assert len(graded) == len(tasks) and all(g["score"] == 1.0 for g in graded)
        assert set(r.task_specs("sess")) == {t.id for t in tasks}  # regrade needs no files
    with sqlite3.connect(db) as c:
        assert {row[0] for row in c.execute("SELECT status FROM runs")} == {"finished"}
        (episode,) = c.execute("SELECT episode_id FROM episodes LIMIT 1").fetchone()
    # replay and regrade work on sessions as on any run
    for args in (["replay", "--db", str(db), "--episode", episode, "--hash"],
                 ["regrade", "--db", str(db), "--run", "sess"]):
        r = subprocess.run([sys.executable, "-m", "coworkenv.cli", *args], capture_output=True,
                           text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stdout + r.stderr


def test_what_an_action_returns(tmp_path: Path) -> None:
    task = next(t for t in builtin_tasks() if t.id == "sched-ask-availability")

    async def main() -> None:
        async with Sessions(tmp_path / "a.db", tasks=[task]) as sessions:
            s = sessions.session()
            await s.reset(task)
            obs, reward, done, info = await s.step(Action.tool("no_such_tool"))
            assert not done and reward == 0.0 and info["steps"] == 1
            assert obs.messages[0]["role"] == "tool" and '"ok": false' in obs.text
            coworker = next(m.person for m in task.cast() if m.person != task.user.person)
            before = info["sim_time_s"]
            # a message has no result: the agent is next asked when something arrives (the
            # reply, later in simulated time, at no wall-clock cost)
            obs, _, done, info = await s.step(Action.message(coworker, "When are you free?"))
            assert not done and f"from {coworker}" in obs.text
            assert info["sim_time_s"] > before and info["steps"] == 2
            obs, _, done, info = await s.step(Action.wait())  # nothing else will come
            assert done and info["termination"] == "agent_idle" and info["steps"] == 2
            assert (await s.close()).termination == "agent_idle"
            # a session can be reset to another episode; one the caller ends is recorded too
            again = await s.reset(task, seed=7)
            assert again.messages and s.spec is not None and s.spec.seed == 7
            result = await s.close("I could not finish")
            assert s.done and result.termination == "agent_finished"
            assert result.status == "completed" and not result.passed
            await s.reset(task)  # left running: closing the host ends and records it

    anyio.run(main)
    with Reader(tmp_path / "a.db") as r:
        episodes = r.graded_episodes(r.latest_run() or "")
        assert len(episodes) == 3


def test_session_errors(tmp_path: Path) -> None:
    async def main() -> None:
        hold = Sessions(tmp_path / "e.db", tasks=builtin_tasks())
        with pytest.raises(RunConfigError, match="open the host first"):
            hold.session()
        async with hold as sessions:
            s = sessions.session()
            with pytest.raises(RunConfigError, match=r"reset\(\) starts an episode"):
                await s.step(Action.wait())
            with pytest.raises(RunConfigError, match="task_id 'nope' is not among"):
                await s.reset("nope")

    anyio.run(main)
    with pytest.raises(RunConfigError, match="role: expected teacher or student"):
        Sessions(tmp_path / "e.db", role="boss")
    with pytest.raises(RunConfigError, match=f"^db {tmp_path}: is a folder"):
        Sessions(tmp_path)


def test_a_run_opened_again_goes_on_after_its_last_trial(tmp_path: Path) -> None:
    """Two servers given the same --run-id (or one restarted) record the same task's episodes
    as further trials; the second took trial 0 again before, and its writer died on the
    duplicate episode id."""
    db = tmp_path / "again.db"
    task = next(t for t in builtin_tasks() if t.id == "share-onboarding")

    async def one() -> str:
        async with Sessions(db, tasks=[task], run_id="again") as sessions:
            session = sessions.session()
            await session.reset(task.id)
            result = await session.close()
            assert sessions.failure is None
            return str(result.episode_id)

    ids = [anyio.run(one) for _ in range(2)]
    assert ids == ["again:share-onboarding:0:0", "again:share-onboarding:1:0"]
    with Reader(db) as r:
        assert sorted(e.trial for e in r.episodes("again")) == [0, 1]
