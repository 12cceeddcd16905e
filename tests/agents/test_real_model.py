"""Against the real local server: SmolLM2-135M-Instruct behind llama-cpp-python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.agents import Endpoint
from coworkenv.agents.fake_openai import ScriptedOpenAIServer, tool
from coworkenv.agents.persona import LLMPerson
from coworkenv.sim import builtin_tasks
from coworkenv.store import Reader

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.xdist_group("llama")]
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]


def run_cli(db: Path, base: str, *extra: str) -> None:
    out = subprocess.run([*CLI, "run", "--tasks", "examples/tasks", "--only", "triage-laptop",
                          "--agent", "openai:smollm2", "--base-url", base, "--tools", "tickets",
                          "--max-turns", "3", "--max-tokens", "96", "--model-concurrency", "1",
                          "--db", str(db), *extra], cwd=ROOT, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr


def check_recorded_and_graded(db: Path) -> dict[str, object]:
    with Reader(db) as r:
        (ep,) = r.episodes()
        assert ep.status == "completed", ep.failure
        events = list(r.events(ep.episode_id))
        calls = [e.payload for e in events if e.kind == "agent.model_call"]
        assert calls, "no model call recorded"
        for c in calls:
            assert c["request"]["model"] == "smollm2"
            assert c["response"]["model"]  # the server's own response, as received
            assert c["usage"]["prompt_tokens"] > 100
        assert r.grade(ep.episode_id) is not None
    out = subprocess.run([*CLI, "eval", "--db", str(db)], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "ticket_triage" in out
    return {"episode": ep, "events": events}


def test_a_real_model_runs_a_full_episode(tmp_path: Path, llama_server: str) -> None:
    db = tmp_path / "real.db"
    run_cli(db, llama_server)
    got = check_recorded_and_graded(db)
    ep = got["episode"]
    assert ep.termination in ("agent_finished", "max_turns", "agent_idle")  # type: ignore[attr-defined]


def test_a_real_model_with_an_llm_persona_user(tmp_path: Path, llama_server: str) -> None:
    db = tmp_path / "persona.db"
    run_cli(db, llama_server, "--cast", "llm-user")
    check_recorded_and_graded(db)


def test_the_llm_persona_answers_from_the_real_model(tmp_path: Path, llama_server: str) -> None:
    """A scripted agent asks the user; the user's words come from the real model."""
    task = next(t for t in builtin_tasks() if t.id == "share-changed-access")
    persona = Endpoint(llama_server, "smollm2", max_tokens=60, max_concurrency=1)
    agent_script = [tool("send_message", to="maya", text="Who else should get access?"),
                    tool("finish", summary="asked")]

    def cast(t):  # type: ignore[no-untyped-def]
        m = t.user
        return {m.person: LLMPerson(m, "America/New_York", role="user", agent_person=t.agent,
                                    endpoint=persona, instruction=t.instruction)}

    from coworkenv.agents import OpenAIAgent
    from coworkenv.agents.fake_openai import Reply

    script = [agent_script[0], Reply(content=None, tool_calls=[], finish_reason="stop"),
              agent_script[1]]
    with ScriptedOpenAIServer(script, default=agent_script[1]) as srv:
        ep = Endpoint(srv.base_url, "scripted")

        from coworkenv.runtime import RunConfig, run

        (res,) = run(RunConfig([task], agent=lambda t: OpenAIAgent(ep),
                               agent_name="openai:scripted", role="student", cast=cast,
                               db=tmp_path / "p.db", run_id="p")).episodes
    assert res.status == "completed", res.failure
    with Reader(tmp_path / "p.db") as r:
        events = list(r.events(res.episode_id))
    persona_calls = [e.payload for e in events if e.kind == "persona.model_call"]
    assert len(persona_calls) == 1
    said = [e.payload["text"] for e in events if e.kind == "message" and e.actor == "maya"]
    assert said and said[0] == persona_calls[0]["reply"] and said[0]
    # the model's words reached the agent
    assert any(said[0] in str(m.get("content")) for m in srv.requests[1]["messages"])


def test_a_simulation_whose_people_the_bundled_model_plays(tmp_path: Path,
                                                           llama_server: str) -> None:
    """cast: llm on the bundled model: the hand-off example's people (Elena, Bea) answer the
    agents (the oracle) in the small model's words, end to end; every persona call is on
    record, every arrival graded."""
    out = subprocess.run([*CLI, "simulate", "examples/simulations/handoff.yaml", "--cast",
                          "llm", "--cast-base-url", llama_server, "--cast-model", "smollm2",
                          "--db", str(tmp_path / "s.db"), "--run-id", "c", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["arrivals"] == 8
    with Reader(tmp_path / "s.db") as r:
        log = list(r.events("c:@simulation"))
        graded = r.scheduled_episodes("c")
    said = [e.payload for e in log if e.kind == "persona.model_call"]
    assert said and all(p["request"]["model"] == "smollm2" and p["reply"] for p in said)
    assert {p["person"] for p in said} >= {"elena"}
    assert len(graded) == 8 and all(g["score"] is not None for g in graded)
