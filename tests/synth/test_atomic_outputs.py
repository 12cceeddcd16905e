"""Outputs appear whole or not at all, and a part is never read as a whole: synth and export
write under a temporary name with a manifest; loaders and training check it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]
REQ = str(ROOT / "examples/workflows/finance-approvals.yaml")


def _run(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          **kw)  # type: ignore[call-overload]


def test_a_synth_output_cut_short_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    assert _run("synth", REQ, "--n", "6", "--out", str(out), "--no-mutate").returncode == 0
    manifest = json.loads((tmp_path / "t.jsonl.manifest.json").read_text())
    assert manifest["lines"] == 6 == manifest["tasks"]
    assert _run("validate", str(out)).returncode == 0
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:4]))  # what a writer killed midway would have left
    for cmd in (["validate", str(out)], ["run", "--tasks", str(out), "--db",
                                         str(tmp_path / "r.db")]):
        res = _run(*cmd)
        assert res.returncode != 0, cmd
        text = res.stdout + res.stderr
        assert "does not match" in text and "4 lines, expected 6" in text, text
        assert "Traceback" not in text


def test_a_killed_synth_leaves_the_previous_output_whole(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    assert _run("synth", REQ, "--n", "3", "--out", str(out), "--no-mutate").returncode == 0
    before = out.read_bytes()
    p = subprocess.Popen([*CLI, "synth", REQ, "--n", "3000", "--out", str(out)], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "t.jsonl.attempts.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not log.exists() or
                                           log.read_text().count("\n") < 20):
        time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    assert out.read_bytes() == before
    assert _run("validate", str(out)).returncode == 0
    assert sorted(x.name for x in tmp_path.iterdir() if not x.name.startswith(".")) == [
        "t.jsonl", "t.jsonl.attempts.jsonl", "t.jsonl.manifest.json", "t.jsonl.report.json"]


def test_an_export_replaces_the_previous_one_whole_and_is_checked(tmp_path: Path) -> None:
    db = tmp_path / "teach.db"
    assert _run("run", "--tasks", "examples/tasks", "--agent", "oracle", "--db",
                str(db), "--quiet").returncode == 0
    data = tmp_path / "sft"
    data.mkdir()
    (data / "train.jsonl").write_text('{"stale": true}\n')
    (data / "leftover.jsonl").write_text("{}\n")
    res = _run("export", "sft", "--db", str(db), "--out", str(data))
    assert res.returncode == 0, res.stderr
    assert not (data / "leftover.jsonl").exists()  # no mix of old and new files
    m = json.loads((data / "manifest.json").read_text())
    assert m["files"]["train.jsonl"]["lines"] == m["rows"]["train"] > 0
    rows = (data / "train.jsonl").read_text().splitlines(keepends=True)
    (data / "train.jsonl").write_text("".join(rows[:-1]))
    res = _run("train", "sft", "--model", "no-such-model", "--data", str(data), "--out",
               str(tmp_path / "ckpt"))
    assert res.returncode == 2 and "does not match" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
