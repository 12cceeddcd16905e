"""A simulation's company setup is stored once (in the simulation's episode), not in every
arrival's episode, and every reader still reads each arrival's events whole: the same
events, hashes and replays as when each arrival held its own copy, through merges and
deletes."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.store import Reader, delete_runs, merge_stores
from coworkenv.store._records import events_hash
from coworkenv.workspace import replay_events

HANDOFF = Path(__file__).resolve().parents[2] / "examples" / "simulations" / "handoff.yaml"


def stored(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as c:
        return {"rows": c.execute("SELECT count(*) FROM event_rows").fetchone()[0],
                "events": c.execute("SELECT count(*) FROM events").fetchone()[0],
                "prefixes": c.execute("SELECT count(*) FROM event_prefixes").fetchone()[0],
                "setup_copies": c.execute("SELECT count(*) FROM event_rows WHERE actor = "
                                          "'setup' AND episode_id NOT LIKE '%:@simulation'"
                                          ).fetchone()[0]}


def read_whole(db: Path, run: str) -> int:
    """Check every arrival of ``run`` reads back whole; return how many there are."""
    with Reader(db) as rd:
        arrivals = [e for e in rd.episodes(run) if "arrival" in e.outcome]
        setup = sum(ev.actor == "setup" for ev in rd.events(f"{run}:@simulation"))
        for e in arrivals:
            events = list(rd.events(e.episode_id))
            assert [ev.seq for ev in events] == list(range(e.event_count)), e.episode_id
            assert events_hash(events) == e.events_hash, e.episode_id
            assert sum(ev.actor == "setup" for ev in events) == setup > 20
            assert {ev.episode_id for ev in events} == {e.episode_id}
            assert replay_events(events).state_hash() == e.state_hash
            assert rd.event_count(e.episode_id) == e.event_count
            tail = list(rd.events(e.episode_id, since=setup - 2, upto=setup + 2))
            assert [ev.seq for ev in tail] == list(range(setup - 2, setup + 3))
    return len(arrivals)


def test_the_company_setup_is_stored_once_and_every_arrival_reads_whole(tmp_path: Path
                                                                         ) -> None:
    db = tmp_path / "s.db"
    result = simulate(SimulationConfig(HANDOFF, db=db, run_id="h"))
    n = read_whole(db, "h")
    assert n == len(result.outcomes) == 8
    s = stored(db)
    assert s["prefixes"] == n and s["setup_copies"] == 0
    with sqlite3.connect(db) as c:
        setup = c.execute("SELECT count(*) FROM event_rows WHERE episode_id = 'h:@simulation' "
                          "AND actor = 'setup'").fetchone()[0]
        assert c.execute("SELECT DISTINCT source, rows FROM event_prefixes").fetchall() == [
            ("h:@simulation", setup)]
    assert s["events"] == s["rows"] + n * setup  # (what each arrival would have stored)

    # merged into another store: the fast way (no episode there yet) keeps the setup once
    merged = tmp_path / "m.db"
    merge_stores([db], merged)
    assert read_whole(merged, "h") == n and stored(merged) == s

    # and the episode by episode way (the target holds some of the run already)
    partial = tmp_path / "p.db"
    shutil.copy(merged, partial)
    with sqlite3.connect(partial) as c:
        gone = [r[0] for r in c.execute("SELECT episode_id FROM event_prefixes LIMIT 3")]
        for table in ("event_rows", "event_prefixes", "grades", "check_results", "projection",
                      "episodes"):
            c.executemany(f"DELETE FROM {table} WHERE episode_id = ?", [(g,) for g in gone])
    stats = merge_stores([db], partial)
    assert stats.episodes_added == 3 and read_whole(partial, "h") == n
    assert stored(partial) == s

    # deleting the run deletes its rows and prefixes, and counts its events as read
    counts = delete_runs(merged, ["h"])["h"]
    assert counts["events"] == s["events"]
    assert stored(merged) == {"rows": 0, "events": 0, "prefixes": 0, "setup_copies": 0}
