"""Reading a requirement from a file: YAML, or a BPMN 2.0 process (read by ``bpmn``)."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from ..sim.describe import _describe
from ..sim.errors import TaskFileError
from .bpmn import read_process
from .primitive import PRIMITIVES
from .requirement import WorkflowRequirement


def load_requirement(path: str | Path) -> WorkflowRequirement:
    """A requirement from a YAML file, or from a BPMN 2.0 process file (``.bpmn``)."""
    p = Path(path)
    if p.is_dir():  # (`process.bpmn/` too)
        raise TaskFileError(str(p), ["is a folder; give requirement files (.yaml or .bpmn)"])
    if p.suffix.lower() in (".bpmn", ".xml"):
        return read_process(p)[0]
    try:
        data = yaml.safe_load(p.read_text())
        req = WorkflowRequirement.model_validate(data)
    except FileNotFoundError:
        raise TaskFileError(str(p), ["no such file"]) from None
    except yaml.YAMLError as exc:
        raise TaskFileError(str(p), [f"not YAML: {exc}"]) from None
    except ValidationError as exc:
        raise TaskFileError(str(p), [line for e in exc.errors()
                                     for line in _describe(e, WorkflowRequirement)]) from None
    unknown = [(i, n) for i, n in enumerate(req.primitives or []) if n not in PRIMITIVES]
    if unknown:
        raise TaskFileError(str(p), [f"primitives[{i}]: no registered primitive {n!r} "
                                     f"(registered: {', '.join(sorted(PRIMITIVES))})"
                                     for i, n in unknown])
    return req
