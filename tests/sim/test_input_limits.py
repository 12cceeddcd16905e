"""Bounded inputs: task files from others and tool arguments from models cannot take a run's
memory or time, and each refusal is one line naming the file or the field."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coworkenv.sim import builtin_tasks
from coworkenv.workspace.tools import execute_tool

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "id: *i\n"


def _files(tmp: Path) -> dict[str, tuple[Path, str]]:
    out: dict[str, tuple[Path, str]] = {}
    (tmp / "bomb.yaml").write_text(BOMB)
    out["alias bomb"] = (tmp / "bomb.yaml", "more than 2,000,000 values")
    deep = tmp / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out["deep nesting"] = (deep, "nested more than")
    (tmp / "latin1.yaml").write_bytes("- id: caf\xe9\n".encode("latin-1"))
    out["invalid UTF-8"] = (tmp / "latin1.yaml", "not UTF-8: byte 0xe9")
    (tmp / "surrogate.json").write_text('[{"id": "x", "instruction": "\\ud800"}]')
    out["lone surrogate"] = (tmp / "surrogate.json", "not valid Unicode")
    fifo = tmp / "fifo.yaml"
    os.mkfifo(fifo)
    out["FIFO"] = (fifo, "not a regular file")
    (tmp / "zero.yaml").symlink_to("/dev/zero")
    out["symlink to /dev/zero"] = (tmp / "zero.yaml", "not a regular file")
    return out


@pytest.mark.parametrize("case", ["alias bomb", "deep nesting", "invalid UTF-8",
                                  "lone surrogate", "FIFO", "symlink to /dev/zero"])
def test_bad_task_files_are_one_line_errors(tmp_path: Path, case: str) -> None:
    path, msg = _files(tmp_path)[case]
    t0 = time.monotonic()
    out = subprocess.run([*CLI, "run", "--tasks", str(path), "--db", str(tmp_path / "r.db")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert msg in out.stderr and str(path) in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "r.db").exists()  # refused before anything was written
    assert time.monotonic() - t0 < 30


def test_the_file_size_bound_is_configurable(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * 4000 + "\n[]\n")
    env = {**os.environ, "COWORKENV_MAX_TASK_FILE_MB": "0.001"}
    out = subprocess.run([*CLI, "run", "--tasks", str(big), "--db", str(tmp_path / "r.db")],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "COWORKENV_MAX_TASK_FILE_MB" in out.stderr, out.stderr


def test_oversized_tool_arguments_are_an_error_to_the_caller() -> None:
    task = builtin_tasks()[0]
    state = task.seed.build()
    before = state.state_hash()
    now = datetime(2026, 3, 2, 14, tzinfo=UTC)
    for args, field in (({"to": ["maya"], "subject": "s", "body": "x" * 10_000_000}, "body"),
                        ({"to": ["maya"] * 5000, "subject": "s", "body": "b"}, "to"),
                        ({"to": ["maya"], "subject": "y" * 30_000, "body": "z" * 30_000,
                          "cc": ["w" * 30_000, "v" * 30_000, "u" * 30_000]}, "")):
        res = execute_tool(state, task.agent, "email_send", args, now)
        assert not res.ok and res.error is not None and res.error.code == "too_large"
        assert res.error.field is not None and res.error.field.startswith(field)
    assert state.state_hash() == before


def test_a_run_id_that_cannot_be_a_topic_level_is_refused(tmp_path: Path) -> None:
    out = subprocess.run([*CLI, "run", "--tasks", "examples/tasks", "--run-id", "a+b", "--db",
                          str(tmp_path / "r.db")], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--run-id" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
