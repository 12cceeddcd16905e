from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coworkenv.bus import Bus
from coworkenv.runtime import RunConfig, run
from coworkenv.sim import EpisodeResult, Task


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run_sync(tasks: list[Task], db: Path | str, *, agent: Any = "oracle", trials: int = 1,
             concurrency: int = 16, bus: Bus | None = None, run_id: str = "r1",
             resume: bool = False, clock: str = "virtual",
             role: str = "student") -> list[EpisodeResult]:
    """A run through the library API (what `coworkenv run` calls)."""
    return run(RunConfig(tasks, agent=agent, agent_name=None if isinstance(agent, str)
                         else str(agent), role=role, db=db, bus=bus or "memory", trials=trials,
                         concurrency=concurrency, run_id=run_id, resume=resume,
                         clock=clock)).episodes
