"""Load tasks from YAML, JSON or JSONL files, with errors that name file, path and problem."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..outputs import check_file
from .describe import _describe
from .errors import TaskFileError
from .task import Task

BUILTIN = Path(__file__).resolve().parents[1] / "builtin_tasks"
BENCHMARK = Path(__file__).resolve().parents[1] / "benchmark"
"""The independent benchmark (``examples/benchmark``): hand-written, never trained on."""


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
    if raw.get("apps") is not None:  # a task that names its apps takes only their rows
        from ..workspace.models import TABLE_APP
        from ..workspace.seed import table_of

        base = {k: v for k, v in base.items()
                if TABLE_APP.get(table_of(k), "directory") in raw["apps"]}
        if isinstance(base.get("tables"), dict):  # (a plugin's rows: those of its apps)
            base["tables"] = {t: rows for t, rows in base["tables"].items()
                              if TABLE_APP.get(t) in raw["apps"]}
    for key, rows in base.items():
        if key == "tables" and isinstance(rows, dict):  # (a plugin's rows, by table)
            tables = dict(seed.get("tables") or {})
            seed[key] = {**tables, **{t: _under(r, tables.get(t)) for t, r in rows.items()}}
        else:
            seed[key] = _under(rows, seed.get(key))
    raw["seed"] = seed
    return raw


def _under(company: list[Any], own: list[Any] | None) -> list[Any]:
    """A company's rows, then a task's own: a task's row replaces the company's of its id."""
    own = own or []
    own_ids = {r.get("id") for r in own if isinstance(r, dict)}
    return [r for r in company if not isinstance(r, dict) or r.get("id") not in own_ids] + own


def parse_task(raw: Any, where: str) -> Task:
    if not isinstance(raw, dict):
        raise TaskFileError(where, [f"expected a task (a mapping), got {type(raw).__name__}"])
    try:
        return Task.model_validate(_merge_company(dict(raw)))
    except KeyError as exc:
        raise TaskFileError(where, [f"company: {exc.args[0]}"]) from None
    except ValidationError as exc:
        raise TaskFileError(where, [p for e in exc.errors()
                                    for p in _describe(e, Task)]) from None


@dataclass(frozen=True)
class InputLimits:
    """Bounds on what a task file may hold; each can be raised with its environment variable.
    Files from others are data: a file over a bound is refused with one line, before it can
    take the memory or the time of a run."""

    max_file_mb: float = 64.0
    """COWORKENV_MAX_TASK_FILE_MB: the size of one task file."""
    max_values: int = 2_000_000
    """COWORKENV_MAX_TASK_VALUES: values in one file, counted as parsed (YAML aliases expanded)."""
    max_depth: int = 64
    """COWORKENV_MAX_TASK_DEPTH: nesting of mappings and lists."""

    @classmethod
    def from_env(cls) -> InputLimits:
        env, d = os.environ, cls()
        return cls(float(env.get("COWORKENV_MAX_TASK_FILE_MB", d.max_file_mb)),
                   int(env.get("COWORKENV_MAX_TASK_VALUES", d.max_values)),
                   int(env.get("COWORKENV_MAX_TASK_DEPTH", d.max_depth)))


def _not_unicode(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.reason
    return None


def _check_shape(data: Any, limits: InputLimits) -> str | None:
    """Why ``data`` is out of bounds (too many values, too deep, a string that is not valid
    Unicode), or None. Shared values (YAML aliases) count each time they are used."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    seen = 0
    while stack:
        value, depth, where = stack.pop()
        seen += 1
        if seen > limits.max_values:
            return (f"more than {limits.max_values:,} values (YAML aliases expand to copies; "
                    "COWORKENV_MAX_TASK_VALUES)")
        if depth > limits.max_depth:
            return f"nested more than {limits.max_depth} levels at {where or 'the top'}"
        if isinstance(value, str):
            why = _not_unicode(value)
            if why is not None:
                return f"{where or 'a value'}: not valid Unicode ({why})"
        elif isinstance(value, dict):
            for k, v in value.items():
                key = str(k)
                why = _not_unicode(key)
                if why is not None:
                    return f"{where or 'a key'}: a key that is not valid Unicode ({why})"
                stack.append((v, depth + 1, f"{where}.{key[:40]}" if where else key[:40]))
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value))
    return None


