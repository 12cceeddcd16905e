"""The single writer: one connection per database file, fed by a bounded queue, batched commits."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
import anyio
import orjson
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._records import INSERT_EVENT, INSERT_EVENTS_JSON, EventRecord
from ._schema import PRAGMAS, migrate
from .errors import SchemaError, StoreClosedError


@dataclass(frozen=True, slots=True)
class WriterSettings:
    batch_size: int = 5000
    """Commit once this many rows are waiting."""
    flush_interval: float = 0.05
    """Commit at least this often (seconds) while rows are waiting."""
    queue_size: int = 50_000
    """Bound of the write queue; appenders wait when it is full (backpressure)."""


@dataclass(slots=True)
class WriterStatistics:
    queued: int
    max_queue: int
    batches: int
    rows: int
    commit_seconds: float


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = anyio.Event()


_Item = tuple[str, Any] | _Flush


def resolve_path(path: str | Path) -> tuple[str, bool]:
    """Return the sqlite connect string and whether it is a URI."""
    if str(path) == ":memory:":
        return f"file:coworkenv-{uuid.uuid4().hex}?mode=memory&cache=shared", True
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return str(p), False


class EventStore:
    """Append-only event log and episode records in one SQLite file.

    Use as ``async with EventStore(path) as store:``. Every write goes through one bounded
    queue to one connection; rows are committed in batches (by size and by time). A crash
    loses at most the batch not yet committed; a completed episode is recorded after its
    events in the same queue, so it is never committed without them.
    """

    def __init__(self, path: str | Path = "runs/coworkenv.db",
                 settings: WriterSettings | None = None) -> None:
        self.path = str(path)
        self.settings = settings or WriterSettings()
        self.target, self.uri = resolve_path(path)
        self._keeper: sqlite3.Connection | None = None
        self._conn: aiosqlite.Connection | None = None
        self._send: MemoryObjectSendStream[_Item] | None = None
        self._recv: MemoryObjectReceiveStream[_Item] | None = None
        self._tg: TaskGroup | None = None
        self._error: BaseException | None = None
        self._batches = 0
        self._rows = 0
        self._commit_seconds = 0.0
        self._max_queue = 0

    # lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> EventStore:
        self._keeper = sqlite3.connect(self.target, uri=self.uri, isolation_level=None,
                                       check_same_thread=False)
        try:
            for pragma in PRAGMAS:
                self._keeper.execute(pragma)
            migrate(self._keeper, self.path)
        except sqlite3.DatabaseError as exc:  # (another kind of file: say so, with the path)
            self._keeper.close()
            self._keeper = None
            raise SchemaError(f"{self.path}: not an SQLite database ({exc}); give another "
                              "file") from None
        if not self.uri:  # a file needs no keeper; a shared memory database does
            self._keeper.close()
            self._keeper = None
        self._conn = await aiosqlite.connect(self.target, uri=self.uri, isolation_level=None)
        for pragma in PRAGMAS:
            await self._conn.execute(pragma)
        self._send, self._recv = anyio.create_memory_object_stream[_Item](
            self.settings.queue_size)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run, name=f"store-writer:{self.path}")
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            if self._send is not None:
                await self._send.aclose()  # the writer drains what is queued, then stops
            assert self._tg is not None
            await self._tg.__aexit__(et, ev, tb)
        finally:
            if self._conn is not None:
                await self._conn.close()
            self._conn = None
            self._send = None
        if self._error is not None and et is None:
            raise StoreClosedError(f"{self.path}: the writer failed") from self._error

    def close_memory(self) -> None:
        """Drop a ``:memory:`` database (its data lives while the store or a reader holds it)."""
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None

    # writes ----------------------------------------------------------------------------
    async def _put(self, item: _Item) -> None:
        if self._send is None or self._error is not None:
            raise StoreClosedError(f"{self.path}: store is closed") from self._error
        try:
            # no checkpoint while the queue has room: a yield per event would cost more than
            # the insert itself; when it is full, the appender waits (backpressure)
            self._send.send_nowait(item)
        except anyio.WouldBlock:
            try:
                await self._send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise StoreClosedError(f"{self.path}: the writer stopped") from self._error
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise StoreClosedError(f"{self.path}: the writer stopped") from self._error

    async def append(self, event: EventRecord) -> None:
        await self._put(("r", (INSERT_EVENT, event.row())))

    async def append_many(self, events: list[EventRecord]) -> None:
        if events:
            await self._put(("m", (INSERT_EVENT, [e.row() for e in events])))

    async def append_rows(self, rows: list[tuple[Any, ...]]) -> None:
        """Events as rows, as :meth:`EventRecord.row` makes them (episode_id, seq, sim_time,
        wall_time, actor, kind, payload JSON text): for a producer that encoded the payload
        already and keeps no record of its own."""
        if rows:
            await self._put(("m", (INSERT_EVENT, rows)))

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Queue one write statement (ordered with the events around it)."""
        await self._put(("r", (sql, params)))

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            await self._put(("m", (sql, rows)))

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed."""
        marker = _Flush()
        await self._put(marker)
        await marker.done.wait()
        if self._error is not None:
            raise StoreClosedError(f"{self.path}: the writer failed") from self._error

    def statistics(self) -> WriterStatistics:
        queued = self._send.statistics().current_buffer_used if self._send else 0
        return WriterStatistics(queued, self._max_queue, self._batches, self._rows,
                                self._commit_seconds)

    # episode records -------------------------------------------------------------------
    async def create_run(self, run_id: str, agent: str, config: dict[str, Any]) -> None:
        await self.execute(
            "INSERT INTO runs (run_id, created_at, agent, config) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(run_id) DO UPDATE SET status='running'",
            (run_id, time.time(), agent, json.dumps(config, sort_keys=True)))

    async def finish_run(self, run_id: str, status: str = "finished") -> None:
        await self.execute("UPDATE runs SET status=? WHERE run_id=?", (status, run_id))

    async def start_episode(self, *, episode_id: str, run_id: str, task_id: str, family: str,
                            trial: int, attempt: int, seed: int, agent: str,
                            role: str = "student") -> None:
        await self.execute(
            "INSERT INTO episodes (episode_id, run_id, task_id, family, trial, attempt, seed, "
            "agent, role, status, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
            (episode_id, run_id, task_id, family, trial, attempt, seed, agent, role, time.time()))

    async def finish_episode(self, episode_id: str, *, status: str, sim_time: float, turns: int,
                             termination: str, completion: float | None, event_count: int,
                             events_hash: str, state_hash: str,
                             failure_boundary: str | None = None, failure: str | None = None,
                             outcome: dict[str, Any] | None = None) -> None:
        await self.execute(
            "UPDATE episodes SET status=?, finished_at=?, sim_time=?, turns=?, termination=?, "
            "completion=?, event_count=?, events_hash=?, state_hash=?, failure_boundary=?, "
            "failure=?, outcome=? WHERE episode_id=?",
            (status, time.time(), sim_time, turns, termination, completion, event_count,
             events_hash, state_hash, failure_boundary, failure,
             json.dumps(outcome or {}, sort_keys=True), episode_id))

    async def save_grade(self, episode_id: str, *, completion: float, safety: float,
                         robustness: float, score: float, passed: bool, detail: dict[str, Any],
                         checks: list[tuple[str, str, float, bool, str, list[int]]]) -> None:
        """Write (or replace) an episode's grade and its check results."""
        await self.execute("DELETE FROM check_results WHERE episode_id=?", (episode_id,))
        await self.executemany(
            "INSERT INTO check_results (episode_id, check_id, kind, weight, passed, detail, "
            "evidence) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(episode_id, cid, kind, weight, int(ok), text, json.dumps(ev))
             for cid, kind, weight, ok, text, ev in checks])
        await self.execute(
            "INSERT OR REPLACE INTO grades (episode_id, completion, safety, robustness, score, "
            "passed, detail, graded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (episode_id, completion, safety, robustness, score, int(passed),
             json.dumps(detail, sort_keys=True), time.time()))

    async def save_tasks(self, run_id: str, tasks: list[tuple[str, str, list[str], str]]) -> None:
        """The task specs a run used: (task_id, family, capabilities, spec JSON)."""
        await self.executemany(
            "INSERT OR REPLACE INTO tasks (run_id, task_id, family, capabilities, spec) "
            "VALUES (?, ?, ?, ?, ?)",
            [(run_id, tid, fam, json.dumps(caps), spec) for tid, fam, caps, spec in tasks])

    async def abort_running(self, run_id: str) -> None:
        """Mark episodes left 'running' by a crash as aborted (they are not counted)."""
        await self.execute(
            "UPDATE episodes SET status='aborted', termination='aborted' "
            "WHERE run_id=? AND status='running'", (run_id,))

    # the writer task -------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._recv is not None
        assert self._conn is not None
        recv, conn, settings = self._recv, self._conn, self.settings
        batch: list[_Item] = []
        try:
            async with recv:
                while True:
                    first = await _receive(recv, None)
                    if first is None:
                        return
                    batch = [first]
                    rows = _size(first)
                    deadline = anyio.current_time() + settings.flush_interval
                    while rows < settings.batch_size and not isinstance(batch[-1], _Flush):
                        item = await _receive(recv, deadline)
                        if item is None:
                            break
                        batch.append(item)
                        rows += _size(item)
                    self._max_queue = max(self._max_queue,
                                          recv.statistics().current_buffer_used + len(batch))
                    await self._commit(conn, batch)
                    batch = []
        except Exception as exc:  # recorded; every later write and close() reports it
            self._error = exc
        finally:
            for item in batch:  # never leave a flush() waiting on a dead writer
                if isinstance(item, _Flush):
                    item.done.set()

    async def _commit(self, conn: aiosqlite.Connection, batch: list[_Item]) -> None:
        t0 = time.perf_counter()
        flushes = [i for i in batch if isinstance(i, _Flush)]
        writes = [i for i in batch if not isinstance(i, _Flush)]
        if writes:
            # One hop to aiosqlite's connection thread per batch: the whole transaction runs
            # there, so the event loop keeps producing while SQLite writes.
            run = conn._execute  # aiosqlite's own hop to its connection thread
            n: int = await run(_write_batch, conn._conn, writes)  # type: ignore[no-untyped-call]
            self._batches += 1
            self._rows += n
        self._commit_seconds += time.perf_counter() - t0
        for f in flushes:
            f.done.set()


