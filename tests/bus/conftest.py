from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from coworkenv.bus import Bus, MemoryBus, MqttBus, new_id


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", pytest.param("mqtt", marks=pytest.mark.mqtt)])
async def bus(request: pytest.FixtureRequest, broker: tuple[str, int]) -> AsyncIterator[Bus]:
    prefix = f"cwtest-{new_id()[:10]}"  # per-test topic prefix
    b: Bus = MemoryBus(prefix) if request.param == "memory" else MqttBus(*broker, prefix=prefix)
    async with b:
        yield b
