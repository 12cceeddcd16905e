"""Apps: what a simulated workspace is made of, as plugins.

An app is an :class:`App` record: its entity tables (each an entity model with the prefix of
the ids it hands out) and the modules whose ``@tool`` handlers are its tools (command handlers
with their argument models, permission rules and typed errors; the ``ws.<table>.<op>`` events
they emit are applied by the one reducer, :func:`~coworkenv.workspace.models.apply_event`).
Apps are found through the entry-point group ``coworkenv.apps``, each entry naming an
``App`` (``name = "package.module:RECORD"``); the six built-in apps are registered the same
way, in coworkenv's own ``pyproject.toml``::

    [project.entry-points."coworkenv.apps"]
    retail = "coworkenv_retail:APP"

An app's modules import only :mod:`coworkenv.workspace` when they are loaded (the apps are
loaded while coworkenv's own modules import the workspace); what else they need of coworkenv
(``coworkenv.sim.agent_tool_calls`` in a check kind, say) they import where they use it.

Loading checks every app against the contract (:func:`check_app`) and refuses one that breaks
it with :class:`AppError`, naming the entry point and what is wrong. The tool registry, the
entity tables and their id prefixes are then built from the apps, in the order of their
names. :func:`installed` lists them; :func:`only` runs a block with a subset installed (an
app taken away, say).

A task's workspace is made of the default apps (the built-in six), or of the apps its
``apps:`` names; its seed gives a plugin table's rows under ``seed.tables`` (each validated
against the table's entity model), and the generic ``state`` check grades any table's
entities. :mod:`coworkenv.runtime.contract` is the contract suite an app runs against itself.

An app may also contribute check kinds and safety-rule kinds (:class:`CheckKind`: a parameter
model and a read-only evaluation), used by tasks as ``kind: app`` checks and rules, and tables
of the SQL projection that ``sql`` checks query (:class:`SqlTable`).

Synthesis primitives that use an app's tools are registered beside it, in the entry-point
group ``coworkenv.primitives`` (:mod:`coworkenv.synth.primitive`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel

from .errors import AppError
from .models import (
    DEFAULT_TABLES,
    ENTITY_TYPES,
    ID_PREFIX,
    TABLE_APP,
    CalendarEvent,
    Channel,
    ChatMessage,
    Document,
    Email,
    Entity,
    Group,
    Note,
    Person,
    Ticket,
    TicketQueue,
    WorkspaceState,
)

GROUP = "coworkenv.apps"
"""The entry-point group apps are registered in."""


CHECK_KINDS: dict[tuple[str, str], CheckKind] = {}
"""The check kinds of the installed apps, by (app, name)."""
RULE_KINDS: dict[tuple[str, str], CheckKind] = {}
"""The safety-rule kinds of the installed apps, by (app, name)."""
_installed: list[App] = []
_pending: dict[str, str] = {}
"""Apps whose entry point's module was still being imported when the apps were loaded."""


@dataclass(frozen=True)
class Table:
    """One kind of entity an app keeps: its model and the prefix of the ids it hands out
    (``p`` -> ``p1``, ``p2``, ...)."""

    entity: type[Entity]
    prefix: str


@dataclass(frozen=True)
class CheckKind:
    """A kind of check, or of safety rule, that an app contributes: ``params``, the model a
    task's parameters for it are validated against when the task is loaded; ``evaluate(params,
    state, events)``, which reads the final state and the recorded events (never writes) and
    returns whether the statement holds (for a rule: nothing was violated), a detail for
    people, and the seqs of the events it rests on (for a broken rule: those that broke it).
    Tasks use it as ``{kind: app, app: APP, check: NAME, params: {...}}`` (a check) or
    ``{kind: app, app: APP, rule: NAME, params: {...}}`` (a safety rule)."""

    params: type[BaseModel]
    evaluate: Callable[[Any, WorkspaceState, list[Any]], tuple[bool, str, list[int]]]
    description: str = ""


BUILT_IN_SQL_TABLES = frozenset({
    "people", "emails", "email_recipients", "email_labels", "channels", "channel_members",
    "chat_messages", "calendar_events", "calendar_attendees", "documents",
    "document_permissions", "tickets", "ticket_comments", "ticket_fields", "groups",
    "group_members"})
"""The SQL projection's tables of the built-in apps (``coworkenv.sim.checks.SCHEMA``)."""


@dataclass(frozen=True)
class SqlTable:
    """A table an app adds to the SQL projection that ``sql`` checks query: its columns, and
    the rows it holds for a state (values SQLite stores: text, numbers, None)."""

    columns: tuple[str, ...]
    rows: Callable[[WorkspaceState], Iterable[Sequence[Any]]]


