"""Generators of task specs (procedural and LLM) and the validate-and-repair loop."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import multiprocessing
import random
import re
import statistics
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import yaml
from pydantic import ValidationError

from ..agents.openai_agent import Endpoint
from ..sim.errors import EpisodeFailure
from ..sim.task import Task
from ..workspace import REGISTRY
from .compose import Composer, compose
from .draw import PlanProposal, plan_of
from .families import families_for
from .people import fresh_people
from .plan import PlanError
from .primitive import catalog
from .realism import Realism
from .requirement import WorkflowRequirement
from .validate import Report, validate_task, validate_task_async


class Generator(Protocol):
    name: str

    async def generate(self, req: WorkflowRequirement, index: int) -> dict[str, Any]: ...

    async def repair(self, req: WorkflowRequirement, index: int, spec: dict[str, Any],
                     report: Report, round_: int) -> dict[str, Any]: ...


@dataclass
class ProceduralGenerator:
    """Plans of workflow primitives composed into tasks (``compose``, the default), or the
    fixed families (``families``), deterministic by seed."""

    seed: int = 0
    name: str = "procedural"
    mode: str = "compose"
    stages: tuple[int, int] | None = None
    """Plan length (lowest, highest stages, the report counted); default: from the
    requirement's difficulty (4 to 12)."""
    fresh_people: bool = False
    """Each task gets colleagues (and a user) of its own names (see :mod:`.people`), so a
    model must read who a task is about rather than recall the company's ten people."""

    def _tag(self) -> str:
        """What sets this generator's tasks apart in their ids, so that sets made with other
        seeds, plan lengths or people can be run, exported and trained on together."""
        tag = f"-seed{self.seed}" if self.seed else ""
        if self.stages is not None:
            tag += f"-{self.stages[0]}to{self.stages[1]}"
        if self.fresh_people:
            tag += "-fresh"
        return tag

    def _build(self, req: WorkflowRequirement, index: int, round_: int) -> dict[str, Any]:
        key = f"{self.seed}:{req.id}:{index}:{round_}"
        if self.stages is not None:  # not a cut of the default plan of the same index
            key += f":{self.stages}"
        rng = random.Random(zlib.crc32(key.encode()))
        tid = f"{req.id}{self._tag()}-{index:05d}"
        if self.mode == "compose":
            spec = compose(req, rng, tid, stages=self.stages)
        else:
            fams = families_for(req)
            if not fams:
                raise ValueError(f"{req.id}: no task family fits apps {req.apps} and "
                                 f"capabilities {sorted(req.capabilities)}")
            spec = fams[index % len(fams)].build(req, rng, tid)
        return fresh_people(spec, rng, keep={req.agent}) if self.fresh_people else spec

    async def generate(self, req: WorkflowRequirement, index: int) -> dict[str, Any]:
        return self._build(req, index, 0)

    async def repair(self, req: WorkflowRequirement, index: int, spec: dict[str, Any],
                     report: Report, round_: int) -> dict[str, Any]:
        return self._build(req, index, round_)  # a fresh draw of the parameters


def _catalog(apps: list[str]) -> str:
    return "\n".join(f"- {t.name}({', '.join(t.args.model_json_schema().get('properties', {}))})"
                     f": {t.description}" for t in REGISTRY.values()
                     if t.app in apps or t.app == "directory")


def _json_of(text: str) -> dict[str, Any]:
    """The JSON object in a model's reply (fenced or bare); generated text is only parsed."""
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else t
        t = t.rsplit("```", 1)[0]
    start, end = t.find("{"), t.rfind("}")
    if start < 0 or end <= start:
        return {"_unparsed": text[:2000]}
    try:
        out = json.loads(t[start:end + 1])
    except json.JSONDecodeError as exc:
        return {"_unparsed": text[:2000], "_error": str(exc)}
    return out if isinstance(out, dict) else {"_unparsed": text[:2000]}


