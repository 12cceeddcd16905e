"""The documentation's reference pages, generated from the code itself: every command's help
(from the command line's own parser), the task and simulation languages and the company file
(from their JSON schemas) and the tool catalog. The documentation site's hook
(``docs/hooks.py``) puts them where a page says ``<!-- generated: NAME -->``; a test builds
the site with ``--strict``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

WIDTH = 100
"""Columns of the help text (what a terminal of that width shows)."""


def commands() -> Iterator[tuple[str, Any]]:
    """Every command and subcommand of ``coworkenv`` as (``coworkenv run``, click command),
    in the order ``--help`` lists them."""
    import typer

    from .cli import app

    root: Any = typer.main.get_command(app)  # (typer's own click: read by its attributes)

    def walk(cmd: Any, path: str) -> Iterator[tuple[str, Any]]:
        yield path, cmd
        for name in getattr(cmd, "commands", {}) or {}:
            sub = cmd.commands[name]
            if not getattr(sub, "hidden", False):
                yield from walk(sub, f"{path} {name}")

    yield from walk(root, "coworkenv")


def command_help(path: str, cmd: Any) -> str:
    """The help text ``coworkenv ... --help`` prints, at :data:`WIDTH` columns."""
    import click

    parent = None
    for name in path.split()[:-1]:  # (the usage line names the whole command)
        parent = click.Context(click.Command(name), info_name=name, parent=parent)
    ctx = click.Context(cmd, info_name=path.split()[-1], parent=parent, terminal_width=WIDTH,
                        max_content_width=WIDTH)
    return str(cmd.get_help(ctx))


def option_defaults() -> dict[str, set[str]]:
    """Each ``--option`` of any command and the defaults it has (as the help shows them):
    what the documentation's "(default `X`)" must agree with."""
    out: dict[str, set[str]] = {}
    for _, cmd in commands():
        for p in getattr(cmd, "params", []):
            if getattr(p, "param_type_name", "") != "option" or p.default is None:
                continue
            value = p.default
            if isinstance(value, (list, tuple)):
                value = ",".join(map(str, value))
            for opt in p.opts:
                if opt.startswith("--"):
                    out.setdefault(opt, set()).add(str(value))
    return out


def cli_reference() -> str:
    parts = ["Generated from the command line's own parser: what `coworkenv COMMAND --help` "
             "prints.\n"]
    for path, cmd in commands():
        if path == "coworkenv":
            parts.append(f"## `coworkenv`\n\n```text\n{command_help(path, cmd)}\n```\n")
            continue
        if getattr(cmd, "commands", None):  # a group: its commands follow, each on its own
            continue
        parts.append(f"## `{path}`\n\n```text\n{command_help(path, cmd)}\n```\n")
    return "\n".join(parts)


def _type(schema: dict[str, Any]) -> str:
    """A field's type as a person reads it: `integer`, `list of Check`, `A | B`."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema or "oneOf" in schema:
        kinds = [_type(s) for s in schema.get("anyOf", schema.get("oneOf", []))]
        return " \\| ".join(k for k in kinds if k != "null") + (
            " \\| null" if "null" in kinds else "")
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    t = schema.get("type")
    if t == "array":
        return "list of " + _type(schema.get("items", {}))
    if t == "object":
        extra = schema.get("additionalProperties")
        return "mapping" + (f" to {_type(extra)}" if isinstance(extra, dict) and extra else "")
    return str(t or "any")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def schema_reference(schema: dict[str, Any], root: str) -> str:
    """A JSON schema as one table per model: field, type, required, default, description;
    the root model first, the others by name."""
    defs = dict(schema.get("$defs", {}))
    body = {k: v for k, v in schema.items() if k != "$defs"}
    models = [(root, body), *sorted(defs.items())]
    out = []
    for name, model in models:
        out.append(f"### {name}\n")
        if model.get("description"):
            out.append(_cell(model["description"]) + "\n")
        props = model.get("properties")
        if not props:
            if "enum" in model:
                out.append("One of " + ", ".join(f"`{json.dumps(v)}`" for v in model["enum"])
                           + ".\n")
            elif "anyOf" in model or "oneOf" in model:
                out.append("One of: " + _type(model) + ".\n")
            continue
        required = set(model.get("required", []))
        out.append("| field | type | required | default | description |\n|---|---|---|---|---|")
        for field, spec in props.items():
            default = f"`{_cell(json.dumps(spec['default']))}`" if "default" in spec else ""
            out.append(f"| `{field}` | {_type(spec)} | {'yes' if field in required else ''} | "
                       f"{default} | {_cell(spec.get('description', ''))} |")
        out.append("")
    return "\n".join(out)


def task_reference() -> str:
    from .sim import Task

    return ("Generated from the task model's JSON schema (`coworkenv schema task` prints it); "
            "a task file is YAML, JSON or JSONL of these.\n\n"
            + schema_reference(Task.model_json_schema(), "Task"))


def simulation_reference() -> str:
    from .sim.simulation import simulation_schema

    return ("Generated from the simulation model's JSON schema (`coworkenv schema simulation` "
            "prints it).\n\n" + schema_reference(simulation_schema(), "Simulation"))


def company_reference() -> str:
    from .sim.companies import company_schema

    return ("Generated from the company model's JSON schema (`coworkenv schema company` prints "
            "it).\n\n" + schema_reference(company_schema(), "Company"))


def tools_reference() -> str:
    from .workspace import markdown_table

    return ("Generated from the tools' argument models (`coworkenv tools --format markdown` "
            "prints the same table; `coworkenv tools --json` the JSON schemas).\n\n"
            + markdown_table())


GENERATED: dict[str, Callable[[], str]] = {
    "cli": cli_reference, "task": task_reference, "simulation": simulation_reference,
    "tools": tools_reference, "company": company_reference}
"""What a page's ``<!-- generated: NAME -->`` becomes."""


def expand(markdown: str) -> str:
    """A page's markdown with each ``<!-- generated: NAME -->`` replaced by its text."""
    import re

    def one(m: re.Match[str]) -> str:
        name = m[1]
        if name not in GENERATED:
            raise KeyError(f"<!-- generated: {name} -->: no such generated text "
                           f"({', '.join(GENERATED)})")
        return GENERATED[name]()

    return re.sub(r"<!-- generated: ([a-z]+) -->", one, markdown)
