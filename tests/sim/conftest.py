from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.agents import agent_factory, scripted_cast
from coworkenv.bus import Bus, MemoryBus
from coworkenv.sim import EpisodeResult, RunOptions, Task, run_episodes
from coworkenv.store import EventStore


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run_sync(tasks: list[Task], db: Path | str, *, agent: Any = "oracle", trials: int = 1,
             concurrency: int = 16, bus: Bus | None = None, run_id: str = "r1",
             resume: bool = False, clock: str = "virtual",
             role: str = "student") -> list[EpisodeResult]:
    make = agent_factory(agent) if isinstance(agent, str) else agent

    async def go() -> list[EpisodeResult]:
        async with bus or MemoryBus("t") as b, EventStore(db) as store:
            return await run_episodes(tasks, agent=make, cast=scripted_cast, bus=b, store=store,
                                      options=RunOptions(run_id, str(agent), trials, concurrency,
                                                         clock, role=role, resume=resume))

    return anyio.run(go)
