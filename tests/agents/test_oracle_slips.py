"""The oracle's slips: a wrong person argument, ``not_found``, a directory lookup, the id.

Teacher demonstrations otherwise never show a failed call followed by a repair (transient
faults are retried unchanged); these do, and grade exactly as the clean reference does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkenv.agents.oracle import slip_names
from coworkenv.runtime import RunConfig
from coworkenv.runtime.run import run
from coworkenv.sim import RunConfigError, load_tasks
from coworkenv.store import Reader

ROOT = Path(__file__).resolve().parents[2]
TASKS = [ROOT / "examples/tasks", ROOT / "examples/benchmark"]
LOOKUP = ["reference", "directory_search"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[float, Path]:
    d = tmp_path_factory.mktemp("slips")
    out = {}
    for slips in (0.0, 1.0):
        out[slips] = d / f"s{slips}.db"
        run(RunConfig(tasks=TASKS, agent="oracle", db=out[slips], slips=slips, tools=LOOKUP,
                      faults=0.1))
    return out


def _episodes(db: Path) -> dict[str, list]:  # type: ignore[type-arg]
    with Reader(db) as r:
        return {g["task_id"]: list(r.events(g["episode_id"])) for g in r.graded_episodes(None)}


def _grades(db: Path) -> dict[str, tuple[float, float, float]]:
    with Reader(db) as r:
        return {g["task_id"]: (g["score"], g["safety"], g["completion"])
                for g in r.graded_episodes(None)}


def test_slipped_runs_grade_as_the_clean_reference(runs: dict[float, Path]) -> None:
    clean, slipped = _grades(runs[0.0]), _grades(runs[1.0])
    assert len(clean) == 60 and slipped == clean
    assert set(slipped.values()) == {(1.0, 1.0, 1.0)}


def test_every_slip_is_told_not_found_then_looked_up_then_called_right(
        runs: dict[float, Path]) -> None:
    slips = 0
    for task_id, events in _episodes(runs[1.0]).items():
        marked = {e.payload["call_id"] for e in events if e.kind == "agent.slip"}
        calls = [e.payload for e in events if e.kind == "tool_call" and e.actor == "agent"]
        results = {e.payload["call_id"]: e.payload for e in events if e.kind == "tool_result"}
        for i, c in enumerate(calls):
            if c["call_id"] not in marked:
                continue
            slips += 1
            j = i
            while results[calls[j]["call_id"]].get("error", {}).get("code") in (
                    "rate_limited", "server_error", "unavailable"):
                j += 1  # (an injected fault on the slip: the same wrong call again)
                assert calls[j]["arguments"] == c["arguments"]
            assert results[calls[j]["call_id"]]["error"]["code"] == "not_found", task_id
            k = next(k for k in range(j + 1, len(calls))
                     if not results[calls[k]["call_id"]].get("error"))
            found = results[calls[k]["call_id"]]
            assert calls[k]["tool"] == "directory_search"
            ids = {p["id"] for p in found["result"]["people"]}
            right = next(x for x in calls[k + 1:] if x["tool"] == c["tool"])
            # the right call differs from the slip only where the name was, by an id found
            changed = {key for key in c["arguments"] if c["arguments"][key] != right["arguments"][key]}
            assert len(changed) == 1, (task_id, c, right)
            value = right["arguments"][changed.pop()]
            assert (set(value) if isinstance(value, list) else {value}) & ids
    assert slips > 100  # every person-naming step of 60 tasks


def test_no_slip_where_the_lookup_is_not_offered(tmp_path: Path) -> None:
    r = run(RunConfig(tasks=[ROOT / "examples/tasks"], agent="oracle", db=tmp_path / "a.db",
                      slips=1.0, tools=["reference"]))
    assert r.overall["score"] == 1.0
    with Reader(tmp_path / "a.db") as rd:
        assert not rd.conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'agent.slip'").fetchone()[0]


def test_slips_are_the_same_every_run(tmp_path: Path, runs: dict[float, Path]) -> None:
    again = tmp_path / "again.db"
    run(RunConfig(tasks=TASKS, agent="oracle", db=again, slips=1.0, tools=LOOKUP, faults=0.1))
    first, second = _episodes(runs[1.0]), _episodes(again)

    def calls(events: list) -> list:  # type: ignore[type-arg]
        return [(e.kind, json.dumps(e.payload.get("arguments"), sort_keys=True))
                for e in events if e.kind in ("tool_call", "agent.slip")]
    assert all(calls(first[t]) == calls(second[t]) for t in first)


def test_slip_names_never_resolve() -> None:
    for task in load_tasks([str(p) for p in TASKS]):
        ids = {p.id for p in task.seed.people} | {g.id for g in task.seed.groups}
        emails = {p.email.lower() for p in task.seed.people} | {
            g.email.lower() for g in task.seed.groups}
        for person, names in slip_names(task).items():
            assert names and person in {p.id for p in task.seed.people}
            assert not any(n in ids or n.lower() in emails for n in names)


def test_only_the_oracle_slips(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError, match=r"^slips: only the oracle agent slips, got "
                                             r"agent 'noop'"):
        RunConfig(tasks=TASKS, agent="noop", db=tmp_path / "a.db", slips=0.5)
    with pytest.raises(RunConfigError, match=r"^slips: expected a rate between 0 and 1, got 2"):
        RunConfig(tasks=TASKS, agent="oracle", db=tmp_path / "a.db", slips=2.0)
