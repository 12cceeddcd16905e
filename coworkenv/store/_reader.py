"""Read-only access: every reader has its own connection, opened so that it cannot write."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ._merge import check_integrity
from ._records import EpisodeRecord, EventRecord
from ._schema import SCHEMA_VERSION
from ._writer import EventStore
from .errors import NotFoundError, SchemaError

MAX_SHARDS = 10
"""Shards one reader reads together (SQLite attaches at most ten files to a connection);
merge more with :func:`merge_stores`."""

_SHARD_VIEWS = {
    "runs": ("SELECT run_id, min(created_at) AS created_at, CASE WHEN sum(status = "
             "'finished') > 0 THEN 'finished' ELSE max(status) END AS status, min(agent) AS "
             "agent, min(config) AS config FROM ({union}) GROUP BY run_id"),
    "tasks": ("SELECT run_id, task_id, min(family) AS family, min(capabilities) AS "
              "capabilities, min(spec) AS spec FROM ({union}) GROUP BY run_id, task_id"),
    "episodes": "{union}",
    "events": "{union}",
    "projection": "{union}",
    "check_results": "{union}",
    "grades": "{union}",
}


class Reader:
    """A read-only connection to a store: a file path, an open :class:`EventStore`, or
    several shard files (a list, or a folder of ``*.db`` files) read together as one store
    without copying (at most :data:`MAX_SHARDS`; an episode must be in one shard only)."""

    def __init__(self, source: str | Path | EventStore | Sequence[str | Path]) -> None:
        if isinstance(source, (list, tuple)) or (
                isinstance(source, (str, Path)) and Path(source).is_dir() and
                any(Path(source).glob("*.db"))):
            from ._merge import shard_files

            files = shard_files(source if isinstance(source, (list, tuple)) else [source])
            if len(files) > 1:
                self._open_shards(files)
                return
            source = files[0]
        if isinstance(source, EventStore):  # works for :memory: stores too
            self.where = source.path
            target = source.target
            uri = target if source.uri else f"file:{Path(target).absolute()}?mode=ro"
        else:
            p = Path(source)  # type: ignore[arg-type]
            if not p.exists():
                raise NotFoundError(f"{p}: no such file (`coworkenv run` or `coworkenv demo` "
                                    "records one)")
            if p.is_dir():
                raise NotFoundError(f"{p}: is a folder with no store file (*.db); give the "
                                    "SQLite file of a store (e.g. runs/coworkenv.db)")
            self.where = str(p)
            uri = f"file:{p.absolute()}?mode=ro"
        self.shards = [self.where]
        self.conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            self.conn.execute("PRAGMA query_only=ON")
            (version,) = self.conn.execute("PRAGMA user_version").fetchone()
        except sqlite3.DatabaseError as exc:  # (another kind of file)
            self.conn.close()
            raise SchemaError(f"{self.where}: not an SQLite database ({exc})") from None
        if version == 0 or version > SCHEMA_VERSION:
            raise SchemaError(f"{self.where}: schema version {version}; this coworkenv reads "
                              f"1..{SCHEMA_VERSION}")

    def check_integrity(self) -> None:
        """SQLite's ``quick_check`` of every file read (:class:`SchemaError` naming a damaged
        one): what a command that reads a whole store runs before it reports on it."""
        if len(self.shards) == 1:
            check_integrity(self.conn, self.where)
        else:
            for i, f in enumerate(self.shards):
                check_integrity(self.conn, f, f"s{i}")

    def _open_shards(self, files: list[Path]) -> None:
        """Several shards as one store: each attached read-only, every table a view over
        all of them (runs and task specs reconciled as a merge would)."""
        if len(files) > MAX_SHARDS:
            raise SchemaError(f"{len(files)} shards: one reader reads at most {MAX_SHARDS} "
                              "together; merge them first (`coworkenv merge SHARD... --into "
                              "DB`)")
        self.shards = [str(f) for f in files]
        self.where = " + ".join(self.shards)
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        try:
            for i, f in enumerate(files):
                self.conn.execute(f"ATTACH DATABASE ? AS s{i}", (f"file:{f.absolute()}?mode=ro",))
                try:
                    (version,) = self.conn.execute(f"PRAGMA s{i}.user_version").fetchone()
                except sqlite3.DatabaseError as exc:
                    raise SchemaError(f"{f}: not an SQLite database ({exc})") from None
                if version != SCHEMA_VERSION:
                    raise SchemaError(f"{f}: schema version {version}; shards are read "
                                      f"together at version {SCHEMA_VERSION} only")
                check_integrity(self.conn, str(f), f"s{i}")
            for table, shape in _SHARD_VIEWS.items():
                union = " UNION ALL ".join(f"SELECT * FROM s{i}.{table}"
                                           for i in range(len(files)))
                self.conn.execute(f"CREATE TEMP VIEW {table} AS " + shape.format(union=union))
            self.conn.execute("PRAGMA query_only=ON")
            dup = self.conn.execute("SELECT episode_id FROM episodes GROUP BY episode_id "
                                    "HAVING count(*) > 1 LIMIT 1").fetchone()
        except BaseException:
            self.conn.close()
            raise
        if dup is not None:
            self.conn.close()
            raise SchemaError(f"{self.where}: episode {dup[0]!r} is in more than one shard; "
                              "merge them (`coworkenv merge`), which reconciles copies")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # runs --------------------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT r.run_id, r.created_at, r.status, r.agent, r.config, "
            "(SELECT count(*) FROM episodes e WHERE e.run_id = r.run_id) "
            "FROM runs r ORDER BY r.created_at")
        return [{"run_id": r[0], "created_at": r[1], "status": r[2], "agent": r[3],
                 "config": json.loads(r[4]), "episodes": r[5]} for r in cur]

    def run_overview(self) -> list[dict[str, Any]]:
        """Each run (oldest first) with what `coworkenv runs` shows: its agent, tasks x
        trials, how many scheduled (task, trial) pairs are final, passed or failed (the latest
        attempt of each), and who holds it now (``holder``: "pid P on HOST" while a runner's
        heartbeat is fresh, else None)."""
        import time

        from ._lease import TTL_S

        counts = {r[0]: r[1:] for r in self.conn.execute(
            "SELECT e.run_id, count(*), sum(e.status = 'completed' OR (e.status = 'failed' AND "
            "e.failure_boundary = 'agent')), sum(coalesce(g.passed, 0)), "
            "sum(e.status = 'failed' AND e.failure_boundary = 'agent'), "
            "sum(e.status = 'failed' AND e.failure_boundary <> 'agent') "
            "FROM episodes e LEFT JOIN grades g USING (episode_id) "
            "WHERE e.task_id NOT LIKE '@%' AND (e.run_id, e.task_id, e.trial, e.attempt) IN "
            "(SELECT run_id, task_id, trial, max(attempt) FROM episodes GROUP BY run_id, "
            "task_id, trial) GROUP BY e.run_id")}
        holders: dict[str, str] = {}
        try:
            now = time.time()
            for run_id, pid, host, beat in self.conn.execute(
                    "SELECT run_id, pid, host, heartbeat FROM leases"):
                if now - beat < TTL_S:
                    holders[run_id] = f"pid {pid} on {host}"
        except sqlite3.OperationalError:
            pass  # (shards read together: no leases view; a merged run has no runner)
        out = []
        for r in self.runs():
            config = r["config"]
            tasks = len(config.get("tasks") or [])
            trials = int(config.get("trials") or 1)
            n, final, passed, agent_failed, errors = (int(x or 0) for x in
                                                      counts.get(r["run_id"], (0,) * 5))
            scheduled = tasks * trials or n
            out.append({**r, "tasks": tasks, "trials": trials, "scheduled": scheduled,
                        "final": final, "passed": passed, "agent_failures": agent_failed,
                        "errors": errors, "holder": holders.get(r["run_id"]),
                        "simulation": config.get("simulation")})
        return out

    def resolve_run(self, given: str) -> str:
        """A run id, or an unambiguous prefix of one (raises :class:`NotFoundError` naming
        the candidates)."""
        runs = [r[0] for r in self.conn.execute("SELECT run_id FROM runs ORDER BY created_at")]
        if given in runs:
            return given
        matches = [r for r in runs if r.startswith(given)]
        if len(matches) == 1:
            return str(matches[0])
        if matches:
            raise NotFoundError(f"{given!r} is the start of {len(matches)} runs in "
                                f"{self.where} ({', '.join(matches[:5])}"
                                f"{' ...' if len(matches) > 5 else ''}); give more of it")
        shown = ", ".join(runs[-5:]) + (f" and {len(runs) - 5} older" if len(runs) > 5 else "")
        raise NotFoundError(f"{given!r}: no such run in {self.where} (latest runs: "
                            f"{shown or 'none'}; `coworkenv runs` lists them)")

    def resolve_episode(self, given: str) -> str:
        """An episode id as written in full, with its run id shortened to a prefix
        (``RUNPREFIX:TASK:TRIAL:ATTEMPT``), or as ``TASK[:TRIAL[:ATTEMPT]]`` of the latest run
        that has it (trial 0 and the latest attempt unless given). Raises
        :class:`NotFoundError`."""
        if self.conn.execute("SELECT 1 FROM episodes WHERE episode_id=?",
                             (given,)).fetchone() is not None:
            return given
        head, sep, rest = given.partition(":")
        candidates: list[tuple[str | None, str]] = []  # (run or None: the latest, the rest)
        if sep:
            with contextlib.suppress(NotFoundError):
                candidates.append((self.resolve_run(head), rest))
        candidates.append((None, given))
        for run_id, spec in candidates:
            parts = spec.rsplit(":", 2) if spec.count(":") >= 2 else spec.split(":")
            task, trial, attempt = parts[0], 0, None
            try:
                if len(parts) >= 2:
                    trial = int(parts[1])
                if len(parts) == 3:
                    attempt = int(parts[2])
            except ValueError:
                task, trial, attempt = spec, 0, None
            row = self.conn.execute(
                "SELECT e.episode_id FROM episodes e JOIN runs r USING (run_id) WHERE "
                "(? IS NULL OR e.run_id = ?) AND e.task_id = ? AND e.trial = ? "
                "AND (? IS NULL OR e.attempt = ?) ORDER BY r.created_at DESC, e.attempt DESC "
                "LIMIT 1", (run_id, run_id, task, trial, attempt, attempt)).fetchone()
            if row is not None:
                return str(row[0])
        raise NotFoundError(f"{self.where}: no episode {given!r} (an episode id is "
                            "RUN:TASK:TRIAL:ATTEMPT; the run may be the start of its id, or "
                            "left out for the latest run that has the task: TASK, TASK:TRIAL)")

    def latest_run(self) -> str | None:
        row = self.conn.execute(
            "SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        return row[0] if row else None

    # episodes ----------------------------------------------------------------------------
    def episodes(self, run_id: str | None = None, *, status: str | None = None,
                 limit: int = 1_000_000, offset: int = 0) -> list[EpisodeRecord]:
        where, params = [], []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        sql = f"SELECT {EpisodeRecord.COLUMNS} FROM episodes"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY run_id, task_id, trial, attempt LIMIT ? OFFSET ?"
        return [EpisodeRecord.from_row(r) for r in self.conn.execute(sql, (*params, limit, offset))]

    def episode(self, episode_id: str) -> EpisodeRecord:
        row = self.conn.execute(f"SELECT {EpisodeRecord.COLUMNS} FROM episodes WHERE episode_id=?",
                                (episode_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"{self.where}: no episode {episode_id!r}")
        return EpisodeRecord.from_row(row)

    def completed_trials(self, run_id: str) -> set[tuple[str, int]]:
        """The (task, trial) pairs of a run that are final: completed, or failed at the agent
        boundary (the agent's own failure is its result). Failures of the infrastructure
        (the bus, a process, the simulator) are not: ``--resume`` runs them again."""
        return {(r[0], r[1]) for r in self.conn.execute(
            "SELECT task_id, trial FROM episodes WHERE run_id=? AND (status = 'completed' OR "
            "(status = 'failed' AND failure_boundary = 'agent'))", (run_id,))}

    def run_config(self, run_id: str) -> tuple[str, dict[str, Any]] | None:
        """A run's agent and recorded configuration (None when the run is not here)."""
        row = self.conn.execute("SELECT agent, config FROM runs WHERE run_id=?",
                                (run_id,)).fetchone()
        return None if row is None else (row[0], json.loads(row[1]))

    def next_attempt(self, run_id: str, task_id: str, trial: int) -> int:
        row = self.conn.execute(
            "SELECT max(attempt) FROM episodes WHERE run_id=? AND task_id=? AND trial=?",
            (run_id, task_id, trial)).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    # events ------------------------------------------------------------------------------
    def events(self, episode_id: str, upto: int | None = None,
               since: int = 0) -> Iterator[EventRecord]:
        hi = (1 << 62) if upto is None else upto
        cur = self.conn.execute(
            "SELECT episode_id, seq, sim_time, wall_time, actor, kind, payload FROM events "
            "WHERE episode_id=? AND seq BETWEEN ? AND ? ORDER BY seq", (episode_id, since, hi))
        while rows := cur.fetchmany(4096):
            for r in rows:
                yield EventRecord.from_row(r)

    def event_count(self, episode_id: str) -> int:
        return int(self.conn.execute("SELECT count(*) FROM events WHERE episode_id=?",
                                     (episode_id,)).fetchone()[0])

    def projection(self, episode_id: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for app, eid, data in self.conn.execute(
                "SELECT app, entity_id, data FROM projection WHERE episode_id=?", (episode_id,)):
            out.setdefault(app, {})[eid] = json.loads(data)
        return out

    def grade(self, episode_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT completion, safety, robustness, score, passed, detail FROM grades "
            "WHERE episode_id=?", (episode_id,)).fetchone()
        if row is None:
            return None
        return {"completion": row[0], "safety": row[1], "robustness": row[2], "score": row[3],
                "passed": bool(row[4]), "detail": json.loads(row[5])}

    def task_specs(self, run_id: str) -> dict[str, str]:
        """task id -> the task's JSON spec as the run used it."""
        return dict(self.conn.execute("SELECT task_id, spec FROM tasks WHERE run_id=?",
                                      (run_id,)).fetchall())

    def graded_episodes(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Completed episodes with their grade and their task's family and capabilities."""
        sql = ("SELECT e.episode_id, e.run_id, e.task_id, e.trial, e.family, t.capabilities, "
               "g.completion, g.safety, g.robustness, g.score, g.passed, e.turns, e.sim_time, "
               "e.termination FROM episodes e JOIN grades g USING (episode_id) "
               "LEFT JOIN tasks t ON t.run_id = e.run_id AND t.task_id = e.task_id "
               "WHERE e.status = 'completed'")
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql += " AND e.run_id = ?"
            params = (run_id,)
        sql += " ORDER BY e.run_id, e.task_id, e.trial"
        keys = ("episode_id", "run_id", "task_id", "trial", "family", "capabilities",
                "completion", "safety", "robustness", "score", "passed", "turns", "sim_time",
                "termination")
        out = []
        for row in self.conn.execute(sql, params):
            d = dict(zip(keys, row, strict=True))
            d["capabilities"] = json.loads(d["capabilities"] or "[]")
            d["passed"] = bool(d["passed"])
            out.append(d)
        return out

    def scheduled_episodes(self, run_id: str) -> list[dict[str, Any]]:
        """One row per scheduled (task, trial) of a run (its latest attempt), graded or not:
        an episode that failed, or never ran, is there with its status and no grade, so that
        scores can count every scheduled pair (``status`` is ``missing`` when none ran)."""
        row = self.conn.execute("SELECT config FROM runs WHERE run_id=?", (run_id,)).fetchone()
        config = json.loads(row[0]) if row else {}
        sql = ("SELECT e.episode_id, e.task_id, e.trial, e.attempt, e.family, t.capabilities, "
               "e.status, e.failure_boundary, e.failure, e.turns, e.sim_time, e.termination, "
               "g.completion, g.safety, g.robustness, g.score, g.passed "
               "FROM episodes e LEFT JOIN grades g USING (episode_id) "
               "LEFT JOIN tasks t ON t.run_id = e.run_id AND t.task_id = e.task_id "
               "WHERE e.run_id = ? AND e.task_id NOT LIKE '@%' "  # (a simulation's own log)
               "ORDER BY e.task_id, e.trial, e.attempt")
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        keys = ("episode_id", "task_id", "trial", "attempt", "family", "capabilities", "status",
                "failure_boundary", "failure", "turns", "sim_time", "termination", "completion",
                "safety", "robustness", "score", "passed")
        for r in self.conn.execute(sql, (run_id,)):
            d = dict(zip(keys, r, strict=True))
            d["run_id"] = run_id
            d["capabilities"] = json.loads(d["capabilities"] or "[]")
            d["passed"] = bool(d["passed"])
            latest[(d["task_id"], d["trial"])] = d  # later attempts replace earlier ones
        known = {t: (f, json.loads(c or "[]")) for t, f, c in self.conn.execute(
            "SELECT task_id, family, capabilities FROM tasks WHERE run_id=?", (run_id,))}
        for task_id in config.get("tasks") or []:
            for trial in range(int(config.get("trials") or 1)):
                if (task_id, trial) not in latest:
                    fam, caps = known.get(task_id, ("", []))
                    latest[(task_id, trial)] = {
                        "episode_id": None, "run_id": run_id, "task_id": task_id,
                        "trial": trial, "attempt": None, "family": fam, "capabilities": caps,
                        "status": "missing", "failure_boundary": None, "failure": None,
                        "turns": None, "sim_time": None, "termination": None,
                        "completion": None, "safety": None, "robustness": None, "score": None,
                        "passed": False}
        return [latest[k] for k in sorted(latest)]

    def check_results(self, episode_id: str) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT check_id, kind, weight, passed, detail, evidence FROM check_results "
            "WHERE episode_id=? ORDER BY check_id", (episode_id,))
        return [{"check_id": r[0], "kind": r[1], "weight": r[2], "passed": bool(r[3]),
                 "detail": r[4], "evidence": json.loads(r[5])} for r in cur]
