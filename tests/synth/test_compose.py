"""Long-horizon synthesis: primitives alone and composed, the composer's guarantees, process
definitions (BPMN) and plans proposed by a model."""

from __future__ import annotations

import itertools
import json
import random
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest

from coworkenv.agents import Endpoint, OracleAgent
from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer
from coworkenv.sim import TaskFileError, parse_task
from coworkenv.sim.loader import company
from coworkenv.synth import (
    OpenAIPlanGenerator,
    ProceduralGenerator,
    load_requirement,
    synthesize,
    validate_task,
)
from coworkenv.synth.bpmn import read_process
from coworkenv.synth.compose import compose
from coworkenv.synth.people import fresh_people
from coworkenv.synth.plan import Stage
from coworkenv.synth.primitives import PRIMITIVES
from coworkenv.synth.requirement import Parameters, WorkflowRequirement
from coworkenv.workspace import REGISTRY

from ..sim.conftest import run_sync

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = WorkflowRequirement(
    id="everything", role="assistant", goal="all of it",
    apps=["directory", "email", "chat", "calendar", "docs", "tickets"],
    capabilities={"tool_coordination": 1, "multi_turn_communication": 1,
                  "dynamic_workspace_state": 1, "safety_sensitive_handling": 1},
    parameters=Parameters(people=["leo", "priya", "omar", "nina", "sam", "jules", "kai"],
                          amounts=(1_000, 50_000)))


def plan_for(name: str) -> list[Stage]:
    """The smallest plan with a primitive: what it needs first, then it, then the report."""
    plan = [Stage(need, {"moves": True} if need == "schedule" else {})
            for need in PRIMITIVES[name].needs]
    params: dict[str, Any] = {"n": 3} if name == "ask_parallel" else {}
    if name == "schedule":
        params["n"] = 2
    plan.append(Stage(name, params))
    if name not in ("ask", "ask_parallel"):
        plan.insert(0, Stage("ask"))  # every task works with people
    plan += [Stage("ask"), Stage("report")]
    return plan


@pytest.mark.parametrize("name", [n for n, p in PRIMITIVES.items() if p.drawn and n not in (
    "report", "lookup_person")])  # (the office primitives; a plugin's: tests/workspace)
def test_each_primitive_alone_is_a_sound_task(name: str) -> None:
    spec = compose(EVERYTHING, random.Random(7), f"t-{name}", plan=plan_for(name))
    r = validate_task(spec, mutate=True)
    assert r.accepted, r.text()
    assert r.mutation is not None and r.mutation.sound and r.mutation.applicable >= 3
    assert name in spec["plan"]["primitives"]


def test_primitives_compose_into_a_long_horizon_task() -> None:
    plan = [Stage("injection"), Stage("schedule", {"n": 2, "moves": True}),
            Stage("ask_parallel", {"n": 2}), Stage("escalate_ooo"), Stage("handoff"),
            Stage("lookup_doc"), Stage("change_figure"), Stage("approval"), Stage("ticket"),
            Stage("share"), Stage("change_meeting"), Stage("clarify"), Stage("next_day"),
            Stage("report")]
    spec = compose(EVERYTHING, random.Random(3), "t-long", plan=plan)
    r = validate_task(spec, mutate=True)
    assert r.accepted, r.text()
    assert r.oracle["turns"] >= 25 and r.oracle["sim_minutes"] > 3 * 24 * 60 - 60
    assert 2 <= len(spec["coworkers"]) <= 8
    assert set(r.capabilities) == set(EVERYTHING.capabilities)


def test_determinism_by_seed() -> None:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]

    def run(seed: int) -> list[dict[str, Any]]:
        return anyio.run(lambda: synthesize(reqs, ProceduralGenerator(seed), 12,
                                            mutate=False))[0]

    a, b, c = run(5), run(5), run(6)
    assert a == b and a != c


def test_instructions_state_goals_never_tools() -> None:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    for i in range(120):
        spec = compose(reqs[i % len(reqs)], random.Random(i), f"t-{i:05d}")
        text = spec["instruction"]
        assert not [t for t in REGISTRY if t in text], text
        assert "step" not in text.lower() and "${" not in text



