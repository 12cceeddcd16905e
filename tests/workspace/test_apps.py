"""Apps as plugins (``coworkenv.workspace.apps``): the six built-in apps come from the
``coworkenv.apps`` entry points and keep the app contract; an app that breaks it is refused
with what is wrong; an app taken away leaves the rest of the workspace working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkenv.runtime import RunConfig, run
from coworkenv.sim import Task, TaskFileError, builtin_tasks
from coworkenv.workspace import ENTITY_TYPES, REGISTRY, Entity, apps, markdown_table
from coworkenv.workspace.errors import AppError

BUILT_IN = ["calendar", "chat", "directory", "docs", "email", "tickets"]


def test_the_built_in_apps_come_from_the_entry_points_and_keep_the_contract() -> None:
    found = sorted(a.name for a in apps.discover())
    # the six built-ins are the default apps; plugins installed beside them (the test venv
    # has the retail example) are discovered the same way, and are not default
    assert set(BUILT_IN) <= set(found) == {a.name for a in apps.installed()}
    assert apps.default_apps() == BUILT_IN
    everything = apps.installed()
    for app in everything:
        others = [o for o in everything if o is not app]
        assert apps.check_app(app, others) == [], app.name
    # the registry and the tables are the apps', nothing beside them
    assert set(ENTITY_TYPES) == {t for a in everything for t in a.tables}
    assert {t.app for t in REGISTRY.values()} == set(found)
    assert sum(1 for t in REGISTRY.values() if t.app in BUILT_IN) == 41


class NotAnEntity:
    pass


def test_an_app_that_breaks_the_contract_is_refused_with_what_is_wrong() -> None:
    broken = apps.App("broken-app", "nothing right", {
        "people": apps.Table(NotAnEntity, "p"),  # type: ignore[arg-type]
        "directory": apps.Table(Entity, "zz")}, ("coworkenv.nowhere",))
    before = [a.name for a in apps.installed()]
    with pytest.raises(AppError) as refused:
        apps.install([*apps.installed(), broken])
    message = str(refused.value)
    for part in ("app broken-app", "name: 'broken-app' is not an identifier",
                 "tables.people.entity", "tables.people.prefix: 'p' is taken by directory",
                 "tables.directory: app directory has a table of that name",
                 "module coworkenv.nowhere cannot be imported", "no tool is registered"):
        assert part in message, (part, message)
    assert [a.name for a in apps.installed()] == before  # (nothing changed)


def test_an_app_taken_away_leaves_the_rest_working(tmp_path: Path) -> None:
    def needs_tickets(task: Task) -> bool:
        if task.seed.tickets or task.seed.queues:
            return True
        text = json.dumps([x.model_dump(mode="json")
                           for x in [*task.reference, *task.checks, *task.safety]])
        return "ticket" in text or "queue" in text

    without = [t for t in builtin_tasks() if not needs_tickets(t)]
    assert len(without) >= 8
    with apps.only(*(n for n in BUILT_IN if n != "tickets")):
        assert not any(name.startswith("tickets_") for name in REGISTRY)
        assert "tickets" not in ENTITY_TYPES and "tickets_create" not in markdown_table()
        result = run(RunConfig(tasks=without, db=tmp_path / "no-tickets.db", agent="oracle",
                               run_id="no-tickets"))
        assert result.overall["score"] == 1.0, result.overall
        assert all(e.status == "completed" for e in result.episodes)
        # a task that needs the missing app is refused when it is loaded, by name
        with pytest.raises(TaskFileError, match=r"reference\[\d+\]\.tool: unknown tool "
                                                r"'tickets_"):
            builtin_tasks()
    assert "tickets" in ENTITY_TYPES and "tickets_create" in REGISTRY
