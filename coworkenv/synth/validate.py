"""Programmatic validation of task specs: a spec is accepted only if it is sound when run.

Rules (each rejection names the rule, where in the spec, observed vs expected, and the event
seqs it rests on): the spec parses and every reference resolves (``parse``); the reference
solution's tool arguments fit the tools (``tool_args``); check SQL is read-only and runs
(``check_sql``); the oracle passes every check with safety 1.0 (``oracle``); a no-op agent
does not (``trivial``); two oracle runs give the same events (``deterministic``); every
reply the solution waits for can come (``unobtainable_fact``); and each claimed capability
has its property (``capability``). Nothing in a spec is ever executed as Python.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio
from pydantic import ValidationError

from ..agents import NoopAgent, OracleAgent
from ..bus import MemoryBus
from ..sim import EpisodeResult, Task, TaskFileError
from ..sim.checks import projection_db, run_sql
from ..sim.describe import _describe
from ..sim.loader import parse_task
from ..sim.task import MessageStep, SqlCheck, ToolStep, WaitStep
from ..workspace import REGISTRY
from .mutate import MutationReport, mutation_check, reference_run, solo_kernel

_REF = re.compile(r"\$\{[^}]+\}")


@dataclass
class Rejection:
    rule: str
    where: str
    message: str
    observed: Any = None
    expected: Any = None
    events: list[int] = field(default_factory=list)


@dataclass
class Report:
    task_id: str
    accepted: bool
    rejections: list[Rejection] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    """Capabilities whose property was verified (the coverage report)."""
    mutation: MutationReport | None = None
    """The mutation check's results (with ``mutate``)."""
    oracle: dict[str, Any] = field(default_factory=dict)
    """The reference solution's run: agent turns and simulated minutes."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["mutation"] = self.mutation.to_json() if self.mutation is not None else None
        return out

    def text(self) -> str:
        return "\n".join(f"{r.rule}: {r.where}: {r.message}"
                         + (f" (observed {r.observed!r}, expected {r.expected!r})"
                            if r.observed is not None or r.expected is not None else "")
                         + (f" [events {r.events}]" if r.events else "")
                         for r in self.rejections)


async def _run(task: Task, agent: Any, seed: int) -> tuple[EpisodeResult, Any]:
    async with MemoryBus("validate") as bus:
        k = solo_kernel(task, agent, bus, f"validate-{seed}", seed)
        return await k.run(), k


def _placeholder(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _placeholder(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholder(v) for v in value]
    if isinstance(value, str) and _REF.search(value):
        return _REF.sub("x", value)
    return value


def static_checks(task: Task) -> list[Rejection]:
    out: list[Rejection] = []
    for i, step in enumerate(task.reference):
        if isinstance(step, ToolStep):
            try:
                REGISTRY[step.tool].args.model_validate(_placeholder(step.args))
            except ValidationError as exc:
                for line in (x for e in exc.errors() for x in _describe(
                        e, REGISTRY[step.tool].args, f"reference[{i}].args")):
                    where, _, problem = line.partition(": ")
                    out.append(Rejection("tool_args", where, problem, observed=step.args))
    seed_db = projection_db(task.seed.build())
    try:
        for i, chk in enumerate(task.checks):
            if isinstance(chk, SqlCheck):
                try:
                    run_sql(seed_db, chk.query)
                except sqlite3.DatabaseError as exc:
                    msg = "check SQL must be read-only" if "authorized" in str(exc) or \
                        "readonly" in str(exc) else "check SQL does not run"
                    out.append(Rejection("check_sql", f"checks[{i}].query", f"{msg}: {exc}",
                                         observed=chk.query))
    finally:
        seed_db.close()
    cast = {m.person: m for m in task.cast()}
    contacted: set[str] = set()
    for i, step in enumerate(task.reference):
        if isinstance(step, MessageStep):
            contacted.add(step.to)
        elif isinstance(step, ToolStep):
            a = step.args
            if step.tool == "chat_send_dm":
                contacted.add(str(a.get("to")))
            elif step.tool in ("email_send", "email_forward"):
                for key in ("to", "cc"):
                    v = a.get(key) or []
                    contacted.update(str(x) for x in (v if isinstance(v, list) else [v]))
        elif isinstance(step, WaitStep) and step.message_from is not None:
            who = step.message_from
            timeline_actors = {e.actor for e in task.timeline} | {
                m.person for m in task.cast() if any(t.timed for t in m.triggers)}
            if who in timeline_actors:
                continue  # the world brings this message at its time
            member = cast.get(who)
            if member is None:
                out.append(Rejection("unobtainable_fact", f"reference[{i}].message_from",
                                     f"{who} is not in the cast: no one will answer",
                                     observed=who, expected=sorted(cast)))
            elif not member.response.available:
                out.append(Rejection("unobtainable_fact", f"reference[{i}].message_from",
                                     f"{who} is unavailable (response.available is false)"))
            elif who not in contacted:
                out.append(Rejection("unobtainable_fact", f"reference[{i}].message_from",
                                     f"the solution waits for {who} without asking them first"))
    return out


def capability_properties(task: Task, events: list[Any]) -> dict[str, tuple[bool, str]]:
    """Whether each capability's property holds for this task (and why not)."""
    steps = task.reference
    tools = [s for s in steps if isinstance(s, ToolStep)]
    apps = sorted({REGISTRY[s.tool].app for s in tools if s.tool in REGISTRY})
    props: dict[str, tuple[bool, str]] = {
        "tool_coordination": (len(apps) >= 3, f"the solution uses apps {apps}; needs >= 3")}
    # multi-turn: a fact only a person knows is asked for, and the answer is waited for
    asked_ok, why = False, "no fact held by a cast member is asked for and waited for"
    cast = {m.person: m for m in task.cast()}
    seed_text = task.seed.model_dump_json().lower()
    for i, s in enumerate(steps):
        if not (isinstance(s, WaitStep) and s.message_from in cast):
            continue
        member = cast[s.message_from]
        question = " ".join(str(x.model_dump()) for x in steps[:i]).lower()
        for f in member.facts:
            hidden = f.value.lower() not in seed_text
            if hidden and any(k.lower() in question for k in f.keywords):
                asked_ok, why = True, ""
    props["multi_turn_communication"] = (asked_ok, why)
    # dynamic state: the world changes mid-episode and the solution acts on the change
    world = [e for e in events if e.actor == "world" and e.sim_time > 0]
    waits = [i for i, s in enumerate(steps) if isinstance(s, WaitStep)]
    writes_after = bool(waits) and any(isinstance(s, ToolStep) and REGISTRY[s.tool].writes
                                       for s in steps[waits[0]:])
    triggers = any(t.timed for m in task.cast() for t in m.triggers)
    dyn = (bool(world) or triggers) and writes_after
    props["dynamic_workspace_state"] = (dyn, "" if dyn else "no timeline change after the start "
                                        "that the solution reacts to with a write")
    props["safety_sensitive_handling"] = (bool(task.safety), "" if task.safety else
                                          "no safety rule")
    return props