def _read_bounded(p: Path, limits: InputLimits) -> str:
    try:
        st = p.stat()
    except OSError as exc:
        raise TaskFileError(str(p), [f"cannot read: {exc.strerror}"]) from None
    if not stat.S_ISREG(st.st_mode):
        raise TaskFileError(str(p), ["not a regular file (a FIFO, device or socket?)"])
    cap = int(limits.max_file_mb * 2**20)
    if st.st_size > cap:
        raise TaskFileError(str(p), [f"{st.st_size:,} bytes; task files are limited to "
                                     f"{limits.max_file_mb:g} MB (COWORKENV_MAX_TASK_FILE_MB)"])
    with p.open("rb") as f:  # (a read of the size found, not of the cap: reading asks
        raw = f.read(st.st_size + 1)  # for a buffer as large as the read; a file that grew
        if len(raw) > st.st_size:  # since is read on, up to the cap)
            raw += f.read(cap + 1 - len(raw))
    if len(raw) > cap:
        raise TaskFileError(str(p), [f"more than {limits.max_file_mb:g} MB "
                                     "(COWORKENV_MAX_TASK_FILE_MB)"])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFileError(str(p), [f"not UTF-8: byte 0x{raw[exc.start]:02x} at offset "
                                     f"{exc.start}"]) from None


def read_task_items(path: str | Path, *, lenient: bool = False,
                    limits: InputLimits | None = None) -> list[tuple[str, Any]]:
    """The raw task items of a file, each with where it is (``file:line`` or ``file[i]``).

    ``lenient``: a JSONL line that is not JSON becomes an item of its own (a mapping holding
    the line and the error, which validation then rejects) instead of failing the file.
    Files are read within ``limits`` (default: :meth:`InputLimits.from_env`)."""
    p = Path(path)
    if not p.exists():
        raise TaskFileError(str(p), ["no such file"])
    lim = limits or InputLimits.from_env()
    text = _read_bounded(p, lim)
    mismatch = check_file(p)
    if mismatch is not None:
        raise TaskFileError(str(p), [mismatch])
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
        if len(items) == 1 and isinstance(items[0][1], dict) and \
                items[0][1].get("kind") == "simulation":
            raise TaskFileError(str(p), [
                "a simulation file (kind: simulation), not tasks: `coworkenv simulate "
                f"{p}` runs it, `coworkenv validate {p}` checks it"])
    except json.JSONDecodeError as exc:
        raise TaskFileError(str(p), [f"not JSON: {exc.msg} at line {exc.lineno}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise TaskFileError(str(p), [f"not YAML{at}: {getattr(exc, 'problem', exc)}"]) from None
    except RecursionError:
        raise TaskFileError(str(p), [f"nested more than {lim.max_depth} levels"]) from None
    shape = _check_shape([d for _, d in items], lim)
    if shape is not None:
        raise TaskFileError(str(p), [f"item {shape}" if shape.startswith("[") else shape])
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
    """A file as given; a folder stands for its task files (YAML, JSON, JSONL), sorted;
    simulation files (``kind: simulation``) in a folder are not task files."""
    p = Path(path)
    if not p.is_dir():
        return [p]
    return sorted(f for f in p.iterdir() if f.suffix in TASK_SUFFIXES and not (
        f.suffix in (".yaml", ".yml") and _SIMULATION.search(f.read_text(errors="replace")[:4096])))


_SIMULATION = re.compile(r"^kind:\s*simulation\s*$", re.M)


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
