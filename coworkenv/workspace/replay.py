"""Rebuild a workspace from its events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .models import WorkspaceState, apply_event


def replay_events(events: Iterable[Any], upto: int | None = None) -> WorkspaceState:
    """Apply ``ws.*`` events (objects with ``seq``, ``kind``, ``payload``) up to seq ``upto``."""
    state = WorkspaceState()
    for ev in events:
        if upto is not None and ev.seq > upto:
            break
        if ev.kind.startswith("ws."):
            apply_event(state, ev.kind, ev.payload)
    return state
