"""Rows of the store as typed records."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

_encode_json = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode
_SURROGATE = re.compile("[\ud800-\udfff]")


def _encode_std(payload: Any) -> str:
    """The standard library's text, with lone surrogates (which UTF-8 cannot carry) written
    as JSON escapes: storable, and decoded back to the very same string."""
    text = _encode_json(payload)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text
_SORTED = orjson.OPT_SORT_KEYS


def encode_payload(payload: Any) -> str:
    """Canonical JSON text of a payload: compact, keys sorted, UTF-8 as is; the text events
    are hashed and stored as. orjson writes it about ten times faster than the standard
    library, byte for byte the same for JSON data; what orjson refuses (integers beyond 64
    bits, keys that are not strings) and NaN or infinities (which orjson would write as null,
    the standard library as NaN) take the standard library's path."""
    try:
        text = orjson.dumps(payload, option=_SORTED).decode()
    except (TypeError, orjson.JSONEncodeError):
        return _encode_std(payload)
    if "null" in text and _has_nonfinite(payload):
        return _encode_std(payload)
    return text


_ATOMS = (str, int, bool, type(None))


def _has_nonfinite(value: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in ``value`` (asked only of payloads whose
    text has a ``null``, which is most entity dumps: plain loops, no generators)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    for v in value:
        if v.__class__ in _ATOMS:  # (exact types: the common case, no call)
            continue
        if _has_nonfinite(v):
            return True
    return False

MEASURED = frozenset({"agent.model_call", "agent.summary_call", "persona.model_call"})
"""Events that carry a measured wall-clock duration (a model call's ``latency_s``)."""

UNHASHED = frozenset({"agent.worker"})
"""Events kept in a log but not in its hash: which remote worker held an arrival is a fact of
the machines, like a wall clock (a resumed run's arrivals may go to other workers, and a run
whose agents ran in process has none). The hash numbers the events it holds on from the
first, so a log with these hashes as the same log without them."""


def hash_line(seq: int, sim_time: float, actor: str, kind: str, text: str) -> bytes:
    """One event's line of an episode's events hash, wall-clock stamps excluded: an event's
    ``wall_time``, and a model call's measured ``latency_s`` (how long the server took is a
    measurement of the machine, like the wall clock: a run resumed, or re-run against a
    deterministic server, hashes as the run it repeats; where the simulation's time follows
    latency, the times it moved to are hashed)."""
    if kind in MEASURED and '"latency_s"' in text:
        payload = json.loads(text)
        payload.pop("latency_s", None)
        text = encode_payload(payload)
    return f"{seq}|{sim_time:.6f}|{actor}|{kind}|{text}\n".encode()


class EventsHasher:
    """An episode's events hash, fed one event at a time (:func:`hash_line`; the
    :data:`UNHASHED` left out, the events after them numbered as if they were not there)."""

    __slots__ = ("_h", "_left_out")

    def __init__(self) -> None:
        self._h = hashlib.sha256()
        self._left_out = 0

    def update(self, seq: int, sim_time: float, actor: str, kind: str, text: str) -> None:
        if kind in UNHASHED:
            self._left_out += 1
        elif kind in MEASURED:
            self._h.update(hash_line(seq - self._left_out, sim_time, actor, kind, text))
        else:  # (hash_line's line, inline: this runs for every event a kernel records)
            self._h.update(f"{seq - self._left_out}|{sim_time:.6f}|{actor}|{kind}|{text}\n"
                           .encode())

    def update_lines(self, lines: bytes) -> None:
        """Events fed at once as the lines :func:`hash_lines` made of them, where nothing was
        left out before them (a prefix many episodes share: its lines made once)."""
        assert self._left_out == 0, "hash_lines numbers events as if none was left out"
        self._h.update(lines)

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    def copy(self) -> EventsHasher:
        new = EventsHasher()
        new._h, new._left_out = self._h.copy(), self._left_out
        return new


def hash_lines(events: Iterable[EventRecord]) -> bytes:
    """The lines :meth:`EventsHasher.update` feeds for ``events`` (:func:`hash_line`'s), where
    none of them and none before them is left out of hashes (:data:`UNHASHED`)."""
    lines = []
    for e in events:
        assert e.kind not in UNHASHED, "an event left out of hashes renumbers those after it"
        lines.append(hash_line(e.seq, e.sim_time, e.actor, e.kind, e.payload_text()))
    return b"".join(lines)


def events_hash(events: Iterable[EventRecord]) -> str:
    """Hash of an event sequence, wall-clock stamps excluded: equal for the same episode
    wherever it was recorded (a shard, its merge, a replay)."""
    h = EventsHasher()
    for e in events:
        h.update(e.seq, e.sim_time, e.actor, e.kind, e.payload_text())
    return h.hexdigest()


INSERT_EVENT = ("INSERT INTO event_rows (episode_id, seq, sim_time, wall_time, actor, kind, "
                "payload) VALUES (?, ?, ?, ?, ?, ?, ?)")


@dataclass(slots=True, frozen=True)
class EventRecord:
    """One appended event. ``seq`` is dense and starts at 0 within an episode."""

    episode_id: str
    seq: int
    sim_time: float
    wall_time: float
    actor: str
    kind: str
    payload: dict[str, Any]
    text: str | None = field(default=None, compare=False, repr=False)
    """The payload's canonical JSON, when the producer already has it (encoded once)."""

    def payload_text(self) -> str:
        return self.text if self.text is not None else encode_payload(self.payload)

    def row(self) -> tuple[Any, ...]:
        return (self.episode_id, self.seq, self.sim_time, self.wall_time, self.actor, self.kind,
                self.payload_text())

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> EventRecord:
        return cls(row[0], row[1], row[2], row[3], row[4], row[5], decode_payload(row[6]),
                   row[6])


def decode_payload(text: str) -> Any:
    """A payload from its canonical text: orjson, or the standard library for what orjson
    refuses (NaN and infinities, integers beyond 64 bits), as :func:`encode_payload` wrote."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


@dataclass(slots=True, frozen=True)
class EpisodeRecord:
    episode_id: str
    run_id: str
    task_id: str
    family: str
    trial: int
    attempt: int
    seed: int
    agent: str
    role: str
    status: str
    started_at: float | None
    finished_at: float | None
    sim_time: float | None
    turns: int | None
    termination: str | None
    failure_boundary: str | None
    failure: str | None
    completion: float | None
    event_count: int | None
    events_hash: str | None
    state_hash: str | None
    outcome: dict[str, Any]

    COLUMNS: ClassVar[str] = (
               "episode_id, run_id, task_id, family, trial, attempt, seed, agent, role, status, "
               "started_at, finished_at, sim_time, turns, termination, failure_boundary, failure, "
               "completion, event_count, events_hash, state_hash, outcome")

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> EpisodeRecord:
        return cls(*row[:-1], json.loads(row[-1]))  # type: ignore[call-arg]
