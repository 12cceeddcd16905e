"""`synth --fresh-people`: each synthesized task gets colleagues and a user of its own names, so
a model trained on them must read who a task is about (on hand-written tasks, a model trained on
the one company's ten people wrote to them). The renamed tasks stay sound (the oracle passes,
every mutant is caught), keep their agent, and differ from task to task."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import anyio

from coworkenv.sim import parse_task
from coworkenv.sim.loader import company
from coworkenv.synth import ProceduralGenerator, load_requirement, synthesize, validate_task
from coworkenv.synth.compose import compose
from coworkenv.synth.people import fresh_people

ROOT = Path(__file__).resolve().parents[2]
REQS = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
ACME = [p for p in company("acme")["people"] if not p.get("external") and p["id"] != "assistant"]


def _words(spec: dict[str, Any]) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]+", json.dumps(spec))}


def test_no_name_of_the_company_is_left_and_the_task_stays_sound() -> None:
    req = REQS[0]
    spec = compose(req, random.Random(11), "t-fresh")
    assert spec["company"] == "acme" and "maya" in _words(spec)
    fresh = fresh_people(spec, random.Random(11), keep={req.agent})
    assert "company" not in fresh  # the directory is the task's own now
    left = {p["id"] for p in ACME} & _words(fresh)
    assert not left, left
    assert not {p["name"].split()[1].lower() for p in ACME} & _words(fresh)
    assert fresh["agent"] == spec["agent"] == req.agent
    ids = {p["id"] for p in fresh["seed"]["people"]}
    assert req.agent in ids and "pat" in ids  # the agent and outside contacts keep theirs
    user = fresh["user"]["person"]
    assert user in ids and user != "maya"
    me = next(p for p in fresh["seed"]["people"] if p["id"] == user)
    assert me["email"] == f"{user}@acme.test" and me["name"].split()[0].lower() == user
    parse_task(fresh, "fresh")
    r = validate_task(fresh, mutate=True)
    assert r.accepted, r.text()
    assert r.mutation is not None and r.mutation.sound


def test_a_name_after_a_line_break_is_renamed_too() -> None:
    spec = {"id": "t", "company": "acme", "agent": "assistant",
            "instruction": "Ask Leo.\nLeo Novak knows;\nleo@acme.test, or 'leo'."}
    fresh = fresh_people(spec, random.Random(0), keep={"assistant"})
    assert not re.search(r"\b(Leo|leo|Novak)\b", fresh["instruction"]), fresh["instruction"]
    leo = next(p for p in fresh["seed"]["people"] if p["email"].startswith(
        fresh["instruction"].split("\n")[2].split("@")[0]))
    first = leo["name"].split()[0]
    assert fresh["instruction"] == (f"Ask {first}.\n{leo['name']} knows;\n"
                                    f"{leo['id']}@acme.test, or '{leo['id']}'.")


def test_tasks_draw_different_people_by_seed_and_ids_say_so() -> None:
    def run(seed: int) -> list[dict[str, Any]]:
        gen = ProceduralGenerator(seed, fresh_people=True)
        return anyio.run(lambda: synthesize(REQS, gen, 12, mutate=False))[0]

    a, b = run(3), run(3)
    assert a == b  # deterministic by seed
    assert all("-fresh-" in t["id"] for t in a)
    users = {t["user"]["person"] for t in a}
    assert len(users) >= 10  # (one company's user was the same in every task)
    cast = [frozenset(c["person"] for c in t["coworkers"]) for t in a]
    assert len(set(cast)) == len(cast)


def test_no_drawn_name_is_a_word_of_the_benchmark() -> None:
    """Names drawn for training tasks never appear in the hand-written benchmark (its people
    included): a model that recalls a training name must not thereby get a benchmark task right."""
    from coworkenv.synth.people import FIRST_NAMES, LAST_NAMES

    bench = Path(__import__("coworkenv").__file__).parent / "benchmark"
    words = {w.lower() for f in bench.rglob("*.yaml")
             for w in re.findall(r"[A-Za-z]+", f.read_text())}
    assert len(words) > 1000
    shared = sorted(n for n in (*FIRST_NAMES, *LAST_NAMES) if n.lower() in words)
    assert not shared, shared
