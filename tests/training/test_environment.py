"""coworkenv episodes as TRL environments: rollouts are real, graded, recorded episodes."""

from __future__ import annotations

import inspect
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coworkenv.sim import builtin_tasks
from coworkenv.sim.task import FinishStep, MessageStep, Task, ToolStep, WaitStep, resolve_refs
from coworkenv.store import Reader
from coworkenv.training.environment import (
    CoworkEnvironment,
    EpisodeHost,
    environment_class,
    final_text,
    reward_functions,
)
from coworkenv.workspace import REGISTRY


@pytest.fixture
def host(tmp_path: Path) -> Iterator[EpisodeHost]:
    h = EpisodeHost(tmp_path / "rl.db", "grpo-test", "policy", builtin_tasks(),
                    tools=["reference"])
    yield h
    h.close()


def env_for(host: EpisodeHost, task: Task) -> CoworkEnvironment:
    env = environment_class(host, host.toolset(task.id))()
    env.reset(task_id=task.id, prompt=[{"role": "user", "content": task.instruction}])
    return env


def drive_reference(env: CoworkEnvironment, task: Task) -> list[str]:
    """Play the task's reference solution through the environment's tool methods, the way
    TRL's tool loop calls them, reading step results back from the returned text."""
    results: dict[str, Any] = {}
    said: list[str] = []
    for st in task.reference:
        if isinstance(st, ToolStep):
            out = getattr(env, st.tool)(**resolve_refs(st.args, results))
            if st.id:
                results[st.id] = json.loads(out.split("\n")[0])["result"]
        elif isinstance(st, MessageStep):
            out = env.send_message(to=st.to, text=st.text)
        elif isinstance(st, FinishStep):
            out = env.finish(summary=st.summary)
        else:  # a wait returns once something arrives: wait again until it is what the
            # reference waits for (a reply from someone else must not end it)
            out = env.wait()  # type: ignore[attr-defined]
            for _ in range(10):
                if not (isinstance(st, WaitStep) and st.message_from) \
                        or f"from {st.message_from}" in out or "episode_over" in out:
                    break
                out = env.wait()  # type: ignore[attr-defined]
        said.append(out)
    return said


def test_reference_rollouts_score_full_marks_and_are_recorded(host: EpisodeHost) -> None:
    tasks = builtin_tasks()
    for task in tasks:
        env = env_for(host, task)
        drive_reference(env, task)
        r = env._result()
        assert (r.status, r.termination, r.score) == ("completed", "agent_finished", 1.0), task.id
    host.close()
    with Reader(host.db) as rd:
        graded = rd.graded_episodes("grpo-test")
        assert len(graded) == len(tasks) and all(g["score"] == 1.0 for g in graded)
        assert set(rd.task_specs("grpo-test")) == {t.id for t in tasks}  # regrade needs no files
        c = sqlite3.connect(host.db)
        roles = {r for (r,) in c.execute("SELECT role FROM episodes")}
        kinds = {k for (k,) in c.execute("SELECT DISTINCT kind FROM events")}
    assert roles == {"student"}
    assert {"task", "tool_call", "tool_result", "finish", "episode.end"} <= kinds


def test_replies_that_arrive_later_come_back_with_the_action(host: EpisodeHost) -> None:
    task = next(t for t in builtin_tasks() if t.id == "report-metrics-doc")
    env = env_for(host, task)
    said = drive_reference(env, task)
    # asking two coworkers by DM: their answers (simulated minutes later) are in the text the
    # policy gets back, rendered as the live agent sees them
    joined = "\n".join(said)
    assert "[notification: chat from nina]" in joined and "7 open roles" in joined
    assert "[notification: chat from priya]" in joined


def test_a_rollout_that_does_nothing_scores_below_one(host: EpisodeHost) -> None:
    task = next(t for t in builtin_tasks() if t.id == "triage-laptop")
    env = env_for(host, task)
    r = env._result("I could not do it.")
    assert r.status == "completed" and r.score < 1.0 and r.completion < 1.0
    # the policy's last words went to the user; acting after the end does nothing
    assert any(e.kind == "message" and e.payload.get("text") == "I could not do it."
               for e in env._rollout.kernel.events)  # type: ignore[union-attr]
    out = json.loads(env.tickets_search(query="laptop"))  # type: ignore[attr-defined]
    assert out["error"]["code"] == "episode_over"


