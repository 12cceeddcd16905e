"""Errors of the workspace.

    WorkspaceError
    └── ToolError            a tool call that cannot be carried out; returned to the caller
                             as an error observation, never raised out of an episode
        ├── (code="invalid_arguments")   arguments fail their model
        ├── (code="not_found")           an id or person that does not resolve
        ├── (code="forbidden")           a permission rule refuses the action
        ├── (code="conflict")            the action is impossible in the current state
        ├── (code="too_large")           an argument over its size bound
        └── (code="unknown_tool")
"""

from __future__ import annotations

from typing import Literal

from ..errors import CoworkenvError

ErrorCode = Literal[
    "invalid_arguments", "not_found", "forbidden", "conflict", "unknown_tool", "unavailable",
    "too_large",
]


class WorkspaceError(CoworkenvError):
    """Base class of the workspace's errors."""


class AppError(WorkspaceError):
    """An app (a plugin of :mod:`coworkenv.workspace.apps`) that cannot be loaded, or that
    breaks the app contract."""


class ToolError(WorkspaceError):
    def __init__(self, code: ErrorCode, message: str, field: str | None = None) -> None:
        self.code = code
        self.message = message
        self.field = field
        super().__init__(f"{code}: {field + ': ' if field else ''}{message}")

    def observation(self) -> dict[str, object]:
        return {"ok": False, "error": {"code": self.code, "field": self.field, "message": self.message}}
