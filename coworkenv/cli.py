"""The ``coworkenv`` command: parse, call the library, print."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Synthesize, run, grade and export training environments for coworker "
                       "agents.")
console = Console()
err = Console(stderr=True)


@app.callback()
def _root() -> None:
    """coworkenv: workspace simulator for training coworker agents."""


@app.command()
def tools(
    fmt: Annotated[str, typer.Option("--format", help="openai (JSON list) or markdown")] = "openai",
) -> None:
    """Print the workspace tool catalog (OpenAI function schemas or a markdown table)."""
    from .workspace import markdown_table, openai_tools

    if fmt == "openai":
        sys.stdout.write(json.dumps(openai_tools(), indent=2) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(markdown_table() + "\n")
    else:
        err.print(f"[red]--format: expected 'openai' or 'markdown', got {fmt!r}[/red]")
        raise typer.Exit(2)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
