"""The PocketWorker path end to end on CPU with the real offline model, through the example
script a user runs: teacher run -> export sft -> train sft -> train grpo on live episodes ->
each checkpoint served over HTTP and evaluated on held-out families -> eval --compare.

A small setting of ``examples/pocketworker/cpu_end_to_end.sh`` (fewer steps, shorter
sequences, one held-out family and one of its tasks); the full setting's numbers are in the README."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
GGUF = Path(os.environ.get("COWORKENV_TEST_GGUF",
                           ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.timeout(1800)]
SFT_STEPS = 6


def test_cpu_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not GGUF.exists():
        pytest.fail(f"{GGUF}: the offline model is missing (scripts/test.sh fetches it)")
    work = tmp_path / "pw"
    env = {**os.environ, "WORK": str(work), "MODEL": str(GGUF),
           "COWORKENV": f"{sys.executable} -m coworkenv.cli",
           # (small: on 2 cores an SFT step of 768 tokens takes about 12 s, a GRPO step with
           # two live rollouts about 40 s, a served model's evaluated episode about 30 s)
           "TEACHER_TRIALS": "2", "HELD_OUT": "doc_sharing", "SFT_STEPS": str(SFT_STEPS),
           "SFT_BATCH": "1", "SFT_MAX_LENGTH": "768", "SFT_LR": "3e-4",
           # (a demonstration's task and tool list alone are 800-1,700 tokens with
           # directory_search offered: keep its last turns)
           "SFT_TRUNCATION": "keep_end", "SFT_MEASURE_ROWS": "8", "GRPO_STEPS": "2",
           "GRPO_COMPLETION": "48", "GRPO_TOOL_CALLS": "2", "EVAL_ONLY": "share-onboarding",
           "EVAL_MAX_TURNS": "2", "EVAL_MAX_TOKENS": "48", "PORT": str(free_port())}
    # the script's own progress goes to the terminal as it runs (a long, real job)
    proc = subprocess.Popen(["bash", str(ROOT / "examples/pocketworker/cpu_end_to_end.sh")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    assert proc.stdout is not None
    with capsys.disabled():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(("==", "+", "trained", "wrote", "run ")) or "step" in line:
                print(f"  [pocketworker] {line.rstrip()[:160]}", flush=True)
    proc.wait(timeout=60)
    log = "".join(lines)
    assert proc.returncode == 0, log[-4000:]

    # the teacher slipped and recovered; those turns are context, not targets
    demos = [json.loads(x) for x in (work / "data/sft/train.jsonl").read_text().splitlines()]
    assert any(d["untrained"] for d in demos)
    for d in demos:
        for i in d["untrained"]:
            assert json.loads(d["messages"][i + 1]["content"])["error"]["code"] in (
                "not_found", "rate_limited", "server_error", "unavailable")  # (a fault: again)

    # SFT: the loss on the same training rows falls (each step's loss is of other rows: at
    # batch 1 those go up and down whatever the model learns)
    sft = json.loads((work / "ckpt/sft/coworkenv-sft.json").read_text())
    assert len(sft["losses"]) == SFT_STEPS
    assert sft["measured_rows"]["train"] == 8, sft
    assert sft["loss_after"]["train"] < sft["loss_before"]["train"], sft
    assert "eval" in sft["loss_before"], sft  # (the held-out family's demonstrations)
    assert f"loss on {sft['measured_rows']['train']} train row(s)" in log

    # GRPO: two steps, each reward component logged; its rollouts are episodes in the store
    grpo = json.loads((work / "ckpt/grpo/coworkenv-grpo.json").read_text())
    assert set(grpo["rewards"]) == {"score", "completion", "safety", "robustness", "no_repeat"}
    assert all(len(v) == 2 for v in grpo["rewards"].values()), grpo["rewards"]
    db = sqlite3.connect(work / "pocketworker.db")
    rollouts = db.execute("SELECT status, role FROM episodes WHERE run_id='grpo-rollouts'").fetchall()
    assert len(rollouts) == 4 and {r for _, r in rollouts} == {"student"}
    graded = db.execute("SELECT count(*) FROM grades JOIN episodes USING (episode_id) "
                        "WHERE run_id='grpo-rollouts'").fetchone()[0]
    assert graded == 4

    # evaluation: each checkpoint served (its path and weight hash on record) and graded
    for name, folder in (("base", None), ("sft", work / "ckpt/sft"), ("grpo", work / "ckpt/grpo")):
        served = json.loads((work / f"served-{name}.json").read_text())["data"][0]
        assert served["id"] == f"pocketworker-{name}" and len(served["weights_sha256"]) == 16
        if folder is not None:
            assert Path(served["checkpoint"]).resolve() == folder.resolve()
        n = db.execute("SELECT count(*) FROM episodes e JOIN grades g USING (episode_id) "
                       "WHERE run_id=?", (f"eval-{name}",)).fetchone()[0]
        assert n == 1, name
        calls = db.execute("SELECT count(*) FROM events e JOIN episodes p USING (episode_id) "
                           "WHERE p.run_id=? AND e.kind='agent.model_call'",
                           (f"eval-{name}",)).fetchone()[0]
        assert calls >= 1, name  # the agent really talked to the served model
    for b in ("sft", "grpo"):
        cmp = json.loads((work / f"compare-eval-base-eval-{b}.json").read_text())
        assert cmp["overall"]["a"]["episodes"] == 1 and cmp["overall"]["b"]["episodes"] == 1
