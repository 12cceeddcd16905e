"""The in-process bus (the default): anyio memory streams, bounded per subscriber."""

from __future__ import annotations

from ._base import Bus
from ._envelope import Envelope


class MemoryBus(Bus):
    """Delivers envelopes in-process, in publish order per topic, with backpressure.

    Envelopes are passed as objects (never copied or serialised); receivers must not mutate
    them.
    """

    async def publish(self, envelope: Envelope) -> None:
        self._check_open()
        self._published += 1
        await self._route(envelope)
