"""Store contract, run against a ``:memory:`` store and a file store."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv.store import (
    SCHEMA_VERSION,
    EventRecord,
    EventStore,
    Reader,
    SchemaError,
    StoreClosedError,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=[":memory:", "file"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    path = ":memory:" if request.param == ":memory:" else tmp_path / "s.db"
    async with EventStore(path) as s:
        yield s
    s.close_memory()


async def _episode(store: EventStore, eid: str, n: int) -> list[EventRecord]:
    await store.create_run("r1", "oracle", {"k": 1})
    await store.start_episode(episode_id=eid, run_id="r1", task_id="t1", family="f", trial=0,
                              attempt=0, seed=7, agent="oracle")
    evs = [EventRecord(eid, i, i * 1.5, 1000.0 + i, "agent", "tool_call",
                       {"i": i, "text": "héllo \"quoted\"", "nested": {"a": [1, None, True]}})
           for i in range(n)]
    await store.append_many(evs[: n // 2])
    for ev in evs[n // 2 :]:
        await store.append(ev)
    return evs


async def test_round_trip(store: EventStore) -> None:
    evs = await _episode(store, "e1", 50)
    await store.finish_episode("e1", status="completed", sim_time=73.5, turns=4,
                               termination="agent_finished", completion=1.0, event_count=50,
                               events_hash="h", state_hash="s", outcome={"x": 1})
    await store.flush()
    with Reader(store) as r:
        assert list(r.events("e1")) == evs
        assert list(r.events("e1", upto=9)) == evs[:10]
        ep = r.episode("e1")
        assert (ep.status, ep.turns, ep.completion, ep.seed, ep.outcome) == (
            "completed", 4, 1.0, 7, {"x": 1})
        assert r.runs()[0]["config"] == {"k": 1}
        assert r.completed_trials("r1") == {("t1", 0)}
        assert r.next_attempt("r1", "t1", 0) == 1


async def test_readers_cannot_write(store: EventStore) -> None:
    await _episode(store, "e1", 3)
    await store.flush()
    with Reader(store) as r, pytest.raises(sqlite3.OperationalError):
        r.conn.execute("DELETE FROM events")


async def test_duplicate_seq_is_refused_and_reported(tmp_path: Path) -> None:
    with pytest.raises(StoreClosedError, match="writer failed"):  # raised again on close
        async with EventStore(tmp_path / "d.db") as store:
            await _episode(store, "e1", 3)
            await store.append(EventRecord("e1", 0, 0.0, 0.0, "a", "k", {}))
            with pytest.raises(StoreClosedError):
                await store.flush()
            with pytest.raises(StoreClosedError):
                await store.append(EventRecord("e1", 9, 0.0, 0.0, "a", "k", {}))


async def _committed(s: EventStore, eid: str, n: int, within: float) -> bool:
    import anyio

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with Reader(s) as r:
            if r.event_count(eid) >= n:
                return True
        await anyio.sleep(0.01)
    return False


async def test_batches_by_size_and_time(tmp_path: Path) -> None:
    from coworkenv.store import WriterSettings

    # full batches are committed at once, without waiting for the (here: an hour's)
    # interval, and no batch is larger than batch_size (what a crash can lose)
    async with EventStore(tmp_path / "b.db", WriterSettings(batch_size=100,
                                                             flush_interval=3600)) as s:
        await _episode(s, "e1", 250)  # 252 rows: the run, the episode, 250 events
        assert await _committed(s, "e1", 198, within=10), "a full batch waited for the interval"
        stats = s.statistics()
        assert (stats.batches, stats.rows, stats.queued) == (2, 200, 52)
    # a lone event is committed by time, without flush()
    async with EventStore(tmp_path / "t.db", WriterSettings(flush_interval=0.01)) as s:
        await _episode(s, "e1", 3)
        await s.append(EventRecord("e1", 3, 0.0, 0.0, "a", "k", {}))
        assert await _committed(s, "e1", 4, within=5), "a lone event was not committed by time"
        assert s.statistics().queued == 0


async def test_appenders_wait_while_the_bound_is_reached(tmp_path: Path) -> None:
    """Backpressure: the rows waiting to be written never pass the bound by more than one
    call's rows, and every row arrives, in order."""
    from coworkenv.store import WriterSettings

    async with EventStore(tmp_path / "q.db", WriterSettings(batch_size=50, queue_size=200,
                                                             flush_interval=0.001)) as s:
        await _episode(s, "e1", 0)  # (the run and the episode; no events yet)
        peak = 0
        for i in range(3000):
            await s.append(EventRecord("e1", i, 0.0, 0.0, "a", "k", {"i": i}))
            peak = max(peak, s.statistics().queued)
        await s.flush()
        assert peak <= 200 and s.statistics().max_queue <= 200
        with Reader(s) as r:
            assert [e.payload["i"] for e in r.events("e1")] == list(range(3000))


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(SchemaError, match="schema version 99"):
        Reader(db)

    async def open_writer() -> None:
        async with EventStore(db):
            pass

    import anyio

    with pytest.raises(SchemaError, match="newer than this coworkenv"):
        anyio.run(open_writer)


