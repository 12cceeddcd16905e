"""Store benchmark: async single-writer append rate vs raw executemany, and replay rate.

Prints one JSON object. All numbers are measured in this one run, side by side:
- raw_executemany_rows_per_s: plain sqlite3 executemany in one transaction on the same schema,
  from the same event records (serialising each one's payload is part of writing it), in the
  calling thread with nothing else to do (the store's writer inserts statements of many rows
  each, in its own thread while the event loop goes on: it can pass this baseline);
- async_append_*: events/s through EventStore (bounded queue, one writer, batched commits),
  from the same records, until everything is committed;
- replay_events_per_s: events read back from the file and folded into a workspace.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.agents import office_mix
from coworkenv.sim import builtin_tasks
from coworkenv.store import EventRecord, EventStore, Reader
from coworkenv.store._records import INSERT_EVENT
from coworkenv.store._schema import PRAGMAS, migrate
from coworkenv.workspace import execute_tool, replay_events


def payload(i: int) -> dict[str, object]:
    return {"tool": "email_send", "call_id": f"c{i}", "arguments": {"to": ["bob"], "subject":
            "Q3 numbers", "body": "Could you send me the Q3 travel budget?"}}


def fresh(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()


def records(n: int) -> list[EventRecord]:
    return [EventRecord(f"e{i // 50}", i % 50, float(i), 0.0, "agent", "tool_call", payload(i))
            for i in range(n)]


def raw_rate(path: Path, recs: list[EventRecord]) -> float:
    n = len(recs)
    fresh(path)
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in PRAGMAS:
        conn.execute(pragma)
    migrate(conn, str(path))
    t = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany(INSERT_EVENT, [r.row() for r in recs])
    conn.execute("COMMIT")
    rate = n / (time.perf_counter() - t)
    conn.close()
    return rate


def async_rate(path: Path, recs: list[EventRecord], chunk: int) -> float:
    n = len(recs)
    fresh(path)

    async def go() -> float:
        async with EventStore(path) as store:
            t = time.perf_counter()
            buf: list[EventRecord] = []
            for ev in recs:
                if chunk == 1:
                    await store.append(ev)
                    continue
                buf.append(ev)
                if len(buf) == chunk:
                    await store.append_many(buf)
                    buf = []
            await store.append_many(buf)
            await store.flush()
            return n / (time.perf_counter() - t)

    return anyio.run(go)


def replay_rate(path: Path, episodes: int, calls: int) -> tuple[float, int]:
    """A log of real tool events mixed with envelope events, read back and replayed: a
    built-in task's seed, then the load agent's office mix (three writes, two reads)."""
    fresh(path)
    task = next(t for t in builtin_tasks() if t.id == "share-onboarding")
    seed = task.seed
    now = datetime(2026, 3, 2, 14, tzinfo=UTC)
    script = office_mix(task)
    events: list[EventRecord] = []
    for e in range(episodes):
        eid = f"e{e}"
        state = seed.build()
        evs = [EventRecord(eid, i, 0.0, 0.0, "setup", k, p) for i, (k, p) in
               enumerate(seed.events())]
        for c in range(calls):
            name, args = script[c % len(script)]
            evs.append(EventRecord(eid, len(evs), c, 0.0, "agent", "tool_call",
                                   {"tool": name, "arguments": args}))
            out = execute_tool(state, task.agent, name, args, now + timedelta(seconds=c))
            evs.extend(EventRecord(eid, len(evs) + j, c, 0.0, "tools", k, p)
                       for j, (k, p) in enumerate(out.events))
            evs.append(EventRecord(eid, len(evs), c, 0.0, "tools", "tool_result",
                                   out.observation))
        events.extend(evs)

    async def write() -> None:
        async with EventStore(path) as s:
            await s.append_many(events)

    anyio.run(write)
    t = time.perf_counter()
    with Reader(path) as r:
        for e in range(episodes):
            replay_events(r.events(f"e{e}"))
    return len(events) / (time.perf_counter() - t), len(events)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.db"
        recs = records(args.events)
        raw, single, stepped = [], [], []
        for _ in range(args.repeats):  # interleaved, so noise hits every variant alike
            raw.append(raw_rate(path, recs))
            single.append(async_rate(path, recs, 1))
            stepped.append(async_rate(path, recs, 8))
        replay, replay_n = replay_rate(path, 200, 100)
    med = statistics.median
    out = {
        "events": args.events,
        "repeats": args.repeats,
        "raw_executemany_rows_per_s": round(med(raw)),
        "async_append_single_events_per_s": round(med(single)),
        "async_append_many_8_events_per_s": round(med(stepped)),
        "ratio_single_vs_raw": round(med(single) / med(raw), 3),
        "ratio_many_8_vs_raw": round(med(stepped) / med(raw), 3),
        "replay_events_per_s": round(replay),
        "replay_events": replay_n,
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
