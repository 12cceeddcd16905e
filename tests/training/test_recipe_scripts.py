"""The PocketWorker scripts call only commands and options the CLI has.

The CPU script runs end to end in CI (``test_pocketworker.py``); the H200 script cannot run
here, so at least every ``coworkenv`` command line in both is checked against the CLI itself:
a renamed option or a typo fails here, not an hour into a GPU run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer

from coworkenv.cli import app

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "examples" / "pocketworker").glob("*.sh"))
RUNNERS = [s for s in SCRIPTS if "CW=${COWORKENV" in s.read_text()]  # (the recipe's runs; not
# offline_bundle.sh, which packs and calls pip only)


def _command_lines(script: Path) -> list[list[str]]:
    """The words of every `$CW ...` command line (continuations joined)."""
    text = script.read_text().replace("\\\n", " ")
    lines = []
    for line in text.splitlines():
        code = line.split(" #", 1)[0]
        for m in re.finditer(r"\$CW\s+([^;&|]+)", code):
            lines.append(m.group(1).split())
    return lines


def _resolve(words: list[str]) -> tuple[Any, list[str]]:
    cmd: Any = typer.main.get_command(app)  # a click group (typer may carry its own click)
    rest = list(words)
    while hasattr(cmd, "commands") and rest and rest[0] in cmd.commands:
        cmd = cmd.commands[rest.pop(0)]
    return cmd, rest


def test_both_recipe_scripts_are_checked() -> None:
    assert {s.name for s in RUNNERS} == {"cpu_end_to_end.sh", "gpu_h200.sh"}


@pytest.mark.parametrize("script", RUNNERS, ids=[s.name for s in RUNNERS])
def test_every_command_line_uses_known_options(script: Path) -> None:
    lines = _command_lines(script)
    assert lines, f"{script.name}: no coworkenv command found"
    for words in lines:
        cmd, rest = _resolve(words)
        assert not hasattr(cmd, "commands"), f"{script.name}: no command {' '.join(words)}"
        known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
        used = {w.split("=", 1)[0] for w in rest if w.startswith("--")}
        assert used <= known, f"{script.name}: `{' '.join(words[:2])}` has no {used - known}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_scripts_parse(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)
