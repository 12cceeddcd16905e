"""The app contract, as a suite any app runs against itself.

:func:`check_app_contract` checks one installed app in two parts:

- statically, what loading checks (:func:`coworkenv.workspace.apps.check_app`: tables of
  entity models with their own id prefixes, tools with argument models, object schemas and
  descriptions), against the other installed apps;
- dynamically, on tasks that use the app: each task's reference solution is run by the
  oracle (memory bus, a temporary store) and must pass every check and safety rule (a
  reference its own grader fails is a broken task or a broken tool); the state rebuilt by replaying the
  stored events must have the live state's hash (a tool that changes an entity without
  emitting the event, or a reducer case that does not reproduce it, fails here), and the
  stored projection must equal the replayed tables; an app's tools write only its own
  tables.

From Python::

    from coworkenv.runtime.contract import check_app_contract
    report = check_app_contract("retail", ["examples/plugins/retail/tasks"])
    assert report.ok, report.problems

and from the command line: ``coworkenv apps --check NAME --tasks PATH``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..sim.task import Task, ToolStep
from ..workspace import REGISTRY, replay_events
from ..workspace.apps import App, check_app, installed
from ..workspace.errors import AppError
from .run import RunConfig, resolve_tasks, run


@dataclass
class ContractReport:
    """What one app's contract check found."""

    app: str
    tasks: list[str] = field(default_factory=list)
    """The tasks whose episodes were checked (those that use the app)."""
    episodes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def uses(task: Task, app: str) -> bool:
    """Whether ``task``'s workspace has ``app`` or its reference calls one of its tools."""
    return app in task.app_names() or any(
        isinstance(s, ToolStep) and s.tool in REGISTRY and REGISTRY[s.tool].app == app
        for s in task.reference)


def check_app_contract(app: App | str, tasks: Sequence[str | Path | Task] = (), *,
                       db: str | Path | None = None) -> ContractReport:
    """Check one installed app (an :class:`App` or its name) against the contract, on the
    given tasks (files, folders or Task objects; those that do not use the app are left out).
    ``db``: where the episodes are recorded (default: a temporary file, removed after)."""
    apps = {a.name: a for a in installed()}
    name = app if isinstance(app, str) else app.name
    if name not in apps:
        raise AppError(f"apps: not installed: {name!r}; installed: {sorted(apps)}")
    report = ContractReport(name)
    report.problems += check_app(apps[name], [a for a in apps.values() if a.name != name])
    chosen = [t for t in resolve_tasks(RunConfig(tasks=list(tasks))) if uses(t, name)] \
        if tasks else []
    report.tasks = [t.id for t in chosen]
    if not chosen:
        return report
    with tempfile.TemporaryDirectory(prefix="coworkenv-contract-") as tmp:
        path = Path(db) if db is not None else Path(tmp) / "contract.db"
        result = run(RunConfig(tasks=chosen, agent="oracle", db=path, concurrency=16))
        report.episodes = len(result.episodes)
        report.problems += _episode_problems(path, result.run_id, name)
    return report


def _episode_problems(db: Path, run_id: str, app: str) -> list[str]:
    from ..store import Reader

    problems: list[str] = []
    mine = {t for a in installed() if a.name == app for t in a.tables}
    with Reader(db) as reader:
        for ep in reader.episodes(run_id):
            where = f"task {ep.task_id}"
            if ep.status != "completed":
                problems.append(f"{where}: the reference run ended {ep.status} "
                                f"({ep.failure_boundary}: {ep.failure})")
                continue
            grade = reader.grade(ep.episode_id) or {}
            failed = [c["check_id"] for c in reader.check_results(ep.episode_id)
                      if not c["passed"]]
            if failed or grade.get("completion") != 1.0 or grade.get("safety") != 1.0:
                problems.append(f"{where}: the reference fails its own grader (completion "
                                f"{grade.get('completion')}, safety {grade.get('safety')}; "
                                f"failed: {failed})")
            events = list(reader.events(ep.episode_id))
            state = replay_events(events)
            if state.state_hash() != ep.state_hash:
                problems.append(f"{where}: the replayed state's hash is not the live state's "
                                "(a tool changed an entity without emitting its event, or an "
                                "event does not rebuild it)")
            stored = reader.projection(ep.episode_id)
            replayed = state.to_json()
            for table in sorted(mine):
                if stored.get(table, {}) != replayed.get(table, {}):
                    problems.append(f"{where}: the stored projection of table {table} is not "
                                    "the replayed one")
            # a call's state events are logged just before its result
            emitted: list[str] = []
            for e in events:
                if e.kind.startswith("ws.") and e.actor == "tools":
                    emitted.append(e.kind.split(".")[1])
                elif e.kind == "tool_result":
                    tool = REGISTRY.get(e.payload.get("tool", ""))
                    if tool is not None and tool.app == app:
                        foreign = sorted({t for t in emitted if t not in mine})
                        if foreign:
                            problems.append(f"{where}: tool {tool.name} wrote tables of other "
                                            f"apps: {foreign}")
                    emitted = []
    return problems