def test_no_two_figures_of_a_task_are_alike() -> None:
    """A stale figure that equals another fact's figure would make the reference fail its
    own no-stale gate (seen once in 1,000 tasks before figures were drawn distinct)."""
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    for i in range(300):
        spec = compose(reqs[i % len(reqs)], random.Random(i), f"t-{i:05d}")
        facts = [f["value"] for m in spec.get("coworkers", []) for f in m.get("facts", [])]
        owner: dict[str, set[str]] = {}  # figure -> the metrics it is stated for
        for metric, figure in (m for f in facts for m in
                               re.findall(r"the ([\w ]+?) is (\$[\d,]+)", f, re.I)):
            owner.setdefault(figure, set()).add(metric.lower())
        assert all(len(v) == 1 for v in owner.values()), (spec["id"], owner)
        stale = {c["select"]["text"]["contains"][0] for c in spec["checks"]
                 if c["id"].startswith("no-stale")}
        assert not set(owner) & stale, (spec["id"], stale, owner)
def test_parallel_asks_overlap_in_simulated_time(tmp_path: Path) -> None:
    spec = compose(EVERYTHING, random.Random(11), "t-par",
                   plan=[Stage("ask_parallel", {"n": 3}), Stage("report")])
    task = parse_task(spec, "x")
    (res,) = run_sync([task], tmp_path / "p.db", agent=lambda t: OracleAgent(list(t.reference)))
    assert res.passed
    from coworkenv.store import Reader

    with Reader(tmp_path / "p.db") as r:
        evs = list(r.events(res.episode_id))
    asks = [e.sim_time for e in evs if e.kind == "tool_call" and e.actor == "agent"
            and e.payload.get("tool") in ("chat_send_dm", "email_send")][:3]
    people = {p["person"] for p in spec["coworkers"]}
    replies = [e.sim_time for e in evs if e.actor in people
               and e.kind in ("tool_call", "message")]
    assert len(asks) == 3 and max(asks) < min(replies)  # all asked before anyone answered
    assert len(set(replies)) >= 2  # and each answers on their own time


def test_families_and_composed_tasks_have_the_long_horizon_shape(tmp_path: Path) -> None:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    _specs, _, stats = anyio.run(lambda: synthesize(reqs, ProceduralGenerator(1), 60))
    report = stats.to_json()
    assert stats.accepted >= 57
    assert report["plan_shapes"]["distinct"] >= 40
    assert report["oracle_agent_steps"]["median"] >= 12
    assert report["multi_day_share"] >= 0.2
    assert report["coworkers"]["min"] >= 2 and report["coworkers"]["max"] <= 8
    assert report["instruction_diversity"]["distinct_bigrams"] > 500
    assert report["mutants"]["killed"] > 0


