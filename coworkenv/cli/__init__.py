"""The ``coworkenv`` command: parse, call the library, print.

One module per group of commands, each a thin layer over the library; the checks they share
(task files, databases, names, one-line failures) live in ``_common``:

    run       demo, run, worker
    simulate  simulate
    results   replay, runs, eval, regrade, merge, view
    synth     synth, validate, schema, tools, apps, primitives
    catalog   companies, tasks
    train     export sft|rl, train sft|grpo, serve
"""

from __future__ import annotations

# each module registers its commands; `--help` lists them in this order
# isort: off
from . import run  # noqa: F401
from . import simulate  # noqa: F401
from . import results  # noqa: F401
from . import synth  # noqa: F401
from . import catalog  # noqa: F401
from . import train  # noqa: F401
# isort: on
from ._common import app, main

__all__ = ["app", "main"]