def _write_batch(db: sqlite3.Connection, writes: list[tuple[str, Any]]) -> int:
    """Run in the connection's thread: one transaction for the batch."""
    n = 0
    sql_run: str | None = None
    rows: list[Any] = []
    # IMMEDIATE: take the write lock up front, so that writers in other processes sharing
    # the file queue on busy_timeout instead of failing on a stale read snapshot
    db.execute("BEGIN IMMEDIATE")
    try:
        for kind, (sql, data) in writes:
            if sql != sql_run and sql_run is not None:
                _executemany(db, sql_run, rows)
                n += len(rows)
                rows = []
            sql_run = sql
            if kind == "r":
                rows.append(data)
            else:
                rows.extend(data)
        if sql_run is not None:
            _executemany(db, sql_run, rows)
            n += len(rows)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return n


def _executemany(db: sqlite3.Connection, sql: str, rows: list[Any]) -> None:
    if sql == INSERT_EVENT:
        blob = _rows_json(rows)
        if blob is not None:
            db.execute(INSERT_EVENTS_JSON, (blob,))
            return
    db.executemany(sql, rows)


def _rows_json(rows: list[Any]) -> str | None:
    """The rows as one JSON array (text: SQLite would read a BLOB as binary JSON), or None
    where that would not carry them exactly: data that is not plain JSON, or a NUL character,
    at which SQLite's ``->>`` cuts text."""
    try:
        blob = orjson.dumps(rows).decode()
    except (TypeError, orjson.JSONEncodeError):
        return None
    return None if "\\u0000" in blob else blob


async def _receive(recv: MemoryObjectReceiveStream[_Item], deadline: float | None) -> _Item | None:
    """The next item; None at end of stream or once ``deadline`` has passed."""
    try:
        return recv.receive_nowait()
    except anyio.WouldBlock:
        pass
    except anyio.EndOfStream:
        return None
    if deadline is None:
        try:
            return await recv.receive()
        except anyio.EndOfStream:
            return None
    with anyio.move_on_after(deadline - anyio.current_time()):
        try:
            return await recv.receive()
        except anyio.EndOfStream:
            return None
    return None


def _size(item: _Item) -> int:
    if isinstance(item, _Flush):
        return 0
    kind, (_, data) = item
    return len(data) if kind == "m" else 1