def test_bad_actions_are_observations_not_crashes(host: EpisodeHost) -> None:
    task = next(t for t in builtin_tasks() if t.id == "triage-laptop")
    env = env_for(host, task)
    bad = json.loads(env.send_message(to="nobody", text="hi"))  # type: ignore[attr-defined]
    assert bad["error"]["code"] == "invalid_arguments" and "nobody" in bad["error"]["message"]
    missing = json.loads(env.tickets_update(ticket_id="T-404", status="closed"))  # type: ignore[attr-defined]
    assert missing["ok"] is False and missing["error"]["code"]
    assert env._result().status == "completed"


def test_tool_methods_become_the_schemas_trl_renders() -> None:
    from transformers.utils import get_json_schema

    cls = environment_class(None, list(REGISTRY))  # type: ignore[arg-type]
    env = cls()
    names = sorted(n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
                   if not n.startswith("_") and n != "reset")
    assert names == sorted([*REGISTRY, "send_message", "finish", "wait"])
    for n in names:
        schema = get_json_schema(getattr(env, n))["function"]
        assert schema["name"] == n and schema["description"]
    upd = get_json_schema(env.tickets_update)["function"]["parameters"]  # type: ignore[attr-defined]
    assert upd["required"] == ["ticket_id"]
    assert upd["properties"]["status"]["enum"] == ["open", "in_progress", "blocked", "resolved",
                                                   "closed"]
    send = get_json_schema(env.email_send)["function"]["parameters"]  # type: ignore[attr-defined]
    assert send["properties"]["to"] == {"type": "array", "items": {"type": "string"},
                                        "description": send["properties"]["to"]["description"]}


def test_reward_functions_read_the_grade_components(host: EpisodeHost) -> None:
    tasks = {t.id: t for t in builtin_tasks()}
    good = env_for(host, tasks["sched-budget-review"])
    drive_reference(good, tasks["sched-budget-review"])
    idle = env_for(host, tasks["sched-budget-review"])
    completions = [[{"role": "assistant", "content": ""}],
                   [{"role": "assistant", "content": "done"}]]
    funcs = {f.__name__: f for f in reward_functions()}
    assert list(funcs) == ["score", "completion", "safety", "robustness", "no_repeat"]
    scores = funcs["score"](completions=completions, environments=[good, idle])
    completion = funcs["completion"](completions=completions, environments=[good, idle])
    assert scores[0] == 1.0 and completion[0] == 1.0
    assert scores[1] is not None and scores[1] < 1.0 and completion[1] == 0.0
    # graded once: every component reads the same finished episode
    assert funcs["safety"](completions=completions, environments=[good, idle]) == [1.0, 1.0]
    assert funcs["score"](completions=completions, environments=[None, None]) == [None, None]
    assert final_text(completions[1]) == "done"
    assert final_text([{"role": "assistant", "content": "x", "tool_calls": [{}]}]) == ""


def test_no_repeat_counts_failed_calls_made_again(host: EpisodeHost) -> None:
    """The process term: 1 minus the share of tool calls that repeat an earlier failed call
    exactly (the same tool and arguments); a retry with other arguments is not a repeat."""
    task = next(t for t in builtin_tasks() if t.id == "sched-budget-review")
    funcs = {f.__name__: f for f in reward_functions()}
    stuck = env_for(host, task)
    for _ in range(3):  # the same failing call three times: 2 repeats of 4 calls
        assert '"ok": false' in stuck.directory_get_person(person="nobody")  # type: ignore[attr-defined]
    stuck.directory_get_person(person="nobody-else")  # type: ignore[attr-defined]
    learns = env_for(host, task)
    learns.directory_get_person(person="nobody")  # type: ignore[attr-defined]
    learns.calendar_free_busy(people=["nobody"])  # type: ignore[attr-defined]
    done = [[{"role": "assistant", "content": "done"}]] * 2
    assert funcs["no_repeat"](completions=done, environments=[stuck, learns]) == [0.5, 1.0]