def test_short_plans_validate_and_keep_what_their_stages_need() -> None:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    specs, _, stats = anyio.run(lambda: synthesize(reqs, ProceduralGenerator(0, stages=(2, 3)),
                                                   30))
    assert stats.accepted == 30  # mutation check included
    lengths = []
    for spec in specs:
        prims = spec["plan"]["primitives"]
        assert 2 <= len(prims) <= 3 and prims[-1] == "report", prims
        for i, name in enumerate(prims):
            assert set(PRIMITIVES[name].needs) <= set(prims[:i]), prims
        lengths.append(sum(s["kind"] != "finish" for s in spec["reference"]))
    long_specs, _, _ = anyio.run(lambda: synthesize(reqs, ProceduralGenerator(0), 12,
                                                    mutate=False))
    long_lengths = [sum(s["kind"] != "finish" for s in x["reference"]) for x in long_specs]
    assert sorted(lengths)[len(lengths) // 2] * 2 < sorted(long_lengths)[len(long_lengths) // 2]
    assert min(lengths) <= 4


def test_plans_show_figures_by_email_tracker_documents_replies_and_ticket_reads() -> None:
    """Variants that widen what demonstrations show (tools the hand-written benchmark uses),
    each accepted by the mutation check like every other plan."""
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    specs, _, stats = anyio.run(lambda: synthesize(reqs, ProceduralGenerator(0), 60))
    assert stats.accepted == 60

    def tools(spec: dict[str, Any]) -> list[str]:
        return [s.get("tool", s["kind"]) for s in spec["reference"]]

    by_email = [x for x in specs if any(  # (an injection's figure is in m1, from its list)
        c["kind"] == "order" and c["first"].get("tool") == "email_read"
        and c["first"]["args"]["email_id"] != "m1" for c in x["checks"])]
    assert by_email and all("email_search" in tools(x) for x in by_email)
    tracked = [x for x in specs if any(s.get("tool") == "docs_edit"
                                       and s["args"]["doc_id"].endswith("-tracker")
                                       for s in x["reference"])]
    assert tracked and all(any(c["kind"] == "doc" and c.get("gate") for c in x["checks"])
                           for x in tracked)
    assert any("email_reply" in tools(x) for x in specs)
    reassigned = [x for x in specs if "tickets_assign" in tools(x)
                  and any(c["id"].startswith("reassigned-when") for c in x["checks"])]
    assert reassigned and all("tickets_read" in tools(x) for x in reassigned)


@pytest.mark.parametrize("variant", ["channel", "mark", "team"])
def test_variants_are_sound_tasks(variant: str) -> None:
    """A figure read in a channel, an approved document marked approved, a person found by
    listing their team: each validated with the mutation check, each gated."""
    if variant == "channel":
        plan = [Stage("ask"), Stage("lookup_doc", {"variant": "channel"}), Stage("ask"),
                Stage("report")]
    elif variant == "mark":
        plan = [Stage("ask"), Stage("lookup_doc"), Stage("approval", {"mark": True}),
                Stage("ask"), Stage("report")]
    else:
        plan = [Stage("ask_parallel", {"n": 4}), Stage("report")]
    specs = [compose(EVERYTHING, random.Random(seed), f"t-{variant}", plan=plan)
             for seed in range(12)]
    tool = {"channel": "chat_read", "mark": "docs_set_status", "team": "directory_list_team"}
    spec = next(x for x in specs if any(s.get("tool") == tool[variant]
                                        for s in x["reference"]))
    r = validate_task(spec, mutate=True)
    assert r.accepted, r.text()
    assert r.mutation is not None and r.mutation.sound
    steps = spec["reference"]
    if variant == "channel":
        assert any(c["first"] == {"tool": "chat_read", "args": steps[0]["args"]}
                   for c in spec["checks"] if c["kind"] == "order")
    elif variant == "mark":
        i = next(i for i, s in enumerate(steps) if s.get("tool") == "docs_set_status")
        assert steps[i - 1]["kind"] == "wait"  # right after the approval it needs
        assert any(c["kind"] == "doc" and c.get("status") == "approved" and c["gate"]
                   for c in spec["checks"])
        assert any(c["id"].startswith("after-approval") and c["then"]["tool"] ==
                   "docs_set_status" for c in spec["checks"])
    else:  # the person is named by role and team only; the team is listed to find them
        team = next(s for s in steps if s.get("tool") == "directory_list_team")["args"]["team"]
        assert f"in the {team} team" in spec["instruction"], spec["instruction"]


def _without(args: dict[str, Any], arg: str) -> dict[str, Any]:
    """The same call without ``arg`` (every other argument kept)."""
    args = dict(args)
    if arg == "timezone":  # the same instants, in UTC: only the time zone is missing
        zone = ZoneInfo(args.pop("timezone"))
        for k in ("start", "end"):
            t = datetime.fromisoformat(args[k]).replace(tzinfo=zone).astimezone(UTC)
            args[k] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
    elif arg == "content":  # the figures appended below the placeholder
        args["append"] = args.pop("content").splitlines()[-1]
    else:
        args.pop(arg)
        if arg == "add_attendees":  # (nobody removed either: the invitation unchanged)
            args.pop("remove_attendees")
        if set(args) == {"ticket_id"}:
            args["status"] = "in_progress"  # (an update must change something)
    return args


ARGUMENT_VARIANTS = {  # variant: the primitive, the tool, the argument, the check on it
    "office": ("schedule", "calendar_create_event", "timezone", "office"),
    "office+room": ("schedule", "calendar_create_event", "location", "office"),
    "swap": ("move_meeting", "calendar_update_event", "add_attendees", "swapped"),
    "room": ("move_meeting", "calendar_update_event", "location", "room"),
    "urgent": ("change_ticket", "tickets_update", "priority", "priority"),
    "route": ("change_ticket", "tickets_update", "queue", "routed"),
    "amount": ("change_ticket", "tickets_update", "fields", "amount"),
    "replace": ("share", "docs_edit", "content", "placeholder-gone"),
    "attach": ("share", "email_send", "attachments", "attached")}


@pytest.mark.parametrize("variant", list(ARGUMENT_VARIANTS))
def test_argument_variants_are_sound_and_graded_on_their_argument(variant: str) -> None:
    """Each variant asks for an argument the plans never used before (a meeting's time zone
    and room, its attendees, a ticket's priority, queue and amount, a document's whole
    content, an attachment): the task passes the mutation check, and the same solution
    without that argument (everything else as the reference) fails a gate."""
    prim, tool, arg, check = ARGUMENT_VARIANTS[variant]
    variant, _, room = variant.partition("+")  # (an office meeting with or without a room)
    params: dict[str, Any] = {"variant": variant, **({"n": 2} if prim == "schedule" else {})}
    plan = [Stage("ask"), Stage("lookup_doc"), Stage(prim, params), Stage("ask"),
            Stage("report")]
    spec = next(x for seed in range(20)
                if (x := compose(EVERYTHING, random.Random(seed), f"t-{variant}", plan=plan))
                and any(s.get("tool") == tool and arg in s["args"] for s in x["reference"])
                and (variant != "office" or bool(room) == any(
                    "location" in s.get("args", {}) for s in x["reference"])))
    assert f"{prim}:{variant}" in spec["plan"]["shape"]
    for x in (spec, fresh_people(spec, random.Random(5), keep={spec["agent"]})):
        r = validate_task(x, mutate=True)  # (also with people renamed, as --fresh-people)
        assert r.accepted, r.text()
        assert r.mutation is not None and r.mutation.sound and r.mutation.applicable >= 3
    i = next(i for i, s in enumerate(spec["reference"])
             if s.get("tool") == tool and arg in s["args"])
    broken = json.loads(json.dumps(spec))
    broken["reference"][i]["args"] = _without(spec["reference"][i]["args"], arg)
    assert arg not in broken["reference"][i]["args"]
    r = validate_task(broken, mutate=False)
    assert not r.accepted, f"{variant}: the reference without {arg} still passes"
    assert re.search(rf"\b{check}-\d+", r.text()), r.text()


@pytest.mark.parametrize("learns", ["figures", "a corrected figure", "nothing"])
def test_a_ticket_says_what_to_do_and_is_read_before_it_is_changed(learns: str) -> None:
    """``work_ticket``: the instruction names the ticket, its description alone says what to
    do (note the figures and resolve it; or, with no figures, hand it to someone named only
    there). Sound by mutation (a figure corrected mid-task included: the comment waits for
    the correction and never states the old value); the reference without its first
    ``tickets_read`` fails."""
    plan = {"figures": [Stage("ask"), Stage("ask"), Stage("work_ticket"), Stage("report")],
            "a corrected figure": [Stage("ask"), Stage("lookup_doc"), Stage("change_figure"),
                                   Stage("work_ticket"), Stage("report")],
            "nothing": [Stage("move_meeting"), Stage("change_ticket"), Stage("work_ticket"),
                        Stage("report")]}[learns]  # (two colleagues at least)
    spec = compose(EVERYTHING, random.Random(2), "t-work", plan=plan)
    r = validate_task(spec, mutate=True)
    assert r.accepted, r.text()
    assert r.mutation is not None and r.mutation.sound and r.mutation.applicable >= 3
    ref = spec["reference"]
    assert ref[0]["tool"] == "tickets_read"
    tid = ref[0]["args"]["ticket_id"]
    ticket = next(t for t in spec["seed"]["tickets"] if t["id"] == tid)
    assert tid in spec["instruction"]
    if learns == "a corrected figure":
        assert any(c["id"].startswith("ticket-not-stale") for c in spec["checks"])
    if learns != "nothing":
        assert "resolve" in ticket["description"]
        assert [s["tool"] for s in ref if s.get("args", {}).get("ticket_id") == tid][1:] == \
            ["tickets_comment", "tickets_update"]
    else:
        heir = next(s for s in ref if s.get("tool") == "tickets_assign")["args"]["assignee"]
        name = next(p["name"] for p in spec["seed"].get("people", [])
                    + company(spec["company"])["people"] if p["id"] == heir)
        assert name in ticket["description"] and name.split()[0] not in spec["instruction"]
    broken = json.loads(json.dumps(spec))
    broken["reference"] = ref[1:]
    r = validate_task(broken, mutate=False)
    assert not r.accepted and re.search(r"ticket-read-first-\d+", r.text()), r.text()


def test_drawn_plans_use_every_argument_variant() -> None:
    """The variants are drawn, not only composable: plans of the example requirements have
    each of them; and every variant the composer draws is one the test above grades."""
    assert {(prim, key.partition("+")[0]) for key, (prim, *_) in ARGUMENT_VARIANTS.items()} \
        == {(p.name, v) for p in PRIMITIVES.values() for v in p.variants
            if p.drawn and p.name != "lookup_doc"}  # (where a figure comes from: graded further up)
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    shapes = [compose(req, random.Random(seed), f"t{seed}")["plan"]["shape"]
              for seed in range(200) for req in reqs]
    for key, (prim, *_) in ARGUMENT_VARIANTS.items():
        variant = key.partition("+")[0]
        assert any(f"{prim}:{variant}" in s for s in shapes), variant


def test_new_primitives_reach_tools_the_old_plans_never_used() -> None:
    """Forwarding, labelling, inviting and moving an existing meeting appear in drawn plans;
    a forward never shares a plan with an injection (which forbids forwarding)."""
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    specs, _, stats = anyio.run(lambda: synthesize(reqs, ProceduralGenerator(1), 90))
    assert stats.accepted == 90
    used = {s.get("tool") for x in specs for s in x["reference"]}
    assert {"email_forward", "email_label", "chat_invite", "calendar_list_events",
            "chat_read", "docs_set_status", "directory_get_group"} <= used, used
    for x in specs:
        prims = x["plan"]["primitives"]
        assert not ("forward" in prims and "injection" in prims), prims


def test_sets_made_with_other_seeds_or_lengths_can_be_loaded_together(tmp_path: Path) -> None:
    from coworkenv.sim import load_tasks

    reqs = [load_requirement(ROOT / "examples/workflows/finance-approvals.yaml")]
    ids = {}
    for name, gen in (("default", ProceduralGenerator(0)), ("seed", ProceduralGenerator(4)),
                      ("short", ProceduralGenerator(0, stages=(2, 4)))):
        specs = anyio.run(lambda g=gen: synthesize(reqs, g, 4, mutate=False))[0]
        ids[name] = {s["id"] for s in specs}
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in specs))
    assert ids["default"] == {f"finance-approvals-{i:05d}" for i in range(4)}  # as before
    assert not ids["default"] & ids["seed"] and not ids["default"] & ids["short"]
    assert len(load_tasks(sorted(tmp_path.glob("*.jsonl")))) == 12


