"""The GPU recipe's CPU stages (``examples/pocketworker/gpu_h200.sh`` with ``PREPARE_ONLY=1``):
long and short synthesized tasks, the teacher run and the export, then a stop before anything
needs a model or a GPU, so WORK can be prepared on one machine and brought to another."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_prepare_only_makes_the_sft_data_from_long_and_short_tasks(tmp_path: Path) -> None:
    env = _env(tmp_path)
    p = _script(env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "prepared" in p.stdout and "== eval-base" not in p.stdout
    rows = [json.loads(x) for x in (tmp_path / "w/data/sft/train.jsonl").read_text().splitlines()]
    ids = {r["task_id"] for r in rows}
    assert len(ids) == 12 and sum("-2to4-" in i for i in ids) == 6
    stages = [x.split("\t")[0] for x in (tmp_path / "w/timings.tsv").read_text().splitlines()]
    assert stages == ["synth", "synth-short", "teacher-oracle", "export"]
    assert not (tmp_path / "w/ckpt").exists()
    # each stage's time is in RESULTS as soon as the stage ends
    assert (tmp_path / "results/timings.tsv").read_text() == (tmp_path / "w/timings.tsv").read_text()

    # run again after an interruption before the export: the recorded teacher run resumes
    # (nothing missing) instead of being refused as a run already recorded, and exports
    (tmp_path / "w/data/sft/train.jsonl").unlink()
    p = _script(env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "0 episode(s) this call" in p.stdout + p.stderr
    assert (tmp_path / "w/data/sft/train.jsonl").read_text().count("\n") == len(rows)


def _script(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ROOT / "examples/pocketworker/gpu_h200.sh")], env=env,
                          capture_output=True, text=True, timeout=600)


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PREPARE_ONLY": "1", "SYNTH": "6", "SYNTH_SHORT": "6", "TRIALS": "1",
            "HELD_OUT": "", "EVAL_TASKS": str(ROOT / "examples/benchmark"),
            "WORK": str(tmp_path / "w"), "RESULTS": str(tmp_path / "results"),
            "STUDENT": str(tmp_path / "no-such-model"),
            "COWORKENV": f"{sys.executable} -m coworkenv.cli",
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def test_the_lease_script_sets_only_what_the_recipe_reads(tmp_path: Path) -> None:
    """``lease.sh go`` passes the recipe its settings by name: each must be one gpu_h200.sh
    reads (a misspelt one would be ignored there, and the lease spent on defaults). Without
    the first call's part it stops at once and says so."""
    lease = (ROOT / "examples/pocketworker/lease.sh").read_text()
    recipe = (ROOT / "examples/pocketworker/gpu_h200.sh").read_text()
    start = lease.index('timeout "${BUDGET_S')
    run = lease[start:lease.index('bash "$HERE/gpu_h200.sh"', start)]
    passed = set(re.findall(r"\b([A-Z][A-Z_0-9]+)=", run))
    assert {"STUDENT", "SFT_STEPS", "GRPO_STEPS", "EVAL_TRIALS", "RESULTS"} <= passed
    read = set(re.findall(r"^([A-Z][A-Z_0-9]+)=\$\{\1[:-]", recipe, re.M))
    assert passed <= read, passed - read
    shared = set(re.findall(r"\b([A-Z][A-Z_]+)=\$\{\1:?-", lease.split("prepare()")[0]))
    assert {"SYNTH", "SYNTH_SHORT", "TRIALS"} <= shared <= read | {"LEASE"}, shared - read
    p = subprocess.run(["bash", str(ROOT / "examples/pocketworker/lease.sh"), "go"],
                       env={**os.environ, "LEASE": str(tmp_path / "lease")},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "call 1 (carrying c1) must come first" in p.stderr, p.stderr
    p = subprocess.run(["bash", str(ROOT / "examples/pocketworker/lease.sh")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "usage: lease.sh prepare | go" in p.stderr
