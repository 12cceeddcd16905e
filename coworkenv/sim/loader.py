"""Load tasks from YAML, JSON or JSONL files, with errors that name file, path and problem."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .errors import TaskFileError
from .task import Task

BUILTIN = Path(__file__).resolve().parents[1] / "builtin_tasks"
BENCHMARK = Path(__file__).resolve().parents[1] / "benchmark"
"""The independent benchmark (``examples/benchmark``): hand-written, never trained on."""
_TAGS = {"tool", "message", "wait", "finish", "sql", "email_sent", "chat_message",
         "calendar_event", "ticket", "doc", "tool_order", "asked_before", "no_tool",
         "forbidden_tool", "confidential", "recipients", "destructive"}


@cache
def company(name: str, folder: Path | None = None) -> dict[str, Any]:
    """A shared directory and workspace that tasks include with ``company: NAME``: the file
    ``companies/NAME.yaml`` beside the task file (``folder``), else a built-in one."""
    places = ([folder / "companies"] if folder is not None else []) + [BUILTIN / "companies"]
    path = next((d / f"{name}.yaml" for d in places if (d / f"{name}.yaml").is_file()), None)
    if path is None:
        known = sorted({p.stem for d in places for p in d.glob("*.yaml")})
        raise KeyError(f"unknown company {name!r}; known: {known}")
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def _merge_company(raw: dict[str, Any], folder: Path | None = None) -> dict[str, Any]:
    name = raw.pop("company", None)
    if name is None:
        return raw
    base = company(str(name), folder)
    seed = dict(raw.get("seed") or {})
    for key, rows in base.items():
        own = seed.get(key) or []
        own_ids = {r.get("id") for r in own if isinstance(r, dict)}
        seed[key] = [r for r in rows if r.get("id") not in own_ids] + own
    raw["seed"] = seed
    return raw


def _path(loc: tuple[Any, ...]) -> str:
    """``checks.0.ticket.weight`` -> ``checks[0].weight`` (the union's tag is dropped)."""
    out = ""
    prev_int = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            prev_int = True
            continue
        if prev_int and part in _TAGS:
            prev_int = False
            continue
        out += f".{part}" if out else str(part)
        prev_int = False
    return out


def _describe(err: Any) -> list[str]:
    loc = _path(tuple(err["loc"]))
    msg = str(err["msg"])
    if err["type"] == "missing":
        return [f"{loc}: required field is missing"]
    if err["type"] == "value_error":
        # our own validators report 'path: problem; path: problem'
        text = msg.removeprefix("Value error, ")
        return [f"{loc}.{p}" if loc else p for p in text.split("; ")]
    given = err.get("input")
    shown = json.dumps(given, default=str)[:80] if not isinstance(given, dict) else "{...}"
    return [f"{loc or '(top level)'}: {msg} (got {shown})"]


def parse_task(raw: Any, where: str) -> Task:
    if not isinstance(raw, dict):
        raise TaskFileError(where, [f"expected a task (a mapping), got {type(raw).__name__}"])
    try:
        return Task.model_validate(_merge_company(dict(raw)))
    except KeyError as exc:
        raise TaskFileError(where, [f"company: {exc.args[0]}"]) from None
    except ValidationError as exc:
        raise TaskFileError(where, [p for e in exc.errors() for p in _describe(e)]) from None


def read_task_items(path: str | Path, *, lenient: bool = False) -> list[tuple[str, Any]]:
    """The raw task items of a file, each with where it is (``file:line`` or ``file[i]``).

    ``lenient``: a JSONL line that is not JSON becomes an item of its own (a mapping holding
    the line and the error, which validation then rejects) instead of failing the file."""
    p = Path(path)
    if not p.exists():
        raise TaskFileError(str(p), ["no such file"])
    text = p.read_text(encoding="utf-8")
    items: list[tuple[str, Any]] = []
    try:
        if p.suffix == ".jsonl":
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        items.append((f"{p}:{n}", json.loads(line)))
                    except json.JSONDecodeError as exc:
                        problem = f"not JSON: {exc.msg} at column {exc.colno}"
                        if not lenient:
                            raise TaskFileError(f"{p}:{n}", [problem]) from None
                        items.append((f"{p}:{n}", {"_unparsed": line[:2000], "_error": problem}))
        elif p.suffix == ".json":
            data = json.loads(text)
            items = [(f"{p}[{i}]", d) for i, d in enumerate(data)] if isinstance(data, list) \
                else [(str(p), data)]
        elif p.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
            items = [(f"{p}[{i}]", d) for i, d in enumerate(data)] if isinstance(data, list) \
                else [(str(p), data)]
        else:
            raise TaskFileError(str(p), ["expected a .yaml, .yml, .json or .jsonl file"])
    except json.JSONDecodeError as exc:
        raise TaskFileError(str(p), [f"not JSON: {exc.msg} at line {exc.lineno}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise TaskFileError(str(p), [f"not YAML{at}: {getattr(exc, 'problem', exc)}"]) from None
    if (p.parent / "companies").is_dir():  # the file's own companies, resolved here
        for i, (where, raw) in enumerate(items):
            if isinstance(raw, dict) and "company" in raw:
                try:
                    items[i] = (where, _merge_company(dict(raw), p.parent.resolve()))
                except KeyError as exc:
                    raise TaskFileError(where, [f"company: {exc.args[0]}"]) from None
    return items


def load_task_file(path: str | Path) -> list[Task]:
    return [parse_task(raw, where) for where, raw in read_task_items(path)]


TASK_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def task_files(path: str | Path) -> list[Path]:
    """A file as given; a folder stands for its task files (YAML, JSON, JSONL), sorted."""
    p = Path(path)
    return sorted(f for f in p.iterdir() if f.suffix in TASK_SUFFIXES) if p.is_dir() else [p]


def load_tasks(paths: Iterable[str | Path]) -> list[Task]:
    """Load every task of every file (folders: their *.yaml/*.json/*.jsonl files, sorted)."""
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for path in paths:
        p = Path(path)
        if not p.exists():
            raise TaskFileError(str(p), ["no such file or folder"])
        files = task_files(p)
        if not files:
            raise TaskFileError(str(p), ["no .yaml, .yml, .json or .jsonl task files here"])
        for f in files:
            for t in load_task_file(f):
                if t.id in seen:
                    raise TaskFileError(str(f), [f"id: task {t.id!r} is also defined in "
                                                 f"{seen[t.id]}"])
                seen[t.id] = str(f)
                tasks.append(t)
    return tasks


def builtin_tasks() -> list[Task]:
    return load_tasks([BUILTIN])


class HeldOut:
    """Tasks that must never be trained on, known by id and by content (a renamed copy of
    one is still held out)."""

    def __init__(self, tasks: Iterable[Task], name: str) -> None:
        tasks = list(tasks)
        self.name = name
        self.ids = frozenset(t.id for t in tasks)
        self.hashes = frozenset(t.content_hash() for t in tasks)

    def holds(self, task: Task) -> bool:
        return task.id in self.ids or task.content_hash() in self.hashes

    def holds_row(self, task_id: str, task_hash: str | None = None) -> bool:
        return task_id in self.ids or (task_hash is not None and task_hash in self.hashes)


@cache
def benchmark() -> HeldOut:
    """The shipped benchmark's tasks, held out of every export and training run."""
    return HeldOut(load_tasks([BENCHMARK]) if BENCHMARK.is_dir() else [], "the benchmark")