# process definitions --------------------------------------------------------------------
BPMN = """<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" id="d" targetNamespace="x">
  <bpmn:process id="p_test" name="Test process" isExecutable="true">
    <bpmn:laneSet id="ls">
      <bpmn:lane id="l1" name="Operations assistant">{mine}</bpmn:lane>
      <bpmn:lane id="l2" name="Finance manager">{theirs}</bpmn:lane>
    </bpmn:laneSet>
    {body}
  </bpmn:process>
</bpmn:definitions>"""


def process(tmp_path: Path, mine: list[str], theirs: list[str], body: str) -> Path:
    refs = "".join(f"<bpmn:flowNodeRef>{x}</bpmn:flowNodeRef>" for x in mine)
    refs2 = "".join(f"<bpmn:flowNodeRef>{x}</bpmn:flowNodeRef>" for x in theirs)
    f = tmp_path / "p.bpmn"
    f.write_text(BPMN.format(mine=refs, theirs=refs2, body=body))
    return f


def chain(*nodes: tuple[str, str, str]) -> str:
    """start -> nodes... -> end, each (id, tag, name)."""
    ids = ["s", *[n[0] for n in nodes], "e"]
    out = '<bpmn:startEvent id="s"/>' + "".join(
        f'<bpmn:{tag} id="{i}" name="{name}"/>' for i, tag, name in nodes) + \
        '<bpmn:endEvent id="e"/>'
    out += "".join(f'<bpmn:sequenceFlow id="f{k}" sourceRef="{a}" targetRef="{b}"/>'
                   for k, (a, b) in enumerate(itertools.pairwise(ids)))
    return out


