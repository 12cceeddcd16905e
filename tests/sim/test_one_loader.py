"""`validate` and `run` read task files with one loader, so they agree on every file: what one
refuses, the other refuses, naming the same field."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.sim.loader import read_task_items

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]


def _base() -> dict[str, Any]:
    return dict(read_task_items(ROOT / "examples" / "tasks" / "scheduling.yaml")[0][1])


def _delay(value: float) -> list[dict[str, Any]]:
    t = _base()
    t["user"] = {**t["user"], "response": {"delay_minutes": [value, value]}}
    return [t]


def _turns() -> list[dict[str, Any]]:
    t = _base()
    t["limits"] = {"max_turns": float("inf")}
    return [t]


CASES = {
    "duplicate-id": ([_base(), copy.deepcopy(_base())], "is also defined in"),
    "delay-1e308": (_delay(1e308), "delay_minutes"),
    "delay-nan": (_delay(float("nan")), "delay_minutes"),
    "max-turns-inf": (_turns(), "max_turns"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_and_run_refuse_the_same_files(tmp_path: Path, case: str) -> None:
    tasks, says = CASES[case]
    f = tmp_path / f"{case}.yaml"
    f.write_text(yaml.safe_dump(tasks))
    v = subprocess.run([*CLI, "validate", str(f)], capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert v.returncode == 1 and "rejected" in v.stdout and says in v.stdout, v.stdout + v.stderr
    r = subprocess.run([*CLI, "run", "--tasks", str(f), "--db", str(tmp_path / "r.db")],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and says in r.stderr, r.stdout + r.stderr
    assert lines and lines[0].startswith("error: ") and "Traceback" not in r.stderr
    assert not (tmp_path / "r.db").exists() or "episodes" not in r.stdout
