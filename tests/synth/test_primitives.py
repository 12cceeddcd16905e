"""Primitives as registered parts (``coworkenv.synth.primitive``): the built-ins come from the
``coworkenv.primitives`` entry points, one module each, and keep the contract; a plugin's
broken primitives are refused with every problem named; a primitive that leaves its work
ungraded fails ``coworkenv primitives --check``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from coworkenv.synth import (
    PRIMITIVES,
    PrimitiveError,
    check_primitive_contract,
)
from coworkenv.synth.primitive import GROUP, check_primitive, discover

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = sorted(p.stem for p in (ROOT / "coworkenv/synth/primitives").glob("*.py")
                  if p.stem != "__init__")


def test_the_built_in_primitives_come_from_the_entry_points_one_module_each() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    for name in BUILT_IN:
        assert eps[name] == f"coworkenv.synth.primitives.{name}:{name.upper()}"
    assert set(BUILT_IN) <= set(PRIMITIVES) == set(discover())
    for name in BUILT_IN:
        others = {n: p for n, p in PRIMITIVES.items() if n != name}
        assert check_primitive(PRIMITIVES[name], others) == [], name
    # a builder sees the composer through its narrow view, never the composer itself
    for path in (ROOT / "coworkenv/synth/primitives").glob("*.py"):
        text = path.read_text()
        for module in ("compose", "draw", "generate", "contract"):
            assert f"from ..{module} import" not in text, (path.name, module)


def _plugin(tmp: Path, name: str, module: str, entries: dict[str, str]) -> Path:
    """A real installed distribution (a dist-info folder on a path entry) registering
    ``entries`` in the primitives group, with ``module`` as its code."""
    (tmp / f"{name}.py").write_text(textwrap.dedent(module))
    info = tmp / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + "".join(
        f"{k} = {v}\n" for k, v in entries.items()))
    return tmp


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    """Prepend tmp_path to sys.path for a plugin written there; afterwards, take it away and
    find the primitives again."""
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for mod in [m for m in sys.modules if m.startswith("broken_prims") or m == "lax_prims"]:
            del sys.modules[mod]
        PRIMITIVES.reload()
        assert "lax" not in PRIMITIVES


BROKEN = """
from coworkenv.synth import Primitive

def build(c, st):
    pass

BAD = Primitive("bad name", "later", (frozenset({"email"}),), ("flying",), provides="",
                grading="nothing", build=None, variants={"office": 3}, example="nowhere.yaml")
NOT_ONE = object()
GOOD = Primitive("good", "act", (frozenset({"email"}),), ("tool_coordination",),
                 provides="a thing", grading="a check", build=build)
NEEDY = Primitive("needy", "act", (frozenset({"email"}),), ("tool_coordination",),
                  provides="a thing", grading="a check", build=build, needs=("nowhere",))
"""


def test_a_broken_primitive_plugin_is_refused_with_each_problem_named(installed: Path) -> None:
    _plugin(installed, "broken_prims", BROKEN, {
        "bad_name": "broken_prims:BAD", "not_one": "broken_prims:NOT_ONE",
        "renamed": "broken_prims:GOOD", "needy": "broken_prims:NEEDY",
        "missing": "broken_prims_nowhere:X", "ask": "broken_prims:GOOD"})
    with pytest.raises(PrimitiveError) as refused:
        discover()
    message = str(refused.value)
    for part in ("entry point bad_name = 'broken_prims:BAD'",
                 "name: 'bad name' is not an identifier", "phase: 'later' is not one of",
                 "capabilities: 'flying' is not one of", "build: not callable",
                 "provides: empty", "variants: {'office': 3} is not a mapping",
                 "example: 'nowhere.yaml' is not 'package:path'",
                 "entry point not_one", "is a object, not a coworkenv Primitive record",
                 "entry point renamed", "the record is named 'good'",
                 "entry point missing", "cannot be loaded: ModuleNotFoundError",
                 "entry point needy", "needs: ['nowhere']",
                 "name: 'ask' is registered already"):
        assert part in message, (part, message)
    # the registry refuses to compose with them, saying so
    PRIMITIVES.reload()
    with pytest.raises(PrimitiveError, match="primitive\\(s\\) refused"):
        list(PRIMITIVES)


LAX = """
from coworkenv.synth import Primitive

def build(c, st):
    '''Files a note nobody checks: the grader cannot tell it was done.'''
    who = c.person()
    c.buckets["act"].append(c.say(who, f"Hi {c.name(who)}, a note for you."))
    c.goals.append(f"Send {c.name(who)} a note.")

LAX = Primitive("lax", "act", (frozenset({"chat", "email"}),), ("multi_turn_communication",),
                provides="a colleague to send a note to", grading="nothing (a hole)",
                build=build)
"""


def test_a_primitive_that_leaves_its_work_ungraded_fails_the_check(installed: Path) -> None:
    _plugin(installed, "lax_prims", LAX, {"lax": "lax_prims:LAX"})
    PRIMITIVES.reload()
    report = check_primitive_contract("lax", seeds=1)
    assert not report.ok and report.tasks == 1
    assert any("mutant" in p and "survived" in p for p in report.problems), report.problems
    # and through the command line, as a plugin's author runs it
    env = {**os.environ, "PYTHONPATH": str(installed)}
    out = subprocess.run([sys.executable, "-m", "coworkenv.cli", "primitives", "--check", "lax",
                          "--seeds", "1", "--json"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 1, out.stderr
    (got,) = json.loads(out.stdout)
    assert got["primitive"] == "lax" and not got["ok"] and got["problems"]
    listed = subprocess.run([sys.executable, "-m", "coworkenv.cli", "primitives", "--json"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert {"primitive": "lax", "module": "lax_prims"}.items() <= next(
        p for p in json.loads(listed.stdout) if p["primitive"] == "lax").items()


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_primitive_keeps_the_contract(name: str) -> None:
    report = check_primitive_contract(name, seeds=2)
    assert report.ok, report.problems
    assert report.mutants > 0 and len(report.plans) == 1 + len(PRIMITIVES[name].variants)
