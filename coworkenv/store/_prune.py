"""Deleting runs from a store: every row of a run, in every table, in one transaction.

A run's rows: its ``runs`` row, its task specs (``tasks``) and lease (``leases``), its
``episodes``, and each episode's ``events``, ``projection``, ``check_results`` and
``grades``. A run whose lease a live runner holds is refused (deleting its lease also stops
a paused runner at its next commit: the lease is its fencing token).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ._lease import live_holder
from ._merge import writable_store
from .errors import LeaseHeldError, NotFoundError

EPISODE_TABLES = ("events", "projection", "check_results", "grades")
"""The tables keyed by episode id (deleted with the run's episodes)."""
RUN_TABLES = ("episodes", "tasks", "leases", "runs")
"""The tables keyed by run id (deleted after its episodes' rows)."""


def delete_runs(path: str | Path, run_ids: Sequence[str], *, dry_run: bool = False,
                vacuum: bool = False) -> dict[str, dict[str, int]]:
    """Delete the runs ``run_ids`` (whole ids) from the store file ``path``; return the rows
    deleted per run and table. All or nothing: a run that is not in the store
    (:class:`NotFoundError`) or that a live runner holds (:class:`LeaseHeldError`) leaves
    the store as it was. ``dry_run``: count, then roll back. ``vacuum``: then rewrite the
    file to give the freed pages back (SQLite's ``VACUUM``)."""
    p = Path(path)
    if not p.is_file():
        raise NotFoundError(f"{p}: no such file")
    counts: dict[str, dict[str, int]] = {}
    with writable_store(p) as conn:
        conn.execute("BEGIN IMMEDIATE")  # (no runner takes a lease while this looks)
        try:
            for run_id in dict.fromkeys(run_ids):
                counts[run_id] = _delete_run(conn, run_id, str(p))
            conn.execute("ROLLBACK" if dry_run else "COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if vacuum and not dry_run:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return counts


def _delete_run(conn: sqlite3.Connection, run_id: str, where: str) -> dict[str, int]:
    if conn.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone() is None:
        raise NotFoundError(f"{where}: no run {run_id!r}")
    holder = live_holder(conn, run_id)
    if holder is not None:
        raise LeaseHeldError(f"run {run_id!r} is being run by {holder}; stop it (or let it "
                             "finish) before deleting it")
    counts = {}
    ours = ("episode_id IN (SELECT episode_id FROM episodes WHERE run_id=?)", (run_id,))
    strays = ("episode_id >= ? AND episode_id < ? AND episode_id NOT IN (SELECT episode_id "
              "FROM episodes)", (f"{run_id}:", f"{run_id};"))
    for table in EPISODE_TABLES:  # the run's episodes', and any under its id with no episode row
        if table == "events":  # (a view: its rows, as every reader sees them, counted; its
            # stored rows and shared prefixes deleted)
            counts[table] = sum(conn.execute(f"SELECT count(*) FROM events WHERE {where}",
                                             args).fetchone()[0] for where, args in (ours, strays))
            for base in ("event_prefixes", "event_rows"):
                for where, args in (ours, strays):
                    conn.execute(f"DELETE FROM {base} WHERE {where}", args)
            continue
        counts[table] = sum(conn.execute(f"DELETE FROM {table} WHERE {where}", args).rowcount
                            for where, args in (ours, strays))
    for table in RUN_TABLES:
        counts[table] = conn.execute(f"DELETE FROM {table} WHERE run_id=?", (run_id,)).rowcount
    return counts
