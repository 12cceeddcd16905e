"""Recorded model answers, served again.

Every model call of a simulation (an agent's, a persistent agent's summary, a model-played
person's) is recorded with the answer, its latency and its request's digest
(:func:`~coworkenv.agents.chat.request_digest`). :class:`RecordedAnswers` serves them again,
each actor's n-th call the answer recorded for its n-th, to the same request only:

- a **resumed** simulation answers its recorded prefix from its own log (no model call until
  the point where it was interrupted), then goes on with the model;
- a simulation **re-run with a run's answers** (``coworkenv simulate FILE --replay-model RUN``)
  answers every call from RUN's log, so with nothing else changed it records the very events
  RUN did, with zero model calls. Where a request differs from the one recorded (a prompt, a
  tool's result or a function changed), the first such call is reported (whose, when, which
  message, recorded and now); with ``--replay-live`` the run goes on with the model from there.

A call is matched by position (the actor's n-th) and checked by digest: a simulation is
deterministic up to its model's answers, so the same file with the same answers makes the
same requests in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..sim.errors import RunConfigError
from ..sim.simulation import SEAT_PREFIX, SimulationError
from ..store import MEASURED

__all__ = ["REPLAY_ONLY", "RecordedAnswers", "ReplayDiffers"]

REPLAY_ONLY = "http://replay-only.invalid/v1"
"""The endpoint address of a simulation that answers every model call from a recording: never
contacted (a call the recording does not hold stops the run first)."""


AHEAD = 16
"""How many of an agent's next recorded calls go with each envelope to its remote worker (one
envelope costs an agent one call, and a few more where it corrects malformed output)."""


class ReplayDiffers(SimulationError):
    """A simulation that cannot be served its recorded answers: a call whose request differs
    from the recorded one, or that the recording does not hold. ``resumable``: the run's own
    log disagrees (run it again as it was: the same file, tools and prompts), as opposed to
    another run's answers, whose re-run has then ended."""

    def __init__(self, message: str, resumable: bool = False) -> None:
        super().__init__(message)
        self.resumable = resumable


@dataclass(frozen=True)
class _Call:
    kind: str
    seq: int
    sim_time: float
    payload: dict[str, Any]
    own: bool = False
    """Recorded by the run being resumed (it must be asked again exactly)."""


