"""The simulation language: a company that runs for days, with a roster of agents under test,
a workload of arrivals and world events (``kind: simulation`` files; ``coworkenv schema
simulation`` prints the JSON schema, generated from these models).

A simulation file names task files (the *templates* of its requests); each arrival is one
template instantiated at its arrival time (see :mod:`.arrivals`). Times in a simulation are
``dN HH:MM`` (the N-th *working* day of the simulation, d1 being the first; weekends are
skipped), ``HH:MM`` (the first day) or ISO-8601 with offset (see :mod:`.calendar`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..policy import POLICIES
from ..task import Response, SafetyRule
from .calendar import _hm

SIM_RULE = "sim."
"""The prefix of a simulation-wide safety rule's id in each arrival's task."""
STRUCTURAL = frozenset({"directory", "channel", "groups", "queues"})
"""The company's structure (people, channels, groups, queues): every change to it is in every
arrival's view (a DM channel opened by one request is there for the next), whereas the
content tables (mail, chat, calendar, documents, tickets) hold only the arrival's own."""
SEAT_PREFIX = "agent."
"""A seat's actor is ``agent.<id>``."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Context(Model):
    """What a persistent seat's model is sent: its prompt stays under a budget over a whole
    run, whatever the run's length."""

    budget_tokens: int = Field(default=16000, ge=500, le=2_000_000, description="Largest "
                               "prompt (messages and functions, estimated at 3 characters a "
                               "token) a persistent agent's model is sent; above it the oldest "
                               "turns leave the prompt")
    trim: Literal["oldest", "summarize"] = Field(default="oldest", description="What leaves "
                                                 "the prompt: the oldest turns (the open "
                                                 "requests they held stay listed), or the "
                                                 "oldest turns replaced by the model's own "
                                                 "summary of them")


class Seat(Model):
    """One agent under test: the person it acts as, what it does, and its own policy."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", description="Name of the agent "
                    "(routing, summaries, exports)")
    person: str = Field(description="Person id in the company's directory it acts as")
    role: str = Field(default="", description="What it does (arrivals may be routed by role)")
    policy: str = Field(default="oracle", description=POLICIES)
    tools: list[str] | None = Field(default=None, description="Tools or apps it may use "
                                    "(default: each arrival's own toolset; a persistent "
                                    "seat's: all its arrivals' and the memory app's)")
    queues: list[str] = Field(default_factory=list, description="Work queues it takes "
                              "arrivals from")
    action_minutes: float = Field(default=0.5, ge=0, description="Simulated minutes each of "
                                  "its actions takes (a tool call, a message)")
    max_turns: int | None = Field(default=None, ge=1, description="A budget of actions over "
                                  "the whole simulation (checked as a simulation-level check)")
    memory: Literal["persistent", "per_arrival"] | None = Field(
        default=None, description="persistent: one agent for the seat over the whole run, "
        "one conversation that every request, reply and notice reaches as it happens (the "
        "default for model-backed policies); per_arrival: a new agent for each arrival, one "
        "at a time (the default for scripted policies)")
    context: Context = Field(default_factory=Context, description="A persistent seat's "
                             "prompt budget")


class Clock(Model):
    start: datetime = Field(description="When the simulation starts (ISO-8601 with offset); "
                            "the first working day")
    days: int = Field(default=5, ge=1, le=400, description="Working days it runs")
    hours: tuple[str, str] = Field(default=("09:00", "17:00"), description="Working hours, "
                                   "local HH:MM in the start's offset")

    @model_validator(mode="after")
    def _aware(self) -> Clock:
        if self.start.tzinfo is None:
            raise ValueError("start: give an offset (e.g. 2026-03-02T09:00:00-05:00)")
        for h in self.hours:
            if not re.fullmatch(r"\d{1,2}:\d{2}", h):
                raise ValueError(f"hours: {h!r} is not HH:MM")
        if _hm(self.hours[0]) >= _hm(self.hours[1]):
            raise ValueError(f"hours: {self.hours[0]} is not before {self.hours[1]}")
        return self


class Poisson(Model):
    per_hour: float = Field(gt=0, le=10_000, description="Mean arrivals per working hour (per "
                            "requester, when the stream names requesters)")


class Route(Model):
    """Where an arrival goes: one agent, the least busy agent of a role, or a queue."""

    agent: str | None = None
    role: str | None = None
    queue: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Route:
        if [self.agent, self.role, self.queue].count(None) != 2:
            raise ValueError("give exactly one of agent, role or queue")
        return self


class OnMessage(Model):
    """An arrival when one person writes to another (a message, DM or mail)."""

    sender: str = Field(alias="from", description="Person id who writes")
    to: str = Field(description="Person id written to")


class On(Model):
    message: OnMessage | None = None
    done: str | None = Field(default=None, description="When an arrival of this task template "
                             "is completed")
    after_minutes: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one(self) -> On:
        if (self.message is None) == (self.done is None):
            raise ValueError("give exactly one of message or done")
        return self


class Stream(Model):
    """Arrivals of task templates: at fixed times, as a Poisson process over working hours,
    or when something happens."""

    task: str | None = Field(default=None, description="One task template id (or `tasks`)")
    tasks: list[str] = Field(default_factory=list, description="Task template ids (drawn in "
                             "turn)")
    to: str | Route = Field(description="An agent id, a person an agent acts as, or a route")
    at: list[str] = Field(default_factory=list, description="Fixed arrival times")
    poisson: Poisson | None = None
    on: On | None = None
    requesters: list[str] = Field(default_factory=list, description="People who ask: each "
                                  "has their own Poisson stream, and is the arrival's user")
    family: str | None = Field(default=None, description="Family on record (default: the "
                               "template's)")

    @model_validator(mode="before")
    @classmethod
    def _task(cls, data: Any) -> Any:
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if k is True else k): v for k, v in data.items()}  # (YAML 1.1's on)
        return data

    @model_validator(mode="after")
    def _one(self) -> Stream:
        if self.task is not None:
            self.tasks = [self.task, *self.tasks]
            self.task = None
        if not self.tasks:
            raise ValueError("give `task` or `tasks`")
        given = [bool(self.at), self.poisson is not None, self.on is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of at, poisson or on")
        if self.requesters and self.poisson is None:
            raise ValueError("requesters: only a poisson stream draws requesters")
        return self


class Outage(Model):
    kind: Literal["outage"] = "outage"
    app: str | None = Field(default=None, description="Every tool of this app fails")
    tools: list[str] = Field(default_factory=list, description="Or these tools")
    start: str = Field(alias="from", description="When it starts")
    end: str = Field(alias="to", description="When it ends")
    message: str = "the service is down; try again later"

    @model_validator(mode="after")
    def _what(self) -> Outage:
        if (self.app is None) == (not self.tools):
            raise ValueError("give exactly one of app or tools")
        return self


class Away(Model):
    kind: Literal["out_of_office"] = "out_of_office"
    person: str
    start: str = Field(alias="from")
    end: str = Field(alias="to")
    auto_reply: str | None = None


class Join(Model):
    kind: Literal["join"] = "join"
    at: str
    person: dict[str, Any] = Field(description="A directory entry (id, name, email, role, ...)")


class Leave(Model):
    """A person leaves: from then on they ask nothing, and whoever writes to them gets the
    auto-reply (their directory entry stays: mail to a former colleague is not an error)."""

    kind: Literal["leave"] = "leave"
    at: str
    person: str
    auto_reply: str = "I have left the company; this mailbox is no longer read."


class Reorg(Model):
    """A reorganisation: people change team, manager or role at a time (a directory change,
    on record like any other)."""

    kind: Literal["reorg"] = "reorg"
    at: str
    changes: dict[str, dict[str, str]] = Field(description="Person id -> the fields that "
                                               "change (team, manager, role)")

    @model_validator(mode="after")
    def _fields(self) -> Reorg:
        for pid, fields in self.changes.items():
            bad = sorted(set(fields) - {"team", "manager", "role"})
            if bad:
                raise ValueError(f"changes.{pid}: only team, manager and role change in a "
                                 f"reorganisation, not {bad}")
        return self


WorldEvent = Annotated[Outage | Away | Join | Leave | Reorg, Field(discriminator="kind")]


class Time(Model):
    """How simulated time passes for the agents (beside ``action_minutes`` per action)."""

    thinking: Literal["none", "latency", "tokens"] = Field(
        default="none", description="latency: each model call's measured latency (times "
        "`factor`) passes before the actions it decided; tokens: its completion tokens times "
        "`seconds_per_token` (deterministic); none: only action_minutes")
    factor: float = Field(default=1.0, gt=0, le=1000)
    seconds_per_token: float = Field(default=0.05, gt=0, le=60)


class ModelBudget(Model):
    """What the run's model calls may cost (agents' and people's), checked like the SLA."""

    tokens_per_day: int | None = Field(default=None, gt=0, description="Prompt and completion "
                                       "tokens of all model calls on any one simulated day")
    calls_per_arrival: int | None = Field(default=None, gt=0, description="Model calls made "
                                          "for any one arrival (those made while its agent "
                                          "handled what came for it)")


