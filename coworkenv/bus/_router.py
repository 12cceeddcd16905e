"""Local fan-out: a trie of subscriptions, each with a bounded buffer (shared by backends)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._envelope import Envelope, shared, validate_filter
from .errors import BusClosedError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    subs: list[Subscription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SubscriptionStatistics:
    topic_filter: str
    buffered: int
    max_buffer: int
    delivered: int
    waits: int
    """How often a publisher had to wait because this subscriber's buffer was full."""


class Subscription:
    """Envelopes matching one topic filter, in publish order, through a bounded buffer.

    Iterate it inside ``async with bus.subscribe(filter) as sub``. A full buffer makes the
    publisher wait (backpressure); nothing is dropped. Cancelling a reader loses nothing:
    unread envelopes stay in the buffer for the next ``receive()``.
    """

    def __init__(self, topic_filter: str, max_buffer: int,
                 on_close: Callable[[Subscription], Awaitable[None]]) -> None:
        self.topic_filter = topic_filter
        self.share_group, self.match_filter = shared(topic_filter)
        """A shared subscription's group (each envelope goes to one member), and the filter
        that topics are matched against."""
        self.max_buffer = max_buffer
        self._send: MemoryObjectSendStream[Envelope]
        self._recv: MemoryObjectReceiveStream[Envelope]
        self._send, self._recv = anyio.create_memory_object_stream[Envelope](max_buffer)
        self._on_close = on_close
        self.delivered = 0
        self.waits = 0
        self.closed = False
        self._error: BaseException | None = None

    async def _deliver(self, env: Envelope) -> None:
        try:
            self._send.send_nowait(env)
        except anyio.WouldBlock:
            self.waits += 1
            try:
                await self._send.send(env)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the subscriber left while we waited
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return
        self.delivered += 1

    def _end(self, error: BaseException | None = None) -> None:
        """No more envelopes will come: readers drain the buffer, then stop (or get ``error``)."""
        self._error = error
        self._send.close()

    async def receive(self) -> Envelope:
        try:
            return self._recv.receive_nowait()
        except anyio.WouldBlock:
            pass
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass  # reported below with the same messages as a waiting receive
        try:
            return await self._recv.receive()
        except anyio.EndOfStream:
            if self._error is not None:
                raise self._error from None
            raise BusClosedError(f"subscription {self.topic_filter!r}: bus closed") from None
        except anyio.ClosedResourceError:
            raise BusClosedError(f"subscription {self.topic_filter!r} is closed") from None

    def receive_nowait(self) -> Envelope:
        """The next buffered envelope; ``anyio.WouldBlock`` when none is waiting."""
        return self._recv.receive_nowait()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Envelope:
        try:  # no checkpoint while envelopes are waiting: a yield per envelope costs more
            return self._recv.receive_nowait()  # than the delivery itself
        except anyio.WouldBlock:
            pass
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            if self._error is not None:
                raise self._error from None
            raise StopAsyncIteration from None
        try:
            return await self._recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            if self._error is not None:
                raise self._error from None
            raise StopAsyncIteration from None

    def statistics(self) -> SubscriptionStatistics:
        return SubscriptionStatistics(self.topic_filter,
                                      self._recv.statistics().current_buffer_used,
                                      self.max_buffer, self.delivered, self.waits)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self._send.close()
            self._recv.close()
            await self._on_close(self)


class Router:
    """Topic trie: O(levels) matching however many subscriptions exist.

    Matches are cached per topic, in buckets by the topic's first ``depth`` levels (a bus
    passes its prefix's levels + 2: one bucket per episode). A subscription whose filter's
    first ``depth`` levels are literal can only change the matches of that bucket's topics,
    so adding or removing it forgets that bucket alone: with thousands of live episodes,
    an episode starting or ending costs the same as with one (forgetting every cached topic
    cost time in proportion to the live episodes). Other filters (wildcards early, a run-wide
    watcher) forget everything, as before.
    """

    MAX_CACHED = 65_536

    def __init__(self, depth: int = 3) -> None:
        self._root = _Node()
        self.count = 0
        self.depth = depth
        self._cache: dict[str, dict[str, list[Subscription]]] = {}
        self._cached = 0

    def _bucket(self, levels: str) -> tuple[str, list[str]]:
        """The bucket of a topic (or of the topics a filter can match): its first ``depth``
        levels, joined, and those levels."""
        first = levels.split("/", self.depth)[:self.depth]
        return "/".join(first), first

    def _forget(self, match_filter: str) -> None:
        key, first = self._bucket(match_filter)
        if "+" not in first and "#" not in first:  # (literal: it matches in one bucket only)
            self._cached -= len(self._cache.pop(key, ()))
        else:
            self._cache.clear()
            self._cached = 0

    def add(self, sub: Subscription) -> None:
        validate_filter(sub.topic_filter)
        node = self._root
        for part in sub.match_filter.split("/"):
            node = node.children.setdefault(part, _Node())
        node.subs.append(sub)
        self.count += 1
        self._forget(sub.match_filter)

    def remove(self, sub: Subscription) -> None:
        path = [self._root]
        for part in sub.match_filter.split("/"):
            nxt = path[-1].children.get(part)
            if nxt is None:
                return
            path.append(nxt)
        if sub in path[-1].subs:
            path[-1].subs.remove(sub)
            self.count -= 1
            self._forget(sub.match_filter)
        # prune empty branches
        parts = sub.match_filter.split("/")
        for depth in range(len(parts), 0, -1):
            node = path[depth]
            if node.subs or node.children:
                break
            del path[depth - 1].children[parts[depth - 1]]

    def match(self, topic: str) -> list[Subscription]:
        key = self._bucket(topic)[0]
        bucket = self._cache.get(key)
        if bucket is not None:
            cached = bucket.get(topic)
            if cached is not None:
                return cached
        else:
            bucket = self._cache[key] = {}
        out = self._match(topic)
        if self._cached >= self.MAX_CACHED:
            self._cache.clear()
            self._cached = 0
            bucket = self._cache[key] = {}
        bucket[topic] = out
        self._cached += 1
        return out

    def _match(self, topic: str) -> list[Subscription]:
        out: list[Subscription] = []
        levels = topic.split("/")
        stack = [(self._root, 0)]
        while stack:
            node, i = stack.pop()
            hash_node = node.children.get("#")
            if hash_node is not None:
                out.extend(hash_node.subs)
            if i == len(levels):
                out.extend(node.subs)
                continue
            for key in (levels[i], "+"):
                child = node.children.get(key)
                if child is not None:
                    stack.append((child, i + 1))
        return out

    def all(self) -> list[Subscription]:
        out: list[Subscription] = []
        stack = [self._root]
        while stack:
            node = stack.pop()
            out.extend(node.subs)
            stack.extend(node.children.values())
        return out
