from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from coworkenv.bus import Bus, MemoryBus, MqttBus, new_id


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", pytest.param("mqtt", marks=pytest.mark.mqtt),
                        pytest.param("mqtt-via-broker", marks=pytest.mark.mqtt)])
async def bus(request: pytest.FixtureRequest, broker: tuple[str, int]) -> AsyncIterator[Bus]:
    """Every backend: memory; MQTT with its own subscribers served in-process (the default);
    MQTT with every envelope coming back through the broker (``local=False``)."""
    prefix = f"cwtest-{new_id()[:10]}"  # per-test topic prefix
    b: Bus = MemoryBus(prefix) if request.param == "memory" else MqttBus(
        *broker, prefix=prefix, local=request.param == "mqtt")
    async with b:
        yield b