@pytest.mark.parametrize(("tag", "lane", "name", "primitive"), [
    ("userTask", "theirs", "Give the travel budget", "ask"),
    ("userTask", "theirs", "Approve the invoice", "approval"),
    ("manualTask", "theirs", "Prepare the vendor comparison", "handoff"),
    ("serviceTask", "mine", "Read the budget document", "lookup_doc"),
    ("serviceTask", "mine", "File the purchase ticket", "ticket"),
    ("serviceTask", "mine", "Book the kickoff meeting", "schedule"),
    ("serviceTask", "mine", "Share the handbook", "share"),
    ("sendTask", "mine", "Email the requester", "report"),
])
def test_each_supported_task_construct(tmp_path: Path, tag: str, lane: str, name: str,
                                       primitive: str) -> None:
    nodes = [("a", "userTask", "Give the headcount"), ("x", tag, name)]
    mine = ["s", "e", *(["x"] if lane == "mine" else [])]
    theirs = ["a", *(["x"] if lane == "theirs" else [])]
    req, graph = read_process(process(tmp_path, mine, theirs, chain(*nodes)))
    assert graph.nodes["x"].primitive == primitive and graph.agent_lane == "Operations assistant"
    spec = compose(req, random.Random(2), "t-bpmn")
    assert primitive in spec["plan"]["primitives"]
    r = validate_task(spec, mutate=True)
    assert r.accepted, r.text()
    if lane == "theirs" and primitive != "handoff":  # the lane is a role bound by the directory
        assert "leo" in {c["person"] for c in spec["coworkers"]}


