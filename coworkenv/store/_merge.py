"""Shards: store files written apart (one per Ray episode host, one per machine) merged into
one, episode by episode, with each episode's events hash checked before and after.

The rules, per episode id:

- not in the target: copied whole (its row, events, projection, check results, grade);
- in the target with the same events (hash and count): nothing to do, so merging the same
  shard twice changes nothing;
- in the target unfinished (``running`` or ``aborted``: a crash left it), or recorded there
  as lost with no events (a Ray host died before its batch came back), and final in the
  shard: the shard's copy replaces it; final in the target and unfinished in the shard: the
  target keeps its own;
- final in both with different events: refused (:class:`MergeConflictError`), as is any
  shard whose recorded hash does not match its own events.

Runs and task specs are reconciled: one run row per run id (the earliest start; finished
once any copy says so), which must agree on the agent and the configuration; one spec per
(run, task), which must be the same text. A shard is merged in one transaction: a refused
shard leaves the target as it was.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._records import EventsHasher
from ._schema import PRAGMAS, SCHEMA_VERSION, migrate
from .errors import MergeConflictError, NotFoundError, SchemaError

FINAL = ("completed", "failed")
_EVENT_COLS = "episode_id, seq, sim_time, wall_time, actor, kind, payload"
_PREFIX_COLS = "episode_id, source, rows"
_TABLES = {  # per-episode tables other than events, with their columns
    "projection": "episode_id, app, entity_id, data",
    "check_results": "episode_id, check_id, kind, weight, passed, detail, evidence",
    "grades": "episode_id, completion, safety, robustness, score, passed, detail, graded_at",
}
_EPISODE_COLS = ("episode_id, run_id, task_id, family, trial, attempt, seed, agent, role, "
                 "status, started_at, finished_at, sim_time, turns, termination, "
                 "failure_boundary, failure, completion, event_count, events_hash, state_hash, "
                 "outcome")


@dataclass
class MergeStats:
    """What a merge did, shard by shard summed."""

    shards: int = 0
    episodes_added: int = 0
    episodes_replaced: int = 0
    episodes_same: int = 0
    episodes_kept: int = 0
    """Unfinished in the shard, final (or also unfinished) in the target: the target's kept."""
    events_added: int = 0
    runs_added: int = 0
    tasks_added: int = 0
    verified: int = 0
    """Episodes whose events hash, recomputed from the target after the merge, equals the
    hash recorded (and recomputed) in the shard."""
    seconds: float = 0.0
    per_shard: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "shards", "episodes_added", "episodes_replaced", "episodes_same", "episodes_kept",
            "events_added", "runs_added", "tasks_added", "verified", "seconds", "per_shard")}