async def test_migrations_are_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with EventStore(db) as s:
        await _episode(s, "e1", 5)
    async with EventStore(db) as s:
        await s.flush()
    with Reader(db) as r:
        assert r.event_count("e1") == 5



def test_version_2_events_are_carried_into_the_rowid_table(tmp_path: Path) -> None:
    """A store written by schema 2 (events keyed without rowid) opens as schema 3 with every
    event kept, in order, and duplicates of (episode, seq) still refused."""
    from coworkenv.store._schema import MIGRATIONS, _statements

    db = tmp_path / "v2.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for version in (0, 1):
        for statement in _statements(MIGRATIONS[version]):
            conn.execute(statement)
    conn.execute("PRAGMA user_version=2")
    conn.executemany("INSERT INTO events VALUES (?, ?, 0.0, 0.0, 'kernel', 'k', ?)",
                     [(f"e{i % 3}", i // 3, f'{{"i": {i}}}') for i in range(30)])
    conn.close()

    async def open_writer() -> None:
        async with EventStore(db):
            pass

    import anyio

    anyio.run(open_writer)
    with Reader(db) as r:
        assert r.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        assert [e.payload["i"] for e in r.events("e1")] == list(range(1, 30, 3))
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO events VALUES ('e1', 0, 0.0, 0.0, 'kernel', 'k', '{}')")
    conn.close()


def test_processes_opening_a_new_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    db = tmp_path / "race.db"
    code = ("import sys, anyio\nfrom coworkenv.store import EventStore\n"
            "async def main():\n    async with EventStore(sys.argv[1]):\n        pass\n"
            "anyio.run(main)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(db)], stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    with Reader(db) as r:
        assert r.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


WRITER = textwrap.dedent("""
    import sys, anyio
    from coworkenv.store import EventRecord, EventStore, WriterSettings

    async def main():
        async with EventStore(sys.argv[1], WriterSettings(batch_size=500,
                                                          flush_interval=0.005)) as s:
            await s.create_run("r", "x", {})
            ep = 0
            while True:
                eid = f"e{ep}"
                n = 40 + ep % 17
                await s.start_episode(episode_id=eid, run_id="r", task_id=f"t{ep}",
                                      family="f", trial=0, attempt=0, seed=0, agent="x")
                for i in range(n):
                    await s.append(EventRecord(eid, i, float(i), 0.0, "a", "k", {"i": i}))
                await s.finish_episode(eid, status="completed", sim_time=1.0, turns=1,
                                       termination="done", completion=1.0, event_count=n,
                                       events_hash="", state_hash="")
                if ep == 20:
                    print("ready", flush=True)
                ep += 1
                if ep % 10 == 0:
                    await anyio.sleep(0)

    anyio.run(main)
""")


@pytest.mark.slow
def test_sigkill_mid_stream_keeps_completed_episodes_whole(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    completed = conn.execute(
        "SELECT episode_id, event_count FROM episodes WHERE status='completed'").fetchall()
    assert len(completed) > 20
    for eid, n in completed:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM events WHERE episode_id=? "
                                           "ORDER BY seq", (eid,))]
        assert seqs == list(range(n)), eid  # whole, dense, no duplicates
    dupes = conn.execute("SELECT count(*) FROM (SELECT episode_id, seq FROM events "
                         "GROUP BY 1, 2 HAVING count(*) > 1)").fetchone()[0]
    assert dupes == 0
    # the file is still a working store
    with Reader(db) as r:
        assert r.latest_run() == "r"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.text(max_size=20),
                          st.dictionaries(st.text(max_size=5),
                                          st.one_of(st.integers(-10**9, 10**9), st.text(max_size=10),
                                                    st.booleans(), st.none()), max_size=4)),
                max_size=30))
def test_property_round_trip(tmp_path_factory: pytest.TempPathFactory,
                             rows: list[tuple[int, str, dict[str, object]]]) -> None:
    import anyio

    db = tmp_path_factory.mktemp("p") / "p.db"
    evs = [EventRecord("e", i, float(t), 0.0, actor, "k", payload)
           for i, (t, actor, payload) in enumerate(rows)]

    async def go() -> None:
        async with EventStore(db) as s:
            await s.append_many(evs)

    anyio.run(go)
    with Reader(db) as r:
        assert list(r.events("e")) == evs