async def _ask_structured(gen: Any, key: tuple[str, int], system: str, content: str,
                          name: str, schema: dict[str, Any], *, json_object: bool = False,
                          ) -> dict[str, Any]:
    """One turn of a generator's conversation about one task: structured output against
    ``schema`` where the server supports it (else plain JSON, remembered on ``gen``); the
    reply is only parsed, never run."""
    hist = gen.histories.setdefault(key, [{"role": "system", "content": system}])
    hist.append({"role": "user", "content": content})
    request: dict[str, Any] = {"model": gen.endpoint.model, "messages": hist,
                               "temperature": 0.7, "max_tokens": gen.endpoint.max_tokens}
    if gen.structured:
        request["response_format"] = {"type": "json_schema", "json_schema": {
            "name": name, "schema": schema}}
    try:
        resp, _ = await gen.endpoint.complete(request)
    except EpisodeFailure:
        if not gen.structured:
            raise
        gen.structured = False  # the server cannot constrain to this schema: plain JSON
        request.pop("response_format")
        if json_object:
            request["response_format"] = {"type": "json_object"}
            try:
                resp, _ = await gen.endpoint.complete(request)
            except EpisodeFailure:
                request.pop("response_format")
                resp, _ = await gen.endpoint.complete(request)
        else:
            resp, _ = await gen.endpoint.complete(request)
    text = (resp.choices[0].message.content if resp.choices else "") or ""
    hist.append({"role": "assistant", "content": text})
    return _json_of(text)


@dataclass
class OpenAIGenerator:
    """Asks a model, through any OpenAI-compatible endpoint, for task specs against the task
    JSON schema (generated from the models), with the requirement, the tool catalog and valid
    examples; repairs are asked for with the validator's report."""

    endpoint: Endpoint
    examples: list[dict[str, Any]] = field(default_factory=list)
    name: str = "openai"
    structured: bool = True
    histories: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)

    def _system(self) -> str:
        return ("You write task specifications for a simulated company workspace, as one JSON "
                "object that follows the given JSON schema exactly. Use only people, tools and "
                "ids that exist. Reply with the JSON object only.")

    def _prompt(self, req: WorkflowRequirement, index: int) -> str:
        ex = "\n".join(json.dumps(e, separators=(",", ":")) for e in self.examples)
        return (f"Workflow requirement:\n{yaml.safe_dump(req.model_dump(mode='json'))}\n"
                f"Tools:\n{_catalog(list(req.apps))}\n\n"
                + (f"Valid example task(s):\n{ex}\n\n" if ex else "") +
                f"Write task number {index} for this requirement, with id "
                f"\"{req.id}-llm-{index:05d}\", company \"{req.company}\", agent "
                f"\"{req.agent}\", user person \"{req.user}\". It must exercise: "
                f"{', '.join(req.capabilities)}.")

    async def _ask(self, key: tuple[str, int], content: str) -> dict[str, Any]:
        return await _ask_structured(self, key, self._system(), content, "task",
                                     Task.model_json_schema(), json_object=True)

    async def generate(self, req: WorkflowRequirement, index: int) -> dict[str, Any]:
        return await self._ask((req.id, index), self._prompt(req, index))

    async def repair(self, req: WorkflowRequirement, index: int, spec: dict[str, Any],
                     report: Report, round_: int) -> dict[str, Any]:
        return await self._ask((req.id, index), "The validator rejected that spec:\n"
                               f"{report.text()}\nReturn the corrected JSON object only.")


@dataclass
class OpenAIPlanGenerator:
    """Asks a model, through any OpenAI-compatible endpoint, for a *plan* of workflow
    primitives and an opening sentence (structured output against ``PlanProposal``'s JSON
    schema); the composer binds the plan into a task, which the validator checks like any
    other. A rejected task goes back to the model with the validator's report. The proposal
    and every repair are kept with the spec (``plan.proposal``)."""

    endpoint: Endpoint
    name: str = "openai"
    structured: bool = True
    seed: int = 0
    histories: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)

    def _prompt(self, req: WorkflowRequirement, index: int) -> str:
        return (f"Workflow requirement:\n{yaml.safe_dump(req.model_dump(mode='json', exclude={'process'}))}\n"
                f"Workflow primitives (the building blocks of a task):\n{catalog(req.primitives)}\n\n"
                f"Propose plan number {index} for this requirement: 4 to 10 stages that "
                f"exercise {', '.join(req.capabilities)}, using only its apps "
                f"({', '.join(req.apps)}), ending with report. Vary the plan from one number "
                "to the next. Reply with the JSON object only.")

    async def _ask(self, key: tuple[str, int], content: str) -> dict[str, Any]:
        return await _ask_structured(self, key, (
            "You design realistic office work for an AI assistant as plans of workflow "
            "primitives, as one JSON object that follows the given JSON schema exactly."),
            content, "plan", PlanProposal.model_json_schema())

    def _compose(self, req: WorkflowRequirement, index: int, raw: dict[str, Any],
                 round_: int) -> dict[str, Any]:
        """The task of a proposal; a proposal that cannot be composed becomes a spec the
        validator rejects with the reason (rule ``plan``), so the repair loop sees it."""
        tid = f"{req.id}-llm-{index:05d}"
        try:
            proposal = PlanProposal.model_validate(raw)
        except ValidationError as exc:
            return {"id": tid, "_plan_error": [f"{'.'.join(str(x) for x in e['loc'])}: "
                                               f"{e['msg']}" for e in exc.errors()[:5]],
                    "_proposal": raw}
        plan, problems = plan_of(proposal, req)
        if problems:
            return {"id": tid, "_plan_error": problems, "_proposal": raw}
        rng = random.Random(zlib.crc32(f"{self.seed}:{req.id}:{index}:{round_}".encode()))
        try:
            c = Composer(req, rng, tid)
            c.intro = proposal.intro.strip()
            spec = c.build(plan)
        except PlanError as exc:
            return {"id": tid, "_plan_error": [str(exc)], "_proposal": raw}
        spec["plan"]["proposal"] = raw
        spec["family"] = f"{req.id}/llm"
        return spec

    async def generate(self, req: WorkflowRequirement, index: int) -> dict[str, Any]:
        raw = await self._ask((req.id, index), self._prompt(req, index))
        return self._compose(req, index, raw, 0)

    async def repair(self, req: WorkflowRequirement, index: int, spec: dict[str, Any],
                     report: Report, round_: int) -> dict[str, Any]:
        raw = await self._ask((req.id, index), "That plan was rejected:\n"
                              f"{report.text()}\nReturn a corrected plan, JSON only.")
        return self._compose(req, index, raw, round_)


