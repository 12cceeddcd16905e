"""The actor contract: what every policy in an episode receives and emits.

An actor receives envelopes addressed to it (``task``, ``message``, ``notify``,
``tool_result``, ``timer``, ...) through :meth:`Actor.handle` and acts only through its
:class:`ActorContext`: sending messages, calling workspace tools, setting timers, finishing.
The agent under training is given no access to the task's hidden facts or checks.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..bus import Envelope
from ..workspace import WorkspaceState


class ModelEndpoint(Protocol):
    """A model server as an actor calls it (:class:`~coworkenv.agents.Endpoint`)."""

    async def complete(self, request: dict[str, Any], boundary: Any = "agent"
                       ) -> tuple[Any, float]: ...


class Kernel(Protocol):
    """What a context needs from the episode kernel."""

    start: datetime

    @property
    def clock_now(self) -> float: ...

    @property
    def workspace(self) -> WorkspaceState: ...

    def submit(self, sender: str, to: str, kind: str, payload: dict[str, Any],
               delay: float) -> None: ...

    def note(self, actor: str, kind: str, payload: dict[str, Any]) -> None: ...

    def actor_for(self, person: str) -> str | None: ...

    def person_for(self, actor: str) -> str | None: ...

    async def model_call(self, actor: str, endpoint: ModelEndpoint, request: dict[str, Any],
                         boundary: Any) -> tuple[Any, float]: ...

    def recorded_ahead(self, actor: str) -> list[dict[str, Any]]: ...

    def answered_elsewhere(self, actor: str, calls: int, served: int, differs: int | None,
                           where: str) -> None: ...


class ActorContext:
    """An actor's handle on its episode."""

    def __init__(self, kernel: Kernel, name: str, person: str | None, seed: int) -> None:
        self._kernel = kernel
        self.name = name
        self.person = person
        self.seed = seed
        # made on first use (a generator holds 2.5 KiB of state, and most actors of most
        # episodes never draw): from ``seed``, or from a forked context's copied state
        self._rng: random.Random | None = None
        self._rng_state: Any = None
        self.tool_calls = 0
        """Tool calls made so far, which the next call's id counts on from (an agent that a
        remote worker runs is handed the count with each envelope, and hands it back)."""

    @property
    def rng(self) -> random.Random:
        """This actor's own random generator (deterministic per episode seed and actor)."""
        if self._rng is None:
            self._rng = random.Random(self.seed)
            if self._rng_state is not None:  # a forked context: where its parent was
                self._rng.setstate(self._rng_state)
        return self._rng

    def rng_state(self) -> Any:
        """The generator's state, for a fork (None: never drawn from, still at ``seed``)."""
        return self._rng_state if self._rng is None else self._rng.getstate()

    def copy_for(self, kernel: Kernel, rng_state: Any) -> ActorContext:
        """This context on another kernel (a forked episode), its random state ``rng_state``
        (from ``rng_state()``) and its call counter carried over."""
        new = ActorContext.__new__(ActorContext)
        new._kernel, new.name, new.person, new.seed = kernel, self.name, self.person, self.seed
        new._rng, new._rng_state = None, rng_state
        new.tool_calls = self.tool_calls
        return new

    @property
    def now(self) -> float:
        """Simulated seconds since the episode started."""
        return self._kernel.clock_now

    @property
    def now_dt(self) -> datetime:
        return self._kernel.start + timedelta(seconds=self._kernel.clock_now)

    @property
    def start(self) -> datetime:
        return self._kernel.start

    @property
    def workspace(self) -> WorkspaceState:
        """The episode's workspace as it is now: for simulated people to read (a calendar, a
        document's current figure). Actors change it only through tools."""
        return self._kernel.workspace

    def send(self, to: str, kind: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        """Send an envelope to another actor (by actor name), ``delay`` simulated seconds on."""
        self._kernel.submit(self.name, to, kind, payload, delay)

    def say(self, person: str, text: str, *, delay: float = 0.0, **extra: Any) -> None:
        """A direct message to a person (the user or a coworker), by person id."""
        to = self._kernel.actor_for(person)
        if to is None:
            raise ValueError(f"{person!r} is not someone in this episode who can be messaged")
        self.send(to, "message", {"from": self.person, "text": text, **extra},
                  delay=delay)

    def call_tool(self, tool: str, arguments: dict[str, Any], *, delay: float = 0.0,
                  as_person: str | None = None, call_id: str | None = None,
                  **extra: Any) -> str:
        """Ask the tool service to run a tool; the result comes back as a ``tool_result``
        carrying the same ``call_id`` (a model's own tool-call id, or a generated one).
        ``extra``: more of the envelope's payload (``re``: the request it is for)."""
        self.tool_calls += 1
        call_id = call_id or f"{self.name}-{self.tool_calls}"
        payload: dict[str, Any] = {"call_id": call_id, "tool": tool, "arguments": arguments,
                                   **extra}
        if as_person is not None:
            payload["as"] = as_person
        self.send("tools", "tool_call", payload, delay=delay)
        return call_id

    def timer(self, delay: float, **payload: Any) -> None:
        """Wake this actor with a ``timer`` envelope after ``delay`` simulated seconds."""
        self.send(self.name, "timer", payload, delay=delay)

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """Append an event about this actor's own work (e.g. a model call: request, response,
        latency, tokens) to the episode log. It changes nothing in the episode."""
        self._kernel.note(self.name, kind, payload)

    async def complete(self, endpoint: ModelEndpoint, request: dict[str, Any],
                       boundary: Any = "agent") -> tuple[Any, float]:
        """One model call of this actor: (response, seconds). It goes through the episode's
        kernel, which may answer it from a recording (a resumed or replayed simulation serves
        each actor's n-th call the answer recorded for the same request) instead of the
        endpoint. A call's record should carry ``digest`` (:func:`~coworkenv.agents.chat.
        request_digest` of ``request``) so that it can be served again."""
        return await self._kernel.model_call(self.name, endpoint, request, boundary)

    def recorded_answers(self) -> list[dict[str, Any]]:
        """For an agent whose model calls are made elsewhere (a remote worker): the recorded
        answers the kernel would serve its next calls (a resumed or replayed simulation),
        each ``{"digest", "response", "latency_s"}``, for that side to serve them; [] where
        none are recorded."""
        return self._kernel.recorded_ahead(self.name)

    def answered_elsewhere(self, calls: int, served: int, differs: int | None,
                           where: str) -> None:
        """What became of :meth:`recorded_answers` elsewhere, told before the calls' records:
        ``calls`` made, the first ``served`` of them from the recording; ``differs``: the
        index of the call whose request was not the recorded one (it asked the model), if
        any; ``where``: who made them (named in a report)."""
        self._kernel.answered_elsewhere(self.name, calls, served, differs, where)

    def finish(self, summary: str = "", **extra: Any) -> None:
        """The agent says it is done (ends the episode)."""
        self.send("kernel", "finish", {"summary": summary, **extra})

    def actor_for(self, person: str) -> str | None:
        return self._kernel.actor_for(person)

    def person_for(self, actor: str) -> str | None:
        return self._kernel.person_for(actor)


class Actor(ABC):
    """A policy in an episode. ``handle`` runs for one envelope at a time."""

    role: str = "actor"

    @abstractmethod
    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        """React to one envelope. Raising fails the episode at this actor's boundary."""

    def ended(self) -> None:  # noqa: B027 (optional: most actors hold nothing elsewhere)
        """The episode (or a simulation's arrival) this actor played is over and its result
        taken. Nothing by default; an actor that holds something elsewhere for it (a remote
        worker's room) lets it go here. Called once, outside any ``handle``; it must not
        raise."""


def let_go(actor: object) -> None:
    """``actor.ended()``, where the actor has it (an object with only ``handle``, all an
    actor needed before ``ended``, holds nothing to let go)."""
    ended = getattr(actor, "ended", None)
    if callable(ended):
        ended()
