"""A task's cases: the values a request is made with (``cases``), written into its text as
``{{name}}`` wherever it needs them (instruction, facts, reference, checks).

A task loaded alone is bound to its first case. In a simulation, each arrival of it is bound to
one case: drawn for an arrival that comes at its time, and for an arrival caused by a message
(a hand-off) the case that message names, every value of ``match`` mentioned in it (figures in
any writing), so that the receiving agent works on what was actually sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..workspace.text import mentions

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w-]*)\s*\}\}")


def bind(value: Any, case: Mapping[str, str]) -> Any:
    """``value`` with every ``{{name}}`` of its strings replaced by the case's value (names
    the case has not left as they are, for the task's check to name)."""
    if isinstance(value, str):
        if "{{" not in value:
            return value
        return PLACEHOLDER.sub(lambda m: str(case.get(m[1], m[0])), value)
    if isinstance(value, dict):
        return {k: bind(v, case) for k, v in value.items()}
    if isinstance(value, list):
        return [bind(v, case) for v in value]
    return value


def bind_task(data: dict[str, Any], case: Mapping[str, str]) -> dict[str, Any]:
    """A task's raw fields bound to one case (its ``cases`` kept as they are, ``case`` set)."""
    out = {k: (v if k == "cases" else bind(v, case)) for k, v in data.items()}
    out["case"] = dict(case)
    return out


def placeholders(value: Any) -> set[str]:
    """The names of the ``{{name}}`` still in a value's strings."""
    if isinstance(value, str):
        return set(PLACEHOLDER.findall(value))
    if isinstance(value, dict):
        return {n for v in value.values() for n in placeholders(v)}
    if isinstance(value, list):
        return {n for v in value for n in placeholders(v)}
    return set()


def named_case(cases: Sequence[Mapping[str, str]], match: Sequence[str],
               text: str) -> Mapping[str, str] | None:
    """The first case whose ``match`` values (all its values, when ``match`` is empty) the
    text mentions, or None."""
    for case in cases:
        keys = list(match) or list(case)
        if keys and all(mentions(text, str(case[k])) for k in keys if k in case):
            return case
    return None
