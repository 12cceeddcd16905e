"""Schema and migrations. ``PRAGMA user_version`` holds the applied version."""

from __future__ import annotations

import sqlite3

from .errors import SchemaError

MIGRATIONS: list[str] = [
    # 1: runs, episodes, events, projection, check results
    """
    CREATE TABLE runs (
        run_id      TEXT PRIMARY KEY,
        created_at  REAL NOT NULL,
        status      TEXT NOT NULL DEFAULT 'running',
        agent       TEXT NOT NULL DEFAULT '',
        config      TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE episodes (
        episode_id       TEXT PRIMARY KEY,
        run_id           TEXT NOT NULL REFERENCES runs(run_id),
        task_id          TEXT NOT NULL,
        family           TEXT NOT NULL DEFAULT '',
        trial            INTEGER NOT NULL DEFAULT 0,
        attempt          INTEGER NOT NULL DEFAULT 0,
        seed             INTEGER NOT NULL DEFAULT 0,
        agent            TEXT NOT NULL DEFAULT '',
        role             TEXT NOT NULL DEFAULT 'student',
        status           TEXT NOT NULL DEFAULT 'running',
        started_at       REAL,
        finished_at      REAL,
        sim_time         REAL,
        turns            INTEGER,
        termination      TEXT,
        failure_boundary TEXT,
        failure          TEXT,
        completion       REAL,
        event_count      INTEGER,
        events_hash      TEXT,
        state_hash       TEXT,
        outcome          TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX episodes_run ON episodes(run_id, task_id, trial);
    CREATE INDEX episodes_status ON episodes(run_id, status);
    CREATE TABLE events (
        episode_id  TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        sim_time    REAL NOT NULL,
        wall_time   REAL NOT NULL,
        actor       TEXT NOT NULL,
        kind        TEXT NOT NULL,
        payload     TEXT NOT NULL,
        PRIMARY KEY (episode_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE projection (
        episode_id  TEXT NOT NULL,
        app         TEXT NOT NULL,
        entity_id   TEXT NOT NULL,
        data        TEXT NOT NULL,
        PRIMARY KEY (episode_id, app, entity_id)
    ) WITHOUT ROWID;
    CREATE TABLE check_results (
        episode_id  TEXT NOT NULL,
        check_id    TEXT NOT NULL,
        kind        TEXT NOT NULL,
        weight      REAL NOT NULL,
        passed      INTEGER NOT NULL,
        detail      TEXT NOT NULL DEFAULT '',
        evidence    TEXT NOT NULL DEFAULT '[]',
        PRIMARY KEY (episode_id, check_id)
    ) WITHOUT ROWID;
    """,
    # 2: grades (completion, safety, robustness, score) and the task specs a run used, so any
    # past run can be re-graded without its task files
    """
    CREATE TABLE grades (
        episode_id  TEXT PRIMARY KEY,
        completion  REAL NOT NULL,
        safety      REAL NOT NULL,
        robustness  REAL NOT NULL,
        score       REAL NOT NULL,
        passed      INTEGER NOT NULL,
        detail      TEXT NOT NULL DEFAULT '{}',
        graded_at   REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE tasks (
        run_id      TEXT NOT NULL,
        task_id     TEXT NOT NULL,
        family      TEXT NOT NULL,
        capabilities TEXT NOT NULL,
        spec        TEXT NOT NULL,
        PRIMARY KEY (run_id, task_id)
    ) WITHOUT ROWID;
    """,
    # 3: events in a rowid table (appended at its end) with a unique (episode_id, seq) index.
    # Keyed by (episode_id, seq) without rowid, every event of a thousand interleaved episodes
    # went into the middle of a B-tree that holds the payloads: 1.7 times slower to write.
    """
    CREATE TABLE events_v3 (
        episode_id  TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        sim_time    REAL NOT NULL,
        wall_time   REAL NOT NULL,
        actor       TEXT NOT NULL,
        kind        TEXT NOT NULL,
        payload     TEXT NOT NULL
    );
    INSERT INTO events_v3 (episode_id, seq, sim_time, wall_time, actor, kind, payload)
        SELECT episode_id, seq, sim_time, wall_time, actor, kind, payload FROM events
        ORDER BY episode_id, seq;
    DROP TABLE events;
    ALTER TABLE events_v3 RENAME TO events;
    CREATE UNIQUE INDEX events_episode_seq ON events(episode_id, seq);
    """,
    # 4: one runner per run: who runs it, and when it last said it was alive
    """
    CREATE TABLE leases (
        run_id      TEXT PRIMARY KEY,
        owner       TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        host        TEXT NOT NULL,
        acquired_at REAL NOT NULL,
        heartbeat   REAL NOT NULL
    ) WITHOUT ROWID;
    """,
    # 5: an episode whose events begin with another's stores that prefix once. A simulation's
    # arrival begins with the company's setup (1,700 rows a 1,000-person company: 770 KB an
    # arrival): its rows name the simulation's episode instead (event_prefixes), and the
    # ``events`` view gives every episode's events whole, as before, to every reader. Writes
    # go to event_rows; the view's triggers keep writes to ``events`` working.
    """
    ALTER TABLE events RENAME TO event_rows;
    CREATE TABLE event_prefixes (
        episode_id  TEXT PRIMARY KEY,
        source      TEXT NOT NULL,
        rows        INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE VIEW events AS
        SELECT episode_id, seq, sim_time, wall_time, actor, kind, payload FROM event_rows
        UNION ALL
        SELECT p.episode_id, r.seq, r.sim_time, r.wall_time, r.actor, r.kind, r.payload
        FROM event_prefixes AS p JOIN event_rows AS r
        ON r.episode_id = p.source AND r.seq BETWEEN 1 AND p.rows;
    CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT INTO event_rows (episode_id, seq, sim_time, wall_time, actor, kind, payload)
        VALUES (NEW.episode_id, NEW.seq, NEW.sim_time, NEW.wall_time, NEW.actor, NEW.kind,
                NEW.payload);
    END;
    CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN
        DELETE FROM event_rows WHERE episode_id = OLD.episode_id AND seq = OLD.seq;
        DELETE FROM event_prefixes WHERE episode_id = OLD.episode_id;
    END;
    CREATE TRIGGER events_update INSTEAD OF UPDATE ON events BEGIN
        UPDATE event_rows SET episode_id = NEW.episode_id, seq = NEW.seq,
            sim_time = NEW.sim_time, wall_time = NEW.wall_time, actor = NEW.actor,
            kind = NEW.kind, payload = NEW.payload
        WHERE episode_id = OLD.episode_id AND seq = OLD.seq;
    END;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=OFF",
    "PRAGMA busy_timeout=10000",
)

WRITER_CACHE = "PRAGMA cache_size=-512"
"""The run writer's page cache on a file, 512 KiB (SQLite's default is 2 MB a connection).
Its work is appending: each event lands on the leaf page of its episode, so with thousands
of live episodes no cache of a few MB holds what it touches, and the pages it reads back come
from the operating system's cache. Measured, 1,000 live episodes: the same CPU a step (within
noise) and 1.5 MB less resident memory; on a run of 100, 15 KiB less a live episode.
(An in-memory store keeps its pages in the cache and is left at the default.)"""


def migrate(conn: sqlite3.Connection, where: str) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; return the version found before."""
    (found,) = conn.execute("PRAGMA user_version").fetchone()
    if found > SCHEMA_VERSION:
        raise SchemaError(f"{where}: schema version {found} is newer than this coworkenv "
                          f"({SCHEMA_VERSION}); upgrade coworkenv")
    if found == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()
        if tables[0]:
            raise SchemaError(f"{where}: not a coworkenv store (has tables but no version)")
    if found == SCHEMA_VERSION:
        return int(found)
    # Take the write lock, then look again: another process opening the same file at the same
    # moment (``run --processes``) may have migrated it while this one waited.
    conn.execute("BEGIN IMMEDIATE")
    try:
        (now,) = conn.execute("PRAGMA user_version").fetchone()
        for version in range(now, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version + 1}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return int(found)


def _statements(script: str) -> list[str]:
    out: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out