@dataclass(frozen=True)
class App:
    name: str
    description: str
    tables: Mapping[str, Table] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    """Modules whose ``@tool(name, app=<this app's name>, ...)`` handlers are the app's tools;
    imported when the app is loaded."""
    default: bool = False
    """Part of every task's workspace unless the task names its ``apps:`` (the six built-in
    apps are; a plugin's app joins only the tasks that name it, so installing one changes
    no other task's tools, tables or state hashes)."""
    checks: Mapping[str, CheckKind] = field(default_factory=dict)
    """Check kinds of this app, by name (graded statements about its entities or calls)."""
    rules: Mapping[str, CheckKind] = field(default_factory=dict)
    """Safety-rule kinds of this app, by name (a violation zeroes the score)."""
    sql: Mapping[str, SqlTable] = field(default_factory=dict)
    """Tables this app adds to the SQL projection of ``sql`` checks, by name."""

    def __post_init__(self) -> None:
        # a plugin whose own import started coworkenv's (``python -m plugin.cli``) could not be
        # loaded then: its record is installed when its module makes it (see discover)
        if self.name in _pending and _installed:
            del _pending[self.name]
            install([*_installed, self])


# the built-in apps (registered in pyproject.toml like any other) ------------------------
_TOOLS = "coworkenv.workspace.tools."
CALENDAR = App("calendar", "Events, invitations, free/busy", {
    "calendar": Table(CalendarEvent, "ev")}, (_TOOLS + "calendar",), default=True)
CHAT = App("chat", "Channels, direct messages, threads", {
    "channel": Table(Channel, "c"), "chat": Table(ChatMessage, "msg")}, (_TOOLS + "chat",), default=True)
DIRECTORY = App("directory", "People, their roles and managers; groups (mailing lists)", {
    "directory": Table(Person, "p"), "groups": Table(Group, "g")}, (_TOOLS + "directory",), default=True)
DOCS = App("docs", "Documents, their sharing and versions", {
    "docs": Table(Document, "doc")}, (_TOOLS + "docs",), default=True)
EMAIL = App("email", "Mail: inboxes, sending, replies, labels", {
    "email": Table(Email, "m")}, (_TOOLS + "email",), default=True)
MEMORY = App("memory", "Private notes an agent keeps for itself: written, searched, read", {
    "notes": Table(Note, "note")}, (_TOOLS + "memory",))
"""Not a default app: a task names it, and a simulation's persistent seats have it."""
TICKETS = App("tickets", "Tickets and their queues (fields, transitions, members)", {
    "tickets": Table(Ticket, "T"), "queues": Table(TicketQueue, "q")}, (_TOOLS + "tickets",), default=True)



def discover() -> list[App]:
    """Every app registered in the ``coworkenv.apps`` entry-point group, loaded."""
    found: list[App] = []
    for ep in entry_points(group=GROUP):
        where = f"entry point {ep.name} = {ep.value!r} ({GROUP})"
        held = sys.modules.get(ep.module)
        if held is not None and ep.attr and not hasattr(held, ep.attr.split(".")[0]):
            # the plugin's module is being imported (it imported coworkenv, which loads the
            # apps): its record does not exist yet, and is installed when it does
            _pending[ep.name] = where
            continue
        try:
            app = ep.load()
        except Exception as exc:
            raise AppError(f"{where}: cannot be loaded: {type(exc).__name__}: {exc}") from exc
        if not isinstance(app, App):
            raise AppError(f"{where}: is a {type(app).__name__}, not a coworkenv App record")
        if app.name != ep.name:
            raise AppError(f"{where}: names app {app.name!r}; an app is registered under its "
                           "own name")
        found.append(app)
    if not found:
        raise AppError(f"no app is registered in the {GROUP} entry-point group: coworkenv's "
                       "own apps are registered when it is installed (pip install -e .)")
    return found


