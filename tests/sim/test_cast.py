"""Model-played people in a simulation (``cast: llm``): a person answers as their persona from
their facts and calendar, through an OpenAI-compatible endpoint of their own (the package's
scripted server here); the facts stay what the graders hold, and a figure the person's model
made up is recorded."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.agents import Playbook
from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.store import Reader

SIMS = Path(__file__).resolve().parents[2] / "examples" / "simulations"


def _sim(tmp_path: Path, **extra: Any) -> Path:
    shutil.copytree(SIMS / "companies", tmp_path / "companies", dirs_exist_ok=True)
    sim = {"kind": "simulation", "id": "cast", "company": "northwind",
           "clock": {"start": "2026-03-02T09:00:00-05:00", "days": 1},
           "tasks": [str(SIMS / "northwind-requests.yaml")],
           "roster": [{"id": "ea", "person": "assistant", "policy": "openai:agent",
                       "tools": ["chat_send_dm", "docs_edit"]}],
           "people": [{"person": "maya", "cast": "llm",
                       "response": {"delay_minutes": [20, 20]}}],
           "workload": [{"task": "ea-ask-budget", "to": "ea", "at": ["d1 10:00"]}], **extra}
    path = tmp_path / "cast.yaml"
    path.write_text(yaml.safe_dump(sim))
    return path


def _relay(hit: re.Match[str], messages: list[dict[str, Any]]) -> list[Any]:
    doc = hit[1]

    def edit(messages: list[dict[str, Any]]) -> dict[str, Any]:
        said = next(str(m["content"]) for m in reversed(messages)
                    if "from maya" in str(m.get("content")))
        n = re.search(r"\b(\d+) people", said)
        return {"doc_id": doc, "append": f" Ops on site: {n[1] if n else '?'} people."}
    return [("chat_send_dm", {"to": "maya", "text": "How many ops people are on site?"}),
            ("wait", {}), ("docs_edit", edit), ("finish", {})]


def maya(figure: int) -> Any:
    """A person's model: Maya says a figure (her fact's, or not)."""
    def respond(request: dict[str, Any]) -> Reply:
        system = request["messages"][0]["content"]
        assert "never make up a figure" in system and not request.get("tools")
        if system.startswith("You are maya"):
            return Reply(content=f"We have {figure} people on site this week.")
        return Reply(content="Thanks, noted.")
    return respond


@pytest.mark.parametrize("figure", [14, 17])
def test_a_model_played_person_answers_and_an_invented_figure_is_recorded(
        tmp_path: Path, figure: int) -> None:
    agent = Playbook([(r"Ask Maya how many ops people.*?\(document (D1-\d+)\)", _relay)])
    with ScriptedOpenAIServer(responder=agent) as agents, \
            ScriptedOpenAIServer(responder=maya(figure)) as people:
        r = simulate(SimulationConfig(_sim(tmp_path), db=tmp_path / "c.db", run_id="c",
                                      base_url=agents.base_url,
                                      cast_base_url=people.base_url, cast_model="persona"))
        persona_calls = list(people.requests)
    assert [o.passed for o in r.outcomes] == [figure == 14]  # (the fact, 14, is the truth)
    assert persona_calls and "Ops has 14 people on site this week." in \
        persona_calls[0]["messages"][0]["content"]  # (her facts, in her prompt)
    assert r.model_use["people"]["calls"] == len(persona_calls)
    assert r.model_use["people"]["invented"] == (1 if figure == 17 else 0)
    with Reader(tmp_path / "c.db") as rd:
        log = list(rd.events("c:@simulation"))
    invented = [e.payload for e in log if e.kind == "persona.invented"]
    if figure == 17:
        assert invented == [{"person": "maya", "figures": [17.0],
                             "reply": "We have 17 people on site this week."}]
    else:
        assert invented == []
    said = [e for e in log if e.kind == "persona.model_call"]
    assert said and said[0].payload["person"] == "maya"
    assert json.dumps(said[0].payload["request"]).count("You are maya") == 1


def test_a_cast_without_an_endpoint_is_refused(tmp_path: Path) -> None:
    from coworkenv.sim import RunConfigError

    with pytest.raises(RunConfigError, match="cast_base_url: base_url is required"):
        simulate(SimulationConfig(_sim(tmp_path, roster=[
            {"id": "ea", "person": "assistant", "policy": "oracle"}]), db=tmp_path / "x.db"))
    assert not (tmp_path / "x.db").exists()
    with pytest.raises(RunConfigError, match="cast: expected scripted or llm"):
        simulate(SimulationConfig(_sim(tmp_path), db=tmp_path / "x.db", cast="robots"))
