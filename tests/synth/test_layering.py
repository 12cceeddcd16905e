"""The synthesis modules import one another without a circle (lazy imports inside functions
count): a process reader produces plans the composer consumes, never the other way round."""

from __future__ import annotations

import ast
from pathlib import Path

SYNTH = Path(__file__).resolve().parents[2] / "coworkenv" / "synth"


def _imports(path: Path) -> set[str]:
    """The sibling modules of ``synth`` that a module imports, anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def test_no_module_of_synth_imports_itself_back() -> None:
    graph = {p.stem: _imports(p) & {q.stem for q in SYNTH.glob("*.py")}
             for p in SYNTH.glob("*.py") if p.stem != "__init__"}
    circles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                circles.append([*path[path.index(nxt):], nxt])
            elif nxt != "__init__":
                walk(nxt, [*path, nxt])

    for start in graph:
        walk(start, [start])
    assert circles == [], circles[:5]
    assert "compose" not in graph["bpmn"] and "bpmn" not in graph["requirement"]
