"""Replay from the event log: --at, --diff, --agent-view on demo episodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.store import Reader

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("replay") / "demo.db"
    subprocess.run([*CLI, "demo", "--db", str(db)], cwd=ROOT, check=True, capture_output=True)
    return db


def episode_of(db: Path, task_id: str) -> str:
    with Reader(db) as r:
        return next(e.episode_id for e in r.episodes() if e.task_id == task_id)


def replay(db: Path, episode: str, *args: str) -> str:
    return subprocess.run([*CLI, "replay", "--db", str(db), "--episode", episode, *args],
                          cwd=ROOT, check=True, capture_output=True, text=True).stdout


def seq_of(db: Path, episode: str, actor: str, kind: str) -> int:
    with Reader(db) as r:
        return next(e.seq for e in r.events(episode) if e.actor == actor and e.kind == kind)


def test_at_shows_the_workspace_before_and_after_the_world_changed(demo_db: Path) -> None:
    ep = episode_of(demo_db, "sched-conflict-move")
    change = seq_of(demo_db, ep, "tools", "ws.calendar.updated")
    before = json.loads(replay(demo_db, ep, "--at", str(change - 1), "--json"))
    after = json.loads(replay(demo_db, ep, "--at", str(change), "--json"))
    sync = next(k for k, v in before["calendar"].items() if v["title"] == "Design sync")
    assert before["calendar"][sync]["start"] == "2026-03-03T19:00:00Z"
    assert after["calendar"][sync]["start"] == "2026-03-03T20:30:00Z"
    # Priya's incident review, created by the timeline at minute 29, is there in both
    assert any(v["title"] == "Incident review" for v in before["calendar"].values())
    text = replay(demo_db, ep, "--at", str(change))
    assert "Design sync" in text and "2026-03-03T20:30:00Z" in text and "tickets:" in text


def test_diff_names_what_changed(demo_db: Path) -> None:
    ep = episode_of(demo_db, "sched-conflict-move")
    world = seq_of(demo_db, ep, "world", "timeline")
    end = seq_of(demo_db, ep, "kernel", "episode.end")
    d = json.loads(replay(demo_db, ep, "--diff", str(world), str(end), "--json"))
    added = d["calendar"]["added"]
    assert [v["title"] for v in added.values()] == ["Incident review"]
    (changed,) = d["calendar"]["changed"].values()
    assert changed["start"] == ["2026-03-03T19:00:00Z", "2026-03-03T20:30:00Z"]
    text = replay(demo_db, ep, "--diff", str(world), str(end))
    assert "+ calendar/" in text and "~ calendar/" in text and ".start:" in text
    assert "no change" in replay(demo_db, ep, "--diff", "1", "1")


def test_agent_view_is_the_conversation_in_chat_format(demo_db: Path) -> None:
    ep = episode_of(demo_db, "sched-conflict-move")
    msgs = json.loads(replay(demo_db, ep, "--agent-view", "--json"))
    assert msgs[0]["role"] == "system"
    assert msgs[1]["role"] == "user" and "Design sync" in msgs[1]["content"]
    calls = [m["tool_calls"][0]["function"]["name"] for m in msgs if m.get("tool_calls")]
    assert calls == ["calendar_create_event", "wait", "calendar_update_event", "send_message",
                     "finish"]
    # the teacher's wait is shown as the decision it is, and what it waited for follows it
    w = next(i for i, m in enumerate(msgs) if m.get("tool_calls")
             and m["tool_calls"][0]["function"]["name"] == "wait")
    assert msgs[w + 1]["role"] == "tool" and json.loads(msgs[w + 1]["content"])["waiting"]
    assert msgs[w + 2]["role"] == "user" and "incident review" in msgs[w + 2]["content"]
    # every tool call is answered by a tool message with the same id, in order
    for i, m in enumerate(msgs):
        if m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] != "finish":
            assert msgs[i + 1]["role"] == "tool"
            assert msgs[i + 1]["tool_call_id"] == m["tool_calls"][0]["id"]
    # the world's mid-episode message reached the agent as a user turn
    assert any(m["role"] == "user" and "incident review" in m["content"] for m in msgs)
    # hidden facts and checks are never in the agent's view
    blob = json.dumps(msgs)
    assert "created-then-moved" not in blob and "Anything from 15:30" not in blob
    printed = replay(demo_db, ep, "--agent-view")
    assert "[task from maya]" in printed


def test_replay_rejects_seqs_outside_the_episode(demo_db: Path) -> None:
    ep = episode_of(demo_db, "triage-laptop")
    out = subprocess.run([*CLI, "replay", "--db", str(demo_db), "--episode", ep, "--at",
                          "99999"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "outside this episode" in out.stderr
    out = subprocess.run([*CLI, "replay", "--db", str(demo_db), "--episode", "nope"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 2 and "no episode 'nope'" in out.stderr
