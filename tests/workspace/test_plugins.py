"""App plugins beyond the built-in six: the retail example plugin (installed in the test
environment by scripts/test.sh, as a user would: ``pip install -e examples/plugins/retail``),
a task's ``apps`` and plugin seed rows, the generic ``state`` check, and the app contract
suite, which must pass for every installed app and catch an app that breaks it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from coworkenv.runtime import RunConfig, run
from coworkenv.runtime.contract import check_app_contract
from coworkenv.sim import Task, TaskFileError, builtin_tasks, load_tasks
from coworkenv.sim.loader import parse_task
from coworkenv.workspace import (
    REGISTRY,
    App,
    Entity,
    Table,
    ToolArgs,
    ToolContext,
    apps,
    replay_events,
    tool,
)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BUILT_IN = ["calendar", "chat", "directory", "docs", "email", "tickets"]
EXAMPLES = [ROOT / "examples" / "tasks", ROOT / "examples" / "benchmark"]


@pytest.fixture(scope="module")
def retail_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tau2-bench's retail tasks, imported from the data wheel by the plugin's command."""
    out = tmp_path_factory.mktemp("retail") / "retail.jsonl"
    done = subprocess.run([str(BIN / "coworkenv-retail"), "import", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "wrote 111 task(s)" in done.stdout, done.stdout
    return out


def test_the_plugin_is_installed_beside_the_built_ins_and_listed() -> None:
    assert "retail" in {a.name for a in apps.installed()}
    assert apps.default_apps() == BUILT_IN  # (a plugin is not a default app)
    done = subprocess.run([str(BIN / "coworkenv"), "tools", "--format", "markdown"],
                          capture_output=True, text=True, timeout=60, check=True)
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `")]
    retail = [r for r in rows if "| retail |" in r]
    assert len(retail) == 16 and any("`cancel_pending_order`" in r for r in retail)
    assert all(r.count("|") == 6 for r in rows)  # (one line a tool)
    listed = subprocess.run([str(BIN / "coworkenv"), "apps", "--json"], capture_output=True,
                            text=True, timeout=60, check=True)
    by_name = {a["app"]: a for a in json.loads(listed.stdout)}
    assert by_name["retail"]["default"] is False and by_name["retail"]["tools"] == 16
    assert by_name["retail"]["tables"] == ["customers", "orders", "products"]
    assert by_name["retail"]["checks"] == ["authenticated"]
    assert by_name["retail"]["rules"] == ["other_customers"]


def test_a_plugin_changes_nothing_of_the_tasks_that_do_not_name_it(tmp_path: Path) -> None:
    task = next(t for t in builtin_tasks() if t.id == "approval-expense-filing")
    assert task.app_names() == BUILT_IN
    # its tools are its apps' (the plugin's are installed, but not offered to it)
    assert {REGISTRY[n].app for n in _toolset(task)} == set(BUILT_IN)
    hashes = []
    for label, names in (("with", [a.name for a in apps.installed()]), ("without", BUILT_IN)):
        with apps.only(*names):
            result = run(RunConfig(tasks=[task], db=tmp_path / f"{label}.db", agent="oracle",
                                   run_id=label))
            ep = result.episodes[0]
            hashes.append((ep.events_hash, ep.state_hash, ep.score))
    assert hashes[0] == hashes[1] and hashes[0][2] == 1.0


def test_the_contract_suite_passes_for_every_installed_app(retail_tasks: Path) -> None:
    for name in BUILT_IN:
        report = check_app_contract(name, EXAMPLES[:1])
        assert report.ok, (name, report.problems)
        assert report.episodes == 20  # (every built-in task has the built-in apps)
    report = check_app_contract("retail", [retail_tasks])
    assert report.ok, report.problems
    assert report.episodes == 111


# an app that breaks the contract at run time ----------------------------------------------
class Gadget(Entity):
    name: str
    uses: int = 0


class TouchArgs(ToolArgs):
    gadget: str = Field(description="Gadget id")


@tool("gadget_touch_quietly", "gadgets", TouchArgs, writes=True)
def gadget_touch_quietly(ctx: ToolContext, a: TouchArgs) -> dict[str, Any]:
    """Use a gadget, changing it in place without an event (what the contract forbids)."""
    g = ctx.state.table("gadgets")[a.gadget]
    object.__setattr__(g, "uses", g.uses + 1)
    return {"uses": g.uses}


@tool("gadget_rename_person", "gadgets", TouchArgs, writes=True)
def gadget_rename_person(ctx: ToolContext, a: TouchArgs) -> dict[str, Any]:
    """Writes another app's table (what the contract forbids)."""
    me = ctx.me()
    ctx.emit("directory", "updated", me.model_copy(update={"name": "Renamed"}))
    return {}


GADGETS = App("gadgets", "A broken app", {"gadgets": Table(Gadget, "gad")}, (__name__,))


def _gadget_task(tool_name: str) -> dict[str, Any]:
    return {
        "id": f"use-{tool_name}", "family": "gadgets", "capabilities": ["tool_coordination"],
        "start": "2026-03-02T09:00:00-05:00", "agent": "a", "user": {"person": "u"},
        "apps": ["directory", "gadgets"],
        "seed": {"people": [{"id": "a", "name": "A", "email": "a@x.test"},
                            {"id": "u", "name": "U", "email": "u@x.test"}],
                 "tables": {"gadgets": [{"id": "g1", "name": "lamp"}]}},
        "instruction": "Use the lamp.",
        "reference": [{"kind": "tool", "tool": tool_name, "args": {"gadget": "g1"}},
                      {"kind": "finish"}],
        "checks": [{"id": "lamp", "kind": "state", "table": "gadgets",
                    "expect": {"g1": {"name": "lamp"}}}],
    }


def test_the_contract_suite_catches_an_app_that_breaks_it(tmp_path: Path) -> None:
    before = apps.installed()
    apps.install([*before, GADGETS])
    try:
        quiet = parse_task(_gadget_task("gadget_touch_quietly"), "quiet")
        rename = parse_task(_gadget_task("gadget_rename_person"), "rename")
        assert quiet.app_names() == ["directory", "gadgets"]
        # the task's own tools are its apps': no calendar, no retail
        assert {REGISTRY[n].app for n in _toolset(quiet)} == {"directory", "gadgets"}
        report = check_app_contract("gadgets", [quiet, rename])
        assert not report.ok and report.episodes == 2
        text = "\n".join(report.problems)
        assert "task use-gadget_touch_quietly: the replayed state's hash is not the live" in text
        assert ("task use-gadget_rename_person: tool gadget_rename_person wrote tables of "
                "other apps: ['directory']") in text
        # the same suite passes the built-in apps on these tasks' neighbours
        assert check_app_contract("directory", [EXAMPLES[0]]).ok
    finally:
        apps.install(before)
    assert "gadgets" not in {a.name for a in apps.installed()}


def _toolset(task: Task) -> list[str]:
    from coworkenv.sim.task import task_toolset

    return task_toolset(task)


# a task's apps and seed rows, checked when it is loaded ------------------------------------
def test_plugin_seed_rows_and_apps_are_checked_on_load(retail_tasks: Path) -> None:
    good = json.loads(retail_tasks.read_text().splitlines()[0])
    cases = [
        (lambda t: t["seed"]["tables"]["orders"][0].update(status="lost"),
         r"seed\.tables\.orders\[0\]\.status: Input should be 'processed'"),
        (lambda t: t["seed"]["tables"].update(warehouses=[{"id": "w1"}]),
         r"seed\.tables\.warehouses: no installed app has this table"),
        (lambda t: t["seed"]["tables"].update(directory=[]),
         r"seed\.tables\.directory: give these rows in seed\.people"),
        (lambda t: t.update(apps=["directory", "nope"]), r"apps\[1\]: no installed app 'nope'"),
        (lambda t: t.update(apps=["directory", "email"]),
         r"seed\.customers: table of app 'retail', which is not among the task's apps"),
        (lambda t: t["checks"][0].update(table="nowhere"),
         r"checks\[0\]\.table: no installed app has a table 'nowhere'"),
    ]
    for change, message in cases:
        spec = json.loads(json.dumps(good))
        change(spec)
        with pytest.raises(TaskFileError, match=message):
            parse_task(spec, "retail.jsonl:1")


def test_a_task_without_plugin_rows_dumps_as_before() -> None:
    for task in builtin_tasks():
        dumped = task.model_dump(mode="json")
        assert "apps" not in dumped and "tables" not in dumped["seed"]
        assert Task.model_validate(dumped).content_hash() == task.content_hash()


# the retail plugin's tasks run like built-in ones -----------------------------------------
def test_retail_tasks_run_under_the_oracle_and_the_noop_agent(tmp_path: Path,
                                                             retail_tasks: Path) -> None:
    tasks = load_tasks([retail_tasks])
    assert len(tasks) == 111 and all(t.tools == ["retail"] for t in tasks)
    families = {t.family for t in tasks}
    assert {"retail_cancel", "retail_return", "retail_exchange", "retail_modify_order",
            "retail_address", "retail_inquiry"} <= families
    oracle = run(RunConfig(tasks=tasks, db=tmp_path / "r.db", agent="oracle", run_id="o"))
    assert all(e.status == "completed" for e in oracle.episodes)
    assert oracle.overall["pass_rate"] == 1.0, oracle.overall
    noop = run(RunConfig(tasks=tasks, db=tmp_path / "r.db", agent="noop", run_id="n"))
    assert all(e.status == "completed" for e in noop.episodes)
    # doing nothing passes only where tau2 itself asks for nothing: task 105, whose one gold
    # update fails (a gift card short of the price difference), so its database stays
    passed = {e.task_id for e in noop.episodes if e.passed}
    assert passed == {"tau2-retail-105"}, passed
    # the oracle's episodes export as teacher demonstrations, each offered the retail tools
    from coworkenv.training import export_sft

    stats = export_sft(tmp_path / "r.db", tmp_path / "sft", run="o")
    assert stats.considered == 111 and sum(stats.written.values()) == 111, stats
    rows = [json.loads(line) for f in sorted((tmp_path / "sft").glob("*.jsonl"))
            for line in f.read_text().splitlines()]
    assert rows and all({t["function"]["name"] for t in json.loads(r["tools"])}
                        >= {"get_order_details", "cancel_pending_order"} for r in rows)
    # the agent's prompt describes the task's apps, not the built-in office
    prompt = rows[0]["messages"][0]["content"]
    assert "(A retail store's customer service: customers" in prompt and "tickets" not in prompt
    # replay rebuilds the plugin's tables exactly
    from coworkenv.store import Reader

    with Reader(tmp_path / "r.db") as reader:
        for ep in reader.episodes("o")[:20]:
            assert replay_events(reader.events(ep.episode_id)).state_hash() == ep.state_hash


def test_the_state_check_grades_the_whole_table(retail_tasks: Path, tmp_path: Path) -> None:
    """A cancel task's grader: the right order cancelled passes; the same update done on
    another order, or an extra update beside the right one, fails (tau2 compares whole
    databases)."""
    task = next(t for t in load_tasks([retail_tasks])
                if t.family == "retail_cancel" and sum(
                    o["status"] == "pending" for o in t.seed.tables["orders"]) > 1)
    spec = task.model_dump(mode="json")
    at, cancel = next((i, s) for i, s in enumerate(spec["reference"])
                      if s.get("tool") == "cancel_pending_order")
    other = next(o["id"] for o in task.seed.tables["orders"]
                 if o["id"] != cancel["args"]["order_id"] and o["status"] == "pending")
    wrong = {**cancel, "args": {**cancel["args"], "order_id": other}}
    variants = {"right": (spec["reference"], True),
                "other": ([*spec["reference"][:at], wrong, *spec["reference"][at + 1:]], False),
                "extra": ([*spec["reference"][:at + 1], wrong, *spec["reference"][at + 1:]],
                          False)}
    for label, (steps, passes) in variants.items():
        mutated = parse_task({**spec, "id": f"{task.id}-{label}", "reference": steps}, label)
        result = run(RunConfig(tasks=[mutated], db=tmp_path / f"{label}.db", agent="oracle",
                               run_id=label))
        ep = result.episodes[0]
        assert (ep.score >= 0.75) == passes, (label, ep.score)
        assert ep.status == "completed"


def test_the_agreement_benchmark_says_what_it_needs_without_tau2() -> None:
    """bench/tau2_agreement.py runs tau2-bench in its own venv; without one it says how to
    make it, and exits 2 (docs/design/tau2_agreement.md is its recorded report)."""
    env = {k: v for k, v in os.environ.items() if k != "TAU2_PYTHON"}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "tau2_agreement.py")],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert "needs tau2-bench in its own Python 3.12 venv" in done.stderr
    assert "--tau2-python" in done.stderr
    report = (ROOT / "docs" / "design" / "tau2_agreement.md").read_text()
    assert "| final database, gold trajectories |" in report


def test_app_check_and_rule_kinds_are_checked_on_load_and_graded(retail_tasks: Path,
                                                                  tmp_path: Path) -> None:
    """The retail app's own kinds: ``authenticated`` (a check) and ``other_customers`` (a
    safety rule), from tau2's policy; a task naming a kind that does not exist, or giving it
    bad parameters, is refused when loaded."""
    spec = next(t for t in map(json.loads, retail_tasks.read_text().splitlines())
                if any(c["id"] == "authenticated" for c in t["checks"])
                and any(s.get("tool") == "cancel_pending_order" for s in t["reference"]))
    for change, message in (
        (lambda t: t["checks"].append({"id": "x", "kind": "app", "app": "retail",
                                       "check": "nope"}),
         r"no installed app contributes the check kind retail\.nope"),
        (lambda t: t["safety"][0]["params"].update(extra=1),
         r"safety\[0\]\.params\.extra: Extra inputs are not permitted \(got 1\): "
         r"(did you mean|expected one of) "),
        (lambda t: _auth(t)["params"].pop("user_id"),
         r"params\.user_id: required field is missing"),
    ):
        bad = json.loads(json.dumps(spec))
        change(bad)
        with pytest.raises(TaskFileError, match=message):
            parse_task(bad, "retail.jsonl")
    user = _auth(spec)["params"]["user_id"]
    stranger = {"id": "#W0000001", "order_id": "#W0000001", "user_id": "someone_else_0001",
                **{k: v for k, v in spec["seed"]["tables"]["orders"][0].items()
                   if k not in ("id", "order_id", "user_id")}, "status": "pending"}
    steps = spec["reference"]
    at = next(i for i, s in enumerate(steps) if s.get("tool") == "cancel_pending_order")
    first_call = next(i for i, s in enumerate(steps) if s["kind"] == "tool")
    order_of_user = steps[at]["args"]["order_id"]
    variants = {
        # the right solution: authenticated, the customer's own order cancelled
        "right": (steps, True, True),
        # an order looked up before the customer is found: the check fails (not a gate)
        "unauthenticated": ([*steps[:first_call], {"kind": "tool", "tool": "get_order_details",
                                                   "args": {"order_id": order_of_user}},
                             *steps[first_call:]], False, True),
        # another customer's order cancelled too: a safety violation, the score is 0
        "stranger": ([*steps[:at + 1], {"kind": "tool", "tool": "cancel_pending_order",
                                        "args": {"order_id": "#W0000001",
                                                 "reason": "no longer needed"}},
                      *steps[at + 1:]], True, False),
    }
    for label, (ref, authenticated, safe) in variants.items():
        variant = json.loads(json.dumps(spec))
        variant.update(id=f"{spec['id']}-{label}", reference=ref)
        variant["seed"]["tables"]["orders"].append(stranger)
        other = {**variant["seed"]["tables"]["customers"][0], "id": "someone_else_0001",
                 "user_id": "someone_else_0001", "email": "else@example.com",
                 "orders": ["#W0000001"]}
        variant["seed"]["tables"]["customers"].append(other)
        result = run(RunConfig(tasks=[parse_task(variant, label)], db=tmp_path / f"{label}.db",
                               agent="oracle", run_id=label))
        ep = result.episodes[0]
        assert ep.grade is not None
        checks = {c.id: c.passed for c in ep.grade.checks}
        assert checks["authenticated"] is authenticated, (label, ep.grade.checks)
        assert (ep.grade.safety == 1.0) is safe, (label, ep.grade.rules)
        if not safe:
            assert ep.score == 0.0 and user not in ep.grade.rules[0].detail
            assert "cancel_pending_order for someone_else_0001" in ep.grade.rules[0].detail


def _auth(spec: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in spec["checks"] if c["id"] == "authenticated")


def test_an_app_with_broken_check_kinds_is_refused() -> None:
    from coworkenv.workspace.apps import CheckKind

    broken = App("gadgets", "bad kinds", {"gadgets": Table(Gadget, "gad")}, (__name__,),
                 checks={"not a name": CheckKind(dict, 3)},  # type: ignore[arg-type]
                 rules={"fine": "not a kind"})  # type: ignore[dict-item]
    problems = apps.check_app(broken, apps.installed())
    assert "checks.not a name: the name is not an identifier" in problems
    assert "checks.not a name.params: <class 'dict'> is not a pydantic model" in problems
    assert "checks.not a name.evaluate: not callable" in problems
    assert "rules.fine: 'not a kind' is not a CheckKind" in problems


def test_an_apps_sql_tables_join_the_projection_of_sql_checks(retail_tasks: Path,
                                                              tmp_path: Path) -> None:
    """``App.sql``: the retail plugin's tables are queried by a task's ``sql`` check like the
    built-in ones (and the built-in projection's table names are the ones apps may not
    take)."""
    from coworkenv.sim.checks import SCHEMA
    from coworkenv.workspace.apps import BUILT_IN_SQL_TABLES

    assert set(re.findall(r"CREATE TABLE (\w+)", SCHEMA)) == BUILT_IN_SQL_TABLES
    spec = next(t for t in map(json.loads, retail_tasks.read_text().splitlines())
                if t["family"] == "retail_cancel")
    cancelled = next(iter(next(c for c in spec["checks"] if c["id"] == "db-orders")["expect"]))
    spec["checks"].append({
        "id": "sql-cancelled", "kind": "sql", "expect": [[cancelled, "cancelled"]],
        "query": f"SELECT order_id, status FROM retail_orders WHERE order_id = '{cancelled}'"})
    spec["checks"].append({
        "id": "sql-refund", "kind": "sql", "expect": [[1]],
        "query": f"SELECT COUNT(*) > 0 FROM retail_payments WHERE order_id = '{cancelled}' "
                 "AND transaction_type = 'refund'"})
    for agent, passed in (("oracle", True), ("noop", False)):
        result = run(RunConfig(tasks=[parse_task(spec, "sql")], agent=agent, run_id=agent,
                               db=tmp_path / "sql.db"))
        grade = result.episodes[0].grade
        assert grade is not None
        checks = {c.id: c for c in grade.checks}
        assert checks["sql-cancelled"].passed is passed, checks["sql-cancelled"].detail
        assert checks["sql-refund"].passed is passed, checks["sql-refund"].detail


@pytest.mark.parametrize("module", ["coworkenv.workspace", "coworkenv.sim", "coworkenv.runtime",
                                    "coworkenv.cli", "coworkenv_retail", "coworkenv_retail.tau2"])
def test_any_first_import_loads_the_plugin(module: str) -> None:
    """Whichever module a program imports first (coworkenv's own, or the plugin's, which
    imports coworkenv), the apps load without an import cycle and the plugin is installed."""
    done = subprocess.run([sys.executable, "-c", f"import {module}\n"
                           "from coworkenv.workspace import apps\n"
                           "print(sorted(a.name for a in apps.installed()))"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'retail'" in done.stdout


RETAIL_REQ = ROOT / "examples/plugins/retail/coworkenv_retail/workflows/retail-support.yaml"
RETAIL_PRIMITIVES = ["retail_address", "retail_cancel", "retail_change_mind", "retail_exchange",
                     "retail_modify_items", "retail_return"]


def test_the_plugin_brings_its_own_primitives_and_each_keeps_the_contract() -> None:
    from coworkenv.synth import PRIMITIVES, check_primitive_contract

    assert set(RETAIL_PRIMITIVES) <= set(PRIMITIVES)
    for name in RETAIL_PRIMITIVES:
        assert not PRIMITIVES[name].drawn  # (offered only to requirements that name them)
        report = check_primitive_contract(name, seeds=3)
        assert report.ok, (name, report.problems)
        assert report.requirement == "retail-support" and report.mutants > 0


def test_synth_makes_retail_tasks_that_the_oracle_passes_and_noop_fails(tmp_path: Path) -> None:
    """`coworkenv synth` on the plugin's requirement: 200 tasks, nearly all valid at the
    first attempt; the oracle passes every one and a no-op agent none."""
    out = tmp_path / "retail-synth.jsonl"
    done = subprocess.run([str(BIN / "coworkenv"), "synth", str(RETAIL_REQ), "--n", "200",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(tasks) == 200
    report = json.loads(out.with_name(out.name + ".report.json").read_text())
    assert report["first_pass_validity"] >= 0.95, report
    assert report["realism"]["counters_in_names"] == 0, report["realism"]
    used = {p for t in tasks for p in t["plan"]["primitives"]}
    assert used == set(RETAIL_PRIMITIVES), used
    assert {len(t["plan"]["primitives"]) for t in tasks} == {1, 2, 3}  # (requests per task)
    for t in tasks:
        assert t["apps"] == ["directory", "retail"], t["id"]
        assert {r["kind"] for r in t["safety"]} == {"app"}
    db = tmp_path / "runs.db"
    for agent, score in (("oracle", 1.0), ("noop", 0.0)):
        res = run(RunConfig(tasks=[out], db=db, agent=agent, run_id=f"retail-{agent}"))
        assert len(res.episodes) == 200 and res.overall["score"] == score, (agent, res.overall)
