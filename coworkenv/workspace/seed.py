"""The seed workspace of a task, and the events that create it."""

from __future__ import annotations

from typing import Any

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

from .models import (
    ENTITY_TYPES,
    CalendarEvent,
    Channel,
    ChatMessage,
    Document,
    Email,
    Entity,
    Group,
    Person,
    Ticket,
    TicketQueue,
    WorkspaceState,
    apply_event,
    ws_event,
)


class WorkspaceSeed(BaseModel):
    """What exists when an episode starts."""

    model_config = ConfigDict(extra="forbid")
    people: list[Person] = Field(default_factory=list, description="The directory: everyone "
                                 "mail, chat, calendars and documents name by id")
    emails: list[Email] = Field(default_factory=list, description="Mail already sent")
    channels: list[Channel] = Field(default_factory=list, description="Chat channels and DMs")
    chat: list[ChatMessage] = Field(default_factory=list, description="Chat messages already "
                                    "posted")
    calendar: list[CalendarEvent] = Field(default_factory=list, description="Calendar events "
                                          "(each person's calendar: those they organize or "
                                          "attend)")
    docs: list[Document] = Field(default_factory=list, description="Documents")
    tickets: list[Ticket] = Field(default_factory=list, description="Tickets")
    groups: list[Group] = Field(default_factory=list, description="Distribution lists and "
                                "shared mailboxes")
    queues: list[TicketQueue] = Field(default_factory=list, description="Ticket queues")
    tables: dict[str, list[dict[str, Any]]] = Field(default_factory=dict, description="Rows of "
                                                    "other apps' tables (a plugin's), by table "
                                                    "name; each row is validated against the "
                                                    "table's entity model")
    _rows: dict[str, list[Entity]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _plugin_rows(self) -> WorkspaceSeed:
        builtin = {name for name, _ in self._builtin()}
        problems: list[str] = []
        for table, rows in self.tables.items():
            if table in builtin:
                problems.append(f"tables.{table}: give these rows in seed."
                                f"{_FIELD.get(table, table)}")
                continue
            model = ENTITY_TYPES.get(table)
            if model is None:
                problems.append(f"tables.{table}: no installed app has this table (tables: "
                                f"{', '.join(sorted(ENTITY_TYPES))})")
                continue
            parsed: list[Entity] = []
            for i, row in enumerate(rows):
                try:
                    parsed.append(model.model_validate(row))
                except ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(x) for x in err["loc"])
                    problems.append(f"tables.{table}[{i}]{'.' + loc if loc else ''}: "
                                    f"{err['msg']}")
            self._rows[table] = parsed
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_serializer(mode="wrap")
    def _without_empty_tables(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a seed without plugin rows dumps as it did before ``tables`` existed, so the specs
        # and content hashes of existing tasks stay the same
        out: dict[str, Any] = handler(self)
        if not self.tables:
            out.pop("tables", None)
        return out

    def _builtin(self) -> list[tuple[str, list[Any]]]:
        return [("directory", self.people), ("email", self.emails), ("channel", self.channels),
                ("chat", self.chat), ("calendar", self.calendar), ("docs", self.docs),
                ("tickets", self.tickets), ("groups", self.groups), ("queues", self.queues)]

    def rows(self) -> list[tuple[str, list[Entity]]]:
        """Every seeded table and its entities, in the order they are seeded: the built-in
        tables, then the plugin tables in name order."""
        return [*self._builtin(), *sorted(self._rows.items())]

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """``ws.*.seeded`` events, in a fixed order, that build this workspace from nothing."""
        out: list[tuple[str, dict[str, Any]]] = []
        for app, rows in self.rows():
            out.extend(ws_event(app, "seeded", row) for row in rows)
        return out

    def build(self) -> WorkspaceState:
        state = WorkspaceState()
        for kind, payload in self.events():
            apply_event(state, kind, payload)
        return state


_FIELD = {"directory": "people", "email": "emails", "channel": "channels"}
"""The seed field of each built-in table whose name is not the field's."""


def table_of(field: str) -> str:
    """The table a seed field fills (``people`` -> ``directory``)."""
    return next((t for t, f in _FIELD.items() if f == field), field)
