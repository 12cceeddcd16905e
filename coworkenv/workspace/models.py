"""The simulated company's entities, the workspace state and its reducer.

The workspace is a projection of the event log: every change is a ``ws.<app>.<op>`` event
whose payload carries the entity's id and its full new value (``data``), ``deleted``, or
only what changed of an existing entity (``set``: fields and their new values; ``append``:
items added at the end of list fields), so that an entity that grows by one comment at a
time writes one comment each time, not the whole thread again.
:func:`apply_event` is the only function that mutates a :class:`WorkspaceState`; the live
tool service and replay both go through it, so replay rebuilds the same state and hash.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class Entity(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="Stable identifier, unique within its app")


class Person(Entity):
    name: str
    email: str = Field(description="Primary address; the person's identity in mail and chat")
    role: str = ""
    team: str = ""
    manager: str | None = Field(default=None, description="Person id of the manager")
    timezone: str = Field(default="UTC", description="IANA time zone name")
    external: bool = Field(default=False, description="Outside the company")


class Email(Entity):
    sender: str = Field(description="Person id of the sender")
    to: list[str] = Field(default_factory=list, description="Person ids")
    cc: list[str] = Field(default_factory=list)
    subject: str = ""
    body: str = ""
    attachments: list[str] = Field(default_factory=list, description="Document ids")
    thread: str = Field(default="", description="Thread id (the first email's id)")
    in_reply_to: str | None = None
    sent_at: str = Field(default="", description="ISO-8601 UTC timestamp")
    labels: dict[str, list[str]] = Field(
        default_factory=dict, description="Per-mailbox labels: person id -> labels"
    )
    read_by: list[str] = Field(default_factory=list)
    deleted_by: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list, description="Group ids it was addressed to "
                              "(their members are in to/cc)")


class Note(Entity):
    """A note an agent keeps for itself (the ``memory`` app): private to its owner."""

    owner: str = Field(description="Person id of who keeps it (only they read it)")
    key: str = Field(description="What it is about: how it is looked up")
    text: str = ""
    updated_at: str = Field(default="", description="ISO-8601 UTC timestamp")


class Channel(Entity):
    name: str
    members: list[str] = Field(default_factory=list)
    internal_only: bool = True
    is_dm: bool = False


class ChatMessage(Entity):
    channel: str
    sender: str
    text: str
    sent_at: str = ""
    reactions: dict[str, list[str]] = Field(default_factory=dict, description="emoji -> people")


class CalendarEvent(Entity):
    title: str
    organizer: str
    start: str = Field(description="ISO-8601 UTC")
    end: str = Field(description="ISO-8601 UTC")
    timezone: str = "UTC"
    location: str = ""
    description: str = ""
    attendees: dict[str, Literal["pending", "accepted", "declined", "tentative"]] = Field(
        default_factory=dict
    )
    status: Literal["confirmed", "cancelled"] = "confirmed"


class Comment(BaseModel):
    author: str
    text: str
    at: str = ""


class Document(Entity):
    title: str
    owner: str
    content: str = ""
    confidentiality: Literal["public", "internal", "confidential", "restricted"] = "internal"
    permissions: dict[str, Literal["view", "edit"]] = Field(
        default_factory=dict, description="person id -> permission (the owner always edits)"
    )
    comments: list[Comment] = Field(default_factory=list)
    updated_at: str = ""
    status: Literal["draft", "in_review", "approved", "final", "archived"] = "draft"


class Group(Entity):
    """A shared mailbox or a distribution list: mail to its address reaches its members."""

    name: str
    email: str = Field(description="The group's address")
    kind: Literal["list", "mailbox"] = "list"
    members: list[str] = Field(default_factory=list, description="Person ids")
    external_members: bool = Field(default=False, description="Has people outside the company")


FieldType = Literal["text", "number", "bool", "date"]


TicketStatus = Literal["open", "in_progress", "blocked", "resolved", "closed"]


class TicketQueue(Entity):
    """Where tickets are routed: the queue's custom fields and its status workflow."""

    name: str
    fields: dict[str, FieldType] = Field(default_factory=dict, description="Custom field types")
    required: list[str] = Field(default_factory=list, description="Fields a ticket in this "
                                "queue must have before it is resolved or closed")
    transitions: dict[TicketStatus, list[TicketStatus]] | None = Field(
        default=None, description="Allowed status changes between the statuses a ticket can "
        "take (open, in_progress, blocked, resolved, closed); default: the standard workflow")
    members: list[str] = Field(default_factory=list, description="Who works the queue")