class SimChecks(Model):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())  # (model_budget)

    sla_hours: float | None = Field(default=None, gt=0, description="Every arrival is completed "
                                    "within this many working hours of arriving")
    none_dropped: bool = Field(default=True, description="Every arrival ended (its agent "
                               "finished it, or its own limit came) before the simulation ended, "
                               "passed or not")
    handoffs: bool | None = Field(default=None, description="Every hand-off (an arrival that an "
                                  "agent's message to another agent made) was taken up and seen "
                                  "through by its agent, and every such message named a request "
                                  "to make one; default: on when the workload has hand-offs")
    model_budget: ModelBudget | None = Field(default=None, description="Limits on the model "
                                             "calls of the run (checks model_budget:...)")


class Person(Model):
    """How one person of the company responds, across every request they take part in."""

    person: str
    persona: str = ""
    response: Response | None = None
    cast: Literal["scripted", "llm"] | None = Field(
        default=None, description="Who plays them: scripted (from their facts, to the letter) "
        "or llm (a model answers as their persona from their facts and calendar); default: "
        "the simulation's cast")


class Simulation(Model):
    kind: Literal["simulation"] = "simulation"
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    company: str = Field(description="companies/NAME.yaml beside the file, else a built-in one")
    clock: Clock
    seed: int = 0
    tasks: list[str] = Field(min_length=1, description="Task files and folders (templates), "
                             "relative to this file")
    roster: list[Seat] = Field(min_length=1)
    people: list[Person] = Field(default_factory=list)
    workload: list[Stream] = Field(min_length=1)
    events: list[WorldEvent] = Field(default_factory=list)
    safety: list[SafetyRule] = Field(default_factory=list, description="Safety rules over the "
                                     "whole run: every arrival is graded against them too")
    checks: SimChecks = Field(default_factory=SimChecks)
    time: Time = Field(default_factory=Time)
    cast: Literal["scripted", "llm"] = Field(default="scripted", description="Who plays the "
                                             "people: scripted, or llm (a model endpoint "
                                             "given to the run: --cast-base-url)")


def simulation_schema() -> dict[str, Any]:
    return Simulation.model_json_schema(by_alias=True)

