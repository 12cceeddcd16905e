"""What a simulation keeps of its arrivals while it runs, and what it reports of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...bus import Envelope
from ..actor import Actor
from ..errors import SimError
from ..task import Task
from .arrivals import Arrival
from .language import Seat


class SimulationError(SimError):
    """A simulation that cannot go on (a resume that does not replay what was recorded)."""


@dataclass(slots=True)
class Live:
    """An arrival in the kernel, from its arrival to its grade."""

    arrival: Arrival
    task: Task
    seat: Seat
    seq: int
    """The log's length when it arrived (its view starts there)."""
    started: float | None = None
    started_seq: int | None = None
    turns: int = 0
    agent: Actor | None = None
    end: str | None = None
    failure: tuple[str, str] | None = None
    closed: bool = False
    policy: str = ""
    """The policy that took it up (its seat's when it started), and its role on record."""
    role: str = "student"
    mailbox: list[Envelope] = field(default_factory=list)
    """What reached its seat for it before the seat took it up (its agent gets them then)."""
    deadline: float = 0.0
    """When its time limit is reached (counted in working time from when it was taken up)."""


@dataclass(slots=True)
class ArrivalOutcome:
    """What the summary keeps of a graded arrival (its records are in the store)."""

    key: str
    task_id: str
    template: str
    family: str
    agent: str
    arrived: float
    started: float | None
    finished: float
    termination: str
    status: str
    completion: float
    score: float
    passed: bool
    response_hours: float
    """Working hours from its arrival to its end."""
    events_hash: str
    answered: bool = False
    """Its requester heard back (the agent reached them) or its grade passed."""
    violations: list[str] = field(default_factory=list)
    """The simulation-wide safety rules it violated."""
    failure: str | None = None
    """Why it failed (``boundary: message``: a model server down, no worker with room, a
    grader's error), None when it did not."""


@dataclass
class SimCheck:
    id: str
    passed: bool
    detail: str


AgentFactory = Callable[[Task], Actor]
PersonFactory = Callable[[Task, Any, str, str], Actor]
"""(task, cast member, role, agent's person) -> the actor that plays them for one arrival."""


MODEL_SLOT = ("calls", "prompt_tokens", "completion_tokens", "tokens", "latency_ms")
"""What a simulation counts of its model calls by simulated day and by arrival: calls, tokens
(prompt, completion, both) and their latency in milliseconds."""


class Answers(Protocol):
    """Recorded model answers a simulation serves again (a resume's own prefix, another run's
    calls): the runtime's ``RecordedAnswers``."""

    def answer(self, actor: str, n: int, request: dict[str, Any]) -> tuple[Any, float] | None:
        """``actor``'s ``n``-th model call's recorded (response, seconds); None: ask the
        model."""

    def ahead(self, actor: str, n: int) -> list[dict[str, Any]]:
        """The recorded answers of ``actor``'s calls from its ``n``-th on, for a remote
        worker that makes them to serve."""

    def elsewhere(self, actor: str, n: int, calls: int, served: int, differs: int | None,
                  where: str) -> None:
        """Account for ``calls`` of ``actor``'s from its ``n``-th, made by a remote worker,
        the first ``served`` from :meth:`ahead`; ``differs``: which asked something else."""


@dataclass
class Resume:
    """What a store already holds of a simulation: its log's first ``rows`` rows (whose hash
    is ``digest``) and the arrivals already recorded."""

    rows: int = 0
    digest: str = ""
    recorded: set[str] = field(default_factory=set)