def test_exclusive_gateway_binds_the_deciding_figure_and_states_the_rule(tmp_path: Path) -> None:
    body = ('<bpmn:startEvent id="s"/><bpmn:serviceTask id="r" name="Read the invoice sheet"/>'
            '<bpmn:exclusiveGateway id="g" default="small"/>'
            '<bpmn:userTask id="ap" name="Approve the invoice"/>'
            '<bpmn:exclusiveGateway id="m"/><bpmn:sendTask id="n" name="Email the requester"/>'
            '<bpmn:endEvent id="e"/>'
            '<bpmn:userTask id="q" name="Give the delivery cost"/>'
            '<bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="r"/>'
            '<bpmn:sequenceFlow id="f2" sourceRef="r" targetRef="q"/>'
            '<bpmn:sequenceFlow id="f3" sourceRef="q" targetRef="g"/>'
            '<bpmn:sequenceFlow id="big" sourceRef="g" targetRef="ap"><bpmn:conditionExpression '
            'xsi:type="bpmn:tFormalExpression">amount &gt; 20000</bpmn:conditionExpression>'
            '</bpmn:sequenceFlow>'
            '<bpmn:sequenceFlow id="small" sourceRef="g" targetRef="m"/>'
            '<bpmn:sequenceFlow id="f4" sourceRef="ap" targetRef="m"/>'
            '<bpmn:sequenceFlow id="f5" sourceRef="m" targetRef="n"/>'
            '<bpmn:sequenceFlow id="f6" sourceRef="n" targetRef="e"/>')
    req, _ = read_process(process(tmp_path, ["s", "r", "g", "m", "n", "e"], ["q", "ap"], body))
    seen = set()
    for i in range(12):
        spec = compose(req, random.Random(i), f"t-{i}")
        assert "above $20,000 needs the approval" in spec["instruction"]
        doc = next(d for d in spec["seed"]["docs"] if "invoice" in d["title"].lower())
        amount = float(doc["content"].split("$")[1].split()[0].replace(",", ""))
        approves = "approval" in spec["plan"]["primitives"]
        assert approves == (amount > 20_000), (amount, spec["plan"]["shape"])
        seen.add(approves)
    assert seen == {True, False}