@dataclass
class RecordedAnswers:
    """The recorded model calls of a simulation's log, by actor, served again in order.
    ``source``: what they are (named in reports); ``missing``: what a call beyond the
    recording does (``live``: asks the model; ``error``: stops the run); ``mismatch``: what a
    call whose request differs from the recorded one does (``error``: stops the run, naming
    the call and the difference; ``live``: recorded as the divergence, and every call from
    then on asks the model)."""

    calls: dict[str, list[_Call]]
    source: str
    start: datetime
    missing: str = "live"
    mismatch: str = "error"
    served: int = 0
    asked: int = 0
    """Calls made through the kernel while this recording was in force."""
    diverged: str | None = None
    """The first call whose request differed (``mismatch: live``), as reported."""
    label: str = "replay"
    """What a report starts with (``replay`` or ``resume``)."""

    @classmethod
    def from_events(cls, events: Iterable[Any], source: str, start: datetime, *,
                    missing: str = "live", mismatch: str = "error",
                    label: str = "replay") -> RecordedAnswers:
        """From a simulation's events (:class:`~coworkenv.store.EventRecord`s, in order)."""
        calls: dict[str, list[_Call]] = {}
        for e in events:
            if e.kind in MEASURED:
                calls.setdefault(e.actor, []).append(_Call(e.kind, e.seq, e.sim_time,
                                                           e.payload))
        out = cls(calls, source, start, missing, mismatch, label=label)
        old = sum(1 for cs in calls.values() for c in cs if not c.payload.get("digest"))
        if old:
            raise RunConfigError(f"{source}: {old} of its model calls carry no request digest "
                                 "(recorded by an earlier coworkenv): their answers cannot be "
                                 "served again")
        return out

    @classmethod
    def read(cls, db: Any, run_id: str, start: datetime, *, source: str | None = None,
             missing: str = "live", mismatch: str = "error") -> RecordedAnswers:
        """A run's recorded answers from a store (a path or an open store)."""
        from ..store import Reader

        with Reader(db) as r:
            known = {x["run_id"] for x in r.runs()}
            if run_id not in known:
                raise RunConfigError(f"replay_model: {db} holds no run {run_id!r} (runs: "
                                     f"{', '.join(sorted(known)) or 'none'})")
            episode = f"{run_id}:@simulation"
            if not r.event_count(episode):
                raise RunConfigError(f"replay_model: run {run_id!r} of {db} is not a "
                                     "simulation (it has no @simulation log)")
            return cls.from_events(r.events(episode), source or f"run {run_id} of {db}",
                                   start, missing=missing, mismatch=mismatch)

    def resuming(self, events: Iterable[Any], source: str) -> RecordedAnswers:
        """These answers under a resumed run's own recorded calls (``events``: its log so
        far): its own come first, each actor's later calls from these; a call of its own
        whose request differs stops the resume."""
        own = RecordedAnswers.from_events(events, source, self.start, label="resume")
        calls = {a: list(cs) for a, cs in self.calls.items()}
        for actor, mine in own.calls.items():
            calls[actor] = [_Call(c.kind, c.seq, c.sim_time, c.payload, own=True)
                            for c in mine] + calls.get(actor, [])[len(mine):]
        return RecordedAnswers(calls, self.source, self.start, self.missing, self.mismatch,
                               label=self.label)

    @property
    def recorded(self) -> int:
        return sum(len(cs) for cs in self.calls.values())

    def answer(self, actor: str, n: int, request: dict[str, Any]) -> tuple[Any, float] | None:
        """The recorded answer to ``actor``'s ``n``-th model call (from 0), as (response,
        seconds), if it is recorded for this very request; None: ask the model."""
        from ..agents.chat import request_digest

        self.asked += 1
        if self.diverged is not None:
            return None
        mine = self.calls.get(actor, [])
        if n >= len(mine):
            if self.missing == "error":
                raise self._beyond(actor, n)
            return None
        call = mine[n]
        if call.payload.get("digest") != request_digest(request):
            self._differs(call, self.difference(actor, n, request))
            return None
        self.served += 1
        return _response(call), float(call.payload.get("latency_s") or 0.0)

    def ahead(self, actor: str, n: int, most: int = AHEAD) -> list[dict[str, Any]]:
        """``actor``'s recorded calls from its ``n``-th on (at most ``most``), as a remote
        worker serves them: each the request's digest, the answer (a chat completion's JSON)
        and its latency."""
        if self.diverged is not None:
            return []
        return [{"digest": c.payload.get("digest"), "response": _response_body(c),
                 "latency_s": float(c.payload.get("latency_s") or 0.0)}
                for c in self.calls.get(actor, [])[n: n + most]]

    def elsewhere(self, actor: str, n: int, calls: int, served: int, differs: int | None,
                  where: str) -> None:
        """``calls`` of ``actor``'s from its ``n``-th made on a remote worker (``where``), the
        first ``served`` answered from :meth:`ahead`; ``differs``: the index among them of
        the call whose request was not the recorded one. Reported as :meth:`answer` reports
        a call made here (its request is on the worker: the report says which call)."""
        self.asked += calls
        self.served += served
        if self.diverged is not None or served == calls:
            return
        mine = self.calls.get(actor, [])
        k = n + (differs if differs is not None else served)
        if k >= len(mine):
            if self.missing == "error":
                raise self._beyond(actor, k, f" (on {where})")
            return
        if differs is None:
            return  # (an older worker, given no answers to serve: it asked the model)
        call = mine[k]
        when = (self.start + timedelta(seconds=call.sim_time)).strftime("%a %d %b %H:%M")
        source = "the run's own log" if call.own else self.source
        self._differs(call, f"{self.label}: {_who(actor)}'s model call {k + 1} ({when}, event "
                            f"{call.seq} of {source}), made on {where}, asks something else "
                            "than it did")

    def _beyond(self, actor: str, n: int, where: str = "") -> ReplayDiffers:
        """``actor``'s ``n``-th call, which the recording does not hold (``missing: error``)."""
        return ReplayDiffers(
            f"{self.label}: {_who(actor)}'s model call {n + 1}{where} is not in {self.source} "
            f"(it recorded {len(self.calls.get(actor, []))} for {_who(actor)}): the "
            "simulation went further than the recorded one (add --replay-live to go on with "
            "the model)")

    def _differs(self, call: _Call, report: str) -> None:
        """A call whose request is not the recorded one: a resume's own stops the run
        (resumable), else as ``mismatch`` says (``live``: noted, and the model asked from
        here on)."""
        if call.own:
            raise ReplayDiffers(report.replace(f"{self.label}: ", "resume: ", 1)
                                + " (a resume re-runs the simulation from its start: the "
                                "same file, tools and prompts)", resumable=True)
        if self.mismatch == "live":
            self.diverged = report
            return
        raise ReplayDiffers(report)

    # reporting -----------------------------------------------------------------------------
    def difference(self, actor: str, n: int, request: dict[str, Any]) -> str:
        """Which call differs from the recorded one, and how (the first differing message,
        else the functions or sampling)."""
        call = self.calls[actor][n]
        when = (self.start + timedelta(seconds=call.sim_time)).strftime("%a %d %b %H:%M")
        source = "the run's own log" if call.own else self.source
        head = (f"{self.label}: {_who(actor)}'s model call {n + 1} ({when}, event {call.seq} of "
                f"{source}) asks something else than it did: ")
        was = self._recorded_request(actor, n)
        for key in ("model", "temperature", "max_tokens", "seed"):
            if key in was and was.get(key) != request.get(key):
                return head + f"{key} was {was.get(key)!r}, now {request.get(key)!r}"
        before, now = was.get("messages") or [], request.get("messages") or []
        for i, (a, b) in enumerate(zip(before, now, strict=False)):
            if a != b:
                was_text, now_text = _contrast(_text(a), _text(b))
                return head + (f"message {i} ({b.get('role')}) was {was_text}, now {now_text}")
        if len(before) != len(now):
            i = min(len(before), len(now))
            extra = now[i] if len(now) > i else before[i]
            return head + (f"it sends {len(now)} messages where {len(before)} were recorded "
                           f"(message {i}: {_contrast(_text(extra), '')[0]})")
        tools = was.get("tools")
        count = len(request.get("tools") or [])
        if isinstance(tools, int) and tools != count:
            return head + f"it offers {count} functions where {tools} were recorded"
        return head + "its functions (names, descriptions or schemas) differ"

    def _recorded_request(self, actor: str, n: int) -> dict[str, Any]:
        """The request of ``actor``'s ``n``-th recorded call, its messages whole (an agent's
        call records only what it added since its previous one)."""
        from ..agents.chat import request_messages

        call = self.calls[actor][n]
        request = dict(call.payload.get("request") or {})
        if call.kind == "agent.model_call":
            convo: list[Mapping[str, Any]] = [c.payload for c in self.calls[actor][: n + 1]
                                              if c.kind == "agent.model_call"]
            request["messages"] = request_messages(convo)[-1]
        return request


