"""Replay from the event log rebuilds exactly the state built live."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coworkenv.store import EventRecord, EventStore, Reader
from coworkenv.workspace import execute_tool, replay_events

from ..conftest import company_seed
from .test_tools import HAPPY, NOW, REJECT

CALLS = [(n, a, args) for n, a, args in HAPPY] + [(n, a, args) for n, a, args, *_ in REJECT]
ACTORS = ["agent", "alice", "bob", "carol", "vic"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(CALLS), st.sampled_from(ACTORS)), min_size=1,
                max_size=25))
def test_replay_equals_live(tmp_path: Path, calls: list[tuple[tuple[str, str, dict], str]]) -> None:
    seed = company_seed()
    state = seed.build()
    events = [EventRecord("e", i, 0.0, 0.0, "setup", k, p) for i, (k, p) in enumerate(seed.events())]
    hashes = {len(events) - 1: state.state_hash()}
    for step, ((name, _, args), actor) in enumerate(calls):
        out = execute_tool(state, actor, name, args, NOW + timedelta(minutes=step))
        for kind, payload in out.events:
            events.append(EventRecord("e", len(events), float(step), 0.0, actor, kind, payload))
        hashes[len(events) - 1] = state.state_hash()

    db = tmp_path / f"r{abs(hash(str(calls)))}.db"

    async def write() -> None:
        async with EventStore(db) as s:
            await s.append_many(events)

    anyio.run(write)
    with Reader(db) as r:
        assert replay_events(r.events("e")).state_hash() == state.state_hash()
        for seq, h in hashes.items():  # time travel: every intermediate point too
            assert replay_events(r.events("e", upto=seq)).state_hash() == h


def test_seed_replay_is_exact() -> None:
    seed = company_seed()
    assert replay_events(
        [EventRecord("e", i, 0, 0, "s", k, p) for i, (k, p) in enumerate(seed.events())]
    ).to_json() == seed.build().to_json()


@pytest.mark.parametrize("upto", [0, 3])
def test_replay_upto_is_a_prefix(upto: int) -> None:
    seed = company_seed()
    evs = [EventRecord("e", i, 0, 0, "s", k, p) for i, (k, p) in enumerate(seed.events())]
    assert len(replay_events(evs, upto=upto).people) == upto + 1
