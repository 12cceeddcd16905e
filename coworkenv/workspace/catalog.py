"""The tool catalog: OpenAI function schemas and a human table, from the argument models."""

from __future__ import annotations

from typing import Any

from .tools import REGISTRY


def openai_tools(names: list[str] | None = None) -> list[dict[str, Any]]:
    """Every tool (or the named ones) as an OpenAI function-calling schema."""
    chosen = REGISTRY.values() if names is None else [REGISTRY[n] for n in names]
    return [t.openai_schema() for t in chosen]


def markdown_table() -> str:
    """The installed tools as a markdown table, a row each (descriptions on one line)."""
    lines = ["| tool | app | writes | arguments | description |", "|---|---|---|---|---|"]
    for t in REGISTRY.values():
        props = t.args.model_json_schema().get("properties", {})
        required = set(t.args.model_json_schema().get("required", []))
        args = ", ".join(f"`{k}`" + ("" if k in required else "?") for k in props)
        lines.append(f"| `{t.name}` | {t.app} | {'yes' if t.writes else 'no'} | {args} | "
                     f"{' '.join(t.description.split())} |")
    return "\n".join(lines)
