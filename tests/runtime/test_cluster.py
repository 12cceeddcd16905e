"""Episodes on a Ray cluster that the test starts itself: a head and a second node on this
machine, one CPU each. Slow (Ray's processes start in seconds each); deselect with
``-m "not slow"``."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkenv.runtime import RunConfig, run
from coworkenv.sim import RunConfigError
from coworkenv.store import Reader, merge_stores

ray = pytest.importorskip("ray", reason="the Ray extra: pip install 'coworkenv[ray]'")

# (one Ray per machine: `--ray auto` joins whichever runs, so Ray tests share one worker)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"
TRIALS = 20  # 20 tasks x 20 trials: 400 episodes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": 100 * 2**20})
    c.add_node(num_cpus=1, object_store_memory=100 * 2**20)
    c.wait_for_nodes()
    print(f"ray cluster at {c.address}: 2 nodes, 2 CPUs", flush=True)
    try:
        yield c.address
    finally:
        c.shutdown()


def _pairs(db: Path, run_id: str) -> dict[tuple[str, int], list[tuple[str, str, str | None]]]:
    """(task, trial) -> its attempts: (status, events hash, failure boundary)."""
    out: dict[tuple[str, int], list[tuple[str, str, str | None]]] = {}
    with sqlite3.connect(db) as c:
        for t, k, status, h, b in c.execute(
                "SELECT task_id, trial, status, events_hash, failure_boundary FROM episodes "
                "WHERE run_id=? ORDER BY attempt", (run_id,)):
            out.setdefault((t, k), []).append((status, h, b))
    return out


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("one") / "one.db"
    run(RunConfig(tasks=[TASKS], db=db, run_id="r", trials=TRIALS))
    return db


def test_ray_run_equals_a_one_process_run(cluster: str, one_process: Path,
                                          tmp_path: Path) -> None:
    db = tmp_path / "ray.db"
    seen: list[str] = []
    result = run(RunConfig(tasks=[TASKS], db=db, run_id="r", trials=TRIALS, ray=cluster,
                           hosts=2, shard_dir=str(tmp_path / "shards")),
                 on_done=lambda e: seen.append(e.episode_id))
    assert len(result.episodes) == len(seen) == len(set(seen)) == 400
    ours, theirs = _pairs(db, "r"), _pairs(one_process, "r")
    assert len(ours) == 400 and all(len(a) == 1 for a in ours.values())  # each pair once
    assert ours == theirs  # the same events, episode by episode
    with Reader(db) as r:
        assert r.runs()[0]["status"] == "finished"
        assert result.overall["episodes"] == 400 and result.overall["score"] > 0.9
    shards = sorted((tmp_path / "shards" / "r").glob("*.db"))
    assert len(shards) == 2  # one per host, each a whole store of its episodes
    with Reader(shards) as r:
        assert len(r.episodes("r")) == 400 and len(r.task_specs("r")) == 20


def _host_pids(shards: Path) -> list[int]:
    """The processes of this run's episode hosts: Ray actor processes titled
    ``ray::EpisodeHost`` that hold a shard under ``shards`` open (a host of an earlier run,
    killed but not yet gone, may keep its title)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if not (d / "cmdline").read_bytes().startswith(b"ray::EpisodeHost"):
                continue
            fds = [os.readlink(f) for f in (d / "fd").iterdir()]
        except OSError:
            continue
        if any(f.startswith(str(shards)) for f in fds):
            pids.append(int(d.name))
    return pids