class Ticket(Entity):
    title: str
    description: str = ""
    reporter: str
    assignee: str | None = None
    status: TicketStatus = "open"
    priority: Literal["low", "medium", "high", "urgent"] = "medium"
    comments: list[Comment] = Field(default_factory=list)
    updated_at: str = ""
    queue: str | None = Field(default=None, description="Queue id")
    fields: dict[str, str | float | bool] = Field(default_factory=dict, description="Custom "
                                                   "fields, typed by the queue")
    created_at: str = ""
    resolved_at: str = ""


ENTITY_TYPES: dict[str, type[Entity]] = {}
"""Each table of the installed apps and its entity model (filled by
:func:`coworkenv.workspace.apps.install`)."""
ID_PREFIX: dict[str, str] = {}
"""Each table's id prefix (``p`` -> ``p1``, ``p2``, ...), from the installed apps."""
TABLE_APP: dict[str, str] = {}
"""Each table's app."""
DEFAULT_TABLES: list[str] = []
"""The tables of the default apps: every state has them, empty or not (so that state hashes
do not depend on which plugins are installed); another app's table joins a state with its
first event."""


class WorkspaceState:
    """All entities of one episode's workspace, keyed by app then id."""

    __slots__ = ("counters", "tables")

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {app: {} for app in DEFAULT_TABLES}
        self.counters: dict[str, int] = dict.fromkeys(DEFAULT_TABLES, 0)

    def table(self, name: str) -> dict[str, Any]:
        """The entities of one table, by id; a table of an installed app that has no row yet
        joins the state here (empty)."""
        rows = self.tables.get(name)
        if rows is None:
            if name not in ENTITY_TYPES:
                from .errors import WorkspaceError
                raise WorkspaceError(f"no installed app has a table {name!r} (tables: "
                                     f"{', '.join(sorted(ENTITY_TYPES))})")
            rows = self.tables[name] = {}
            self.counters[name] = 0
        return rows

    # typed views of the built-in apps' tables (empty where the app is not installed) -----
    @property
    def people(self) -> dict[str, Person]:
        return self.tables.get("directory", {})

    @property
    def emails(self) -> dict[str, Email]:
        return self.tables.get("email", {})

    @property
    def channels(self) -> dict[str, Channel]:
        return self.tables.get("channel", {})

    @property
    def chat(self) -> dict[str, ChatMessage]:
        return self.tables.get("chat", {})

    @property
    def calendar(self) -> dict[str, CalendarEvent]:
        return self.tables.get("calendar", {})

    @property
    def docs(self) -> dict[str, Document]:
        return self.tables.get("docs", {})

    @property
    def tickets(self) -> dict[str, Ticket]:
        return self.tables.get("tickets", {})

    @property
    def groups(self) -> dict[str, Group]:
        return self.tables.get("groups", {})

    @property
    def queues(self) -> dict[str, TicketQueue]:
        return self.tables.get("queues", {})

    def group_by_ref(self, ref: str) -> Group | None:
        """A group by id or address (any letter case)."""
        g = self.groups.get(ref)
        if g is not None:
            return g
        low = ref.lower()
        return next((g for g in self.groups.values() if g.email.lower() == low), None)

    def parties(self, ref: str) -> set[str]:
        """Who a reference reaches, as person ids: a person (id or address in any case), a
        group's members; an unknown reference stands for itself, folded."""
        p = self.people.get(ref) or self.person_by_email(ref)
        if p is not None:
            return {p.id}
        g = self.group_by_ref(ref)
        if g is not None:
            return set(g.members)
        return {ref.lower()}

    def copy(self) -> WorkspaceState:
        """A new state with the same entities (entities are replaced, never mutated)."""
        new = WorkspaceState()
        new.tables = {app: dict(rows) for app, rows in self.tables.items()}
        new.counters = dict(self.counters)
        return new

    def next_id(self, app: str) -> str:
        """The id the next new entity of table ``app`` gets (deterministic)."""
        self.table(app)
        return f"{ID_PREFIX[app]}{self.counters[app] + 1}"

    def person_by_email(self, address: str) -> Person | None:
        address = address.lower()
        for p in self.people.values():
            if p.email.lower() == address:
                return p
        return None

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {
            app: {k: v.model_dump(mode="json") for k, v in sorted(rows.items())}
            for app, rows in self.tables.items()
        }

    def state_hash(self, dumped: dict[str, dict[str, Any]] | None = None) -> str:
        """Canonical hash of every entity (stable across live runs and replay); ``dumped``:
        :meth:`to_json` of this state, when the caller has it already."""
        blob = canonical_json(self.to_json() if dumped is None else dumped)
        return hashlib.sha256(blob.encode()).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON text as :meth:`WorkspaceState.state_hash` hashes it (keys sorted, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class _AllFields(frozenset[str]):
    """Every field of one entity model: one object shared by all the entities of that model in
    workspaces (a set of a dozen names costs about 700 bytes per entity otherwise). Copying
    gives a plain set, which ``model_copy(update=...)`` then updates, as it does any model's."""

    __slots__ = ()

    def __copy__(self) -> set[str]:
        return set(self)


class _Unchangeable:
    """Mutators of the shared empty containers: an entity in a workspace is replaced (a new
    model through an event), never changed in place, so a change in place is a bug; it is
    refused loudly instead of reaching every entity that shares the container."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a workspace entity is never changed in place: emit an event with a "
                        "new value (model_copy(update=...))")


class _EmptyList(_Unchangeable, list[Any]):  # (a list, so pydantic dumps it)
    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _Unchangeable._refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _Unchangeable._refuse

    def __copy__(self) -> list[Any]:
        return []

    def __deepcopy__(self, memo: Any) -> list[Any]:
        return []

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, ())


class _EmptyDict(_Unchangeable, dict[Any, Any]):  # (a dict, so pydantic dumps it)
    __slots__ = ()
    clear = pop = popitem = setdefault = update = _Unchangeable._refuse
    __setitem__ = __delitem__ = __ior__ = _Unchangeable._refuse

    def __copy__(self) -> dict[Any, Any]:
        return {}

    def __deepcopy__(self, memo: Any) -> dict[Any, Any]:
        return {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, ())


_EMPTY_LIST = _EmptyList()
_EMPTY_DICT = _EmptyDict()
_ALL_FIELDS: dict[type[BaseModel], _AllFields] = {}
_M = TypeVar("_M", bound=BaseModel)


def compact(model: _M) -> _M:
    """The entity as a workspace keeps it (a new object; the argument is left as it was):
    its fields set is the shared set of all its model's fields (what replay's entities,
    validated from a full dump, have anyway), its empty lists and dicts are the shared,
    unchangeable empty ones, and its attributes sit in a dict that shares its keys with every
    other kept entity of its model (set one by one on a new object, as an ordinary class's
    ``__init__`` would; pydantic gives each model a dict of its own). An email costs about a
    fifth of a validated one; what it dumps, equals and hashes to is unchanged. The models
    inside it (a document's comments) are kept the same way."""
    cls = type(model)
    shared = _ALL_FIELDS.get(cls)
    if shared is None:
        shared = _ALL_FIELDS[cls] = _AllFields(cls.model_fields)
    current: object = model.__pydantic_fields_set__  # (typed set[str]; ours is a frozenset)
    if current is shared:
        return model
    new = cls.__new__(cls)
    set_ = object.__setattr__  # (pydantic's own slots and attributes, set as its copy does)
    for k, v in model.__dict__.items():
        kind = v.__class__
        if kind is list:
            if not v:
                v = _EMPTY_LIST
            elif isinstance(v[-1], BaseModel) and not isinstance(
                    v[-1].__pydantic_fields_set__, _AllFields):
                # new items are added at the end of a copied list: only those after the last
                # kept one are new (a thread that grows by one costs one item, not the thread)
                i = len(v) - 1
                while i > 0 and not isinstance(v[i - 1].__pydantic_fields_set__, _AllFields):
                    i -= 1
                v = [*v[:i], *(compact(item) for item in v[i:])]
        elif kind is dict and not v:
            v = _EMPTY_DICT
        elif isinstance(v, BaseModel):
            v = compact(v)
        set_(new, k, v)
    set_(new, "__pydantic_fields_set__", shared)
    set_(new, "__pydantic_extra__", model.__pydantic_extra__)
    set_(new, "__pydantic_private__", model.__pydantic_private__)
    return new


def ws_event(app: str, op: str, entity: Entity | None, *, entity_id: str | None = None) -> tuple[
    str, dict[str, Any]
]:
    """Build a state event: kind ``ws.<app>.<op>`` and its payload."""
    if entity is None:
        assert entity_id is not None
        return f"ws.{app}.{op}", {"id": entity_id, "deleted": True}
    return f"ws.{app}.{op}", {"id": entity.id, "data": entity.model_dump(mode="json")}


def ws_change(app: str, op: str, old: Entity, new: Entity, fields: tuple[str, ...]) -> tuple[
    str, dict[str, Any]
]:
    """Build a state event that carries only what changed of ``fields`` between ``old`` and
    ``new`` (the same entity): the items added at the end of a list field (``append``),
    otherwise the field's new value (``set``)."""
    sets: dict[str, Any] = {}
    appended: dict[str, list[Any]] = {}
    for f in fields:
        a, b = getattr(old, f), getattr(new, f)
        if a.__class__ in _LISTS and b.__class__ in _LISTS and len(b) >= len(a) and all(
                x is y for x, y in zip(a, b, strict=False)):  # (the old items kept: identity)
            appended[f] = [x.model_dump(mode="json") if isinstance(x, BaseModel) else x
                           for x in b[len(a):]]
        else:
            sets[f] = new.model_dump(mode="json", include={f})[f]
    payload: dict[str, Any] = {"id": new.id}
    if sets:
        payload["set"] = sets
    if appended:
        payload["append"] = appended
    return f"ws.{app}.{op}", payload


_LISTS = (list, _EmptyList)
_FIELD_TYPES: dict[tuple[type[BaseModel], str], TypeAdapter[Any]] = {}


def _field_type(model: type[BaseModel], name: str, where: str) -> TypeAdapter[Any]:
    adapter = _FIELD_TYPES.get((model, name))
    if adapter is None:
        info = model.model_fields.get(name)
        if info is None or info.annotation is None:
            raise ValueError(f"{where}: {model.__name__} has no field {name!r}")
        adapter = _FIELD_TYPES[(model, name)] = TypeAdapter(info.annotation)
    return adapter


def changed_entity(model: type[_M], old: _M, payload: dict[str, Any], where: str) -> _M:
    """``old`` with a change event's ``set`` and ``append`` applied, each value validated
    against its field's type (replay: the log is data, checked as it is read)."""
    update: dict[str, Any] = {}
    for f, v in (payload.get("set") or {}).items():
        update[f] = _field_type(model, f, where).validate_python(v)
    for f, items in (payload.get("append") or {}).items():
        update[f] = [*getattr(old, f), *_field_type(model, f, where).validate_python(items)]
    return old.model_copy(update=update)


def changed_data(old: dict[str, Any] | None, payload: dict[str, Any]) -> dict[str, Any]:
    """The entity's JSON after a state event, from its JSON before (``old``; None when not
    known), for readers of a log that follow entities as dumps (grading, mutation)."""
    if "data" in payload:
        return payload["data"]  # type: ignore[no-any-return]
    old = old or {}
    new = {**old, **(payload.get("set") or {})}
    for f, items in (payload.get("append") or {}).items():
        new[f] = [*(old.get(f) or []), *items]
    return new


def follow(known: dict[tuple[str, str], dict[str, Any]], kind: str,
           payload: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Follow entities as JSON through a log, one ``ws.*`` event at a time: ``known`` holds
    each (app, id)'s JSON so far; returns the entity's JSON before and after this event
    (after: None when it deletes the entity)."""
    key = (kind.split(".", 2)[1], str(payload.get("id")))
    before = known.get(key)
    if payload.get("deleted"):
        known.pop(key, None)
        return before, None
    after = known[key] = changed_data(before, payload)
    return before, after


def apply_event(state: WorkspaceState, kind: str, payload: dict[str, Any],
                entity: Entity | None = None) -> None:
    """Apply one ``ws.*`` event to the state. Other kinds are ignored. ``entity``: the
    validated entity the payload was dumped from (a live tool's), which spares validating
    the payload again; replay always validates."""
    if not kind.startswith("ws."):
        return
    app = kind.split(".", 2)[1]
    table = state.tables.get(app)
    if table is None:
        table = state.table(app)
    eid = payload["id"]
    if payload.get("deleted"):
        table.pop(eid, None)
        return
    if eid not in table:
        prefix = ID_PREFIX[app]
        if eid.startswith(prefix) and eid[len(prefix) :].isdigit():
            state.counters[app] = max(state.counters[app], int(eid[len(prefix) :]))
    if entity is None:
        if "data" in payload:
            entity = ENTITY_TYPES[app].model_validate(payload["data"])
        else:  # a change of an entity that exists
            before = table.get(eid)
            if before is None:
                raise ValueError(f"{kind}: changes {app} entity {eid!r}, which does not exist "
                                 "(a log that lost or reordered events)")
            entity = changed_entity(ENTITY_TYPES[app], before, payload, f"{kind} {eid!r}")
    table[eid] = compact(entity)


_ISO_LAST: tuple[datetime, str] = (datetime(1970, 1, 1, tzinfo=UTC), "1970-01-01T00:00:00Z")


def iso(dt: datetime) -> str:
    """Canonical ISO-8601 UTC text for a datetime (naive means UTC). The last one is kept:
    an episode asks for the same simulated instant many times in a row (each tool call
    stamps what it writes), and the same text object is then shared by what it stamps."""
    global _ISO_LAST
    last = _ISO_LAST
    if dt == last[0]:  # (a naive datetime never equals an aware one)
        return last[1]
    utc = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt
    text = utc.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _ISO_LAST = (dt, text)  # (one tuple: a reader in another thread sees a matching pair)
    return text


def parse_iso(text: str) -> datetime:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt
