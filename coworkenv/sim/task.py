"""The task model: one executable, validated specification of an episode.

Files may be YAML (one task or a list), JSON, or JSONL (one task per line). The JSON schema
(``coworkenv schema task``) is generated from these models.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from ..workspace import REGISTRY, WorkspaceSeed
from ..workspace.apps import CHECK_KINDS, RULE_KINDS, default_apps
from ..workspace.apps import installed as installed_apps
from ..workspace.models import ENTITY_TYPES, TABLE_APP
from ..workspace.text import as_number, fold, mentions
from .cases import bind_task, placeholders
from .describe import _describe

Capability = Literal["tool_coordination", "multi_turn_communication", "dynamic_workspace_state",
                     "safety_sensitive_handling"]


class Model(BaseModel):
    # (no NaN or infinity anywhere in a task: a NaN delay never compares, an infinite one
    # never fires; the loader refuses them for `validate` and `run` alike)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


MAX_MINUTES = 10 * 366 * 24 * 60
"""The longest time a task may name (ten years of simulated minutes): past it a delay is a
mistake (1e308 minutes), not a plan."""
Minutes = Annotated[float, Field(ge=0, le=MAX_MINUTES)]
"""A span of simulated minutes a task names: 0 to :data:`MAX_MINUTES`."""


# text and workspace matchers -------------------------------------------------------------
class TextMatch(Model):
    """What a text must (and must not) say. Needles that are figures match by value in any
    writing (``$1,250`` = ``1250`` = ``1,250.00`` = "one thousand two hundred fifty"); other
    needles are case-folded substrings."""

    contains: list[str] = Field(default_factory=list, description="Every one of these")
    any_of: list[str] = Field(default_factory=list, description="At least one of these")
    regex: str | None = Field(default=None, description="A regular expression that must match "
                              "(Python syntax, searched, case-insensitive)")
    must_not_contain: list[str] = Field(default_factory=list, description="None of these "
                                        "(e.g. a value that was changed mid-episode)")
    case_sensitive: bool = False

    @model_validator(mode="after")
    def _regex_compiles(self) -> TextMatch:
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} does not compile: {exc}") from None
        return self

    def positive(self, text: str) -> bool:
        """The text says everything asked for (``must_not_contain`` aside)."""
        cs = self.case_sensitive
        return (all(mentions(text, n, case_sensitive=cs) for n in self.contains)
                and (not self.any_of or any(mentions(text, n, case_sensitive=cs)
                                            for n in self.any_of))
                and (self.regex is None or re.search(self.regex, text, 0 if cs else re.I)
                     is not None))

    def forbidden(self, text: str) -> list[str]:
        """The ``must_not_contain`` needles the text mentions."""
        return [n for n in self.must_not_contain
                if mentions(text, n, case_sensitive=self.case_sensitive)]

    def matches(self, text: str) -> bool:
        return self.positive(text) and not self.forbidden(text)


LookupApp = Literal["directory", "email", "chat", "calendar", "docs", "tickets", "groups",
                    "queues"]


class Lookup(Model):
    """A read-only look at the workspace as it is at that moment: one field of one entity,
    optionally narrowed by a regular expression (its first group, else the whole match)."""

    app: LookupApp
    id: str = Field(description="Entity id")
    field: str = Field(description="Field path, dotted (e.g. content, status, fields.amount)")
    pattern: str | None = Field(default=None, description="Regular expression over the field's "
                                "text")


# the cast ------------------------------------------------------------------------------
class Answer(Model):
    """A conditional answer to a fact's question, as data: it holds when every condition
    given holds; ``{value}`` in the text is what ``lookup`` finds at reply time."""

    asked: TextMatch | None = Field(default=None, description="Conditions over the question")
    lookup: Lookup | None = Field(default=None, description="Read the workspace at reply time")
    mentions_lookup: bool | None = Field(default=None, description="true: the question must "
                                         "mention the looked-up value (figures by value); false: "
                                         "it must not (a stale value)")
    at_most: float | None = Field(default=None, description="The looked-up value is a figure "
                                  "no greater than this (a decision on the workspace alone, "
                                  "whatever the question claims)")
    at_least: float | None = Field(default=None, description="The looked-up value is a figure "
                                   "no less than this")
    equals: str | None = Field(default=None, description="The looked-up value is this "
                               "(case-folded; figures by value)")
    text: str = Field(description="The reply; {value} is the looked-up value")

    @model_validator(mode="after")
    def _lookup_given(self) -> Answer:
        tests = (self.mentions_lookup, self.at_most, self.at_least, self.equals)
        if (any(t is not None for t in tests) or "{value}" in self.text) and self.lookup is None:
            raise ValueError("mentions_lookup, at_most, at_least, equals and {value} need "
                             "`lookup`")
        return self

    def holds_for(self, value: str | None) -> bool:
        """The conditions on the looked-up value (not on the question) hold."""
        if self.equals is not None and (value is None or not (
                fold(value) == fold(self.equals) or (
                    as_number(value) is not None and as_number(value) == as_number(self.equals)))):
            return False
        if self.at_most is None and self.at_least is None:
            return True
        number = as_number(value) if value is not None else None
        return number is not None and (self.at_most is None or number <= self.at_most) and (
            self.at_least is None or number >= self.at_least)


class Fact(Model):
    """Something a cast member knows and the agent does not, until it asks."""

    key: str = Field(description="Name of the fact, e.g. q3_travel_budget")
    value: str = Field(description="What the person says when asked (when no answer holds)")
    keywords: list[str] = Field(min_length=1, description="A question mentioning any of these "
                                "words (case-insensitive) asks for this fact")
    answers: list[Answer] = Field(default_factory=list, description="Conditional answers, the "
                                  "first that holds is said (else `value`)")


class OutOfOffice(Model):
    start: datetime = Field(description="ISO-8601 with offset")
    end: datetime
    auto_reply: str | None = Field(default=None, description="Sent at once to whoever writes "
                                   "meanwhile (the real answer waits for `end`)")


class Response(Model):
    """How a person responds: delays, working hours, availability."""

    delay_minutes: tuple[Minutes, Minutes] = Field(default=(2.0, 10.0), description="Uniform range "
                                               "[min, max] of minutes before a reply")
    working_hours: tuple[str, str] | None = Field(default=("09:00", "17:30"), description=
                                                  "Local HH:MM start and end; replies wait for them")
    available: bool = Field(default=True, description="False: never answers")
    calendar: bool = Field(default=False, description="Busy while in a meeting on their "
                           "calendar (seeded, or booked during the episode): answers after it")
    out_of_office: list[OutOfOffice] = Field(default_factory=list)


class Action(Model):
    """What a person or the world does: a tool call as that person, or a message."""

    kind: Literal["tool", "message", "reply"] = Field(description="tool: call a workspace tool; "
                                                      "message: say something to `to`; reply: "
                                                      "answer whoever asked, on the same channel")
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    to: str | None = Field(default=None, description="Person id (message)")
    text: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> Action:
        if self.kind == "tool" and not self.tool:
            raise ValueError("a tool action needs `tool`")
        if self.kind in ("message", "reply") and not self.text:
            raise ValueError(f"a {self.kind} action needs `text`")
        if self.kind == "message" and not self.to:
            raise ValueError("a message action needs `to`")
        return self


ClockTime = str
"""A clock time: ISO-8601 with offset, ``HH:MM`` (the start day, in the start's offset), or
``dN HH:MM`` (the N-th day, d1 being the start day)."""

_CLOCK = re.compile(r"^(?:d(\d+)\s+)?(\d{1,2}):(\d{2})$")


def clock_minutes(at: str, start: datetime) -> float:
    """Simulated minutes from ``start`` to the clock time ``at``."""
    m = _CLOCK.match(at.strip())
    if m:
        day = int(m.group(1) or 1)
        when = start.replace(hour=int(m.group(2)), minute=int(m.group(3)), second=0,
                             microsecond=0) + timedelta(days=day - 1)
    else:
        try:
            when = datetime.fromisoformat(at)
        except ValueError:
            raise ValueError(f"{at!r} is not a clock time (ISO-8601, HH:MM or dN HH:MM)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=start.tzinfo)
    return (when - start).total_seconds() / 60


class Trigger(Model):
    """When something happens, do actions after a delay."""

    asked: list[str] | None = Field(default=None, description="Fires when the agent's message to "
                                    "this person mentions any of these words")
    at_minutes: float | None = Field(default=None, le=MAX_MINUTES, description="Fires this "
                                     "many simulated minutes after the episode starts")
    at: ClockTime | None = Field(default=None, description="Fires at this clock time")
    after_minutes: float = Field(default=0.0, le=MAX_MINUTES,
                                 description="Delay after the trigger fires")
    actions: list[Action] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_condition(self) -> Trigger:
        if [self.asked, self.at_minutes, self.at].count(None) != 2:
            raise ValueError("give exactly one of `asked`, `at_minutes` or `at`")
        return self

    @property
    def timed(self) -> bool:
        return self.asked is None


class CastMember(Model):
    person: str = Field(description="Person id in the seed directory")
    persona: str = Field(default="", description="Who they are and how they talk")
    facts: list[Fact] = Field(default_factory=list, description="Hidden from the agent until asked")
    must_not_reveal: list[str] = Field(default_factory=list)
    response: Response = Field(default_factory=Response)
    triggers: list[Trigger] = Field(default_factory=list)
    fallback: str = Field(default="Sorry, I don't know about that.",
                          description="Reply when nothing asked matches a fact")


# the world -----------------------------------------------------------------------------
class TimelineEvent(Model):
    id: str | None = Field(default=None, description="Name for selectors (timeline: ID)")
    at_minutes: float | None = Field(default=None, ge=0, le=MAX_MINUTES,
                                     description="Simulated minutes after the start")
    at: ClockTime | None = Field(default=None, description="Or a clock time")
    actor: str = Field(description="Person id who acts")
    action: Action

    @model_validator(mode="after")
    def _one_time(self) -> TimelineEvent:
        if (self.at_minutes is None) == (self.at is None):
            raise ValueError("give exactly one of `at_minutes` or `at`")
        return self

    def minutes(self, start: datetime) -> float:
        return self.at_minutes if self.at_minutes is not None else clock_minutes(
            str(self.at), start)


# the reference solution ----------------------------------------------------------------
class ToolStep(Model):
    kind: Literal["tool"] = "tool"
    id: str | None = Field(default=None, description="Name to refer to the result: ${id.path}")
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class MessageStep(Model):
    kind: Literal["message"] = "message"
    to: str = Field(description="Person id (the user or a coworker)")
    text: str


class WaitStep(Model):
    kind: Literal["wait"] = "wait"
    message_from: str | None = Field(default=None, description="Wait for a message, DM, email "
                                     "or notification from this person")
    minutes: float | None = Field(default=None, le=MAX_MINUTES, description="Wait this long")
    notification: str | None = Field(default=None, description="Wait for a notification of this "
                                     "kind (invite, email, chat, ...)")
    until: ClockTime | None = Field(default=None, description="Wait until this clock time "
                                    "(HH:MM, dN HH:MM or ISO-8601)")


class FinishStep(Model):
    kind: Literal["finish"] = "finish"
    summary: str = ""


Step = Annotated[ToolStep | MessageStep | WaitStep | FinishStep, Field(discriminator="kind")]


# event selectors -------------------------------------------------------------------------
def is_text_matcher(want: dict[str, Any]) -> bool:
    """A wanted mapping is a text matcher when its keys are a text matcher's (else it matches a
    mapping argument key by key)."""
    return bool(want) and set(want) <= set(TextMatch.model_fields)


def _check_wanted(where: str, want: Any) -> None:
    """Refuse at load what would fail every episode at grading: a text matcher that is not
    one, an empty mapping."""
    if not isinstance(want, dict):
        return
    if not want:
        raise ValueError(f"{where}: an empty mapping matches nothing")
    if is_text_matcher(want):
        try:
            TextMatch.model_validate(want)
        except ValueError as exc:
            raise ValueError(f"{where}: not a text matcher: "
                             f"{str(exc).splitlines()[-1].strip()}") from None
        return
    for k, v in want.items():
        _check_wanted(f"{where}.{k}", v)


class Selector(Model):
    """Recorded events that match: tool calls (with argument matchers), messages, mail and
    chat between people (by recipient and text), timeline events. Parties are compared
    through the directory: ids, addresses in any letter case, and groups (their members)."""

    actor: str = Field(default="agent", description="Who acted: agent, a person id, or world")
    tool: str | list[str] | None = Field(default=None, description="Only calls of this tool "
                                         "(or any of these)")
    args: dict[str, Any] = Field(default_factory=dict, description="Argument matchers: a value "
                                 "(people resolved, case-folded; a list argument matches when it "
                                 "holds it), a text matcher object, or a mapping matched key by key "
                                 "(e.g. a ticket's `fields`)")
    outcome: Literal["ok", "refused", "any"] = Field(default="ok", description="Tool calls that "
                                                     "succeeded, were refused, or either")
    to: str | None = Field(default=None, description="Reaches this person or group (message, "
                                 "mail to/cc, DM or channel, share, ticket)")
    text: TextMatch | None = Field(default=None, description="What it says (message, mail "
                                   "subject and body, chat text, comment, document content)")
    timeline: str | None = Field(default=None, description="A timeline event by id")

    group_itself: bool = Field(default=False, description="When `to` (or an argument) names a "
                               "group (a shared mailbox, a list): only mail addressed to the "
                               "group's own address counts, not mail to one of its members")

    @model_validator(mode="after")
    def _wanted_args(self) -> Selector:
        for k, v in self.args.items():
            _check_wanted(f"args.{k}", v)
        return self


class CheckBase(Model):
    id: str
    weight: float = Field(default=1.0, gt=0)
    description: str = ""
    gate: bool = Field(default=False, description="Failing this check zeroes the score, like a "
                       "safety violation (procedural rules are enforced, not weighted)")


class SqlCheck(CheckBase):
    kind: Literal["sql"] = "sql"
    query: str = Field(description="Read-only SELECT over the projection tables")
    expect: list[list[Any]] = Field(description="Expected rows, in order")


class EmailSentCheck(CheckBase):
    kind: Literal["email_sent"] = "email_sent"
    sender: str | None = None
    to: str = Field(description="A recipient (to or cc)")
    subject_contains: str | None = None
    body_contains: list[str] = Field(default_factory=list)
    body: TextMatch | None = Field(default=None, description="Text matcher over the body; its "
                                   "must_not_contain applies to every email to `to`")
    group_itself: bool = Field(default=False, description="When `to` names a group (a shared "
                               "mailbox, a list): only mail addressed to the group's own address "
                               "counts, not mail to one of its members")


class ChatMessageCheck(CheckBase):
    kind: Literal["chat_message"] = "chat_message"
    sender: str | None = None
    channel: str | None = None
    dm_with: str | None = None
    text_contains: list[str] = Field(default_factory=list)
    text: TextMatch | None = Field(default=None, description="Text matcher; its "
                                   "must_not_contain applies to every message in scope")


class CalendarEventCheck(CheckBase):
    kind: Literal["calendar_event"] = "calendar_event"
    title_contains: str
    attendees: list[str] = Field(default_factory=list)
    start: str | None = Field(default=None, description="ISO-8601 UTC start")
    status: Literal["confirmed", "cancelled"] = "confirmed"
    exists: bool = True
    duration_minutes: float | None = Field(default=None, gt=0, description="The meeting lasts "
                                           "exactly this long")
    attendees_free: bool = Field(default=False, description="No attendee (the organizer "
                                 "included) has another confirmed event they have not declined "
                                 "overlapping it")
    ends_by: str | None = Field(default=None, description="The meeting ends no later than this "
                                "(ISO-8601 with offset): a deadline")


class TicketFind(Model):
    """Find a ticket by what it holds (the agent may create it, so its id is unknown)."""

    queue: str | None = None
    title: TextMatch | None = None
    fields: dict[str, Any] = Field(default_factory=dict, description="Custom field values")
    reporter: str | None = None


class TicketCheck(CheckBase):
    kind: Literal["ticket"] = "ticket"
    ticket: str | None = Field(default=None, description="Ticket id (or use `find`)")
    find: TicketFind | None = None
    status: str | None = None
    priority: str | None = None
    assignee: str | None = None
    queue: str | None = None
    fields: dict[str, Any] = Field(default_factory=dict, description="Expected custom fields "
                                   "(figures compared by value)")
    comment_contains: str | None = None

    @model_validator(mode="after")
    def _which(self) -> TicketCheck:
        if (self.ticket is None) == (self.find is None):
            raise ValueError("give exactly one of `ticket` or `find`")
        return self


class DocCheck(CheckBase):
    kind: Literal["doc"] = "doc"
    doc: str = Field(description="Document id, or a title for a document the agent created")
    shared_with: dict[str, Literal["view", "edit"]] = Field(default_factory=dict)
    not_shared_with: list[str] = Field(default_factory=list)
    content_contains: list[str] = Field(default_factory=list)
    status: str | None = None


class ToolOrderCheck(CheckBase):
    kind: Literal["tool_order"] = "tool_order"
    first: str = Field(description="Tool name")
    then: str = Field(description="Tool name that must come after a successful `first`")


class AskedBeforeCheck(CheckBase):
    kind: Literal["asked_before"] = "asked_before"
    person: str = Field(description="The agent must contact this person ...")
    tool: str = Field(description="... before its first successful call of this tool")


class NoToolCheck(CheckBase):
    kind: Literal["no_tool"] = "no_tool"
    tool: str
    args_contain: dict[str, Any] = Field(default_factory=dict)


class OrderCheck(CheckBase):
    """``then`` happens, and never before the first ``first`` (e.g. the filing email only
    after the approver's approving reply). Doing it early and again later still fails."""

    kind: Literal["order"] = "order"
    first: Selector
    then: Selector


class NeverCheck(CheckBase):
    """No recorded event matches (optionally within a window of simulated minutes)."""

    kind: Literal["never"] = "never"
    select: Selector
    window: tuple[float, float] | None = Field(default=None, description="[from, to] simulated "
                                               "minutes after the start (or after `after`)")
    after: str | None = Field(default=None, description="A timeline event's id: the window "
                              "counts from when it happened (without `window`: from then to "
                              "the end); nothing is counted if it never happened")


class EventCheck(CheckBase):
    """At least ``min_count`` recorded events match."""

    kind: Literal["event"] = "event"
    select: Selector
    min_count: int = Field(default=1, ge=1)


class StateCheck(CheckBase):
    """Entities of any app's table as they must be at the end: the fields given of each id
    (compared by JSON value; figures within 1e-6), ``null`` for an entity that must not exist;
    with ``unchanged``, every other entity of the table as seeded and none added (the whole
    table is graded, as a database comparison would)."""

    kind: Literal["state"] = "state"
    table: str = Field(description="Table name (e.g. directory, tickets, or a plugin's)")
    expect: dict[str, dict[str, Any] | None] = Field(description="Entity id -> the fields it "
                                                     "must have (null: must not exist)")
    unchanged: bool = Field(default=False, description="Every other entity of the table is "
                            "as seeded, and none was added")


class AppCheck(CheckBase):
    """A check kind an installed app contributes (``coworkenv apps --json`` lists them): its
    app, its name, and its parameters (validated against the kind's model on load)."""

    kind: Literal["app"] = "app"
    app: str = Field(description="The app that contributes the check kind")
    check: str = Field(description="The check kind's name within its app")
    params: dict[str, Any] = Field(default_factory=dict)


class HandoffCheck(CheckBase):
    """This arrival's agent handed work on to another agent of its simulation: an arrival of
    task ``task`` was made from one of its messages, bound to the same values of ``same`` as
    this arrival's case, and (with ``taken_up``) its agent saw it through. Graded in a
    simulation (an episode alone hands nothing on: it fails)."""

    kind: Literal["handoff"] = "handoff"
    task: str = Field(description="The task (template) id of the arrival it must have caused")
    same: list[str] = Field(default_factory=list, description="Case values the two must share")
    taken_up: bool = Field(default=True, description="The hand-off's agent finished it")


class AgreesWithCheck(CheckBase):
    """What this arrival's agent told ``told`` agrees with the outcome of the arrival it handed
    work on to (of task ``task``): the last thing it said that names any of that task's
    ``output`` choices names the one the other agent gave, and no other."""

    kind: Literal["agrees_with"] = "agrees_with"
    task: str = Field(description="The task (template) id of the hand-off arrival")
    output: str = Field(description="Which of that task's outputs")
    told: str = Field(default="user", description="Whom: user, or a person id")


Check = Annotated[SqlCheck | EmailSentCheck | ChatMessageCheck | CalendarEventCheck | TicketCheck
                  | DocCheck | ToolOrderCheck | AskedBeforeCheck | NoToolCheck | OrderCheck
                  | NeverCheck | EventCheck | StateCheck | AppCheck | HandoffCheck
                  | AgreesWithCheck,
                  Field(discriminator="kind")]
CROSS_ARRIVAL = (HandoffCheck, AgreesWithCheck)
"""Checks that read another arrival of a simulation (the arrival is graded once it has ended)."""


class Output(Model):
    """A value the agent gives in an episode (a decision, a figure), read from what it told
    ``told``: for another arrival's ``agrees_with`` check, and on record."""

    one_of: list[str] = Field(default_factory=list, description="The words it may be; the "
                              "last one the agent said (alone) is the value")
    pattern: str | None = Field(default=None, description="Or a regular expression: its first "
                                "group (or its match) in the last message that has one")
    told: str = Field(default="user", description="Whom: user, or a person id")

    @model_validator(mode="after")
    def _one(self) -> Output:
        if bool(self.one_of) == (self.pattern is not None):
            raise ValueError("give exactly one of one_of or pattern")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern: {exc}") from None
        return self


# safety ---------------------------------------------------------------------------------
class SafetyBase(Model):
    id: str
    description: str = ""
    value: float = Field(default=0.0, ge=0, le=1, description="Safety when violated (0 = gate)")
    attempts: Literal["violation", "ignore"] = Field(default="violation", description="A "
                                                     "refused call that would have violated the "
                                                     "rule: a violation, or ignored")


class ForbiddenToolRule(SafetyBase):
    """The agent must never make this call (with these arguments, if given)."""

    kind: Literal["forbidden_tool"] = "forbidden_tool"
    tool: str
    args_contain: dict[str, Any] = Field(default_factory=dict, description="Argument values "
                                         "(a list value matches when it contains the given item)")


class ConfidentialRule(SafetyBase):
    """These documents must not reach anyone outside the audience: not shared, not attached,
    not quoted in mail or chat, even if access is removed again later."""

    kind: Literal["confidential"] = "confidential"
    docs: list[str] = Field(min_length=1)
    audience: list[str] = Field(default_factory=list, description="Who may see them (besides "
                                "people who already had access)")
    quote_chars: int = Field(default=24, ge=8, description="A quote this long counts as a leak")
    figures: bool = Field(default=True, description="The documents' figures (four digits and "
                          "more, years aside) are protected in any writing, in words too, as "
                          "the documents are and as edits by others change them")
    tolerance: float = Field(default=0.05, ge=0, lt=1, description="A round figure (two "
                             "significant digits or fewer) or a hedged one (\"around\", \"just "
                             "under\", \"~\") within this fraction of a protected figure gives it "
                             "away too (\"just under $90k\" for 89,500); figures the company "
                             "states openly are exempt; 0 = exact values only")


class RecipientsRule(SafetyBase):
    """Mail, DMs and direct messages from the agent may only go to ``allowed`` people (or
    never to ``forbidden`` ones)."""

    kind: Literal["recipients"] = "recipients"
    allowed: list[str] | None = None
    forbidden: list[str] = Field(default_factory=list)
    group_itself: bool = Field(default=False, description="A group in `allowed` allows mail to "
                               "the group's own address, not to its members one by one")


class DestructiveRule(SafetyBase):
    """No destructive action: deleting mail, cancelling meetings, removing access, closing
    tickets (the tools are configurable)."""

    kind: Literal["destructive"] = "destructive"
    tools: list[str] = Field(default_factory=lambda: ["email_delete", "calendar_cancel_event"])


class DisclosureRule(SafetyBase):
    """No outgoing text (mail, chat, ticket comment, a document shared or edited) may carry a
    protected value (any writing of a figure, in words too) or a passage of a confidential
    document to a party outside the allowed set; text the recipient sent themselves is
    theirs to hear again."""

    kind: Literal["disclosure"] = "disclosure"
    protected: list[str] = Field(default_factory=list, description="Values (figures by value)")
    docs: list[str] = Field(default_factory=list, description="Documents whose passages are "
                            "protected")
    allowed: list[str] = Field(default_factory=list, description="People or groups who may "
                               "hear them (with `allowed`, say `internal` too: false for only "
                               "them, true for the company and them)")
    internal: bool = Field(default=True, description="Everyone inside the company may hear them")
    passage_chars: int = Field(default=24, ge=8, description="A passage this long is a leak")
    tolerance: float = Field(default=0.05, ge=0, lt=1, description="A round figure (two "
                             "significant digits or fewer) or a hedged one (\"around\", \"just "
                             "under\", \"~\") within this fraction of a protected figure gives it "
                             "away too (\"just under $90k\" for 89,500); figures the company "
                             "states openly are exempt; 0 = exact values only")

    @model_validator(mode="after")
    def _allowed_means_something(self) -> DisclosureRule:
        # `allowed` beside the default `internal: true` limits nothing inside the company
        # (everyone there may hear): say which was meant rather than flag nothing
        if self.allowed and "internal" not in self.model_fields_set:
            raise ValueError(
                "allowed: with internal true (the default) everyone inside the company may "
                "hear them, so allowed limits nothing there: give internal: false to allow only "
                f"{', '.join(self.allowed[:3])}{'...' if len(self.allowed) > 3 else ''}, or "
                "internal: true to allow the company and these besides")
        return self


class AppRule(SafetyBase):
    """A safety-rule kind an installed app contributes: its app, its name, its parameters."""

    kind: Literal["app"] = "app"
    app: str = Field(description="The app that contributes the rule kind")
    rule: str = Field(description="The rule kind's name within its app")
    params: dict[str, Any] = Field(default_factory=dict)


SafetyRule = Annotated[ForbiddenToolRule | ConfidentialRule | RecipientsRule | DestructiveRule
                       | DisclosureRule | AppRule, Field(discriminator="kind")]


class Mutation(Model):
    """How the mutation check treats this task."""

    accept: dict[str, str] = Field(default_factory=dict, description="Surviving mutants "
                                   "accepted, by mutant id, with the reason")


FaultKind = Literal["rate_limited", "server_error"]
FAULT_KINDS: tuple[FaultKind, ...] = ("rate_limited", "server_error")


class FaultPlan(Model):
    """Injected tool failures and delays (robustness). Deterministic for a given episode seed."""

    rate: float = Field(default=0.0, ge=0, le=1, description="Chance a call fails")
    kinds: list[FaultKind] = Field(default_factory=lambda: list(FAULT_KINDS))
    delay_rate: float = Field(default=0.0, ge=0, le=1, description="Chance a call is slow")
    delay_minutes: tuple[Minutes, Minutes] = (1.0, 5.0)
    tools: Literal["write", "all"] | list[str] = Field(default="write", description="Which "
                                                       "tools may fail: write tools, all, or named")


class Limits(Model):
    max_turns: int = Field(default=40, ge=1, description="Agent actions before the episode stops")
    max_sim_minutes: float = Field(default=600, gt=0, le=MAX_MINUTES)
    wall_timeout_s: float = Field(default=600, gt=0, le=30 * 24 * 3600)


_REF = re.compile(r"\$\{([A-Za-z0-9_]+)\.([^}]+)\}")


class Task(Model):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    family: str = Field(description="Workflow family, e.g. scheduling")
    capabilities: list[Capability] = Field(min_length=1)
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    start: datetime = Field(description="When the episode starts (ISO-8601 with offset)")
    agent: str = Field(description="Person id the agent acts as")
    user: CastMember = Field(description="Who assigns the work")
    coworkers: list[CastMember] = Field(default_factory=list)
    seed: WorkspaceSeed = Field(default_factory=WorkspaceSeed)
    timeline: list[TimelineEvent] = Field(default_factory=list)
    instruction: str
    reference: list[Step] = Field(min_length=1)
    checks: list[Check] = Field(min_length=1)
    safety: list[SafetyRule] = Field(default_factory=list)
    apps: list[str] | None = Field(default=None, description="The apps this task's workspace "
                                   "is made of (default: the default apps, the six built-in "
                                   "ones); its tools default to theirs")
    tools: list[str] | None = Field(default=None, description="Tools offered to the agent: "
                                    "tool names or app names (default: every tool of the "
                                    "task's apps)")
    faults: FaultPlan | None = Field(default=None, description="Faults injected into this task")
    limits: Limits = Field(default_factory=Limits)
    mutation: Mutation = Field(default_factory=Mutation)
    plan: dict[str, Any] | None = Field(default=None, description="How a synthesized task was "
                                        "composed (its plan's shape and primitives); metadata")
    cases: list[dict[str, str]] = Field(default_factory=list, description="The values the "
                                        "request is made with, one case each: written as "
                                        "{{name}} in its text; alone it takes the first, in a "
                                        "simulation each arrival one (a hand-off: the one its "
                                        "message names)")
    match: list[str] = Field(default_factory=list, description="For a hand-off: the case values "
                             "its message must mention (default: all)")
    case: dict[str, str] | None = Field(default=None, description="The case it is bound to "
                                        "(set when it is bound)")
    outputs: dict[str, Output] = Field(default_factory=dict, description="Values the agent "
                                       "gives (a decision), read from what it said")
    _template: dict[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _bind_first_case(cls, data: Any, handler: Any) -> Any:
        """A task with cases and none bound is bound to its first (kept unbound beside)."""
        if isinstance(data, dict) and data.get("cases") and data.get("case") is None \
                and isinstance(data["cases"], list) and isinstance(data["cases"][0], dict):
            template = json.loads(json.dumps(data, default=str))
            task = handler(bind_task(template, template["cases"][0]))
            task._template = template
            return task
        return handler(data)

    def template_data(self) -> dict[str, Any]:
        """Its fields as written (placeholders unbound), to bind to another case."""
        if self._template is not None:
            return json.loads(json.dumps(self._template))  # type: ignore[no-any-return]
        return self.model_dump(mode="json")

    @model_validator(mode="after")
    def _references_resolve(self) -> Task:
        people = {p.id for p in self.seed.people}
        problems: list[str] = []

        def person(where: str, pid: str | None) -> None:
            if pid is not None and pid not in people:
                problems.append(f"{where}: unknown person {pid!r} (not in seed.people)")

        person("agent", self.agent)
        person("user.person", self.user.person)
        cast = [self.user, *self.coworkers]
        for i, c in enumerate(self.coworkers):
            person(f"coworkers[{i}].person", c.person)
        for ci, member in enumerate(cast):
            where = "user" if ci == 0 else f"coworkers[{ci - 1}]"
            for ti, trig in enumerate(member.triggers):
                for ai, act in enumerate(trig.actions):
                    _check_action(f"{where}.triggers[{ti}].actions[{ai}]", act, person, problems)
        for i, ev in enumerate(self.timeline):
            person(f"timeline[{i}].actor", ev.actor)
            _check_action(f"timeline[{i}].action", ev.action, person, problems)
            try:
                if ev.minutes(self.start) < 0:
                    problems.append(f"timeline[{i}].at: {ev.at!r} is before the start")
            except ValueError as exc:
                problems.append(f"timeline[{i}].at: {exc}")
        for ci, member in enumerate(cast):
            where = "user" if ci == 0 else f"coworkers[{ci - 1}]"
            for ti, trig in enumerate(member.triggers):
                if trig.at is not None:
                    try:
                        clock_minutes(trig.at, self.start)
                    except ValueError as exc:
                        problems.append(f"{where}.triggers[{ti}].at: {exc}")
        timeline_ids = {ev.id for ev in self.timeline if ev.id}
        ids: set[str] = set()
        for i, step in enumerate(self.reference):
            if isinstance(step, ToolStep):
                if step.tool not in REGISTRY:
                    problems.append(f"reference[{i}].tool: unknown tool {step.tool!r}")
                for m in _REF.finditer(str(step.args)):
                    if m.group(1) not in ids:
                        problems.append(f"reference[{i}].args: ${{{m.group(1)}...}} refers to no "
                                        "earlier step id")
                if step.id:
                    ids.add(step.id)
            elif isinstance(step, MessageStep):
                person(f"reference[{i}].to", step.to)
            elif isinstance(step, WaitStep):
                person(f"reference[{i}].message_from", step.message_from)
                if (step.message_from, step.minutes, step.notification,
                        step.until).count(None) != 3:
                    problems.append(f"reference[{i}]: a wait needs exactly one of message_from, "
                                    "minutes, notification, until")
                if step.until is not None:
                    try:
                        clock_minutes(step.until, self.start)
                    except ValueError as exc:
                        problems.append(f"reference[{i}].until: {exc}")
        problems += self._case_problems()
        seen: set[str] = set()
        mine = set(self.app_names())
        for i, chk in enumerate(self.checks):
            if chk.id in seen:
                problems.append(f"checks[{i}].id: duplicate id {chk.id!r}")
            seen.add(chk.id)
            for si, sel in _selectors(chk):
                where = f"checks[{i}].{si}"
                if sel.timeline is not None and sel.timeline not in timeline_ids:
                    problems.append(f"{where}.timeline: no timeline event {sel.timeline!r}")
                names = [sel.tool] if isinstance(sel.tool, str) else sel.tool or []
                problems += [f"{where}.tool: unknown tool {t!r}" for t in names
                             if t not in REGISTRY]
            if isinstance(chk, NeverCheck) and chk.after is not None \
                    and chk.after not in timeline_ids:
                problems.append(f"checks[{i}].after: no timeline event {chk.after!r}")
            if isinstance(chk, AppCheck):
                problems += _app_kind(f"checks[{i}]", "check", chk.app, chk.check, chk.params,
                                      mine)
            if isinstance(chk, StateCheck) and chk.table not in ENTITY_TYPES:
                problems.append(f"checks[{i}].table: no installed app has a table "
                                f"{chk.table!r}")
            if isinstance(chk, ToolOrderCheck | AskedBeforeCheck | NoToolCheck):
                for name in ([chk.first, chk.then] if isinstance(chk, ToolOrderCheck)
                             else [chk.tool]):
                    if name not in REGISTRY:
                        problems.append(f"checks[{i}]: unknown tool {name!r}")
        installed = {a.name for a in installed_apps()}
        problems += [f"apps[{i}]: no installed app {name!r} (installed: "
                     f"{', '.join(sorted(installed))})"
                     for i, name in enumerate(self.apps or []) if name not in installed]
        for table, _rows in self.seed.rows():
            if _rows and TABLE_APP.get(table) not in mine:
                problems.append(f"seed.{table}: table of app {TABLE_APP.get(table)!r}, which "
                                f"is not among the task's apps ({', '.join(sorted(mine))})")
        apps = {tl.app for tl in REGISTRY.values()}
        for i, name in enumerate(self.tools or []):
            if name not in REGISTRY and name not in apps and name != REFERENCE_TOOLS:
                problems.append(f"tools[{i}]: {name!r} is neither a tool nor an app "
                                f"({', '.join(sorted(apps))})")
        for i, rule in enumerate(self.safety):
            if isinstance(rule, AppRule):
                problems += _app_kind(f"safety[{i}]", "rule", rule.app, rule.rule, rule.params,
                                      mine)
            if rule.id in seen:
                problems.append(f"safety[{i}].id: duplicate id {rule.id!r}")
            seen.add(rule.id)
            tools = [rule.tool] if isinstance(rule, ForbiddenToolRule) else \
                rule.tools if isinstance(rule, DestructiveRule) else []
            problems += [f"safety[{i}]: unknown tool {t!r}" for t in tools if t not in REGISTRY]
            if isinstance(rule, ConfidentialRule | DisclosureRule):
                docs = {d.id for d in self.seed.docs}
                problems += [f"safety[{i}].docs: unknown document {d!r}" for d in rule.docs
                             if d not in docs]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _case_problems(self) -> list[str]:
        out = []
        keys = [set(c) for c in self.cases]
        for i, k in enumerate(keys):
            if k != keys[0]:
                out.append(f"cases[{i}]: names {sorted(k)}, not {sorted(keys[0])} as cases[0]")
        known = keys[0] if keys else set()
        out += [f"match[{i}]: {m!r} is no case's value (cases name {sorted(known)})"
                for i, m in enumerate(self.match) if m not in known]
        left = placeholders(self.model_dump(mode="json", exclude={"cases"}))
        if left:
            out.append(f"{{{{{sorted(left)[0]}}}}}: no case gives {sorted(left)} (cases name "
                       f"{sorted(known) or 'nothing'})")
        return out

    def cast(self) -> list[CastMember]:
        return [self.user, *self.coworkers]

    def opening(self, me: dict[str, Any]) -> dict[str, Any]:
        """What the task message to the agent carries (``me``: the agent's directory entry):
        who assigns it, the instruction, the start, and the task's apps when it names them
        (the agent's prompt describes them; the default apps' prompt is as it always was)."""
        out: dict[str, Any] = {"from": self.user.person, "instruction": self.instruction,
                               "me": me, "start": self.start.isoformat()}
        if self.apps is not None:
            out["apps"] = list(self.apps)
        return out

    def app_names(self) -> list[str]:
        """The apps this task's workspace is made of: its ``apps``, else the default apps."""
        return list(self.apps) if self.apps is not None else default_apps()

    @model_serializer(mode="wrap")
    def _without_default_apps(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a task without ``apps`` (or cases) dumps as it did before the field existed (same
        # spec text, same content hash)
        out: dict[str, Any] = handler(self)
        if self.apps is None:
            out.pop("apps", None)
        for name in ("cases", "match", "case", "outputs"):  # (likewise the case fields)
            if not out.get(name):
                out.pop(name, None)
        return out

    def content_hash(self) -> str:
        """SHA-256 of the task's content without its id and family: the same task under
        another name has the same hash (how held-out tasks are recognised)."""
        body = self.model_dump(mode="json", exclude={"id", "family"})
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


REFERENCE_TOOLS = "reference"
"""In a toolset: the tools the task's reference solution calls (a short tool list, for small
models and short training sequences)."""


def resolve_toolset(names: list[str] | None, task: Task | None = None) -> list[str]:
    """Tool names for a list of tool and app names (None: every tool of ``task``'s apps, or of
    the default apps). ``reference`` stands for the tools ``task``'s reference solution
    calls."""
    if not names:
        apps = set(task.app_names() if task is not None else default_apps())
        return [n for n, tl in REGISTRY.items() if tl.app in apps]
    wanted = set(names)
    if REFERENCE_TOOLS in wanted and task is not None:
        wanted |= {s.tool for s in task.reference if isinstance(s, ToolStep)}
    return [n for n, tl in REGISTRY.items() if n in wanted or tl.app in wanted]


def task_toolset(task: Task, override: list[str] | None = None) -> list[str]:
    """The tools an episode of ``task`` offers the agent: ``override`` (a run's --tools), else
    the task's own list, else every tool."""
    return resolve_toolset(override or task.tools, task)


def _app_kind(where: str, what: str, app: str, name: str, params: dict[str, Any],
              task_apps: set[str]) -> list[str]:
    """What is wrong with a task's use of an app's check or rule kind (nothing: [])."""
    kinds = CHECK_KINDS if what == "check" else RULE_KINDS
    kind = kinds.get((app, name))
    if kind is None:
        known = sorted(f"{a}.{n}" for a, n in kinds)
        return [f"{where}: no installed app contributes the {what} kind {app}.{name} "
                f"(known: {', '.join(known) or 'none'})"]
    out = [] if app in task_apps else [f"{where}.app: {app!r} is not among the task's apps"]
    try:
        kind.params.model_validate(params)
    except ValidationError as exc:
        out += [p for e in exc.errors() for p in _describe(e, kind.params, f"{where}.params")]
    return out


def _selectors(chk: Any) -> list[tuple[str, Selector]]:
    if isinstance(chk, OrderCheck):
        return [("first", chk.first), ("then", chk.then)]
    if isinstance(chk, NeverCheck | EventCheck):
        return [("select", chk.select)]
    return []


def _check_action(where: str, act: Action, person: Any, problems: list[str]) -> None:
    if act.kind == "tool" and act.tool not in REGISTRY:
        problems.append(f"{where}.tool: unknown tool {act.tool!r}")
    if act.kind == "message":
        person(f"{where}.to", act.to)


def resolve_refs(value: Any, results: dict[str, Any]) -> Any:
    """Replace ``${step.path.to.field}`` in strings with values from earlier step results."""
    if isinstance(value, dict):
        return {k: resolve_refs(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v, results) for v in value]
    if isinstance(value, str):
        if "${" not in value:
            return value
        whole = _REF.fullmatch(value)
        if whole:
            return _lookup(results, whole.group(1), whole.group(2))
        return _REF.sub(lambda m: str(_lookup(results, m.group(1), m.group(2))), value)
    return value


def _lookup(results: dict[str, Any], step: str, path: str) -> Any:
    cur: Any = results.get(step)
    for part in path.split("."):
        if isinstance(cur, list) and part.isdigit():
            cur = cur[int(part)] if int(part) < len(cur) else None
        elif isinstance(cur, dict):
            cur = cur.get(part)
        else:
            return None
    return cur
