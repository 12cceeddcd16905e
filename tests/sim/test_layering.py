"""The simulation's modules have one direction of imports (each module imports only those
below it: calendar, language, arrivals, loading, records, attribution, world, view,
seats, grades, kernel; lazy
imports and imports for type checking count), none is past 700 lines, and the runtime's run
and cluster modules do not import each other back."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "coworkenv"
SIMULATION = PKG / "sim" / "simulation"
ORDER = ["calendar", "language", "arrivals", "loading", "records", "attribution", "world",
         "view", "seats", "grades", "kernel"]
"""The simulation's modules, bottom to top (a new module takes its place here)."""


def _siblings(path: Path) -> set[str]:
    """The sibling modules a module imports, anywhere in it (``from .x import``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def test_each_simulation_module_imports_only_those_below_it() -> None:
    modules = {p.stem for p in SIMULATION.glob("*.py")} - {"__init__"}
    assert modules <= set(ORDER), f"place {sorted(modules - set(ORDER))} in ORDER"
    for p in SIMULATION.glob("*.py"):
        if p.stem == "__init__":
            continue
        up = {m for m in _siblings(p) if m in ORDER and ORDER.index(m) >= ORDER.index(p.stem)}
        assert not up, f"{p.name} imports {sorted(up)}, which sit above it"


def test_no_simulation_module_is_over_700_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in SIMULATION.glob("*.py")}
    assert max(sizes.values()) <= 700, sizes


def test_the_simulation_reaches_nothing_above_the_simulator() -> None:
    for p in SIMULATION.glob("*.py"):
        text = p.read_text()
        for floor in ("agents", "runtime", "cli", "serve", "training", "viewer", "synth"):
            assert f"from ...{floor}" not in text and f"coworkenv.{floor}" not in text, \
                (p.name, floor)


def test_run_and_cluster_do_not_import_each_other_back() -> None:
    runtime = PKG / "runtime"
    assert "run" not in _siblings(runtime / "cluster.py")
    assert "cluster" not in _siblings(runtime / "prepare.py")
