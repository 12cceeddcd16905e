"""A pydantic validation error as the lines a person reads: where (the field's path, a union's
tag dropped), what is wrong, what was given, and for an unknown field the one meant. Shared by
every file reader (tasks, simulations, requirements, companies) and by the task model's own
checks, which is why it sits below both."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, MutableMapping, Sequence
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

_TAGS = {"tool", "message", "wait", "finish", "sql", "email_sent", "chat_message",
         "calendar_event", "ticket", "doc", "tool_order", "asked_before", "no_tool",
         "forbidden_tool", "confidential", "recipients", "destructive", "handoff", "agrees_with"}


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


_SUBPATH = re.compile(r"[A-Za-z_][\w.\[\]-]*: ")
"""A validator's problem that names a field below the place of the error (``hours: ...``)."""


def _describe(err: Any, model: type[BaseModel] | None = None, at: str = "") -> list[str]:
    """One pydantic error as the lines a person reads: where (``at``, then the error's
    path), what is wrong, what was given. An unknown field of ``model`` (what was validated)
    says the field meant, the allowed one nearest to it (``checks.sla: ... did you mean
    sla_hours?``), else the fields allowed there."""
    path = _path(tuple(err["loc"]))
    loc = f"{at}{'' if path.startswith('[') or not at or not path else '.'}{path}"
    msg = str(err["msg"])
    if err["type"] == "missing":
        return [f"{loc}: required field is missing"]
    if err["type"] == "value_error":
        # our own validators report 'path: problem; path: problem', or a problem of the
        # place itself ('give exactly one of at, poisson or on')
        text = msg.removeprefix("Value error, ")
        return [p if not loc else f"{loc}.{p}" if _SUBPATH.match(p) else f"{loc}: {p}"
                for p in text.split("; ")]
    given = err.get("input")
    shown = json.dumps(given, default=str)[:80] if not isinstance(given, dict) else "{...}"
    hint = ""
    if err["type"] == "extra_forbidden" and model is not None:
        hint = _field_meant(model, tuple(err["loc"]))
    return [f"{loc or '(top level)'}: {msg} (got {shown}){hint}"]


def _field_meant(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """For an unknown field at ``loc`` of ``model``: ": did you mean NAME?" (the allowed field
    nearest to it), else ": expected one of ..." (every field allowed there); "" when the
    place cannot be told."""
    if not loc:
        return ""
    allowed = [n for m in _models_at(model, loc[:-1]) for n in _field_names(m)]
    allowed = [n for n in dict.fromkeys(allowed) if n != loc[-1]]
    if not allowed:
        return ""
    key = str(loc[-1])
    near = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6) or (
        [n for n in allowed if len(key) >= 3 and n.startswith(key)][:1])
    return f": did you mean {near[0]}?" if near else f": expected one of {', '.join(allowed)}"


def _field_names(model: type[BaseModel]) -> list[str]:
    """The names a file may give ``model``'s fields (an alias where there is one)."""
    by_name = bool(model.model_config.get("populate_by_name"))
    out = []
    for name, f in model.model_fields.items():
        if f.alias:
            out.append(f.alias)
        if not f.alias or by_name:
            out.append(name)
    return out


def _models_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[type[BaseModel]]:
    """The models a pydantic error's ``loc`` (without its last part) can point into: field
    names and aliases, list indexes, mapping keys, and the tags (or class names) a union's
    member is named by in a ``loc``."""
    here: list[Any] = [model]
    for part in loc:
        step: list[Any] = []
        for t in _members(here):
            if isinstance(t, type) and issubclass(t, BaseModel):
                field = next((f for n, f in t.model_fields.items() if part in (n, f.alias)),
                             None)
                if field is not None:
                    step.append(field.annotation)
                if part == t.__name__ or any(  # (a tag may also be a field's name: `tool`)
                        get_origin(f.annotation) is Literal
                        and part in get_args(f.annotation)
                        for f in t.model_fields.values()):
                    step.append(t)  # (the tag of a union's member)
                continue
            origin, args = get_origin(t), get_args(t)
            if origin in (dict, Mapping, MutableMapping) and args:
                step.append(args[-1])
            elif origin in (list, tuple, set, frozenset, Sequence) and isinstance(part, int):
                step += [a for a in args if a is not Ellipsis]
        here = step
    return [t for t in _members(here) if isinstance(t, type) and issubclass(t, BaseModel)]


def _members(types: list[Any]) -> list[Any]:
    """Each type with its ``Annotated`` and unions unwrapped (``None`` left out)."""
    out: list[Any] = []
    for t in types:
        origin = get_origin(t)
        if origin is Annotated:
            out += _members([get_args(t)[0]])
        elif origin in (Union, UnionType):
            out += _members([a for a in get_args(t) if a is not NoneType])
        elif t is not NoneType:
            out.append(t)
    return out