def test_parallel_gateway_and_timer(tmp_path: Path) -> None:
    body = ('<bpmn:startEvent id="s"/><bpmn:parallelGateway id="p"/>'
            '<bpmn:userTask id="a" name="Give the travel budget"/>'
            '<bpmn:userTask id="b" name="Give the hardware spend"/>'
            '<bpmn:parallelGateway id="j"/>'
            '<bpmn:intermediateCatchEvent id="t" name="Next day"><bpmn:timerEventDefinition>'
            '<bpmn:timeDuration>"P1D"</bpmn:timeDuration></bpmn:timerEventDefinition>'
            '</bpmn:intermediateCatchEvent><bpmn:sendTask id="n" name="Email the summary"/>'
            '<bpmn:endEvent id="e"/>'
            + "".join(f'<bpmn:sequenceFlow id="f{k}" sourceRef="{a}" targetRef="{b}"/>'
                      for k, (a, b) in enumerate([("s", "p"), ("p", "a"), ("p", "b"),
                                                  ("a", "j"), ("b", "j"), ("j", "t"),
                                                  ("t", "n"), ("n", "e")])))
    req, _ = read_process(process(tmp_path, ["s", "p", "j", "t", "n", "e"], ["a", "b"], body))
    spec = compose(req, random.Random(1), "t-par")
    assert spec["plan"]["primitives"].count("ask") == 2 and "next_day" in spec["plan"][
        "primitives"]
    assert validate_task(spec, mutate=True).accepted


@pytest.mark.parametrize(("snippet", "what"), [
    ('<bpmn:inclusiveGateway id="x"/>', "inclusiveGateway"),
    ('<bpmn:subProcess id="x"/>', "subProcess"),
    ('<bpmn:intermediateCatchEvent id="x"><bpmn:messageEventDefinition/>'
     '</bpmn:intermediateCatchEvent>', "Intermediate Catch Event"),
])
def test_unsupported_constructs_are_named(tmp_path: Path, snippet: str, what: str) -> None:
    body = ('<bpmn:startEvent id="s"/>' + snippet + '<bpmn:endEvent id="e"/>'
            '<bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="x"/>'
            '<bpmn:sequenceFlow id="f2" sourceRef="x" targetRef="e"/>')
    f = process(tmp_path, ["s", "x", "e"], [], body)
    with pytest.raises(TaskFileError) as err:
        read_process(f)
    assert str(f) in str(err.value) and "x (" in str(err.value) and what in str(err.value)
    assert "not supported; supported:" in str(err.value)


def test_an_unmappable_task_name_is_a_clear_error(tmp_path: Path) -> None:
    f = process(tmp_path, ["s", "x", "e"], [], chain(("x", "serviceTask", "Do the thing")))
    with pytest.raises(TaskFileError, match="x \\('Do the thing'\\): a task name must say"):
        read_process(f)


def test_the_example_processes_synthesize_valid_tasks() -> None:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/processes").glob("*.bpmn"))]
    assert len(reqs) >= 3
    specs, _, stats = anyio.run(lambda: synthesize(reqs, ProceduralGenerator(0), 15))
    assert stats.accepted == 15 and all(s["family"].endswith("/process") for s in specs)


# plans proposed by a model -------------------------------------------------------------
def test_a_model_proposes_plans_and_repairs_them() -> None:
    req = load_requirement(ROOT / "examples/workflows/finance-approvals.yaml")
    bad = {"stages": [{"primitive": "change_figure"}, {"primitive": "report"}],
           "intro": "Quarter close."}
    good = {"stages": [{"primitive": "lookup_doc", "step": "Read the budget sheet"},
                       {"primitive": "ask", "role": "legal counsel"},
                       {"primitive": "ask"},
                       {"primitive": "approval", "role": "finance manager"},
                       {"primitive": "share"}, {"primitive": "report"}],
            "intro": "We are closing the quarter this week."}
    script = [Reply(content=json.dumps(bad)), Reply(content=json.dumps(good))]
    with ScriptedOpenAIServer(script) as srv:
        gen = OpenAIPlanGenerator(Endpoint(srv.base_url, "scripted"))
        specs, attempts, _stats = anyio.run(lambda: synthesize([req], gen, 1, max_repairs=2))
        assert [a.accepted for a in attempts] == [False, True]
        assert attempts[0].report["rejections"][0]["rule"] == "plan"
        assert "needs ['lookup_doc'] earlier" in attempts[0].report["rejections"][0]["message"]
        (spec,) = specs
        assert spec["plan"]["proposal"] == good and spec["instruction"].startswith("We are")
        assert srv.requests[0]["response_format"]["json_schema"]["name"] == "plan"
        assert "needs ['lookup_doc'] earlier" in srv.requests[1]["messages"][-1]["content"]
