"""The command line's own options: --version, and -h beside --help on every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import coworkenv
from coworkenv.docgen import commands

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "coworkenv.cli"]


def test_version_and_short_help() -> None:
    out = subprocess.run([*CLI, "--version"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"coworkenv {coworkenv.__version__}"
    for cmd in ([], ["run"], ["export", "sft"], ["eval"]):
        short = subprocess.run([*CLI, *cmd, "-h"], cwd=ROOT, capture_output=True, text=True,
                               timeout=60)
        assert short.returncode == 0 and "Usage:" in short.stdout, (cmd, short.stderr)


# every command and subcommand (what the reference page lists), and the group itself
COMMANDS = [path.split()[1:] for path, cmd in commands() if not getattr(cmd, "commands", None)]
COMMANDS.append([])


def test_help_reads_at_80_columns() -> None:
    """Nothing cut, nothing past column 80, every --agent kind of `run` named, exit codes
    in the top-level help."""
    env = {**os.environ, "COLUMNS": "80"}
    for cmd in COMMANDS:
        r = subprocess.run([*CLI, *cmd, "-h"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 0, (cmd, r.stderr)
        wide = [line for line in r.stdout.splitlines() if len(line) > 80]
        cut = [line for line in r.stdout.splitlines() if "…" in line or (
            line.endswith("...") and not line.startswith("Usage:"))]  # (FILE...: several)
        assert not wide and not cut, (cmd, wide, cut)
        if cmd == ["run"]:
            flat = " ".join(r.stdout.split())
            for kind in ("oracle", "noop", "openai:MODEL", "teacher:openai:MODEL", "remote"):
                assert kind in flat, kind
        if cmd == []:
            assert "Exit codes: 0" in r.stdout and "130 interrupted" in " ".join(r.stdout.split())


def test_tasks_takes_several_paths_after_one_flag(tmp_path: Path) -> None:
    one = ROOT / "coworkenv" / "builtin_tasks" / "safety.yaml"
    two = ROOT / "coworkenv" / "builtin_tasks" / "sharing.yaml"
    r = subprocess.run([*CLI, "run", "--tasks", str(one), str(two), "--quiet", "--db",
                        str(tmp_path / "t.db")], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    import sqlite3

    with sqlite3.connect(tmp_path / "t.db") as c:
        families = {f for (f,) in c.execute("SELECT DISTINCT family FROM episodes")}
    assert families == {"safety", "doc_sharing"}
