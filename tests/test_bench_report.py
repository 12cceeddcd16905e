"""bench/report.py: the README's benchmark figures come from one bench/all.py report, a
benchmark that did not run or failed is said so, and the README is rewritten only between its
markers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _report(tmp_path: Path) -> Path:
    """A real bench/all.py --quick report of two benchmarks (a few seconds)."""
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/all.py"), "--quick", "--only",
                        "store", "replay", "--out", str(out)], capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def _render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench/report.py"), *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_the_report_quotes_the_run_with_its_date_load_and_baselines(tmp_path: Path) -> None:
    path = _report(tmp_path)
    report = json.loads(path.read_text())
    r = _render(str(path))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert report["date"] in text and "--quick" in text
    store = report["benchmarks"]["store"]
    row = next(line for line in text.splitlines() if line.startswith("| store: one-event"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{store['result']['async_append_single_events_per_s']:,.0f}"
    assert cells[2] == f"raw `executemany` {store['result']['raw_executemany_rows_per_s']:,.0f}"
    assert cells[3] == f"{store['result']['ratio_single_vs_raw']:,.3f}"
    assert cells[4] == f"{store['load_before'][0]:,.2f}"
    assert any(line.startswith("| replay: events/s") for line in text.splitlines())
    assert "Not in this run: bus, episodes, grading, synth, sessions, scale, simulate, persistent." in text

    # a failed benchmark is a row that says so
    report["benchmarks"]["replay"] = {**report["benchmarks"]["replay"], "exit": 1}
    report["benchmarks"]["replay"].pop("result")
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps(report))
    assert "| replay: failed (exit 1) |" in _render(str(failed)).stdout


def test_the_readme_is_rewritten_between_its_markers_only(tmp_path: Path) -> None:
    path = _report(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("# T\n\nbefore\n<!-- bench:begin -->\nold figures\n<!-- bench:end -->\n"
                      "after\n")
    r = _render(str(path), "--readme", str(readme))
    assert r.returncode == 0, r.stderr
    text = readme.read_text()
    assert text.startswith("# T\n\nbefore\n<!-- bench:begin -->\nMeasured by")
    assert text.endswith("<!-- bench:end -->\nafter\n") and "old figures" not in text
    # the performance page's own section is there to be rewritten
    assert (ROOT / "docs" / "design" / "performance.md").read_text().count("<!-- bench:begin -->") == 1

    readme.write_text("no markers\n")
    r = _render(str(path), "--readme", str(readme))
    assert r.returncode != 0 and "expected one <!-- bench:begin --> line" in r.stderr
    assert readme.read_text() == "no markers\n"
    r = _render(str(path), "--readme", str(tmp_path / "missing.md"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"{tmp_path / 'missing.md'}: cannot read it (No such file or directory)" in r.stderr
    (tmp_path / "junk.json").write_text("[1]")
    r = _render(str(tmp_path / "junk.json"))
    assert r.returncode != 0 and "not a bench/all.py report" in r.stderr


def test_the_scaling_table_comes_from_one_scale_run(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "bench/episodes.py"), "--scale", "2,100",
                        "--steps", "20", "--load", "2000"], capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    scale = json.loads(r.stdout)
    path = tmp_path / "scale.json"
    path.write_text(r.stdout)
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- scale:begin -->\nold\n<!-- scale:end -->\nb\n")
    out = _render("--scale", str(path), "--readme", str(readme))
    assert out.returncode == 0, out.stderr
    text = readme.read_text()
    assert text.startswith("a\n<!-- scale:begin -->\nMeasured by `python bench/episodes.py "
                           "--scale`") and text.endswith("<!-- scale:end -->\nb\n")
    assert scale["date"] in text and "old" not in text
    row = next(line for line in text.splitlines() if line.startswith("| 100 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    hundred = scale["scale"][1]
    assert hundred["cpu_per_agent_step_us"] is not None  # (a steady stretch of about 1 s)
    assert cells[4] == f"{hundred['cpu_per_agent_step_us']:,.0f}"
    assert cells[5] == f"{hundred['loop_cpu_per_agent_step_us']:,.0f}"
    assert cells[6] == f"{hundred['whole_run_cpu_per_agent_step_us']:,.0f}"
    assert cells[7] == f"{hundred['rss_per_live_episode_kib']:,.0f}"
    assert "times its value at 100" in text and "(target 100)" in text
    # the performance page's own section is there to be rewritten
    assert (ROOT / "docs" / "design" / "performance.md").read_text().count("<!-- scale:begin -->") == 1
    # with no report at all, it says what it needs
    none = _render()
    assert none.returncode != 0 and "--scale FILE" in none.stderr
