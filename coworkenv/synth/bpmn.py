"""Process definitions from workflow tools: BPMN 2.0 files (as Camunda, Flowable or Bizagi
export them) read with SpiffWorkflow's parser into a workflow requirement and a process
graph, from which each synthesized task draws a plan of primitives.

How the constructs map:

- lane: a role. The start event's lane is the agent's; other lanes are people, bound to the
  directory by role or team (a new colleague when no one fits).
- user task in another lane: that person's step: ``approval`` when its name says approve,
  else ``ask``.
- manual task in another lane: ``handoff`` (the person does it, delivers the next day).
- send task: the deliverable, mail or a message (``report``).
- service or script task in the agent's lane: a tool step, by its name: reading a document
  (``lookup_doc``), a ticket (``ticket``), a meeting (``schedule``), sharing (``share``),
  mail or a message (``report``).
- exclusive gateway: a condition. Each task takes one branch; a condition ``amount > N``
  binds the figure so that the branch is the right one, and the rule is stated in the
  instruction.
- parallel gateway: parallel branches, whose questions go out together.
- timer intermediate catch event: the deliverable is due on a later day (``next_day``).
- start and end events, gateways that only join: structure.

Anything else (boundary events, sub-processes, call activities, inclusive and event-based
gateways, message and signal events) is refused with an error naming the element.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..sim.errors import TaskFileError
from .plan import Stage
from .requirement import Parameters, WorkflowRequirement

NodeKind = Literal["start", "end", "user", "manual", "service", "send", "exclusive",
                   "parallel", "timer"]
_KINDS = {"StartEvent": "start", "EndEvent": "end", "UserTask": "user",
          "ManualTask": "manual", "ServiceTask": "service", "SendTask": "send",
          "ScriptTask": "service", "NoneTask": "service", "ExclusiveGateway": "exclusive",
          "ParallelGateway": "parallel", "IntermediateCatchEvent": "timer"}
SUPPORTED = "start and end events, user, manual, service, send and script tasks, exclusive " \
            "and parallel gateways, timer intermediate catch events, lanes"
_SERVICE = [("lookup_doc", ("read", "look up", "check the", "document", "quote", "sheet")),
            ("ticket", ("ticket", "order", "queue")),
            ("schedule", ("schedule", "book", "meeting", "calendar")),
            ("share", ("share", "access", "grant")),
            ("report", ("email", "notify", "send", "inform", "report", "confirm", "tell",
                        "announce", "post"))]
_CONDITION = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|>|<)\s*([\d_,.]+)\s*$", re.I)


class Branch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: str
    condition: str | None = None
    name: str = ""


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    kind: NodeKind
    name: str = ""
    lane: str = ""
    outputs: list[Branch] = Field(default_factory=list)
    primitive: str | None = None


class ProcessGraph(BaseModel):
    """A BPMN process as the composer uses it."""

    model_config = ConfigDict(extra="forbid")
    id: str
    name: str
    agent_lane: str
    start: str
    nodes: dict[str, Node]
    source: str = ""


def _fail(path: Path, problems: list[str]) -> TaskFileError:
    return TaskFileError(str(path), problems)


def read_process(path: str | Path) -> tuple[WorkflowRequirement, ProcessGraph]:
    """The requirement and process graph of the (first) process in a BPMN file."""
    from SpiffWorkflow.bpmn.parser.BpmnParser import BpmnParser  # type: ignore[import-untyped]
    from SpiffWorkflow.bpmn.parser.ValidationException import (  # type: ignore[import-untyped]
        ValidationException,
    )

    p = Path(path)
    if not p.exists():
        raise _fail(p, ["no such file"])
    if p.is_dir():
        raise _fail(p, ["is a folder, not a BPMN 2.0 process file (.bpmn)"])
    _prescan(p)
    parser = BpmnParser()
    try:
        parser.add_bpmn_file(str(p))
        ids = parser.get_process_ids()
        if not ids:
            raise _fail(p, ["no process in this file"])
        spec = parser.get_spec(ids[0])
    except ValidationException as exc:
        raise _fail(p, [f"not a valid BPMN process: {exc}"]) from None
    except TaskFileError:
        raise
    except Exception as exc:  # lxml syntax errors and the like: a file we cannot read
        raise _fail(p, [f"not a BPMN 2.0 file: {type(exc).__name__}: {exc}"]) from None
    nodes: dict[str, Node] = {}
    problems: list[str] = []
    start = ""
    for name, ts in spec.task_specs.items():
        cls = type(ts).__name__
        if cls in ("BpmnStartTask", "_EndJoin", "SimpleBpmnTask"):
            continue  # SpiffWorkflow's own structure around the process
        kind = _KINDS.get(cls)
        event = getattr(ts, "event_definition", None)
        if cls == "IntermediateCatchEvent" and "Timer" not in type(event).__name__:
            kind = None
        if cls in ("StartEvent", "EndEvent") and event is not None and \
                type(event).__name__ not in ("NoneEventDefinition",):
            kind = None
        if kind is None:
            problems.append(f"{name} ({ts.description}, {getattr(ts, 'bpmn_name', '') or ''!s}):"
                            f" not supported; supported: {SUPPORTED}")
            continue
        outs: list[Branch] = []
        conds = getattr(ts, "cond_task_specs", None)
        if conds:
            for cond, target in conds:
                args = getattr(cond, "args", None) if cond is not None else None
                expr = str(args[0]) if args else None
                outs.append(Branch(target=target, condition=expr))
        else:
            outs = [Branch(target=o.name) for o in ts.outputs
                    if not o.name.endswith(".EndJoin") and o.name != "End"]
        node = Node(id=name, kind=kind, name=str(getattr(ts, "bpmn_name", "") or ""),
                    lane=str(getattr(ts, "lane", "") or ""), outputs=outs)
        nodes[name] = node
        if kind == "start":
            start = name
    if problems:
        raise _fail(p, problems)
    if not start:
        raise _fail(p, ["the process has no start event"])
    graph = ProcessGraph(id=spec.name, name=str(spec.description or spec.name),
                         agent_lane=nodes[start].lane, start=start, nodes=nodes, source=str(p))
    for n in graph.nodes.values():
        n.primitive = _primitive(graph, n, p)
    return _requirement(graph), graph


_ALLOWED = {"startEvent", "endEvent", "userTask", "manualTask", "serviceTask", "sendTask",
            "scriptTask", "task", "exclusiveGateway", "parallelGateway",
            "intermediateCatchEvent", "sequenceFlow", "laneSet", "documentation",
            "extensionElements", "textAnnotation", "association"}


def _prescan(path: Path) -> None:
    """Refuse what is not supported before the parser does, naming each element."""
    from lxml import etree  # type: ignore[import-untyped]

    try:
        root = etree.parse(str(path)).getroot()
    except etree.XMLSyntaxError as exc:
        raise _fail(path, [f"not XML: {exc}"]) from None
    problems = []
    for proc in root.iter("{*}process"):
        for el in proc:
            if not isinstance(el.tag, str):
                continue
            tag = etree.QName(el).localname
            if tag not in _ALLOWED:
                problems.append(f"{el.get('id', '?')} ({tag}): not supported; supported: "
                                f"{SUPPORTED}")
    if problems:
        raise _fail(path, problems)


def _primitive(graph: ProcessGraph, n: Node, path: Path) -> str | None:
    other_lane = bool(n.lane) and n.lane != graph.agent_lane
    if n.kind == "user":
        if not other_lane:
            raise _fail(path, [f"{n.id} ({n.name!r}): a user task in the agent's own lane; "
                               "put it in the lane of the person who does it"])
        return "approval" if "approv" in n.name.lower() else "ask"
    if n.kind == "manual":
        return "handoff"
    if n.kind == "timer":
        return "next_day"
    if n.kind == "send":
        return "report"
    if n.kind == "service":
        low = n.name.lower()
        for prim, words in _SERVICE:
            if any(re.search(rf"\b{re.escape(w)}\b", low) for w in words):
                return prim
        raise _fail(path, [f"{n.id} ({n.name!r}): a task name must say what it does in the "
                           "workspace: read a document, a ticket, a meeting, share, or send "
                           "mail or a message"])
    return None


def _requirement(g: ProcessGraph) -> WorkflowRequirement:
    prims = {n.primitive for n in g.nodes.values() if n.primitive}
    apps = {"chat", "email"}
    apps |= {"docs"} if prims & {"lookup_doc", "share", "approval"} else set()
    apps |= {"tickets"} if "ticket" in prims else set()
    apps |= {"calendar"} if "schedule" in prims else set()
    caps: dict[str, float] = {"tool_coordination": 1.0}
    if prims & {"ask", "approval", "handoff"}:
        caps["multi_turn_communication"] = 1.0
    if prims & {"share"}:
        caps["safety_sensitive_handling"] = 1.0
    rid = re.sub(r"[^a-z0-9]+", "-", g.id.lower()).strip("-") or "process"
    return WorkflowRequirement(
        id=rid, role=g.agent_lane or "assistant", goal=g.name,
        apps=sorted(apps),  # type: ignore[arg-type]
        capabilities=caps,  # type: ignore[arg-type]
        parameters=Parameters(people=["leo", "priya", "omar", "nina", "sam", "jules", "kai"],
                              amounts=(1_000, 60_000)),
        difficulty=("medium", "hard"), process=g.model_dump())


def _threshold(cond: str | None) -> tuple[str, float] | None:
    m = _CONDITION.match(cond or "")
    if not m:
        return None
    return m.group(2), float(m.group(3).replace("_", "").replace(",", ""))


def plan_from_process(graph: ProcessGraph, rng: random.Random) -> tuple[list[Stage],
                                                                         dict[str, Any]]:
    """One plan through the process: every branch of a parallel gateway, one branch of each
    exclusive gateway (drawn). Returns the plan and what the composer must bind: the range of
    the deciding figure and the rules stated in the instruction."""
    plan: list[Stage] = []
    bind: dict[str, Any] = {"rules": [], "amount_range": None}
    seen: set[str] = set()
    stack = [graph.start]
    while stack:
        nid = stack.pop(0)
        if nid in seen or nid not in graph.nodes:
            continue
        seen.add(nid)
        n = graph.nodes[nid]
        if n.primitive:
            params: dict[str, Any] = {"role": n.lane, "step": n.name,
                                      "ruled": n.id in bind.get("ruled_targets", ())}
            if n.primitive == "approval" and not any(s.primitive == "lookup_doc" for s in plan):
                plan.append(Stage("lookup_doc", {"step": n.name}))  # what is approved
            plan.append(Stage(n.primitive, params))
        if n.kind == "exclusive" and len(n.outputs) > 1:
            ruled = [(b, _threshold(b.condition)) for b in n.outputs]
            choice = rng.choice(n.outputs)
            rule = next(((b, t) for b, t in ruled if t is not None), None)
            if rule is not None:
                b, (op, limit) = rule[0], rule[1]  # type: ignore[misc]
                bind.setdefault("ruled_targets", []).append(b.target)
                target = graph.nodes.get(b.target)
                side = {">": "above", ">=": "at or above", "<": "below",
                        "<=": "at or below"}[op]
                if target is not None and target.primitive == "approval":
                    bind["rules"].append(f"Anything {side} ${limit:,.0f} needs the approval of "
                                         f"our {target.lane.lower()} first.")
                else:
                    what = target.name.lower() if target is not None else "the next step"
                    bind["rules"].append(f"When the amount is {side} ${limit:,.0f}: {what}.")
                above = choice is b if ">" in op else choice is not b
                bind["amount_range"] = (int(limit) + 10, int(limit) * 4) if above else \
                    (max(100, int(limit) // 10), int(limit) - 10)
                bind["range_for"] = "lookup_doc" if target is not None and \
                    target.primitive == "approval" else "any"
            stack.append(choice.target)
        else:
            stack += [b.target for b in n.outputs]
    if not any(s.primitive == "report" for s in plan):
        plan.append(Stage("report", {}))
    return plan, bind
