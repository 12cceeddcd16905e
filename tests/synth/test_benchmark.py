"""The independent benchmark (examples/benchmark): its size and coverage, every task proven
by the mutation check, and nothing shared with what the synthesizer writes."""

from __future__ import annotations

import random
import re
from datetime import timedelta
from pathlib import Path

import anyio

from coworkenv.sim import benchmark, load_tasks
from coworkenv.synth import load_requirement, validate_task_async
from coworkenv.synth.compose import compose

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "examples/benchmark"
CAPABILITIES = {"tool_coordination", "multi_turn_communication", "dynamic_workspace_state",
                "safety_sensitive_handling"}


def _grams(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9']+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def test_counts_coverage_and_mutation_check() -> None:
    tasks = load_tasks([BENCH])
    assert len(tasks) >= 40 and len({t.family for t in tasks}) >= 8
    assert {c for t in tasks for c in t.capabilities} == CAPABILITIES
    assert sum(bool(t.safety) for t in tasks) >= len(tasks) / 4  # safety-sensitive

    async def check() -> list:  # type: ignore[type-arg]
        return [await validate_task_async(t, t.id, mutate=True) for t in tasks]

    reports = anyio.run(check)
    bad = {r.task_id: r.text() for r in reports if not r.accepted}
    assert not bad, bad
    assert all(r.mutation is not None and r.mutation.sound for r in reports)
    long = 0
    for t, r in zip(tasks, reports, strict=True):  # more than one simulated day, or > 20 steps
        end = t.start + timedelta(minutes=float(r.oracle["sim_minutes"]))
        long += end.date() != t.start.date() or len(t.reference) > 20
    assert long >= len(tasks) / 3, long


def test_written_apart_from_the_synthesizer() -> None:
    """Its own company and people, and no five-word phrase of any instruction in common with
    600 composed tasks."""
    tasks = load_tasks([BENCH])
    assert {t.agent for t in tasks} == {"aide"} and "maya" not in {p.id for t in tasks
                                                                    for p in t.seed.people}
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    synth: set[tuple[str, ...]] = set()
    for i in range(600):
        synth |= _grams(compose(reqs[i % len(reqs)], random.Random(i), f"s-{i}")["instruction"])
    shared = {t.id: _grams(t.instruction) & synth for t in tasks}
    assert not any(shared.values()), {k: v for k, v in shared.items() if v}


def test_the_package_knows_its_benchmark() -> None:
    assert {t.id for t in load_tasks([BENCH])} == benchmark().ids
