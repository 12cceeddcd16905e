"""Synthesis: the validator rejects each kind of broken spec; the repair loop; the CLI."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.agents import Endpoint
from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer
from coworkenv.synth import (
    FAMILIES,
    OpenAIGenerator,
    ProceduralGenerator,
    load_requirement,
    synthesize,
    validate_task,
)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]
REQ = load_requirement(ROOT / "examples/workflows/finance-approvals.yaml")


def good(family: str = "collect_report") -> dict[str, Any]:
    import random

    # (a seed whose summary is an email to the user, not a tracker document or a reply)
    return FAMILIES[family].build(REQ, random.Random(8), "t-00001")


def test_a_generated_spec_is_accepted_with_its_coverage() -> None:
    r = validate_task(good())
    assert r.accepted, r.text()
    assert "multi_turn_communication" in r.capabilities


def index(spec: dict[str, Any], pred: Any) -> int:
    return next(i for i, s in enumerate(spec["reference"]) if pred(s))


def first_ask(spec: dict[str, Any]) -> int:
    return index(spec, lambda s: s.get("tool") in ("chat_send_dm", "email_send")
                 and s["args"].get("to") != [spec["user"]["person"]])


def report(spec: dict[str, Any]) -> int:
    return index(spec, lambda s: s.get("tool") in ("email_send", "chat_send_dm", "chat_post")
                 and s["args"].get("to") in ([spec["user"]["person"]], spec["user"]["person"]))


def rejected(spec: dict[str, Any]) -> list[tuple[str, str]]:
    r = validate_task(spec)
    assert not r.accepted
    return [(x.rule, x.where) for x in r.rejections]


def test_trivial_task_is_rejected() -> None:
    s = good()
    s["checks"] = [{"id": "nothing", "kind": "sql", "query": "SELECT 1", "expect": [[1]]}]
    assert ("trivial", "checks") in rejected(s)


def test_unresolvable_person_is_rejected() -> None:
    s = good()
    s["reference"][first_ask(s)]["args"]["to"] = "ghost"
    s["coworkers"][0]["person"] = "ghost"
    rules = rejected(s)
    assert rules[0][0] == "parse"
    assert "unknown person 'ghost'" in validate_task(s).text()


def test_unobtainable_fact_is_rejected() -> None:
    s = good()
    s["coworkers"][0]["response"] = {"available": False}
    who = s["coworkers"][0]["person"]
    i = index(s, lambda x: x.get("message_from") == who)
    assert ("unobtainable_fact", f"reference[{i}].message_from") in rejected(s)


def test_failing_reference_solution_is_rejected() -> None:
    s = good()
    step = s["reference"][report(s)]
    step["args"]["body" if "body" in step["args"] else "text"] = "I could not get the figure."
    r = validate_task(s)
    assert not r.accepted
    rej = next(x for x in r.rejections if x.rule == "oracle"
               and x.where.startswith("checks[reported-"))
    assert rej.events == [] and "no email" in rej.message


def test_write_statement_in_check_sql_is_rejected() -> None:
    s = good()
    s["checks"].append({"id": "evil", "kind": "sql", "query": "DELETE FROM tickets",
                        "expect": []})
    r = validate_task(s)
    n = len(s["checks"]) - 1
    assert [(x.rule, x.where) for x in r.rejections] == [("check_sql", f"checks[{n}].query")]
    assert "read-only" in r.rejections[0].message


def test_capability_claimed_but_absent_is_rejected() -> None:
    s = good()
    s["capabilities"].append("dynamic_workspace_state")
    assert ("capability", "capabilities[dynamic_workspace_state]") in rejected(s)
    s2 = good()
    s2["safety"] = []
    s2["capabilities"].append("safety_sensitive_handling")
    assert ("capability", "capabilities[safety_sensitive_handling]") in rejected(s2)


def test_invalid_tool_arguments_are_rejected() -> None:
    s = good()
    i = index(s, lambda x: x.get("tool") == "email_send")
    s["reference"][i]["args"]["to"] = "maya"  # must be a list
    assert ("tool_args", f"reference[{i}].args.to") in rejected(s)


def test_procedural_generator_is_deterministic_and_distinct() -> None:
    async def go(seed: int) -> list[dict[str, Any]]:
        specs, _, stats = await synthesize([REQ], ProceduralGenerator(seed), 25)
        assert stats.accepted == 25
        return specs

    a, b = anyio.run(go, 1), anyio.run(go, 1)
    assert a == b
    assert len({json.dumps({k: v for k, v in s.items() if k != "id"}, sort_keys=True)
                for s in a}) == 25


def test_repair_loop_through_the_openai_client(tmp_path: Path) -> None:
    fixed = good()
    broken = copy.deepcopy(fixed)
    broken["coworkers"][0]["response"] = {"available": False}  # the fact cannot be obtained
    script = [Reply(content=json.dumps(broken)), Reply(content="```json\n" + json.dumps(fixed)
                                                       + "\n```")]
    with ScriptedOpenAIServer(script) as srv:
        gen = OpenAIGenerator(Endpoint(srv.base_url, "scripted"), [fixed])

        async def go() -> Any:
            return await synthesize([REQ], gen, 1, max_repairs=2)

        specs, attempts, stats = anyio.run(go)
        assert [a.accepted for a in attempts] == [False, True]
        assert attempts[0].report["rejections"][0]["rule"] == "unobtainable_fact"
        assert specs == [fixed]
        assert stats.first_pass == 0 and stats.accepted == 1
        assert stats.to_json()["mean_rounds"] == 1.0
        # the second request carried the validator's report
        repair_prompt = srv.requests[1]["messages"][-1]["content"]
        assert "unobtainable_fact" in repair_prompt and "rejected" in repair_prompt
        assert srv.requests[0]["response_format"]["type"] == "json_schema"


def test_synth_cli_then_validate_then_run(tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    files = sorted(str(p) for p in (ROOT / "examples/workflows").glob("*.yaml"))
    assert len(files) >= 6
    res = subprocess.run([*CLI, "synth", *files, "--generator", "procedural", "--n", "300",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    specs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(specs) == 300 and len({s["id"] for s in specs}) == 300
    report = json.loads((tmp_path / "tasks.jsonl.report.json").read_text())
    for rid, cov in report["coverage"].items():  # every capability of every requirement
        req = load_requirement(ROOT / f"examples/workflows/{rid}.yaml")
        assert all(cov[c] > 0 for c in req.capabilities), (rid, cov)
    attempts = (tmp_path / "tasks.jsonl.attempts.jsonl").read_text().splitlines()
    assert len(attempts) >= 300
    val = subprocess.run([*CLI, "validate", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert val.returncode == 0 and "300 of 300 task(s) valid" in val.stdout
    db = tmp_path / "s.db"
    subprocess.run([*CLI, "run", "--tasks", str(out), "--agent", "oracle", "--db", str(db),
                    "--quiet"], cwd=ROOT, check=True, capture_output=True)
    import sqlite3

    with sqlite3.connect(db) as c:
        scores = c.execute("SELECT count(*), min(score) FROM grades").fetchone()
    assert scores == (300, 1.0)


def test_validate_cli_names_each_rejection(tmp_path: Path) -> None:
    bad = good()
    bad["checks"].append({"id": "evil", "kind": "sql", "query": "DROP TABLE people",
                          "expect": []})
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps(good()) + "\n" + json.dumps(bad) + "\n{nope\n")
    res = subprocess.run([*CLI, "validate", str(f)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 1
    n = len(bad["checks"]) - 1
    assert f"{f}:2" in res.stdout and f"check_sql: checks[{n}].query" in res.stdout
    assert f"{f}:3" in res.stdout and "1 of 3 task(s) valid" in res.stdout


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.xdist_group("llama")  # (the one model server: see tests/conftest.py)
@pytest.mark.timeout(900)  # (24 s on an idle machine; its command has the same limit)
def test_openai_generator_against_the_real_small_model(tmp_path: Path, llama_server: str) -> None:
    out = tmp_path / "llm.jsonl"
    res = subprocess.run([*CLI, "synth", str(ROOT / "examples/workflows/support-triage.yaml"),
                          "--generator", "openai", "--model", "smollm2", "--base-url",
                          llama_server, "--n", "1", "--max-repairs", "1", "--max-tokens", "300",
                          "--examples", "0", "--concurrency", "1", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    report = json.loads((tmp_path / "llm.jsonl.report.json").read_text())
    # a model this small rarely writes a valid plan in one repair; when it writes none, synth
    # says so and exits 1 (the tasks and the report are still written, empty)
    assert res.returncode == (0 if report["accepted"] else 1), res.stderr
    if not report["accepted"]:
        assert "the openai generator produced no valid task" in res.stderr, res.stderr
    attempts = [json.loads(x) for x in
                (tmp_path / "llm.jsonl.attempts.jsonl").read_text().splitlines()]
    assert len(attempts) >= 1
    assert report["requested"] == 1
    assert 0.0 <= report["first_pass_validity"] <= report["validity_after_repair"] <= 1.0
    assert sum(report["rejection_reasons"].values()) >= len(attempts) - report["accepted"]
    print(json.dumps(report))
