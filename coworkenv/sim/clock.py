"""Simulated time: a heap of ``(time, priority, seq, item)``.

Simultaneous items come out in a deterministic order (priority, then insertion). The episode
kernel pops the next item only when the episode is quiescent; :class:`VirtualClock` then jumps
straight to its time, :class:`WallClock` waits for it in real time. Actor code is the same on
both.
"""

from __future__ import annotations

import heapq
import time
from abc import ABC, abstractmethod
from typing import Any, NamedTuple

import anyio


class Scheduled(NamedTuple):
    """One item on the heap. A tuple, so the heap compares entries in C (a dataclass with
    ``order=True`` cost a Python call per comparison, about 7 a step); ``seq`` is unique, so
    ``item`` is never compared."""

    time: float
    priority: int
    seq: int
    item: Any


class Clock(ABC):
    """Seconds since the episode started."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[Scheduled] = []
        self._seq = 0

    def schedule(self, at: float, item: Any, priority: int = 1) -> None:
        self._seq += 1
        heapq.heappush(self._heap, Scheduled(max(at, self.now), priority, self._seq, item))

    def __len__(self) -> int:
        return len(self._heap)

    def peek_time(self) -> float | None:
        return self._heap[0].time if self._heap else None

    @abstractmethod
    async def next(self) -> Scheduled | None:
        """Pop the next item, moving ``now`` to its time (None when nothing is scheduled)."""


class VirtualClock(Clock):
    async def next(self) -> Scheduled | None:
        if not self._heap:
            return None
        s = heapq.heappop(self._heap)
        self.now = max(self.now, s.time)
        return s


class WallClock(Clock):
    """Simulated time follows real time (times ``speed``): for live demos."""

    def __init__(self, speed: float = 1.0) -> None:
        super().__init__()
        self.speed = speed
        self._t0 = time.monotonic()

    def _elapsed(self) -> float:
        return (time.monotonic() - self._t0) * self.speed

    async def next(self) -> Scheduled | None:
        self.now = max(self.now, self._elapsed())
        if not self._heap:
            return None
        wait = (self._heap[0].time - self._elapsed()) / self.speed
        if wait > 0:
            await anyio.sleep(wait)
        s = heapq.heappop(self._heap)
        self.now = max(self._elapsed(), s.time)
        return s


CLOCKS = ("virtual", "wall")
"""The kinds of clock a run may have."""


def make_clock(kind: str, speed: float = 1.0) -> Clock:
    if kind == "virtual":
        return VirtualClock()
    if kind == "wall":
        return WallClock(speed)
    raise ValueError(f"clock: expected 'virtual' or 'wall', got {kind!r}")