@dataclass
class Attempt:
    requirement: str
    index: int
    round: int
    spec: dict[str, Any]
    report: dict[str, Any]
    accepted: bool
    duplicate: bool = False


@dataclass
class SynthStats:
    requested: int = 0
    accepted: int = 0
    first_pass: int = 0
    rounds_of_accepted: list[int] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    coverage: dict[str, dict[str, int]] = field(default_factory=dict)
    shapes: Counter[str] = field(default_factory=Counter)
    primitives: Counter[str] = field(default_factory=Counter)
    capabilities: Counter[str] = field(default_factory=Counter)
    turns: list[int] = field(default_factory=list)
    people: list[int] = field(default_factory=list)
    sim_minutes: list[float] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    mutants: Counter[str] = field(default_factory=Counter)
    realism: Realism = field(default_factory=Realism)

    def add_accepted(self, spec: dict[str, Any], report: Report) -> None:
        plan = spec.get("plan") or {}
        self.shapes[str(plan.get("shape", spec.get("family", "?")))] += 1
        self.primitives.update(plan.get("primitives", []))
        self.capabilities.update(report.capabilities)
        self.turns.append(int(report.oracle.get("turns", 0)))
        self.sim_minutes.append(float(report.oracle.get("sim_minutes", 0.0)))
        self.people.append(len(spec.get("coworkers") or []))
        self.instructions.append(str(spec.get("instruction", "")))
        self.realism.add(spec)
        if report.mutation is not None:
            self.mutants["applicable"] += report.mutation.applicable
            self.mutants["killed"] += report.mutation.killed
            self.mutants["accepted_survivors"] += len(report.mutation.survivors)

    def to_json(self) -> dict[str, Any]:
        n = self.requested or 1
        words = [re.findall(r"[a-z0-9$']+", i.lower()) for i in self.instructions]
        bigrams = [(a, b) for w in words for a, b in itertools.pairwise(w)]
        days = [m / (24 * 60) for m in self.sim_minutes]
        return {"requested": self.requested, "accepted": self.accepted,
                "first_pass_validity": round(self.first_pass / n, 4),
                "validity_after_repair": round(self.accepted / n, 4),
                "mean_rounds": round(sum(self.rounds_of_accepted)
                                     / max(1, len(self.rounds_of_accepted)), 3),
                "rejection_reasons": dict(self.reasons.most_common()),
                "coverage": self.coverage,
                "plan_shapes": {"distinct": len(self.shapes),
                                "most_common": dict(self.shapes.most_common(10))},
                "primitive_coverage": dict(self.primitives.most_common()),
                "capability_coverage": dict(self.capabilities.most_common()),
                "instruction_diversity": {
                    "distinct_bigrams": len(set(bigrams)), "bigrams": len(bigrams),
                    "distinct_ratio": round(len(set(bigrams)) / max(1, len(bigrams)), 4),
                    "distinct_instructions": len(set(self.instructions))},
                "oracle_agent_steps": _distribution(self.turns),
                "coworkers": _distribution(self.people),
                "simulated_days": _distribution(days),
                "multi_day_share": round(sum(1 for m in self.sim_minutes if m > 24 * 60)
                                         / max(1, len(self.sim_minutes)), 4),
                "mutants": dict(self.mutants),
                "realism": self.realism.to_json()}


