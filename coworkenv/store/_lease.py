"""One runner per run: a lease row in the store, kept alive by a heartbeat.

A runner takes the lease of its run before it plans anything; a second runner on the same
run (a ``--resume`` started while the first still runs, a copy of the command in another
terminal) is refused while the holder's heartbeat is fresh, and takes over once it has gone
stale, or at once when the holder was a process on this host that no longer exists (killed
without releasing it). The heartbeat is a thread with its own
connection, so a busy event loop does not let the lease lapse.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType

from ._schema import PRAGMAS
from .errors import LeaseHeldError

TTL_S = 15.0
"""A lease whose heartbeat is older than this is stale (its holder is presumed dead)."""


def _alive(pid: int, host: str) -> bool:
    """Whether a holder may still be alive: on this host, its process exists; on another,
    only the heartbeat can tell."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process with that pid
    return True


def live_holder(conn: sqlite3.Connection, run_id: str, *, ttl: float = TTL_S,
                owner: str | None = None) -> str | None:
    """Who holds ``run_id``'s lease and is alive ("process P on HOST (alive Ns ago)"), read
    on ``conn``; None when no one does (no lease, a stale heartbeat, a holder on this host that
    no longer exists, or ``owner`` itself)."""
    row = conn.execute("SELECT owner, pid, host, heartbeat FROM leases WHERE run_id=?",
                       (run_id,)).fetchone()
    now = time.time()
    if row is None or row[0] == owner or now - row[3] >= ttl \
            or not _alive(int(row[1]), str(row[2])):
        return None
    return f"process {row[1]} on {row[2]} (alive {now - row[3]:.0f}s ago)"


class RunLease:
    """``with RunLease(db, run_id):`` holds the run for the duration of the block."""

    def __init__(self, db: str | Path, run_id: str, *, ttl: float = TTL_S) -> None:
        self.db, self.run_id, self.ttl = str(db), run_id, ttl
        self.owner = uuid.uuid4().hex
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._held = False
        self.enabled = self.db != ":memory:" and not self.db.startswith("file::memory:")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db, timeout=30, isolation_level=None)
        for p in PRAGMAS:
            conn.execute(p)
        return conn

    def acquire(self, *, heartbeat: bool = True) -> None:
        """Take the lease (or raise :class:`LeaseHeldError`); ``heartbeat=False`` leaves the
        heartbeat thread to :meth:`start_heartbeat` (a process about to fork starts it after,
        so no child inherits a thread caught inside SQLite)."""
        if not self.enabled:
            return
        conn = self._connect()
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # (locked past the 30 s busy timeout)
                raise LeaseHeldError(
                    f"run {self.run_id!r}: {self.db} stayed locked by another process for 30 "
                    f"s ({exc}; a runner paused in the middle of a write holds it); let it "
                    "go on or stop it, then resume the run") from None
            holder = live_holder(conn, self.run_id, ttl=self.ttl, owner=self.owner)
            now = time.time()
            if holder is not None:  # another runner, alive
                conn.execute("ROLLBACK")
                raise LeaseHeldError(f"run {self.run_id!r} is being run by {holder}; wait for "
                                     "it to finish, or stop it, then resume the run")
            conn.execute("INSERT OR REPLACE INTO leases (run_id, owner, pid, host, acquired_at, "
                         "heartbeat) VALUES (?, ?, ?, ?, ?, ?)",
                         (self.run_id, self.owner, os.getpid(), socket.gethostname(), now, now))
            conn.execute("COMMIT")
        finally:
            conn.close()
        self._held = True
        if heartbeat:
            self.start_heartbeat()

    def start_heartbeat(self) -> None:
        if not self.enabled or not self._held or self._beat is not None:
            return
        self._beat = threading.Thread(target=self._heartbeat, daemon=True,
                                      name=f"coworkenv-lease:{self.run_id}")
        self._beat.start()

    def _heartbeat(self) -> None:
        conn = self._connect()
        try:
            while not self._stop.wait(self.ttl / 3):
                # busy for longer than the timeout: try again at the next beat
                with contextlib.suppress(sqlite3.OperationalError):
                    conn.execute("UPDATE leases SET heartbeat=? WHERE run_id=? AND owner=?",
                                 (time.time(), self.run_id, self.owner))
        finally:
            conn.close()

    def release(self) -> None:
        if not self.enabled or not self._held:
            return
        self._held = False
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        conn = self._connect()
        try:
            conn.execute("DELETE FROM leases WHERE run_id=? AND owner=?",
                         (self.run_id, self.owner))
        finally:
            conn.close()

    def __enter__(self) -> RunLease:
        self.acquire()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
