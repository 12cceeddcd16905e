"""The command line's own options: --version, and -h beside --help on every command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import coworkenv

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