def _distribution(xs: list[float] | list[int]) -> dict[str, float]:
    if not xs:
        return {}
    s = sorted(xs)
    q = [s[min(len(s) - 1, int(p * len(s)))] for p in (0.1, 0.5, 0.9)]
    return {"min": round(float(s[0]), 2), "p10": round(float(q[0]), 2),
            "median": round(float(statistics.median(s)), 2), "p90": round(float(q[2]), 2),
            "max": round(float(s[-1]), 2), "mean": round(float(statistics.fmean(s)), 2)}


def spec_fingerprint(spec: dict[str, Any]) -> str:
    body = {k: v for k, v in spec.items() if k not in ("id", "family")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


async def synthesize(reqs: list[WorkflowRequirement], generator: Generator, n: int, *,
                     max_repairs: int = 3, concurrency: int = 8,
                     on_attempt: Callable[[Attempt], None] | None = None,
                     on_done: Callable[[], None] | None = None, mutate: bool = True,
                     workers: int = 1,
                     ) -> tuple[list[dict[str, Any]], list[Attempt], SynthStats]:
    """Generate ``n`` tasks over the requirements (split evenly), validating each and asking
    the generator to repair rejected ones up to ``max_repairs`` times. Duplicates are refused.
    With ``mutate`` (the default) a task is accepted only if its grader kills every
    applicable mutant of its reference solution and passes every equivalent one. With
    ``workers`` > 1, validation (where the time goes: every mutant is a full episode) runs in
    that many worker processes; generation and bookkeeping stay here, so results are the same
    as with one."""
    stats = SynthStats(requested=n)
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) \
        if workers > 1 else None

    async def validate(spec: dict[str, Any], where: str) -> Report:
        if pool is None:
            return await validate_task_async(spec, where, mutate=mutate)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, validate_task, spec, where, mutate)
    for req in reqs:
        stats.coverage[req.id] = dict.fromkeys(req.capabilities, 0)
    jobs = [(reqs[i % len(reqs)], i // len(reqs)) for i in range(n)]
    accepted: dict[int, dict[str, Any]] = {}
    attempts: list[Attempt] = []
    seen: set[str] = set()
    limit = anyio.Semaphore(concurrency)

    async def ask(call: Any) -> tuple[dict[str, Any], str | None]:
        try:
            return await call, None
        except Exception as exc:  # a generator that fails is a rejected attempt, not a crash
            return {}, f"{type(exc).__name__}: {exc}"

    async def one(slot: int, req: WorkflowRequirement, index: int) -> None:
        from .validate import Rejection

        async with limit:
            spec, failed = await ask(generator.generate(req, index))
            for round_ in range(max_repairs + 1):
                if failed is not None:
                    report = Report(f"{req.id}#{index}", False,
                                    [Rejection("generator", generator.name, failed)])
                else:
                    report = await validate(spec, f"{req.id}#{index}")
                fp = spec_fingerprint(spec)
                dup = report.accepted and fp in seen
                if dup:
                    report.accepted = False
                    report.rejections.append(Rejection("duplicate", "task", "the same task as "
                                                       "an accepted one"))
                att = Attempt(req.id, index, round_, spec, report.to_json(), report.accepted, dup)
                attempts.append(att)
                if on_attempt is not None:
                    on_attempt(att)
                stats.reasons.update({r.rule for r in report.rejections})  # per attempt
                if report.accepted:
                    seen.add(fp)
                    accepted[slot] = spec
                    stats.accepted += 1
                    stats.add_accepted(spec, report)
                    stats.first_pass += round_ == 0
                    stats.rounds_of_accepted.append(round_)
                    for c in report.capabilities:
                        stats.coverage[req.id][c] = stats.coverage[req.id].get(c, 0) + 1
                    break
                if round_ < max_repairs:
                    if failed is not None:
                        spec, failed = await ask(generator.generate(req, index))
                    else:
                        spec, failed = await ask(generator.repair(req, index, spec, report,
                                                                  round_ + 1))
        if on_done is not None:
            on_done()

    try:
        async with anyio.create_task_group() as tg:
            for slot, (req, index) in enumerate(jobs):
                tg.start_soon(one, slot, req, index)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return [accepted[k] for k in sorted(accepted)], attempts, stats
