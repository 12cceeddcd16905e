"""An arrival's view of a simulation's log: the episode it is recorded and graded as.

It holds the company (the setup), every change to the company's structure before the arrival,
and from its arrival on its own thread: rows tagged with its key, what other agents sent its
agent, its agent's own notes and results from when its seat took it up, the bus's notes and
the world's changes; its agent is named ``agent``, other agents the people they are, and
times count from its arrival.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ...store._records import decode_payload, encode_payload
from .language import SEAT_PREFIX, STRUCTURAL

if TYPE_CHECKING:
    from ..eventlog import EventLog
    from .language import Simulation
    from .records import Live


class ViewSource(Protocol):
    """What an arrival's view reads of the simulation's kernel."""

    run_id: str
    sim: Simulation
    _log: EventLog
    _setup_rows: list[tuple[Any, ...]]
    _structural: list[tuple[Any, ...]]
    persistent_seats: set[str]
    causes: dict[str, str]
    company_ids: set[tuple[str, str]]
    entity_rows: dict[str, list[int]]

    def _seed_of(self, name: str) -> int: ...


_BOOKKEEPING = frozenset({"arrival", "deadline", "world_event", "script"})


def arrival_view(k: ViewSource, live: Live) -> list[tuple[Any, ...]]:
    """The arrival's events as an episode of its own: see the module's docstring."""
    key, seat_actor = live.arrival.key, SEAT_PREFIX + live.seat.id
    vid = f"{k.run_id}:{live.task.id}:0:0"
    names = {SEAT_PREFIX + s.id: s.person for s in k.sim.roster}
    names[seat_actor] = "agent"
    t0 = live.arrival.at
    started = live.started_seq if live.started_seq is not None else 1 << 62
    # a persistent seat's agent works several arrivals: only what was credited to this one
    # (and what those actions brought about) is its own
    persistent = live.seat.id in k.persistent_seats
    out: list[tuple[Any, ...]] = []

    def add(t: float, wall: float, actor: str, kind: str, payload: dict[str, Any]) -> None:
        out.append((vid, len(out), round(max(0.0, t - t0), 6), wall, actor, kind,
                    encode_payload(payload)))

    add(t0, 0.0, "kernel", "episode.start", {
        "task_id": live.task.id, "trial": 0, "seed": k._seed_of(key),
        "start": live.task.start.isoformat(), "agent": live.task.agent,
        "simulation": k.sim.id, "arrival": key, "seat": live.seat.id})
    for row in k._setup_rows:  # (right after its start: grades.CompanyView counts on it)
        out.append((vid, len(out), 0.0, row[3], row[4], row[5], row[6]))
    for row in k._structural:  # (the company as it stood when the arrival came)
        if row[1] >= live.seq:
            break
        out.append((vid, len(out), 0.0, row[3], "world", row[5], row[6]))
    person = f'"{live.seat.person}"'
    kept_calls: set[tuple[str, str]] = set()
    last_kept = False
    known = {eid for _, eid in k.company_ids} if persistent else set()

    def fill(eid: str, before: int) -> None:
        """An entity another arrival made, that an action credited to this one changes:
        its events before that change come first (the view replays whole)."""
        for s in k.entity_rows.get(eid, ()):
            if s >= before:
                break
            r = next(k._log.rows_from(s))
            add(r[2], r[3], "world", r[5], decode_payload(r[6]))
        known.add(eid)

    for row in k._log.rows_from(live.seq):
        seq, t, wall, actor, kind, text = row[1], row[2], row[3], row[4], row[5], row[6]
        if kind.startswith("ws.") and actor == "tools":
            if last_kept:  # the effects of the call just before
                effect = decode_payload(text)
                if persistent:
                    eid = str(effect.get("id"))
                    if eid not in known and "data" not in effect:
                        fill(eid, seq)
                    known.add(eid)
                add(t, wall, actor, kind, effect)
            elif kind.split(".", 2)[1] in STRUCTURAL:  # (another request's, kept)
                add(t, wall, "world", kind, decode_payload(text))
            continue
        last_kept = False
        if kind.startswith("sim.") or kind in _BOOKKEEPING or kind in ("episode.start",
                                                                       "episode.end"):
            continue
        payload = decode_payload(text)
        to = payload.get("to")
        tag = payload.get("arrival")
        if tag is not None:  # one arrival's: this one's, or another's that reaches it
            reaches = (kind == "tool_call" and person in text) or (
                kind == "message" and to == seat_actor)
            keep = tag == key or (reaches and (not persistent
                                               or k.causes.get(str(tag)) == key))
        elif kind == "tool_result":  # (its seat's from when it took the arrival up)
            keep = (to == seat_actor and seq >= started and not persistent) or (
                str(to), str(payload.get("call_id"))) in kept_calls
        elif kind == "notify":
            keep = to == seat_actor and seq >= started and not persistent
        elif kind == "fault.injected":
            keep = payload.get("caller") == seat_actor and (
                not persistent or (str(seat_actor), str(payload.get("call_id"))) in kept_calls)
        else:  # notes: the seat's own (from when it took the arrival up), the bus's
            keep = (actor == seat_actor and seq >= started and not persistent) or \
                actor == "bus" or (kind.startswith("ws.") and actor != "tools")
        if not keep:
            continue
        if kind == "tool_call":
            kept_calls.add((actor, str(payload.get("call_id"))))
            last_kept = True
        if persistent and kind.startswith("ws."):
            known.add(str(payload.get("id")))
        if to in names:
            payload = {**payload, "to": names[str(to)]}
        add(t, wall, names.get(actor, actor), kind, payload)
    return out
