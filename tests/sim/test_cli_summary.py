"""What `coworkenv simulate` says before and after a run: the work it is about to do (agents,
people, the arrivals the workload draws), and where the clock ended in working days, with
one definition of the backlog."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from coworkenv.sim.simulation import load_simulation

ROOT = Path(__file__).resolve().parents[2]
WEEK = ROOT / "examples" / "simulations" / "week.yaml"


def test_simulate_says_the_work_ahead_and_where_the_clock_ended(tmp_path: Path) -> None:
    expected = load_simulation(WEEK, days=1).expected_arrivals
    r = subprocess.run([sys.executable, "-m", "coworkenv.cli", "simulate", str(WEEK), "--days",
                        "1", "--db", str(tmp_path / "s.db")], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert (f"northwind-week: 1 working days, 3 agents, 29 people; about {expected:,} "
            "arrivals expected") in r.stdout.splitlines()[0]
    out = " ".join(r.stdout.split())
    got = re.search(r"(\d+) arrivals, pass rate 1\.000; the clock ran to Mon 02 Mar \d\d:\d\d "
                    r"\(working day 1 of 1\) in [\d.]+ s, \d+ events \(hash \w+\); at most "
                    r"(\d+) arrivals open at one time \(waiting or in work\)", out)
    assert got, out
    assert abs(int(got[1]) - expected) <= expected  # (a draw, about what was said)
    assert 1 <= int(got[2]) <= int(got[1])
    run = re.search(r"\(run (sim-[\d-]+)\)", out)
    assert run and f"then http://127.0.0.1:8765/#/sim/{run[1]}" in out  # (its page's address)


def test_simulate_check_says_what_a_file_holds_or_names_the_field(tmp_path: Path) -> None:
    """--check: the file checked as the run would, nothing run or written."""
    sims = sorted(p for p in (ROOT / "examples" / "simulations").glob("*.yaml")
                  if "kind: simulation" in p.read_text())
    assert len(sims) >= 4
    r = subprocess.run([sys.executable, "-m", "coworkenv.cli", "validate", *map(str, sims)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.count(": valid: ") == len(sims), r.stdout
    for sim in sims:
        ok = subprocess.run([sys.executable, "-m", "coworkenv.cli", "simulate", str(sim),
                             "--check", "--db", str(tmp_path / "never.db")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
        assert ok.returncode == 0 and f"({sim}): valid: " in ok.stdout, ok.stdout + ok.stderr
    broken = tmp_path / "sims"
    shutil.copytree(ROOT / "examples" / "simulations", broken)
    (broken / "week.yaml").write_text((broken / "week.yaml").read_text().replace(
        "sla_hours: 4", "sla: 4"))
    bad = subprocess.run([sys.executable, "-m", "coworkenv.cli", "simulate",
                          str(broken / "week.yaml"), "--check", "--db",
                          str(tmp_path / "never.db")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 1
    assert "checks.sla: Extra inputs are not permitted (got 4): did you mean sla_hours?" in \
        bad.stdout
    assert not (tmp_path / "never.db").exists()
