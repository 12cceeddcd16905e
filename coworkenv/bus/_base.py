"""The ``Bus`` contract shared by every backend."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio

from ._envelope import Envelope, new_id, topic_matches, validate_prefix
from ._router import Router, Subscription, SubscriptionStatistics
from .errors import BusClosedError, BusTimeoutError


@dataclass(frozen=True, slots=True)
class BusStatistics:
    published: int
    subscriptions: list[SubscriptionStatistics]
    in_flight: int = 0
    """Published but not yet acknowledged by the broker (MQTT)."""
    duplicates_dropped: int = 0
    reconnects: int = 0
    rejected: int = 0
    """Messages refused: unsigned, mis-signed, retained, or not envelopes (MQTT)."""


class Bus(ABC):
    """Publish envelopes; subscribe to MQTT-style topic filters; request/reply; close.

    Use as ``async with bus:``. Topics are ``<prefix>/<run>/<episode>/...``, built with
    :meth:`topic`, so that one episode's actors never see another's traffic.
    """

    def __init__(self, prefix: str = "coworkenv") -> None:
        self.prefix = validate_prefix(prefix)
        self.bus_id = new_id()[:12]
        self._router = Router(depth=len(self.prefix.split("/")) + 2)  # (a bucket per episode)
        self._published = 0
        self._closed = False
        self._pending: dict[str, anyio.Event] = {}
        self._replies: dict[str, Envelope] = {}
        self._reply_sub: Subscription | None = None
        self._rejections = 0
        self._turns: dict[str, int] = {}
        self._reject_watchers: dict[int, tuple[str, Callable[[str, str, dict[str, Any]], None]]] = {}
        self._opened = time.monotonic()

    # topics ------------------------------------------------------------------------------
    def topic(self, run: str, episode: str, *parts: str) -> str:
        return "/".join((self.prefix, run, episode, *parts))

    def episode_filter(self, run: str, episode: str) -> str:
        return f"{self.prefix}/{run}/{episode}/#"

    # contract ----------------------------------------------------------------------------
    @abstractmethod
    async def publish(self, envelope: Envelope) -> None:
        """Send one envelope to every matching subscription (waits when a buffer is full)."""

    def subscribe(self, topic_filter: str, *, max_buffer: int = 1024
                  ) -> AbstractAsyncContextManager[Subscription]:
        """``async with bus.subscribe("p/run/ep/#") as sub: async for env in sub: ...``

        ``$share/GROUP/FILTER`` subscribes as a member of a shared group (MQTT 5): each
        envelope matching FILTER goes to one member, across processes on MQTT (the broker
        picks) and among this bus's own members."""
        return _SubscribeContext(self, topic_filter, max_buffer)

    async def flush(self) -> None:  # noqa: B027  (optional for backends with no window)
        """Wait until every published envelope has left this process."""

    async def request(self, envelope: Envelope, *, timeout: float,
                      alive: Callable[[], str | None] | None = None,
                      check_every: float = 0.5) -> Envelope:
        """Publish ``envelope`` and wait for the reply that carries its correlation id.

        ``alive``, if given, is asked every ``check_every`` seconds while waiting; when it
        returns a reason (the peer stopped sending heartbeats, say), the wait ends at once with
        :class:`BusTimeoutError` carrying that reason, however long ``timeout`` is.

        When the link drops and comes back while the request waits (a broker restart can
        lose what it had taken), the request is sent again: a new envelope with the same
        correlation id, which the replier answers as it answered the first (or not at all,
        while it is still at work on it).
        """
        corr = envelope.correlation_id or new_id()
        inbox = self.topic(envelope.run, envelope.episode, "_reply", self.bus_id)
        env = envelope.model_copy(update={"correlation_id": corr, "reply_to": inbox})
        done = self._pending[corr] = anyio.Event()
        try:
            await self.publish(env)
            up = self.connected_since()
            with anyio.fail_after(timeout):
                while not done.is_set():
                    with anyio.move_on_after(check_every):
                        await done.wait()
                    if done.is_set():
                        break
                    now_up = self.connected_since()
                    if now_up is not None and now_up != up:  # (the link came back)
                        up = now_up
                        await self.publish(env.model_copy(update={"id": new_id()}))
                    if alive is not None:
                        lost = alive()
                        if lost:
                            raise BusTimeoutError(f"no reply to {env.kind} on {env.topic}: "
                                                  f"{lost}")
        except TimeoutError as exc:
            if isinstance(exc, BusTimeoutError):
                raise
            raise BusTimeoutError(f"no reply to {env.kind} on {env.topic} within "
                                  f"{timeout:g}s") from None
        finally:
            self._pending.pop(corr, None)
        reply = self._replies.pop(corr, None)
        if reply is None:  # woken without a reply: the bus failed or closed
            self._check_failed()
            raise BusClosedError(f"bus closed while waiting for a reply to {env.kind}")
        return reply

    async def reply(self, request: Envelope, *, sender: str, kind: str,
                    payload: dict[str, Any]) -> None:
        if request.reply_to is None:
            raise ValueError(f"envelope {request.id} asked for no reply")
        await self.publish(Envelope(run=request.run, episode=request.episode,
                                    topic=request.reply_to, sender=sender, kind=kind,
                                    payload=payload, sim_time=request.sim_time,
                                    correlation_id=request.correlation_id))

    def statistics(self) -> BusStatistics:
        return BusStatistics(self._published, [s.statistics() for s in self._router.all()],
                             rejected=self._rejections)

    # refused traffic ---------------------------------------------------------------------
    @contextmanager
    def watch_rejections(self, topic_filter: str,
                         callback: Callable[[str, str, dict[str, Any]], None]) -> Iterator[None]:
        """Call ``callback(topic, reason, detail)`` for each message refused on a topic the
        filter matches (the episode kernel records them as ``bus.rejected`` events)."""
        key = id(callback)
        self._reject_watchers[key] = (topic_filter, callback)
        try:
            yield
        finally:
            self._reject_watchers.pop(key, None)

    def _rejected(self, topic: str, reason: str, detail: dict[str, Any]) -> None:
        self._rejections += 1
        for f, cb in list(self._reject_watchers.values()):
            if topic_matches(f, topic):
                cb(topic, reason, detail)

    def connected_since(self) -> float | None:
        """``time.monotonic()`` when the link now up came up; None while it is down (a
        broker outage). Who waits to hear from a peer counts its silence from here: nothing
        could be heard before. The memory bus is always up (since it was made)."""
        return self._opened

    def set_last_will(self, envelope: Envelope) -> None:  # noqa: B027  (MQTT only)
        """An envelope that the broker publishes for this bus if its connection is lost
        without a close (a killed process, a dropped network): MQTT's last will. Set before
        the bus opens. The memory bus has no broker and ignores it (a process that dies takes
        its subscribers with it)."""

    # lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Bus:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop: publishing raises, and every subscription ends after its buffer drains."""
        self._closed = True
        for sub in self._router.all():
            sub._end()
        for ev in self._pending.values():
            ev.set()

    # shared machinery --------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise BusClosedError("the bus is closed")

    def _check_failed(self) -> None:
        """Raise the backend's failure, if any (a lost broker, for MQTT)."""
        self._check_open()

    async def _add_subscription(self, sub: Subscription) -> None:
        self._check_open()
        self._router.add(sub)

    async def _remove_subscription(self, sub: Subscription) -> None:
        self._router.remove(sub)

    async def _route(self, env: Envelope, *, plain: bool = True, shared: bool = True) -> None:
        """Deliver to the matching subscriptions: plain ones, shared ones, or both (the MQTT
        bus serves its own plain subscribers in-process and lets the broker pick a shared
        group's member: see MqttBus.local)."""
        if plain and env.correlation_id is not None and env.correlation_id in self._pending \
                and env.topic.endswith(f"/_reply/{self.bus_id}"):
            self._replies[env.correlation_id] = env
            self._pending[env.correlation_id].set()
            return
        groups: dict[str, list[Subscription]] | None = None
        for sub in self._router.match(env.topic):
            if sub.share_group is None:
                if plain:
                    await sub._deliver(env)
            elif shared:
                groups = groups or {}
                groups.setdefault(sub.share_group, []).append(sub)
        for group, members in (groups or {}).items():  # one member each, in turn
            turn = self._turns.get(group, 0)
            self._turns[group] = turn + 1
            await members[turn % len(members)]._deliver(env)



class _SubscribeContext:
    def __init__(self, bus: Bus, topic_filter: str, max_buffer: int) -> None:
        self.bus = bus
        self.sub = Subscription(topic_filter, max_buffer, bus._remove_subscription)

    async def __aenter__(self) -> Subscription:
        await self.bus._add_subscription(self.sub)
        return self.sub

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        with anyio.CancelScope(shield=True):
            await self.sub.aclose()
