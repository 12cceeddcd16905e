"""The MQTT bus: aiomqtt against any MQTT 5 broker (3.1.1 with ``protocol=4``), with its own
flow control.

What the broker does (MQTT 5), and so this code does not: handing each message of a shared
subscription (``$share/GROUP/...``) to one member of the group; publishing a client's last
will when its connection drops without a close (:meth:`Bus.set_last_will`); expiring the
session of a client that never comes back (``session_expiry``), so a crashed run leaves
nothing on the broker for long. What the code below does because MQTT does not:

- QoS 1 by default; publishes run concurrently inside a bounded in-flight window (a slow or
  absent broker makes publishers wait once the window is full; nothing is dropped).
- In-process delivery (MQTT 5, ``local``): an envelope reaches this bus's own plain
  subscribers at publish time and the broker does not echo it back (No Local); the broker
  still gets every envelope. Nagle's algorithm is off on the connection.
- Batching: envelopes published to the same topic in one burst (before the event loop turns)
  travel as one MQTT message holding a JSON array of envelopes; a lone envelope travels as a
  plain JSON object. Any MQTT client can read both forms; order per topic is kept.
- The connection is supervised: after a dropped connection or a broker restart it
  reconnects with backoff, resumes the session the broker kept (what was queued for us
  while we were away is delivered), resubscribes, and re-sends every envelope the broker had
  not acknowledged, in order.
- Receivers deduplicate by envelope id, so a redelivery after reconnect is harmless.
- Every envelope is stamped with the time and this bus's own count, then signed
  (HMAC-SHA256 with the bus key: ``COWORKENV_BUS_KEY``, or one made for this process and its
  forks); unsigned, mis-signed, stale (played back later: see ``_fresh.py``) and retained
  messages, and messages that are not envelopes, are refused before they are seen, counted,
  and reported to whoever watches the topic (the episode kernel records a ``bus.rejected``
  event). A refused message never marks an id as seen, so it cannot shadow the real
  envelope.
- Runs leave nothing on the broker: subscriptions are removed at close and the persistent
  session (kept for reconnects) is cleared.
- While the broker is away, publishers, new subscriptions and readers wait for the
  reconnect; if it stays unreachable past ``reconnect_timeout``, they get
  :class:`BusConnectionError`; never a silent loss or a hang.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import ssl
import time
from collections import OrderedDict
from typing import Any

import aiomqtt
import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import TypeAdapter

from ._base import Bus, BusStatistics
from ._envelope import Envelope, bus_key, new_id
from ._fresh import Freshness
from ._router import Subscription
from .errors import BusConnectionError

# aiomqtt warns once more than 10 publishes await their PUBACK; running many at once inside
# a bounded window is this backend's design, so only its errors are of interest.
_AIOMQTT_LOG = logging.getLogger("coworkenv.bus.aiomqtt")
_AIOMQTT_LOG.setLevel(logging.ERROR)


_ENVELOPES = TypeAdapter(list[Envelope])

# Nagle's algorithm off: paho leaves it on, so a small packet written while an earlier one is
# unacknowledged waits for the peer's delayed ACK (about 40 ms on Linux). An episode sends one
# small message at a time and waits for the answer, so with it on each round trip over a
# local broker took about 88 ms instead of about 1.
_NO_DELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)


def _is_mqtt_error(exc: BaseException) -> bool:
    if isinstance(exc, aiomqtt.MqttError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_mqtt_error(e) for e in exc.exceptions)
    return False


class MqttBus(Bus):
    def __init__(self, host: str = "127.0.0.1", port: int = 1883, *,
                 prefix: str = "coworkenv", username: str | None = None,
                 password: str | None = None, tls: bool = False,
                 tls_context: ssl.SSLContext | None = None, client_id: str | None = None,
                 qos: int = 1, window: int = 4096, max_batch: int = 256,
                 reconnect_timeout: float = 30.0, persistent_session: bool = True,
                 dedup_size: int = 200_000, key: bytes | None = None, protocol: int = 5,
                 session_expiry: int = 300, local: bool = True, max_age: float = 120.0,
                 max_skew: float = 10.0) -> None:
        super().__init__(prefix)
        for name, value in (("window", window), ("max_batch", max_batch)):
            if value < 1:
                raise ValueError(f"{name}: expected at least 1, got {value}")
        if not reconnect_timeout > 0:
            raise ValueError(f"reconnect_timeout: expected a positive number of seconds, got "
                             f"{reconnect_timeout}")
        if qos not in (0, 1, 2):
            raise ValueError(f"qos: expected 0, 1 or 2, got {qos}")
        if protocol not in (4, 5):
            raise ValueError(f"protocol: expected 5 (MQTT 5) or 4 (MQTT 3.1.1), got {protocol}")
        if session_expiry < 0:
            raise ValueError(f"session_expiry: expected seconds (0 or more), got "
                             f"{session_expiry}")
        if not max_age > reconnect_timeout:
            raise ValueError(f"max_age: expected more seconds than reconnect_timeout "
                             f"({reconnect_timeout:g}; what waited out an outage is that "
                             f"old), got {max_age}")
        if not max_skew >= 0:
            raise ValueError(f"max_skew: expected seconds (0 or more), got {max_skew}")
        self.fresh = Freshness(time.time(), max_age=max_age, max_skew=max_skew)
        """What this bus takes as fresh: sent at most ``max_age`` seconds ago, not before
        this bus was made (give or take ``max_skew``, the clocks' difference between hosts),
        each sender's count once."""
        self._count = 0
        self._up_since: float | None = None
        self.protocol = protocol
        self.local = local and protocol == 5
        """Envelopes this bus publishes reach its own plain subscriptions in-process, at
        publish time, and the broker does not send them back (MQTT 5's No Local option on
        those subscriptions): the broker still gets every envelope, for other processes,
        remote workers and anyone watching. Shared subscriptions (``$share/...``) always go
        through the broker, which picks the member. MQTT 3.1.1 has no No Local: there
        everything comes back through the broker."""
        self.session_expiry = session_expiry
        """MQTT 5: seconds the broker keeps this client's session (its subscriptions and the
        messages queued for it) after the connection drops; a reconnect within it loses
        nothing, and a client that never returns leaves nothing behind after it."""
        self._will: Envelope | None = None
        self.key = key or bus_key()
        self.host, self.port = host, port
        self.username, self.password = username, password
        self.tls_context = tls_context or (ssl.create_default_context() if tls else None)
        self.client_id = client_id or f"coworkenv-{new_id()[:16]}"
        self._own_client_id = client_id is None  # (a new id: no broker holds a session of it)
        self.qos = qos
        self.window = window
        self.max_batch = max_batch
        self.reconnect_timeout = reconnect_timeout
        self.persistent_session = persistent_session
        self._window = anyio.Semaphore(window)
        self._unacked: OrderedDict[str, tuple[str, bytes, int]] = OrderedDict()
        self._outbox: dict[str, list[bytes]] = {}
        self._outbox_ready = anyio.Event()
        self._sending: set[str] = set()
        self._drained = anyio.Event()
        self._drained.set()
        self._filters: dict[str, int] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._own: OrderedDict[str, None] = OrderedDict()
        """Ids this bus delivered in-process (``local``): when the broker brings one back
        for a shared subscription of ours, only the shared members get it."""
        self._dedup_size = dedup_size
        self._duplicates = 0
        self._reconnects = 0
        self._client: aiomqtt.Client | None = None
        self._conn_tg: TaskGroup | None = None
        self._connected = anyio.Event()
        self._failure: BusConnectionError | None = None
        self._tg: TaskGroup | None = None
        self._stop = anyio.Event()

    def __repr__(self) -> str:
        return f"MqttBus({self.host}:{self.port}, prefix={self.prefix!r})"

    def set_last_will(self, envelope: Envelope) -> None:
        self._will = envelope

    def _client_options(self, *, clean: bool) -> dict[str, Any]:
        """Connection options by protocol: MQTT 5 (a clean start or the kept session, and a
        session expiry) or 3.1.1 (a clean or a persistent session).

        A persistent session never starts clean, the first connection included: a broker may
        keep a session across its own restart only when it did not (Mosquitto 2.0 drops one
        begun with a clean start, whatever its expiry), and paho's "clean on the first
        connection only" counts from each client object, which here is new at every
        reconnect. A session left by an earlier run under the same id is cleared before the
        first connection instead (:meth:`_supervise`)."""
        will = None if self._will is None else aiomqtt.Will(  # (no time: see _fresh.py)
            self._will.topic, self._will.model_copy(update={
                "origin": f"{self.bus_id}:will"}).signed_json(self.key), qos=1)
        if self.protocol == 4:
            return {"clean_session": clean, "will": will}
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 0 if clean else self.session_expiry
        return {"protocol": aiomqtt.ProtocolVersion.V5, "properties": props, "will": will,
                "clean_start": clean}

    # lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> MqttBus:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._tg.start(self._supervise, name=f"mqtt-bus:{self.client_id}")
            self._tg.start_soon(self._batcher, name=f"mqtt-batcher:{self.client_id}")
        except BaseException:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            raise
        return self

    async def aclose(self) -> None:
        if self._closed:
            return
        if self._failure is None:
            with anyio.move_on_after(10):
                await self.flush()
        client = self._client
        if client is not None and self._failure is None:
            with anyio.move_on_after(5):  # leave no queued-for-us messages on the broker
                for f in list(self._filters):
                    await client.unsubscribe(f)
                await client.unsubscribe(self._inbox_filter())
        await super().aclose()
        self._stop.set()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = None
        if self.persistent_session and self._failure is None:
            await self._forget_session()

    async def _forget_session(self) -> None:
        """Connect once more with a clean session under the same client id, which makes the
        broker drop the persistent one at once (MQTT 5 would expire it only later; 3.1.1
        never)."""
        try:
            with anyio.move_on_after(5):
                async with aiomqtt.Client(self.host, self.port, username=self.username,
                                          password=self.password, identifier=self.client_id,
                                          tls_context=self.tls_context, timeout=5,
                                          logger=_AIOMQTT_LOG,
                                          **{**self._client_options(clean=True), "will": None}):
                    pass
        except aiomqtt.MqttError:
            pass  # the broker went away: it holds nothing of ours that matters now

    def _inbox_filter(self) -> str:
        return f"{self.prefix}/+/+/_reply/{self.bus_id}"

    async def _supervise(self, *, task_status: TaskStatus[None]) -> None:
        started = False
        backoff = 0.05
        down_since = anyio.current_time()
        client: aiomqtt.Client | None = None
        if self.persistent_session and not self._own_client_id:
            await self._forget_session()  # what an earlier run left under this id
        while not self._stop.is_set():
            try:
                async with aiomqtt.Client(
                    self.host, self.port, username=self.username, password=self.password,
                    identifier=self.client_id, tls_context=self.tls_context, timeout=10,
                    keepalive=15, **self._client_options(clean=not self.persistent_session),
                    max_inflight_messages=max(20, self.window // max(1, self.max_batch) * 2),
                    logger=_AIOMQTT_LOG, socket_options=_NO_DELAY,
                ) as client, anyio.create_task_group() as conn_tg:
                    for f in [*self._filters, self._inbox_filter()]:
                        await self._subscribe(client, f)
                    self._client, self._conn_tg = client, conn_tg
                    self._sending.clear()
                    for eid in list(self._unacked):  # re-send what the broker never acked
                        self._spawn(eid)
                    self._connected.set()
                    self._up_since = time.monotonic()
                    backoff = 0.05
                    if not started:
                        started = True
                        task_status.started()
                    else:
                        self._reconnects += 1
                    async for message in client.messages:
                        await self._on_message(message)
            except Exception as exc:
                if not _is_mqtt_error(exc):
                    raise
                self._client, self._conn_tg = None, None
                self._up_since = None
                if self._connected.is_set():  # (before draining: waiters wait from now on)
                    self._connected = anyio.Event()
                    down_since = anyio.current_time()
                if client is not None:
                    await self._drain_received(client)
                if anyio.current_time() - down_since > self.reconnect_timeout:
                    self._fail(BusConnectionError(
                        f"MQTT broker {self.host}:{self.port} unreachable for more than "
                        f"{self.reconnect_timeout:g}s: {exc}"))
                    if not started:
                        raise self._failure from exc  # type: ignore[misc]
                    return
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def _drain_received(self, client: aiomqtt.Client) -> None:
        """Route what the client received (and the broker saw acknowledged) before it died.

        paho acknowledges a QoS 1 message as soon as it is queued for us; aiomqtt's iterator
        stops at a disconnect even when that queue still holds messages. Dropping them would
        lose messages the broker will never resend.
        """
        queue = client._queue  # aiomqtt keeps received messages here
        while True:
            try:
                message = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await self._on_message(message)

    def _fail(self, error: BusConnectionError) -> None:
        self._failure = error
        for sub in self._router.all():
            sub._end(error)
        self._connected.set()  # wake everyone who waits for a connection
        self._drained.set()
        for ev in self._pending.values():
            ev.set()

    def _check_failed(self) -> None:
        if self._failure is not None:
            raise self._failure
        self._check_open()

    # publishing --------------------------------------------------------------------------
    async def publish(self, envelope: Envelope) -> None:
        self._check_open()
        self._check_failed()
        try:  # no checkpoint while the window has room, so a burst can form one batch
            self._window.acquire_nowait()
        except anyio.WouldBlock:
            await self._window.acquire()
            self._check_failed()
        self._published += 1
        self._outbox.setdefault(envelope.topic, []).append(self.wire(envelope))
        if self._drained.is_set():
            self._drained = anyio.Event()
        self._outbox_ready.set()
        if self.local:  # (no checkpoint unless a local subscriber's buffer is full)
            self._own[envelope.id] = None
            if len(self._own) > self._dedup_size:
                self._own.popitem(last=False)
            await self._route(envelope, shared=False)

    def wire(self, envelope: Envelope) -> bytes:
        """What this bus sends for ``envelope``: stamped with the time and this bus's next
        count, then signed."""
        self._count += 1
        return envelope.stamped_json(self.key, int(time.time() * 1000),
                                     f"{self.bus_id}:{self._count}")

    def connected_since(self) -> float | None:
        return self._up_since

    async def _batcher(self) -> None:
        """Turn each burst of envelopes into one message per topic (up to ``max_batch``)."""
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready = anyio.Event()
            outbox, self._outbox = self._outbox, {}
            for topic, items in outbox.items():
                for i in range(0, len(items), self.max_batch):
                    chunk = items[i : i + self.max_batch]
                    data = chunk[0] if len(chunk) == 1 else b"[" + b",".join(chunk) + b"]"
                    bid = new_id()
                    self._unacked[bid] = (topic, data, len(chunk))
                    self._spawn(bid)

    def _spawn(self, bid: str) -> None:
        if bid not in self._sending and self._conn_tg is not None and self._client is not None:
            self._sending.add(bid)
            self._conn_tg.start_soon(self._send_one, self._client, bid)

    async def _send_one(self, client: aiomqtt.Client, bid: str) -> None:
        topic, data, count = self._unacked[bid]
        while True:
            try:
                await client.publish(topic, data, qos=self.qos, timeout=math.inf)
                break
            except aiomqtt.MqttError:
                await anyio.sleep(0.2)
                if client is not self._client:
                    # the connection went down; the supervisor re-sends after reconnect
                    await anyio.sleep_forever()
        del self._unacked[bid]
        self._sending.discard(bid)
        for _ in range(count):
            self._window.release()
        if not self._unacked and not self._outbox:
            self._drained.set()

    async def flush(self) -> None:
        """Wait until the broker has acknowledged every published envelope."""
        while not self._drained.is_set():
            await self._drained.wait()
        self._check_failed()

    # receiving ---------------------------------------------------------------------------
    async def _on_message(self, message: aiomqtt.Message) -> None:
        payload = message.payload
        topic = str(message.topic)
        if not isinstance(payload, bytes | bytearray):
            self._rejected(topic, "not an envelope", {"bytes": None})
            return
        if message.retain:  # planted before the run, or by someone else: never ours to take
            self._rejected(topic, "retained", {"bytes": len(payload)})
            return
        try:
            if payload[:1] == b"[":
                envs = _ENVELOPES.validate_json(payload)
            else:
                envs = [Envelope.model_validate_json(payload)]
        except ValueError:
            self._rejected(topic, "not an envelope", {"bytes": len(payload)})
            return
        now = time.time()
        for env in envs:
            about = {"id": env.id[:200], "sender": env.sender[:200], "kind": env.kind[:200]}
            if not env.verify(self.key):
                self._rejected(topic, "unsigned" if env.sig is None else "bad signature",
                               about)
                continue
            if env.id in self._seen:  # (a redelivery: the broker's, after a reconnect)
                self._duplicates += 1
                continue
            stale = self.fresh.check(env, now)
            if stale is not None:
                if stale[0] == "duplicate":
                    self._duplicates += 1
                else:
                    self._rejected(topic, stale[0], {**about, "why": stale[1]})
                continue
            # checked: receivers get the envelope as it was published
            env.sig = env.sent_ms = env.origin = None
            self._seen[env.id] = None
            if len(self._seen) > self._dedup_size:
                self._seen.popitem(last=False)
            await self._route(env, plain=env.id not in self._own)

    async def _add_subscription(self, sub: Subscription) -> None:
        self._check_open()
        self._check_failed()
        self._router.add(sub)
        n = self._filters.get(sub.topic_filter, 0)
        self._filters[sub.topic_filter] = n + 1
        if n == 0:
            client = await self._wait_connected()
            try:
                # shielded: a subscribe cancelled half-way leaves the broker's SUBACK without
                # its waiter (aiomqtt logs a KeyError) and the filter count out of step with
                # the broker
                with anyio.move_on_after(30, shield=True):
                    await self._subscribe(client, sub.topic_filter)
            except aiomqtt.MqttError:
                # the connection dropped (a broker restart): the next one subscribes to every
                # filter counted above before anyone uses it, so wait for it, as long as the
                # bus waits for the broker (``reconnect_timeout``); an episode starting in an
                # outage rides it out instead of failing at once
                await self._wait_connected(other_than=client)

    async def _subscribe(self, client: aiomqtt.Client, topic_filter: str) -> None:
        if self.protocol == 4:
            await client.subscribe(topic_filter, qos=self.qos)
            return
        from paho.mqtt.subscribeoptions import SubscribeOptions

        no_local = self.local and not topic_filter.startswith("$share/")
        await client.subscribe(topic_filter, options=SubscribeOptions(
            qos=self.qos, noLocal=no_local))  # type: ignore[no-untyped-call]

    async def _remove_subscription(self, sub: Subscription) -> None:
        self._router.remove(sub)
        n = self._filters.get(sub.topic_filter, 0) - 1
        if n > 0:
            self._filters[sub.topic_filter] = n
            return
        self._filters.pop(sub.topic_filter, None)
        if self._client is not None and not self._closed:
            try:
                with anyio.move_on_after(5, shield=True):  # (as for subscribe)
                    await self._client.unsubscribe(sub.topic_filter)
            except aiomqtt.MqttError:
                pass  # the session ends with the connection; nothing left to clean

    async def _wait_connected(self, other_than: aiomqtt.Client | None = None
                              ) -> aiomqtt.Client:
        """The live connection (one other than ``other_than``, which failed); waits through
        an outage, up to ``reconnect_timeout`` (then :class:`BusConnectionError`)."""
        while True:
            self._check_failed()
            client = self._client
            if client is not None and client is not other_than:
                return client
            if client is None:
                await self._connected.wait()
            else:  # the failed connection's end is not yet seen by the supervisor
                await anyio.sleep(0.05)

    def statistics(self) -> BusStatistics:
        base = super().statistics()
        return BusStatistics(base.published, base.subscriptions, len(self._unacked),
                             self._duplicates, self._reconnects, base.rejected)

    def describe(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "prefix": self.prefix, "qos": self.qos,
                "window": self.window, "max_batch": self.max_batch, "local": self.local,
                "max_age": self.fresh.max_age, "max_skew": self.fresh.max_skew}
