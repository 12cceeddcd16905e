"""Shards: `coworkenv merge` (idempotent, duplicates refused, hashes verified) and readers of
several shard files at once (eval, replay, view over shards equal to over their merge)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.runtime import RunConfig, run
from coworkenv.store import (
    MAX_SHARDS,
    MergeConflictError,
    Reader,
    SchemaError,
    adopt_shards,
    events_hash,
    merge_stores,
    migrate,
    verify_shard,
)

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two shards of two runs (one with two trials), written apart."""
    d = tmp_path_factory.mktemp("shards")
    run(RunConfig(tasks=[TASKS], db=d / "a.db", run_id="ra", families=["safety", "doc_sharing"],
                  trials=2))
    run(RunConfig(tasks=[TASKS], db=d / "b.db", run_id="rb", families=["scheduling"],
                  faults=0.3))
    return [d / "a.db", d / "b.db"]


def _episodes(db: Path | list[Path]) -> dict[str, tuple[str, int, str]]:
    """episode -> (status, events, hash recomputed from the rows)."""
    with Reader(db) as r:
        return {e.episode_id: (e.status, r.event_count(e.episode_id),
                               events_hash(r.events(e.episode_id))) for e in r.episodes()}


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as c:
        return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in
                ("runs", "tasks", "episodes", "events", "projection", "check_results", "grades")}


def test_merge_keeps_every_episode_and_its_hash(shards: list[Path], tmp_path: Path) -> None:
    into = tmp_path / "m.db"
    stats = merge_stores(shards, into)
    a, b = _episodes(shards[0]), _episodes(shards[1])
    merged = _episodes(into)
    assert merged == {**a, **b} and len(merged) == len(a) + len(b) > 10
    assert stats.episodes_added == stats.verified == len(merged)
    assert stats.events_added == sum(n for _, n, _ in merged.values())
    with Reader(into) as r:  # recorded hashes equal recomputed ones
        for e in r.episodes():
            assert e.events_hash == merged[e.episode_id][2]
        assert [x["run_id"] for x in r.runs()] == ["ra", "rb"]
        assert all(x["status"] == "finished" for x in r.runs())
    sums = _counts(into)
    assert sums == {t: _counts(shards[0])[t] + _counts(shards[1])[t] for t in sums}


def test_merge_twice_changes_nothing(shards: list[Path], tmp_path: Path) -> None:
    into = tmp_path / "m.db"
    merge_stores(shards, into)
    before, counts = _episodes(into), _counts(into)
    again = merge_stores([shards[1], shards[0]], into)
    assert again.episodes_added == again.episodes_replaced == again.runs_added == 0
    assert again.episodes_same == len(before)
    assert _episodes(into) == before and _counts(into) == counts


def test_merge_refuses_the_same_episode_with_other_events(shards: list[Path],
                                                          tmp_path: Path) -> None:
    into = tmp_path / "m.db"
    merge_stores([shards[0]], into)
    counts = _counts(into)
    other = tmp_path / "other.db"
    shutil.copy(shards[0], other)
    with sqlite3.connect(other) as c:  # the same episode id, recorded with other events
        eid, seq = c.execute("SELECT episode_id, max(seq) FROM events WHERE episode_id = "
                             "(SELECT min(episode_id) FROM episodes WHERE status='completed')"
                             ).fetchone()
        c.execute("UPDATE events SET payload = '{\"other\":1}' WHERE episode_id=? AND seq=?",
                  (eid, seq))
    with Reader(other) as r:
        digest = events_hash(r.events(eid))
    with sqlite3.connect(other) as c:
        c.execute("UPDATE episodes SET events_hash=? WHERE episode_id=?", (digest, eid))
    with pytest.raises(MergeConflictError, match=f"episode '{eid}'.*merge refused"):
        merge_stores([shards[1], other], into)
    # all or nothing: the refused shard left nothing, nor did the one listed before it
    assert _counts(into) == counts
    assert _episodes(into)[eid] == _episodes(shards[0])[eid]