@pytest.mark.parametrize("payload", [
    {"b": 1, "a": [1.5, "é", None, True], "c": {"z": 0.1, "y": -3}},
    {"nan": float("nan"), "inf": [float("inf")]},  # orjson would write null
    {"big": 2 ** 70},  # beyond orjson's 64 bits
    {"m": {2: "b", 1: "a"}},  # keys that are not strings
    {"nul": "a\x00b", "ctl": "\n\t\u2028"},
])
def test_canonical_payload_text_is_the_standard_librarys(payload: dict[Any, Any]) -> None:
    import json

    from coworkenv.store._records import encode_payload

    assert encode_payload(payload) == json.dumps(payload, separators=(",", ":"), sort_keys=True,
                                                 ensure_ascii=False)


def test_another_kind_of_file_is_refused_with_its_path(tmp_path: Path) -> None:
    """A store opened on a file that is not SQLite says so, with the path, and leaves the file
    as it was (no raw sqlite3 error)."""
    import anyio

    from coworkenv.store import EventStore, SchemaError

    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 100)

    async def main() -> None:
        async with EventStore(notes):
            pass

    with pytest.raises(SchemaError, match=rf"^{re.escape(str(notes))}: not an SQLite database"):
        anyio.run(main)
    assert notes.read_text() == "not a database\n" * 100


@pytest.mark.parametrize("n", [1, 2, 31, 63, 64, 65, 127, 200])
def test_batched_inserts_match_executemany_row_for_row(n: int) -> None:
    """The writer inserts a plain ``INSERT ... VALUES`` as statements of many rows: the table
    ends as ``executemany`` leaves it, in order and with conflicts resolved row by row (a
    later row replaces an earlier one of the same key, in the same statement too)."""
    from coworkenv.store._writer import _executemany

    sql = "INSERT OR REPLACE INTO t (k, v, f, b) VALUES (?, ?, ?, ?)"
    rows = [(i % 50, f"v{i}\x00é", i / 3, None if i % 7 else b"\x00\x01") for i in range(n)]
    got, want = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for c in (got, want):
        c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT, f REAL, b BLOB)")
    _executemany(got, sql, rows)
    want.executemany(sql, rows)
    table = "SELECT rowid, k, v, f, b FROM t ORDER BY rowid"
    assert got.execute(table).fetchall() == want.execute(table).fetchall()
    assert len(got.execute(table).fetchall()) == min(n, 50)


class _Statements(sqlite3.Connection):
    """A connection that keeps the text of every statement run on it."""

    texts: set[str]

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        self.texts.add(sql)
        return super().execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        self.texts.add(sql)
        return super().executemany(sql, *args)


def test_batched_inserts_use_a_few_statement_texts_whatever_the_batch_size() -> None:
    """Every statement text a connection runs stays prepared in its cache: batches of every
    size from 1 to 200 rows use seven texts (64, 32, ..., 1 rows), not one per size (each
    prepared statement of many rows holds tens of KiB)."""
    from coworkenv.store._writer import _executemany

    db = sqlite3.connect(":memory:", factory=_Statements)
    assert isinstance(db, _Statements)
    db.texts = set()
    db.execute("CREATE TABLE t (a, b)")
    db.texts.clear()
    for n in range(1, 201):
        _executemany(db, "INSERT INTO t (a, b) VALUES (?, ?)", [(n, i) for i in range(n)])
    assert db.execute("SELECT count(*) FROM t").fetchone() == (200 * 201 // 2,)
    db.texts.discard("SELECT count(*) FROM t")
    assert sorted(t.count("(?, ?)") for t in db.texts) == [1, 2, 4, 8, 16, 32, 64]


def test_a_row_of_the_wrong_width_fails_in_a_batched_insert() -> None:
    """A row with too few values fails as with ``executemany`` (in one statement of many
    rows it would otherwise take its neighbour's values), and nothing of the batch is kept
    in a transaction rolled back."""
    from coworkenv.store._writer import _executemany

    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE t (a, b)")
    rows: list[tuple[Any, ...]] = [(i, i) for i in range(100)]
    rows[70] = (70,)
    db.execute("BEGIN")
    with pytest.raises(sqlite3.ProgrammingError, match="uses 2, and there are 1 supplied"):
        _executemany(db, "INSERT INTO t (a, b) VALUES (?, ?)", rows)
    db.execute("ROLLBACK")
    assert db.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_the_writer_of_a_file_keeps_a_small_page_cache(tmp_path: Path) -> None:
    """A run's writer appends (each event on its episode's leaf page): on a file it keeps a
    512 KiB page cache, not SQLite's 2 MB; an in-memory store, whose pages live in its
    cache, keeps the default."""

    async def cache(path: str | Path) -> int:
        async with EventStore(path) as store:
            assert store._conn is not None  # (the writer's own connection)
            async with store._conn.execute("PRAGMA cache_size") as cur:
                row = await cur.fetchone()
        assert row is not None
        return int(row[0])

    assert anyio.run(cache, tmp_path / "run.db") == -512
    assert anyio.run(cache, ":memory:") == -2000