def blank_store(path: str | Path) -> bool:
    """Whether ``path`` is an SQLite file with no schema at all (version 0, no table): what a
    writer leaves when it is killed between creating its file and committing its schema (a
    Ray episode host killed as it starts). It holds no episode, so there is nothing to read
    or merge in it. Another kind of file is not blank (opening it is what reports it)."""
    try:
        conn = sqlite3.connect(f"file:{Path(path).absolute()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        (tables,) = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return bool(version == 0 and tables == 0)
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def shard_files(sources: Iterable[str | Path]) -> list[Path]:
    """Store files named by ``sources``: files as given, folders as the ``*.db`` files they
    hold (sorted), leaving out blank ones (:func:`blank_store`); a name that is neither is an
    error, as are sources whose files are all blank."""
    out: list[Path] = []
    for s in sources:
        p = Path(s)
        if p.is_dir():
            found = sorted(f for f in p.glob("*.db") if f.is_file())
            if not found:
                raise NotFoundError(f"{p}: a folder with no store file (*.db) in it")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise NotFoundError(f"{p}: no such file or folder")
    named = {Path(s) for s in sources if Path(s).is_file()}
    empty = [p for p in out if p in named and (p.stat().st_size == 0 or blank_store(p))]
    if empty:  # (one named by hand is a mistake to say; blank ones in a folder are skipped)
        raise SchemaError(f"{empty[0]}: an empty store file ("
                          f"{'0 bytes' if empty[0].stat().st_size == 0 else 'no schema'}), "
                          "nothing to read or merge; leave it out")
    blank = [p for p in out if blank_store(p)]
    if blank and len(blank) == len(out):
        raise NotFoundError(f"{', '.join(map(str, blank))}: blank store file(s), nothing to "
                            "read (no schema: their writers stopped before writing one)")
    out = [p for p in out if p not in blank]
    seen: set[Path] = set()
    unique = []
    for p in out:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            unique.append(p)
    return unique


def check_integrity(conn: sqlite3.Connection, where: str, schema: str = "main") -> None:
    """SQLite's ``PRAGMA quick_check`` of an open store: a damaged file (pages overwritten,
    cut short) is a :class:`SchemaError` naming it and SQLite's first finding."""
    try:
        found = [r[0] for r in conn.execute(f"PRAGMA {schema}.quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        found = [str(exc)]
    if found != ["ok"]:
        said = [x.strip() for f in found for x in str(f).splitlines()
                if x.strip() and not x.startswith("***")] or ["quick_check failed"]
        raise SchemaError(f"{where}: damaged ({said[0]}); it cannot be read or merged as it "
                          "is (`sqlite3 FILE .recover` may save what is left)")


def open_shard(path: str | Path) -> sqlite3.Connection:
    """A read-only connection to a shard of this schema version, integrity checked."""
    p = Path(path)
    conn = sqlite3.connect(f"file:{p.absolute()}?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA query_only=ON")
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise SchemaError(f"{p}: not an SQLite database ({exc})") from None
    try:
        check_integrity(conn, str(p))
    except SchemaError:
        conn.close()
        raise
    if version != SCHEMA_VERSION:
        conn.close()
        raise SchemaError(f"{p}: schema version {version}; merging needs version "
                          f"{SCHEMA_VERSION} (open it once with `coworkenv run --resume` or "
                          "this coworkenv's EventStore to migrate it)")
    return conn


def merge_stores(shards: Sequence[str | Path], into: str | Path) -> MergeStats:
    """Merge store files (or folders of them) into ``into`` (created if missing). All or
    nothing: every shard is opened and integrity checked before anything is written, and the
    shards are merged in one transaction, so a damaged or conflicting shard anywhere in the
    list leaves the target as it was."""
    files = shard_files(shards)
    target = Path(into)
    for f in files:
        if target.exists() and f.resolve() == target.resolve():
            raise MergeConflictError(f"{f}: is the target itself; name another file with "
                                     "into")
    sources = []
    try:
        for f in files:
            sources.append(open_shard(f))
        stats = MergeStats()
        start = time.perf_counter()
        with writable_store(target) as dst, _transaction(dst):
            for f, src in zip(files, sources, strict=True):
                try:
                    merge_connection(src, dst, str(f), str(target), stats, transaction=False)
                except sqlite3.DatabaseError as exc:
                    raise SchemaError(f"{f}: cannot be read ({exc})") from None
    finally:
        for src in sources:
            src.close()
    stats.seconds = time.perf_counter() - start
    return stats


def verify_shard(path: str | Path) -> int:
    """Check a store file as :func:`merge_stores` checks a shard while it copies it: every
    final episode's events hash to the hash it records (:class:`MergeConflictError`
    otherwise); the episodes checked. Made where the shard was written (each process of a
    batch its own, beside the others), it lets :func:`adopt_shards` copy it without reading
    its rows."""
    conn = open_shard(path)
    try:
        recorded = {eid: digest for eid, status, digest in conn.execute(
            "SELECT episode_id, status, events_hash FROM episodes") if status in FINAL and digest}
        hashers: dict[str, EventsHasher] = {}
        for eid, seq, t, actor, kind, text in conn.execute(
                "SELECT episode_id, seq, sim_time, actor, kind, payload FROM events "
                "ORDER BY episode_id, seq"):
            h = hashers.get(eid)
            if h is None:
                h = hashers[eid] = EventsHasher()
            h.update(seq, t, actor, kind, text)
        for eid, digest in recorded.items():
            h = hashers.get(eid)
            got = h.hexdigest() if h is not None else EventsHasher().hexdigest()
            if got != digest:
                raise _damaged(path, eid, got, digest)
        return len(recorded)
    finally:
        conn.close()


def adopt_shards(shards: Sequence[str | Path], into: str | Path) -> MergeStats:
    """Merge shards that their writers checked (:func:`verify_shard`) into ``into``: a shard
    none of whose episodes the target holds is copied whole by SQLite (its rows never pass
    through Python), its runs and task specs reconciled as :func:`merge_stores` does and
    each table's row count checked after the copy; any other shard is merged by
    :func:`merge_stores`' rules. One transaction per shard."""
    files = shard_files(shards)
    target = Path(into)
    stats = MergeStats()
    start = time.perf_counter()
    with writable_store(target) as dst:
        for f in files:
            src = open_shard(f)
            try:
                dst.execute("ATTACH DATABASE ? AS shard", (str(f.absolute()),))
                try:
                    clash = dst.execute("SELECT count(*) FROM main.episodes WHERE episode_id "
                                        "IN (SELECT episode_id FROM shard.episodes)"
                                        ).fetchone()[0]
                    if clash:
                        merge_connection(src, dst, str(f), str(target), stats)
                        continue
                    with _transaction(dst):
                        stats.runs_added += _merge_runs(src, dst, str(f), str(target))
                        stats.tasks_added += _merge_tasks(src, dst, str(f), str(target))
                        copied = {}
                        events = dst.execute("SELECT count(*) FROM shard.events"
                                             ).fetchone()[0]
                        for table, cols in (("episodes", _EPISODE_COLS),
                                            ("event_rows", _EVENT_COLS),
                                            ("event_prefixes", _PREFIX_COLS),
                                            *_TABLES.items()):
                            want = dst.execute(f"SELECT count(*) FROM shard.{table}"
                                               ).fetchone()[0]
                            got = dst.execute(f"INSERT INTO main.{table} ({cols}) SELECT "
                                              f"{cols} FROM shard.{table}").rowcount
                            if got != want:
                                raise MergeConflictError(f"{f}: {want} rows of {table}, {got} "
                                                         f"copied into {target}")
                            copied[table] = got
                    _count_shard(stats, {"shard": str(f), "added": copied["episodes"],
                                         "replaced": 0, "same": 0, "kept": 0,
                                         "events": events})
                finally:
                    dst.execute("DETACH DATABASE shard")
            finally:
                src.close()
    stats.seconds = time.perf_counter() - start
    return stats


@contextmanager
def writable_store(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A writing connection (autocommit; transactions are the caller's) to a store file,
    created if missing and migrated to this schema; closed at the end of the block."""
    path = Path(path)
    if path.is_dir():
        raise NotFoundError(f"{path}: is a folder; give the store's file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        try:
            for p in PRAGMAS:
                conn.execute(p)
            migrate(conn, str(path))
        except sqlite3.DatabaseError as exc:
            raise SchemaError(f"{path}: not an SQLite database ({exc})") from None
        yield conn
    finally:
        conn.close()


def merge_connection(src: sqlite3.Connection, dst: sqlite3.Connection, where: str,
                     target: str, stats: MergeStats, *, transaction: bool = True) -> None:
    """Merge one open shard into an open target, in one transaction (``transaction=False``:
    in the caller's)."""
    shard: dict[str, Any] = {"shard": where, "added": 0, "replaced": 0, "same": 0, "kept": 0,
                             "events": 0}
    with _transaction(dst, own=transaction):
        stats.runs_added += _merge_runs(src, dst, where, target)
        stats.tasks_added += _merge_tasks(src, dst, where, target)
        plan = _plan_episodes(src, dst, where, target)
        copied: dict[str, str] = {}  # episode -> hash of the shard's events
        for action, row in plan:
            if action in ("same", "kept"):
                shard[action] += 1
                continue
            eid = row[0]
            if action == "replace":
                for table in ("event_rows", "event_prefixes", *_TABLES):
                    dst.execute(f"DELETE FROM {table} WHERE episode_id=?", (eid,))
                dst.execute("DELETE FROM episodes WHERE episode_id=?", (eid,))
            dst.execute(f"INSERT INTO episodes ({_EPISODE_COLS}) VALUES "
                        f"({', '.join('?' * 22)})", row)
            n, digest = _copy_events(src, dst, eid)
            if row[9] in FINAL and row[19] and digest != row[19]:
                raise _damaged(where, eid, digest, row[19])
            for table, cols in _TABLES.items():
                rows = src.execute(f"SELECT {cols} FROM {table} WHERE episode_id=?",
                                   (eid,)).fetchall()
                if rows:
                    dst.executemany(f"INSERT INTO {table} ({cols}) VALUES "
                                    f"({', '.join('?' * len(rows[0]))})", rows)
            copied[eid] = digest
            shard["events"] += n
            shard["added" if action == "add" else "replaced"] += 1
        for eid, digest in copied.items():  # after: read back from the target
            if _hash_of(dst, eid)[1] != digest:
                raise MergeConflictError(f"{where}: episode {eid!r} reads back from {target} "
                                         "with other events than the shard's")
    stats.verified += len(copied)
    _count_shard(stats, shard)


@contextmanager
def _transaction(dst: sqlite3.Connection, own: bool = True) -> Iterator[None]:
    """A write transaction on ``dst``, committed at the end of the block and rolled back
    if it raises (``own=False``: the caller's, already open)."""
    if not own:
        yield
        return
    dst.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        dst.execute("ROLLBACK")
        raise
    dst.execute("COMMIT")


def _count_shard(stats: MergeStats, shard: dict[str, Any]) -> None:
    """A merged shard's counts (``added``, ``replaced``, ``same``, ``kept``, ``events``)
    into the merge's figures."""
    stats.shards += 1
    stats.episodes_added += shard["added"]
    stats.episodes_replaced += shard["replaced"]
    stats.episodes_same += shard["same"]
    stats.episodes_kept += shard["kept"]
    stats.events_added += shard["events"]
    stats.per_shard.append(shard)


def _damaged(where: str | Path, eid: str, got: str, recorded: str) -> MergeConflictError:
    """A shard whose episode's events do not hash to the hash it records."""
    return MergeConflictError(f"{where}: episode {eid!r}: its events hash to {got[:12]}, but "
                              f"the episode records {recorded[:12]}; the shard is damaged")


def _merge_runs(src: sqlite3.Connection, dst: sqlite3.Connection, where: str,
                target: str) -> int:
    added = 0
    for run_id, created, status, agent, config in src.execute(
            "SELECT run_id, created_at, status, agent, config FROM runs"):
        row = dst.execute("SELECT created_at, status, agent, config FROM runs WHERE run_id=?",
                          (run_id,)).fetchone()
        if row is None:
            dst.execute("INSERT INTO runs (run_id, created_at, status, agent, config) "
                        "VALUES (?, ?, ?, ?, ?)", (run_id, created, status, agent, config))
            added += 1
            continue
        if row[2] != agent:
            raise MergeConflictError(f"{where}: run {run_id!r} was run by agent {agent!r} "
                                     f"there and by {row[2]!r} in {target}: two runs under "
                                     "one id")
        if json.loads(row[3]) != json.loads(config):
            raise MergeConflictError(f"{where}: run {run_id!r} has another configuration "
                                     f"there than in {target}: two runs under one id")
        status = "finished" if "finished" in (status, row[1]) else row[1]
        dst.execute("UPDATE runs SET created_at=min(created_at, ?), status=? WHERE run_id=?",
                    (created, status, run_id))
    return added


def _merge_tasks(src: sqlite3.Connection, dst: sqlite3.Connection, where: str,
                 target: str) -> int:
    added = 0
    for run_id, task_id, family, caps, spec in src.execute(
            "SELECT run_id, task_id, family, capabilities, spec FROM tasks"):
        row = dst.execute("SELECT spec FROM tasks WHERE run_id=? AND task_id=?",
                          (run_id, task_id)).fetchone()
        if row is None:
            dst.execute("INSERT INTO tasks (run_id, task_id, family, capabilities, spec) "
                        "VALUES (?, ?, ?, ?, ?)", (run_id, task_id, family, caps, spec))
            added += 1
        elif row[0] != spec:
            raise MergeConflictError(f"{where}: task {task_id!r} of run {run_id!r} has "
                                     f"another spec there than in {target}")
    return added


def _plan_episodes(src: sqlite3.Connection, dst: sqlite3.Connection, where: str,
                   target: str) -> list[tuple[str, tuple[Any, ...]]]:
    """What to do with each of the shard's episodes; every conflict is found before anything
    is written."""
    plan = []
    for row in src.execute(f"SELECT {_EPISODE_COLS} FROM episodes ORDER BY episode_id"):
        eid, status, count, digest = row[0], row[9], row[18], row[19]
        have = dst.execute("SELECT status, event_count, events_hash, failure_boundary "
                           "FROM episodes WHERE episode_id=?", (eid,)).fetchone()
        if have is None:
            plan.append(("add", row))
        elif (have[0], have[1], have[2]) == (status, count, digest):
            plan.append(("same", row))
        elif status not in FINAL:
            plan.append(("kept", row))
        elif have[0] not in FINAL or (have[3] == "runtime" and not have[1]):
            plan.append(("replace", row))
        else:
            raise MergeConflictError(
                f"{where}: episode {eid!r} is {status} with {count} events (hash "
                f"{(digest or '')[:12]}) there and {have[0]} with {have[1]} events (hash "
                f"{(have[2] or '')[:12]}) in {target}: the same (episode, seq) with other "
                "events; merge refused")
    return plan


def _copy_events(src: sqlite3.Connection, dst: sqlite3.Connection, eid: str) -> tuple[int, str]:
    """Copy an episode's stored rows and its shared prefix (if its events begin with another
    episode's); return how many events it has and their hash (as readers see them)."""
    h = EventsHasher()
    n = 0
    for r in src.execute("SELECT seq, sim_time, actor, kind, payload FROM events "
                         "WHERE episode_id=? ORDER BY seq", (eid,)):
        h.update(*r)
        n += 1
    cur = src.execute(f"SELECT {_EVENT_COLS} FROM event_rows WHERE episode_id=? ORDER BY seq",
                      (eid,))
    while rows := cur.fetchmany(4096):
        dst.executemany(f"INSERT INTO event_rows ({_EVENT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        rows)
    prefix = src.execute(f"SELECT {_PREFIX_COLS} FROM event_prefixes WHERE episode_id=?",
                         (eid,)).fetchone()
    if prefix is not None:
        dst.execute(f"INSERT OR REPLACE INTO event_prefixes ({_PREFIX_COLS}) VALUES (?, ?, ?)",
                    prefix)
    return n, h.hexdigest()


def _hash_of(conn: sqlite3.Connection, eid: str) -> tuple[int, str]:
    h = EventsHasher()
    n = 0
    for r in conn.execute("SELECT seq, sim_time, actor, kind, payload FROM events "
                          "WHERE episode_id=? ORDER BY seq", (eid,)):
        h.update(*r)
        n += 1
    return n, h.hexdigest()