def test_a_killed_host_loses_no_episode(cluster: str, one_process: Path,
                                        tmp_path: Path) -> None:
    """A host's process is killed mid-run: Ray restarts it, the batch it was running is
    recorded as lost attempts and runs again; every pair ends completed once."""
    db = tmp_path / "ray.db"
    killed: list[int] = []
    done = [0, 0]  # episodes done, and done at the last kill

    def lost_yet() -> bool:
        with sqlite3.connect(db) as c:
            return bool(c.execute("SELECT count(*) FROM episodes WHERE status = 'failed'")
                        .fetchone()[0])

    def on_done(_: object) -> None:
        # A host killed between its batches (every one of them back already) loses nothing:
        # then kill again, 40 episodes later, up to three times.
        done[0] += 1
        if len(killed) < 3 and (not killed or (done[0] - done[1] >= 40 and not lost_yet())):
            pids = _host_pids(tmp_path / "shards")
            assert pids, "no episode host process found"
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
            done[1] = done[0]
            print(f"killed episode host process {pids[0]} after {done[0]} episodes",
                  flush=True)

    result = run(RunConfig(tasks=[TASKS], db=db, run_id="r", trials=TRIALS, ray=cluster,
                           hosts=2, concurrency=16, shard_dir=str(tmp_path / "shards")),
                 on_done=on_done)
    assert killed
    pairs = _pairs(db, "r")
    assert len(pairs) == 400
    finals = {k: [a for a in v if a[0] == "completed"] for k, v in pairs.items()}
    assert all(len(f) == 1 for f in finals.values())  # completed exactly once
    lost = [a for v in pairs.values() for a in v if a[0] != "completed"]
    assert lost, f"killing {killed} lost no attempt"
    assert all(a[0] == "failed" and a[2] == "runtime" for a in lost)
    with Reader(db) as r:
        reasons = {e.failure for e in r.episodes("r", status="failed")}
        assert all("died" in (x or "") for x in reasons)
        assert r.runs()[0]["status"] == "finished"
    theirs = _pairs(one_process, "r")
    assert {k: f[0][1] for k, f in finals.items()} == {k: v[0][1] for k, v in theirs.items()}
    assert result.overall["episodes"] == 400
    # every shard, the dead host's included, merges into the run's store without a conflict:
    # an attempt recorded as lost that its host had finished is replaced by its copy
    stats = merge_stores([tmp_path / "shards" / "r"], db)
    assert stats.episodes_added == 0 and stats.shards >= 3
    with Reader(db) as r:
        assert len(r.scheduled_episodes("r")) == 400


def test_ray_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError, match=r"hosts: .* give ray too"):
        RunConfig(tasks=[TASKS], hosts=2)
    with pytest.raises(RunConfigError, match=r"ray: .*use hosts, not processes"):
        RunConfig(tasks=[TASKS], ray="auto", processes=2)


def test_a_batch_of_simulations_on_ray_equals_one_in_this_process(cluster: str,
                                                                   tmp_path: Path) -> None:
    """`simulate --seeds N --ray`: each Ray task runs its simulations on its node and sends
    their shards back; the batch ends merged in the store as one run here would, hash for
    hash."""
    from coworkenv.runtime.simbatch import simulate_seeds
    from coworkenv.runtime.simulate import SimulationConfig

    week = ROOT / "examples" / "simulations" / "week.yaml"
    here = simulate_seeds(SimulationConfig(week, days=1, db=tmp_path / "here.db",
                                           run_id="b"), range(1, 5))
    there = simulate_seeds(SimulationConfig(week, days=1, db=tmp_path / "ray.db", run_id="b"),
                           range(1, 5), ray=cluster, concurrency=2)
    assert [(r.run_id, r.events_hash, r.state_hash) for r in there.runs] == \
        [(r.run_id, r.events_hash, r.state_hash) for r in here.runs]
    assert len({r.events_hash for r in there.runs}) == 4  # (four draws of the workload)
    with Reader(tmp_path / "ray.db") as r:
        assert {x["run_id"]: x["status"] for x in r.runs()} == {
            f"b-s{s}": "finished" for s in range(1, 5)}
        graded = len(r.scheduled_episodes("b-s1"))
    assert graded == len(there.runs[0].outcomes) > 40
    assert not (tmp_path / "ray.db.seeds").exists()  # (the shards merged, then gone)
