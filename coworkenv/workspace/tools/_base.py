"""Tools as command handlers: argument models, the registry and execution."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ToolError
from ..models import Entity, Person, WorkspaceState, apply_event, iso, ws_change, ws_event


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(slots=True)
class Notification:
    """Something a person should hear about (new mail, a DM, an invite)."""

    person: str
    kind: str
    summary: dict[str, Any]


@dataclass(slots=True)
class ToolContext:
    state: WorkspaceState
    actor: str
    now: datetime
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)

    @property
    def now_iso(self) -> str:
        return iso(self.now)

    def emit(self, app: str, op: str, entity: Entity | None, *, entity_id: str | None = None,
             changed: tuple[str, ...] = ()) -> None:
        """Record a state event and apply it. ``changed``: the entity exists and only these
        fields changed (list fields by items added at the end): the event carries them
        alone (see :func:`ws_change`), not the whole entity."""
        if changed and entity is not None:
            kind, payload = ws_change(app, op, self.state.tables[app][entity.id], entity,
                                      changed)
        else:
            kind, payload = ws_event(app, op, entity, entity_id=entity_id)
        apply_event(self.state, kind, payload, entity)
        self.events.append((kind, payload))

    def notify(self, person: str, kind: str, /, **summary: Any) -> None:
        if person != self.actor:
            self.notifications.append(Notification(person, kind, summary))

    def person(self, ref: str, fieldname: str) -> Person:
        """Resolve a person id or email address, or fail naming the field."""
        p = self.state.people.get(ref) or self.state.person_by_email(ref)
        if p is None:
            raise ToolError("not_found", f"no person {ref!r} in the directory", fieldname)
        return p

    def recipients(self, ref: str, fieldname: str) -> tuple[list[str], str | None]:
        """Mail recipients for a person or a group (id or address, any letter case): the
        person ids it reaches, and the group id when it is a group."""
        p = self.state.people.get(ref) or self.state.person_by_email(ref)
        if p is not None:
            return [p.id], None
        g = self.state.group_by_ref(ref)
        if g is not None:
            return list(g.members), g.id
        raise ToolError("not_found", f"no person or group {ref!r} in the directory", fieldname)

    def me(self) -> Person:
        return self.person(self.actor, "actor")


Handler = Callable[[ToolContext, Any], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    app: str
    description: str
    args: type[ToolArgs]
    handler: Handler
    writes: bool

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI function schema (built once; each caller gets its own copy:
        pydantic's schema generation costs about 0.5 ms a tool, on every episode's reset, and a
        deep copy about 0.1 ms, so the copy is decoded from the schema's JSON)."""
        key = (self.name, self.args)
        if key not in _SCHEMAS:
            schema = self.args.model_json_schema()
            schema.pop("title", None)
            _SCHEMAS[key] = orjson.dumps({"type": "function", "function": {
                "name": self.name, "description": self.description, "parameters": schema}})
        out: dict[str, Any] = orjson.loads(_SCHEMAS[key])
        return out


_SCHEMAS: dict[tuple[str, type], bytes] = {}


REGISTRY: dict[str, Tool] = {}
"""The tools of the installed apps (see :mod:`coworkenv.workspace.apps`), by name."""
ALL_TOOLS: dict[str, Tool] = {}
"""Every tool whose module was imported, installed or not."""


def tool(name: str, app: str, args: type[ToolArgs], *, writes: bool) -> Callable[[Handler], Handler]:
    """Register a handler as a tool of ``app``; its docstring is the description the model
    sees. (It joins :data:`REGISTRY` when its app is installed.)"""

    def register(fn: Handler) -> Handler:
        if name in ALL_TOOLS:
            raise ValueError(f"tool {name!r} registered twice")
        ALL_TOOLS[name] = Tool(name, app, (fn.__doc__ or "").strip(), args, fn, writes)
        return fn

    return register


@dataclass(slots=True)
class ToolOutcome:
    ok: bool
    observation: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    notifications: list[Notification]
    error: ToolError | None = None


MAX_FIELD_CHARS = 32_000
"""The longest string one argument may hold (a mail body, a document's content)."""
MAX_CALL_CHARS = 128_000
"""All strings of one call together."""
MAX_ITEMS = 1_000
"""The longest list (recipients, attendees) or widest object in one argument."""


def _too_large(arguments: dict[str, Any]) -> ToolError | None:
    """The first bound ``arguments`` break, as the error the caller gets (None if none)."""
    if _surely_small(arguments):
        return None
    total = 0
    stack: list[tuple[Any, str, int]] = [(v, str(k), 1) for k, v in arguments.items()]
    if len(arguments) > MAX_ITEMS:
        return ToolError("too_large", f"more than {MAX_ITEMS} arguments", "arguments")
    while stack:
        value, where, depth = stack.pop()
        if depth > 16:
            return ToolError("too_large", "arguments nested more than 16 levels", where)
        if isinstance(value, str):
            if len(value) > MAX_FIELD_CHARS:
                return ToolError("too_large", f"{len(value):,} characters; at most "
                                 f"{MAX_FIELD_CHARS:,} per field", where)
            total += len(value)
            if total > MAX_CALL_CHARS:
                return ToolError("too_large", f"more than {MAX_CALL_CHARS:,} characters in "
                                 "one call", where)
        elif isinstance(value, dict | list):
            if len(value) > MAX_ITEMS:
                return ToolError("too_large", f"{len(value):,} items; at most {MAX_ITEMS:,}",
                                 where)
            pairs = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in pairs)
    return None


_SCALARS = (int, float, bool, type(None))


def _surely_small(arguments: dict[str, Any]) -> bool:
    """The common case, decided in one pass: scalars, strings and lists of strings whose
    characters together are within one field's bound (so within every bound)."""
    if len(arguments) > MAX_ITEMS:
        return False
    total = 0
    for v in arguments.values():
        kind = v.__class__
        if kind is str:
            total += len(v)
        elif kind is list:
            if len(v) > MAX_ITEMS:
                return False
            for item in v:
                if item.__class__ is not str:
                    return False
                total += len(item)
        elif kind not in _SCALARS:
            return False
    return total <= MAX_FIELD_CHARS


def execute_tool(
    state: WorkspaceState, actor: str, name: str, arguments: Any, now: datetime
) -> ToolOutcome:
    """Run one tool call as ``actor``. Never raises for bad input: errors are observations.

    On error no event is kept: the state is left exactly as it was.
    """
    ctx = ToolContext(state, actor, now)
    tool_ = REGISTRY.get(name)
    try:
        if tool_ is None:
            raise ToolError("unknown_tool", f"no tool named {name!r}", "name")
        if not isinstance(arguments, dict):
            raise ToolError("invalid_arguments", "arguments must be a JSON object", "arguments")
        big = _too_large(arguments)
        if big is not None:
            raise big
        try:
            args = tool_.args.model_validate(arguments)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "arguments"
            raise ToolError("invalid_arguments", err["msg"], loc) from None
        ctx.me()
        result = tool_.handler(ctx, args)
    except ToolError as exc:
        _rollback(state, ctx)
        return ToolOutcome(False, exc.observation(), [], [], exc)
    return ToolOutcome(True, {"ok": True, "result": result}, ctx.events, ctx.notifications)


def _rollback(state: WorkspaceState, ctx: ToolContext) -> None:
    # Handlers validate before they emit; a handler that emitted and then failed is undone
    # by rebuilding the touched entities would need history, so handlers must not do that.
    assert not ctx.events, "a tool emitted events and then failed; validate before emitting"
