"""The companies that tasks and simulations name with ``company: NAME``: where they are found
(a ``companies/`` folder beside the file, else the built-in ones) and what each holds. A
company file is a seed workspace (:class:`~coworkenv.workspace.seed.WorkspaceSeed`): its
rows become every including task's seed, under the task's own rows of the same ids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..workspace.seed import WorkspaceSeed
from .describe import _describe
from .errors import TaskFileError
from .loader import BENCHMARK, BUILTIN

__all__ = ["CompanyFile", "company_schema", "find_companies"]


@dataclass(frozen=True)
class CompanyFile:
    """One ``companies/NAME.yaml``: its name, file and where it comes from (``built-in``,
    ``benchmark`` or the folder it was found in)."""

    name: str
    path: Path
    source: str

    def seed(self) -> WorkspaceSeed:
        """The company's workspace, checked against the company file's model."""
        try:
            raw = yaml.safe_load(self.path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise TaskFileError(str(self.path), [f"not YAML: {exc}"]) from None
        try:
            return WorkspaceSeed.model_validate(raw)
        except ValidationError as exc:
            raise TaskFileError(str(self.path), [p for e in exc.errors()
                                                 for p in _describe(e, WorkspaceSeed)]) from None


def find_companies(folders: Sequence[Path] = ()) -> list[CompanyFile]:
    """The company files of ``folders`` (each a folder of ``NAME.yaml``, or a task folder with
    a ``companies/`` folder), then the built-in ones, then the benchmark's, in that order: a
    task beside a folder's ``companies/`` finds that folder's company of a name first."""
    places = [(str(f), f / "companies" if (f / "companies").is_dir() else f) for f in folders]
    places += [("built-in", BUILTIN / "companies"), ("benchmark", BENCHMARK / "companies")]
    return [CompanyFile(p.stem, p, source) for source, d in places if d.is_dir()
            for p in sorted(d.glob("*.yaml"))]


def company_schema() -> dict[str, Any]:
    """The JSON schema of a company file (``coworkenv schema company``)."""
    schema = WorkspaceSeed.model_json_schema()
    schema["title"] = "Company"
    schema["description"] = ("A company file (companies/NAME.yaml): the people, channels, "
                             "groups, queues, documents, calendar events and other rows every "
                             "task or simulation that says `company: NAME` starts with")
    return schema
