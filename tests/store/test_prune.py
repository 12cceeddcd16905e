"""Deleting runs (:func:`delete_runs`): all or nothing, and a fenced writer whose run was
deleted under it (paused past its lease) writes nothing more."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coworkenv.store import (
    EventRecord,
    EventStore,
    LeaseHeldError,
    NotFoundError,
    RunLease,
    StoreClosedError,
    delete_runs,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _record(store: EventStore, run_id: str, seqs: range) -> None:
    await store.create_run(run_id, "oracle", {})
    for seq in seqs:
        await store.append(EventRecord(episode_id=f"{run_id}:t:0:0", seq=seq, sim_time=seq,
                                       wall_time=0.0, actor="agent", kind="k", payload={}))
    await store.flush()


def _events(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as c:
        return dict(c.execute(
            "SELECT substr(episode_id, 1, instr(episode_id, ':') - 1), count(*) FROM events "
            "GROUP BY 1"))


async def test_all_or_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with EventStore(db) as store:
        await _record(store, "a", range(3))
        await _record(store, "b", range(2))
    with pytest.raises(NotFoundError, match="no run 'nope'"):
        delete_runs(db, ["a", "nope"])
    assert _events(db) == {"a": 3, "b": 2}
    assert delete_runs(db, ["a"], dry_run=True)["a"]["runs"] == 1
    assert _events(db) == {"a": 3, "b": 2}
    with RunLease(db, "b"), pytest.raises(LeaseHeldError, match="is being run by process"):
        delete_runs(db, ["a", "b"])
    assert _events(db) == {"a": 3, "b": 2}
    assert delete_runs(db, ["a"])["a"]["events"] == 3
    assert _events(db) == {"b": 2}
    with pytest.raises(NotFoundError, match="no such file"):
        delete_runs(tmp_path / "none.db", ["a"])
    assert not (tmp_path / "none.db").exists()


async def test_a_paused_runner_whose_run_was_deleted_writes_nothing_more(
        tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with EventStore(db) as store:
        await _record(store, "r", range(2))
    lease = RunLease(db, "r")
    lease.acquire(heartbeat=False)
    store = EventStore(db, fence=("r", lease.owner))
    with pytest.raises(StoreClosedError, match="the writer failed"):  # (and on leaving)
        async with store:
            await store.append(EventRecord(episode_id="r:t:0:0", seq=2, sim_time=2.0,
                                           wall_time=0.0, actor="agent", kind="k", payload={}))
            await store.flush()  # (its lease: committed)
            with sqlite3.connect(db) as c:  # paused past the lease's time: its heartbeat stale
                c.execute("UPDATE leases SET heartbeat = 0")
            assert delete_runs(db, ["r"])["r"] == {"events": 3, "projection": 0,
                                                   "check_results": 0, "grades": 0,
                                                   "episodes": 0, "tasks": 0, "leases": 1,
                                                   "runs": 1}
            await store.append(EventRecord(episode_id="r:t:0:0", seq=3, sim_time=3.0,
                                           wall_time=0.0, actor="agent", kind="k",
                                           payload={}))
            with pytest.raises(StoreClosedError):
                await store.flush()
    assert "lost its lease" in str(store.failure)
    lease.release()
    assert _events(db) == {}
