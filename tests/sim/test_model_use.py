"""What the model cost, per agent, per arrival and per simulated day, as `simulate` reports it
and as `eval` and the viewer read it back from the store; with a price, in money."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from coworkenv.agents.fake_openai import ScriptedOpenAIServer, tool
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.store import Reader
from coworkenv.viewer.api import simulation as simulation_page

ROOT = Path(__file__).resolve().parents[2]
WEEK = ROOT / "examples" / "simulations" / "week.yaml"


def test_model_use_per_agent_arrival_and_day_in_the_summary_eval_and_viewer(
        tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default=tool("finish", summary="done"), count_tokens=True,
                              latency_s=0.002) as srv:
        r = simulate(SimulationConfig(WEEK, days=2, db=tmp_path / "m.db", run_id="m",
                                      agent="openai:m", memory="per_arrival",
                                      base_url=srv.base_url))
        served = srv.served
    model = r.model(price=(1.0, 2.0))
    total = model["total"]
    # every call the server answered, once, under the agent that made it
    assert total["calls"] == served == sum(f["calls"] for f in model["by_agent"].values())
    assert sorted(model["by_agent"]) == ["ea", "fin", "it"]
    assert total["tokens"] == total["prompt_tokens"] + total["completion_tokens"] > 0
    assert total["completion_tokens"] > 0 and total["model_s"] > 0
    # by day: the two working days, adding up to the whole
    assert len(model["by_day"]) == 2
    for key in ("calls", "prompt_tokens", "completion_tokens", "tokens"):
        assert sum(d[key] for d in model["by_day"].values()) == total[key]
    # by arrival: each agent's arrivals (one call each: a finish), adding up to its own
    for name, f in model["by_agent"].items():
        mine = [o for o in r.outcomes if o.agent == name]
        assert f["per_arrival"]["arrivals"] == len(mine) > 0
        assert f["per_arrival"]["calls_median"] == f["per_arrival"]["calls_max"] == 1
        assert sum(r.model_by_arrival[o.key]["tokens"] for o in mine) == f["tokens"]
        assert f["cost"] == round((f["prompt_tokens"] + 2 * f["completion_tokens"]) / 1e6, 4)

    # eval reads the same from the store: each arrival's figures on its episode
    p = subprocess.run([sys.executable, "-m", "coworkenv.cli", "eval", "--db",
                        str(tmp_path / "m.db"), "--run", "m", "--price", "1,2",
                        "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "model use by agent" in p.stdout and "model use by simulated day" in p.stdout
    stored = json.loads((tmp_path / "eval-m.json").read_text())["simulation"]["model"]
    assert stored == json.loads(json.dumps(model))
    with Reader(tmp_path / "m.db") as rd:
        page = simulation_page(rd, "m")
    assert page["model"]["total"]["calls"] == served
    assert all(a["model"]["calls"] == 1 for a in page["arrivals"])