def check_app(app: App, others: Sequence[App] = ()) -> list[str]:
    """What ``app`` breaks of the contract, beside ``others`` (empty: nothing). Imports its
    tool modules. The contract: a name; tables whose models are entities, with id prefixes
    no other table uses; at least one tool, each with an argument model whose JSON schema
    builds, a handler and a description. (A tool name another module registered already
    fails that module's import, reported here.)"""
    from .tools._base import ALL_TOOLS, ToolArgs

    problems: list[str] = []
    if not app.name.isidentifier():
        problems.append(f"name: {app.name!r} is not an identifier")
    taken = {t: o.name for o in others for t in o.tables}
    prefixes = {tb.prefix: (o.name, t) for o in others for t, tb in o.tables.items()}
    for name, table in app.tables.items():
        if name in taken:
            problems.append(f"tables.{name}: app {taken[name]} has a table of that name")
        if not (isinstance(table.entity, type) and issubclass(table.entity, Entity)):
            problems.append(f"tables.{name}.entity: {table.entity!r} is not an Entity model")
        if not table.prefix or not table.prefix.isalpha():
            problems.append(f"tables.{name}.prefix: {table.prefix!r} is not letters")
        elif table.prefix in prefixes:
            problems.append(f"tables.{name}.prefix: {table.prefix!r} is taken by "
                            f"{prefixes[table.prefix][0]}.{prefixes[table.prefix][1]}")
        prefixes[table.prefix] = (app.name, name)
    for module in app.tools:
        try:
            importlib.import_module(module)
        except Exception as exc:
            problems.append(f"tools: module {module} cannot be imported: "
                            f"{type(exc).__name__}: {exc}")
    for what, kinds in (("checks", app.checks), ("rules", app.rules)):
        for name, kind in kinds.items():
            if not name.isidentifier():
                problems.append(f"{what}.{name}: the name is not an identifier")
            if not isinstance(kind, CheckKind):
                problems.append(f"{what}.{name}: {kind!r} is not a CheckKind")
                continue
            if not (isinstance(kind.params, type) and issubclass(kind.params, BaseModel)):
                problems.append(f"{what}.{name}.params: {kind.params!r} is not a pydantic model")
            if not callable(kind.evaluate):
                problems.append(f"{what}.{name}.evaluate: not callable")
    sql_taken = {t: o.name for o in others for t in o.sql}
    for name, sql in app.sql.items():
        if not name.isidentifier():
            problems.append(f"sql.{name}: the name is not an identifier")
        if name.lower() in BUILT_IN_SQL_TABLES or name in sql_taken:
            problems.append(f"sql.{name}: a table of that name exists already "
                            f"({sql_taken.get(name, 'built in')})")
        if not isinstance(sql, SqlTable) or not sql.columns or not all(
                c.isidentifier() for c in sql.columns) or not callable(sql.rows):
            problems.append(f"sql.{name}: not a SqlTable of identifier columns and a rows "
                            "function")
    mine = [t for t in ALL_TOOLS.values() if t.app == app.name]
    if not mine:
        problems.append(f"tools: no tool is registered for app {app.name!r} (its modules: "
                        f"{list(app.tools)})")
    for t in mine:
        if not (isinstance(t.args, type) and issubclass(t.args, ToolArgs)):
            problems.append(f"tools.{t.name}: arguments {t.args!r} are not a ToolArgs model")
            continue
        try:
            schema = t.openai_schema()["function"]["parameters"]
        except Exception as exc:
            problems.append(f"tools.{t.name}: no JSON schema ({type(exc).__name__}: {exc})")
            continue
        if schema.get("type") != "object":
            problems.append(f"tools.{t.name}: its schema is not an object schema")
        if not t.description:
            problems.append(f"tools.{t.name}: no description (the handler's docstring)")
        if not callable(t.handler):
            problems.append(f"tools.{t.name}: the handler is not callable")
    return problems


def install(apps: Sequence[App]) -> None:
    """Make ``apps`` the workspace's apps: check each (refused with :class:`AppError`), then
    build the entity tables, id prefixes and tool registry from them, in name order."""
    from .tools._base import ALL_TOOLS, REGISTRY

    ordered = sorted(apps, key=lambda a: a.name)
    names = [a.name for a in ordered]
    if len(set(names)) != len(names):
        raise AppError(f"apps: two apps are named alike: {names}")
    # each checked against those before it, the ones installed already first: a clash is
    # the newcomer's
    was = {a.name for a in _installed}
    for i, app in enumerate(checking := sorted(ordered, key=lambda a: (a.name not in was,
                                                                      a.name))):
        problems = check_app(app, checking[:i])
        if problems:
            raise AppError(f"app {app.name}: " + "; ".join(problems))
    ENTITY_TYPES.clear()
    ID_PREFIX.clear()
    DEFAULT_TABLES.clear()
    TABLE_APP.clear()
    for app in ordered:
        for name, table in app.tables.items():
            ENTITY_TYPES[name] = table.entity
            ID_PREFIX[name] = table.prefix
            TABLE_APP[name] = app.name
            if app.default:
                DEFAULT_TABLES.append(name)
    REGISTRY.clear()
    CHECK_KINDS.clear()
    RULE_KINDS.clear()
    for app in ordered:
        REGISTRY.update((t.name, t) for t in ALL_TOOLS.values() if t.app == app.name)
        CHECK_KINDS.update(((app.name, n), k) for n, k in app.checks.items())
        RULE_KINDS.update(((app.name, n), k) for n, k in app.rules.items())
    _installed[:] = ordered


def installed() -> list[App]:
    """The apps the workspace is made of now, in name order."""
    return list(_installed)


def default_apps() -> list[str]:
    """The names of the installed apps every task has unless it names its own."""
    return [a.name for a in _installed if a.default]


@contextmanager
def only(*names: str) -> Iterator[list[App]]:
    """Run a block with only the named apps installed (then the ones before again)."""
    before = installed()
    unknown = sorted(set(names) - {a.name for a in before})
    if unknown:
        raise AppError(f"apps: not installed: {unknown}; installed: "
                       f"{[a.name for a in before]}")
    install([a for a in before if a.name in names])
    try:
        yield installed()
    finally:
        install(before)


def load() -> None:
    """Install every registered app (done once, when the workspace is first imported)."""
    if not _installed:
        install(discover())