def _who(actor: str) -> str:
    """An actor as a report names it: ``agent fin``, ``ana`` (a person)."""
    return f"agent {actor.removeprefix(SEAT_PREFIX)}" if actor.startswith(SEAT_PREFIX) \
        else actor


def _text(message: Any) -> str:
    """A message as one line: its content and its function calls."""
    if not isinstance(message, dict):
        return str(message)
    text = str(message.get("content") or "")
    for c in message.get("tool_calls") or ():
        text += f" {c['function']['name']}({c['function']['arguments']})"
    return " ".join(text.split())


def _contrast(a: str, b: str, most: int = 120) -> tuple[str, str]:
    """Both texts from a little before where they first differ (quoted)."""
    same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))
    start = max(0, same - 40)

    def cut(t: str) -> str:
        part = t[start: start + most]
        return repr(("…" if start else "") + part + ("…" if len(t) > start + most else ""))
    return cut(a), cut(b)


def _response(call: _Call) -> Any:
    """The recorded answer as the client returned it (a chat completion)."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(_response_body(call))


def _response_body(call: _Call) -> dict[str, Any]:
    """The recorded answer as a chat completion's JSON: an agent's call holds the whole
    response; a summary or a person's reply, its text and usage."""
    p = call.payload
    if "response" in p:
        return dict(p["response"])
    text = p.get("summary") if call.kind == "agent.summary_call" else p.get("reply")
    body: dict[str, Any] = {
        "id": "recorded", "object": "chat.completion", "created": 0,
        "model": str((p.get("request") or {}).get("model") or "recorded"),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text or ""}}]}
    if p.get("usage"):
        body["usage"] = p["usage"]
    return body