def test_merge_refuses_a_damaged_shard(shards: list[Path], tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.db"
    shutil.copy(shards[1], damaged)
    with sqlite3.connect(damaged) as c:
        c.execute("UPDATE event_rows SET payload = '{}' WHERE rowid = (SELECT max(rowid) "
                  "FROM event_rows)")  # (the stored rows: events is their view)
    with pytest.raises(MergeConflictError, match="the shard is damaged"):
        merge_stores([damaged], tmp_path / "m.db")
    with Reader(tmp_path / "m.db") as r:
        assert r.episodes() == []


def test_shards_checked_where_written_are_adopted_as_a_merge_would_copy_them(
        shards: list[Path], tmp_path: Path) -> None:
    """A batch's processes check their own shards (verify_shard); the merge then copies them
    whole (adopt_shards): the same store as merge_stores makes; a shard the target holds
    already goes by merge_stores' rules (twice changes nothing)."""
    assert sum(verify_shard(s) for s in shards) == len(_episodes(shards))
    adopted, merged = tmp_path / "a.db", tmp_path / "m.db"
    stats = adopt_shards(shards, adopted)
    merge_stores(shards, merged)
    assert stats.episodes_added == len(_episodes(merged)) and stats.shards == 2
    assert _episodes(adopted) == _episodes(merged) and _counts(adopted) == _counts(merged)
    again = adopt_shards(shards, adopted)
    assert again.episodes_added == 0 and again.episodes_same == len(_episodes(merged))
    assert _counts(adopted) == _counts(merged)
    damaged = tmp_path / "damaged.db"
    shutil.copy(shards[1], damaged)
    with sqlite3.connect(damaged) as c:
        c.execute("UPDATE event_rows SET payload = '{}' WHERE rowid = (SELECT max(rowid) "
                  "FROM event_rows)")  # (the stored rows: events is their view)
    with pytest.raises(MergeConflictError, match=r"damaged.db: episode '.*': its events hash "
                       r"to .*the shard is damaged"):
        verify_shard(damaged)


def test_a_final_copy_replaces_one_a_crash_left_running(shards: list[Path],
                                                        tmp_path: Path) -> None:
    """The target holds an episode a crash cut short (running, half its events); the shard's
    completed copy replaces it; the other way round, the target keeps its final copy."""
    into = tmp_path / "m.db"
    shutil.copy(shards[1], into)
    with sqlite3.connect(into) as c:
        eid, n = c.execute("SELECT episode_id, event_count FROM episodes WHERE "
                           "status='completed' ORDER BY episode_id LIMIT 1").fetchone()
        c.execute("UPDATE episodes SET status='running', event_count=NULL, events_hash=NULL "
                  "WHERE episode_id=?", (eid,))
        c.execute("DELETE FROM events WHERE episode_id=? AND seq >= ?", (eid, n // 2))
        c.execute("DELETE FROM grades WHERE episode_id=?", (eid,))
    stats = merge_stores([shards[1]], into)
    assert stats.episodes_replaced == 1 and stats.episodes_same == len(_episodes(shards[1])) - 1
    assert _episodes(into) == _episodes(shards[1])
    with Reader(into) as r:
        assert r.grade(eid) is not None
    cut = tmp_path / "cut.db"
    shutil.copy(shards[1], cut)
    with sqlite3.connect(cut) as c:
        c.execute("UPDATE episodes SET status='running' WHERE episode_id=?", (eid,))
    assert merge_stores([cut], into).episodes_kept == 1
    assert _episodes(into) == _episodes(shards[1])


def test_merge_refuses_two_runs_under_one_id(shards: list[Path], tmp_path: Path) -> None:
    other = tmp_path / "x.db"
    run(RunConfig(tasks=[TASKS], db=other, run_id="ra", families=["scheduling"]))
    with pytest.raises(MergeConflictError, match="run 'ra' has another configuration"):
        merge_stores([shards[0], other], tmp_path / "m.db")


def test_shards_read_together_equal_their_merge(shards: list[Path], tmp_path: Path) -> None:
    into = tmp_path / "m.db"
    merge_stores(shards, into)
    with Reader(shards) as s, Reader(into) as m:
        assert s.runs() == m.runs()
        assert s.episodes() == m.episodes()
        for rid in ("ra", "rb"):
            assert s.scheduled_episodes(rid) == m.scheduled_episodes(rid)
            assert s.graded_episodes(rid) == m.graded_episodes(rid)
            assert s.task_specs(rid) == m.task_specs(rid)
        eid = m.episodes()[-1].episode_id
        assert list(s.events(eid)) == list(m.events(eid))
        assert s.projection(eid) == m.projection(eid) and s.grade(eid) == m.grade(eid)
        assert s.check_results(eid) == m.check_results(eid)
    folder = tmp_path / "folder"  # a folder of shards reads as the list
    folder.mkdir()
    for f in shards:
        shutil.copy(f, folder / f.name)
    with Reader(folder) as s, Reader(into) as m:
        assert s.episodes() == m.episodes() and len(s.shards) == 2


def test_eval_over_shards_equals_eval_over_their_merge(shards: list[Path],
                                                       tmp_path: Path) -> None:
    into = tmp_path / "m.db"
    merge_stores(shards, into)

    def cli(*args: str) -> str:
        p = subprocess.run([sys.executable, "-m", "coworkenv.cli", *args], capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout

    reports = {}
    for name, dbs in (("shards", ["--db", str(shards[0]), "--db", str(shards[1])]),
                      ("merged", ["--db", str(into)])):
        out = tmp_path / name
        cli("eval", *dbs, "--run", "ra", "--out", str(out))
        reports[name] = json.loads((out / "eval-ra.json").read_text())
    assert reports["shards"] == reports["merged"] and reports["merged"]["overall"]["episodes"]
    eid = _episodes(shards[1]).popitem()[0]
    assert cli("replay", "--db", str(shards[0]), "--db", str(shards[1]), "--episode", eid,
               "--hash") == cli("replay", "--db", str(into), "--episode", eid, "--hash")
    merged = json.loads(cli("merge", str(shards[0]), str(shards[1]), "--into",
                            str(tmp_path / "cli.db"), "--json"))
    assert merged["episodes_added"] == merged["verified"] == len(_episodes(into))


def test_a_blank_shard_is_left_out(shards: list[Path], tmp_path: Path) -> None:
    """A host killed between creating its shard and committing the schema leaves a file with
    no schema: readers and merges leave it out; a folder of only such files is an error."""
    d = tmp_path / "shards"
    d.mkdir()
    for f in shards:
        shutil.copy(f, d / f.name)
    blank = d / "host-0-vm-1.db"
    sqlite3.connect(blank).execute("PRAGMA journal_mode=WAL").fetchone()  # file, no schema
    assert blank.stat().st_size > 0
    with Reader(d) as r:
        assert len(r.shards) == 2 and str(blank) not in r.shards
    stats = merge_stores([d], tmp_path / "m.db")
    assert stats.shards == 2 and _episodes(tmp_path / "m.db") == _episodes(list(shards))
    with pytest.raises(SchemaError, match=r"host-0-vm-1\.db: an empty store file \(no "
                       r"schema\)"):  # (named by hand: a mistake to say)
        merge_stores([blank], tmp_path / "n.db")
    bad = d / "other.db"  # a file of another kind is not blank: it is refused
    bad.write_text("not a store")
    with pytest.raises(SchemaError, match=r"other\.db: not an SQLite database"):
        merge_stores([d], tmp_path / "o.db")


def test_shard_readers_refuse_what_they_cannot_read(shards: list[Path],
                                                    tmp_path: Path) -> None:
    twin = tmp_path / "twin.db"
    shutil.copy(shards[0], twin)
    with pytest.raises(SchemaError, match="in more than one shard"):
        Reader([shards[0], twin])
    many = [tmp_path / f"s{i}.db" for i in range(MAX_SHARDS + 1)]
    for f in many:  # (empty stores of this schema are enough)
        conn = sqlite3.connect(f, isolation_level=None)
        migrate(conn, str(f))
        conn.close()
    with pytest.raises(SchemaError, match="merge them first"):
        Reader(many)
    p = subprocess.run([sys.executable, "-m", "coworkenv.cli", "merge", str(shards[0]),
                        "--into", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "is a folder" in p.stderr


def test_view_and_regrade_read_shards_together(shards: list[Path], tmp_path: Path) -> None:
    """The viewer serves several shards as one store (read-only); regrade grades each
    shard's episodes in their own shard."""
    import urllib.request

    from coworkenv.viewer import ViewerServer

    copies = []
    for f in shards:  # (regrade writes grades: on copies, not the module's shards)
        copies.append(tmp_path / f.name)
        shutil.copy(f, copies[-1])
    server = ViewerServer(copies, "127.0.0.1", 0)
    thread = server.serve_in_thread()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        runs = json.loads(urllib.request.urlopen(base + "/api/runs", timeout=5).read())
        assert [r["run_id"] for r in runs] == ["ra", "rb"]
        page = json.loads(urllib.request.urlopen(base + "/api/episodes?limit=500",
                                                 timeout=5).read())
        assert page["total"] == len(_episodes(copies)) == len(page["items"])
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()
    before = {f: _counts(f) for f in copies}
    p = subprocess.run([sys.executable, "-m", "coworkenv.cli", "regrade", "--db", str(copies[0]),
                        "--db", str(copies[1])], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    total = sum(1 for s, _, _ in _episodes(copies).values() if s == "completed")
    assert f"regraded {total} episode(s): 0 changed" in p.stdout
    assert {f: _counts(f) for f in copies} == before  # each grade rewritten in its own shard


def _torn(src: Path, dest: Path) -> Path:
    """A copy of ``src`` with pages in its middle overwritten (a disk or a copy gone wrong)."""
    data = bytearray(src.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle:middle + 3 * 4096] = bytes(range(256)) * 48
    dest.write_bytes(bytes(data))
    return dest


def test_a_merge_is_all_or_nothing_and_damaged_shards_are_one_line(shards: list[Path],
                                                                    tmp_path: Path) -> None:
    """A shard with torn pages, or of 0 bytes, listed after good ones: nothing is merged (the
    good ones neither), and the command says which file in one line, exit 2."""
    torn = _torn(shards[1], tmp_path / "torn.db")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for bad, says in ((torn, "torn.db: damaged ("), (empty, "empty.db: an empty store file (0 "
                                                               "bytes)")):
        into = tmp_path / f"m-{bad.stem}.db"
        with pytest.raises(SchemaError, match=re.escape(says)):
            merge_stores([shards[0], bad], into)
        assert not into.exists() or _counts(into)["episodes"] == 0
        p = subprocess.run([sys.executable, "-m", "coworkenv.cli", "merge", str(shards[0]),
                            str(bad), "--into", str(into)], capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
        lines = [x for x in p.stderr.splitlines() if x.strip()]
        assert p.returncode == 2 and len(lines) == 1 and says in lines[0], p.stderr
        assert not into.exists() or _counts(into)["episodes"] == 0


def test_eval_and_shard_readers_refuse_a_damaged_shard(shards: list[Path],
                                                       tmp_path: Path) -> None:
    torn = _torn(shards[1], tmp_path / "torn.db")
    with pytest.raises(SchemaError, match=r"torn\.db: damaged"):
        Reader([shards[0], torn])
    p = subprocess.run([sys.executable, "-m", "coworkenv.cli", "eval", "--db", str(torn)],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "torn.db: damaged" in lines[0], p.stderr