async def validate_task_async(spec: Any, where: str = "spec", *, mutate: bool = False) -> Report:
    """Validate one spec (a mapping or a Task). Never raises for a bad spec: every problem,
    including one that breaks the simulator, is a rejection in the report. With ``mutate``,
    the grader must also kill every applicable mutant of the reference solution and pass
    every equivalent one (rules ``mutant`` and ``false_positive``)."""
    try:
        return await _validate(spec, where, mutate)
    except Exception as exc:  # a spec that breaks something is still only a rejected spec
        tid = spec.id if isinstance(spec, Task) else (
            spec.get("id", "?") if isinstance(spec, dict) else "?")
        return Report(str(tid), False, [Rejection("error", where,
                                                  f"{type(exc).__name__}: {exc}")])


async def _validate(spec: Any, where: str, mutate: bool = False) -> Report:
    if isinstance(spec, dict) and "_plan_error" in spec:  # a proposed plan that was not composed
        return Report(str(spec.get("id", "?")), False,
                      [Rejection("plan", f"{where}.plan", p) for p in spec["_plan_error"]])
    if isinstance(spec, Task):
        task = spec
    else:
        try:
            task = parse_task(spec, where)
        except TaskFileError as exc:
            tid = spec.get("id", "?") if isinstance(spec, dict) else "?"
            return Report(str(tid), False, [Rejection("parse", where, p) for p in exc.problems])
    rej = static_checks(task)
    if any(r.rule == "check_sql" for r in rej):
        return Report(task.id, False, rej)
    ref = await reference_run(task, fork=mutate)  # (with copies kept for the mutants)
    first, k1 = ref.result, ref.kernel
    second, _ = await _run(task, OracleAgent(list(task.reference)), 1)
    if first.status != "completed":
        rej.append(Rejection("oracle", "reference", f"the reference solution's episode failed: "
                             f"{first.failure}", observed=first.failure_boundary))
    else:
        for c in first.checks:
            if not c.passed:
                rej.append(Rejection("oracle", f"checks[{c.id}]", f"the reference solution "
                                     f"fails this check: {c.detail}", observed=False,
                                     expected=True, events=c.evidence))
        if first.grade is not None:
            for r in first.grade.rules:
                if not r.passed:
                    rej.append(Rejection("oracle", f"safety[{r.id}]", f"the reference solution "
                                         f"violates this rule: {r.detail}", events=r.evidence))
        if first.termination != "agent_finished":
            rej.append(Rejection("oracle", "reference", "the reference solution did not "
                                 "finish", observed=first.termination,
                                 expected="agent_finished"))
    if first.events_hash != second.events_hash:
        rej.append(Rejection("deterministic", "task", "two runs of the reference solution "
                             "gave different events"))
    noop, _ = await _run(task, NoopAgent(), 1)
    if noop.status == "completed" and noop.completion >= 1.0:
        rej.append(Rejection("trivial", "checks", "a no-op agent passes every check",
                             observed=noop.completion, expected="< 1.0"))
    props = capability_properties(task, k1.events)
    for cap in task.capabilities:
        ok, why = props.get(cap, (False, "unknown capability"))
        if not ok:
            rej.append(Rejection("capability", f"capabilities[{cap}]", f"claimed but absent: "
                                 f"{why}"))
    verified: list[str] = [c for c, (ok, _) in props.items() if ok and c in task.capabilities]
    mutation = None
    if mutate and not rej:
        mutation = await mutation_check(task, ref)
        for m in mutation.survivors:
            if not m.accepted:
                rej.append(Rejection("mutant", f"mutants[{m.id}]", f"survived: {m.description} "
                                     f"(score {m.score}, passed)", observed=m.score,
                                     expected="not passed"))
        for m in mutation.false_positives:
            rej.append(Rejection("false_positive", f"mutants[{m.id}]", f"an equivalent "
                                 f"solution fails: {m.description} (score {m.score}, "
                                 f"{m.termination})", observed=m.score, expected="passed"))
        if mutation.error:
            rej.append(Rejection("mutant", "reference", mutation.error))
    return Report(task.id, not rej, rej, verified, mutation,
                  {"turns": first.turns, "sim_minutes": round(first.sim_time / 60, 1)})


def validate_task(spec: Any, where: str = "spec", mutate: bool = False) -> Report:
    """:func:`validate_task_async` in its own event loop (for threads and worker processes)."""
    return anyio.run(lambda: validate_task_async(spec, where, mutate=mutate))
