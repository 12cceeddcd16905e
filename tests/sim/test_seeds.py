"""Many simulations at once (``coworkenv simulate FILE --seeds N --processes P``): each seed a
run of its own, the same whichever process ran it, merged into the store; a batch goes on
with --resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.runtime.simbatch import shard_folder, simulate_seeds
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.sim.errors import RunConfigError
from coworkenv.store import Reader

ROOT = Path(__file__).resolve().parents[2]
WEEK = ROOT / "examples" / "simulations" / "week.yaml"
CLI = [sys.executable, "-m", "coworkenv.cli"]


def _runs(db: Path) -> dict[str, str]:
    with Reader(db) as r:
        return {x["run_id"]: x["status"] for x in r.runs()}


def test_seeds_over_two_processes_are_the_runs_each_seed_makes_alone(tmp_path: Path) -> None:
    one_day = SimulationConfig(WEEK, days=1, db=tmp_path / "b.db", run_id="b")
    batch = simulate_seeds(one_day, [7, 8, 9, 10], processes=2)
    assert [r.run_id for r in batch.runs] == ["b-s7", "b-s8", "b-s9", "b-s10"]
    assert _runs(tmp_path / "b.db") == dict.fromkeys(("b-s7", "b-s8", "b-s9", "b-s10"),
                                                     "finished")
    assert not shard_folder(tmp_path / "b.db").exists()  # (merged, then cleared)
    assert batch.arrivals == sum(len(r.outcomes) for r in batch.runs) > 100
    assert len({len(r.outcomes) for r in batch.runs}) > 1  # (each seed its own draw)
    # the file's own seed (7) is the plain run; another seed alone is the same run too
    plain = simulate(SimulationConfig(WEEK, days=1, db=tmp_path / "p.db", run_id="p"))
    alone = simulate(SimulationConfig(WEEK, days=1, seed=9, db=tmp_path / "a.db", run_id="a"))
    assert batch.runs[0].events_hash == plain.events_hash
    assert batch.runs[2].events_hash == alone.events_hash
    with Reader(tmp_path / "b.db") as r:  # (merged whole: every arrival's episode)
        assert len(r.episodes("b-s9")) == len(alone.outcomes) + 1


def test_a_batch_goes_on_with_resume_and_is_not_run_twice(tmp_path: Path) -> None:
    c = SimulationConfig(WEEK, days=1, db=tmp_path / "b.db", run_id="b")
    first = simulate_seeds(c, [7, 8])
    with pytest.raises(RunConfigError, match=r"run_id: .*b\.db holds runs of batch 'b' "
                       r"already \(b-s7, \.\.\.\); resume it with --resume"):
        simulate_seeds(c, [7, 8, 9])
    more = simulate_seeds(SimulationConfig(WEEK, days=1, db=tmp_path / "b.db", run_id="b",
                                           resume=True), [7, 8, 9])
    assert more.earlier == ["b-s7", "b-s8"] and [r.run_id for r in more.runs] == ["b-s9"]
    assert len(_runs(tmp_path / "b.db")) == 3 and len(first.runs) == 2


def test_the_cli_runs_a_batch_and_prints_its_rates(tmp_path: Path) -> None:
    r = subprocess.run([*CLI, "simulate", str(WEEK), "--days", "1", "--seeds", "3",
                        "--processes", "2", "--db", str(tmp_path / "c.db"), "--run-id", "c",
                        "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["simulations"] == 3 and out["processes"] == 2
    assert [x["run"] for x in out["runs"]] == ["c-s7", "c-s8", "c-s9"]
    assert out["arrivals"] == sum(x["arrivals"] for x in out["runs"])
    assert out["arrivals_per_s"] > 0 and out["pass_rate"] == 1.0
    bad = subprocess.run([*CLI, "simulate", str(WEEK), "--processes", "2", "--db",
                          str(tmp_path / "d.db")], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "--processes: runs several simulations (with --seeds N)" \
        in bad.stderr
