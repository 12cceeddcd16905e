"""One contract, run against every backend (the MQTT one on the real Mosquitto)."""

from __future__ import annotations

import json

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.lowlevel import checkpoint

from coworkenv.bus import Bus, BusClosedError, BusTimeoutError, Envelope, MemoryBus

pytestmark = pytest.mark.anyio


def env(bus: Bus, *parts: str, run: str = "r1", episode: str = "e1", **payload: object) -> Envelope:
    return Envelope(run=run, episode=episode, topic=bus.topic(run, episode, *parts),
                    sender="test", kind="message", payload=dict(payload))


async def collect(sub, n: int, timeout: float = 10) -> list[Envelope]:  # type: ignore[no-untyped-def]
    out = []
    with anyio.fail_after(timeout):
        while len(out) < n:
            out.append(await sub.receive())
    return out


async def assert_nothing_more(sub) -> None:  # type: ignore[no-untyped-def]
    with anyio.move_on_after(0.3):
        extra = await sub.receive()
        pytest.fail(f"unexpected envelope {extra.topic}")


async def test_wildcards(bus: Bus) -> None:
    p = bus.prefix
    async with bus.subscribe(f"{p}/r1/e1/+/inbox") as plus, \
            bus.subscribe(f"{p}/r1/e1/#") as hash_, \
            bus.subscribe(f"{p}/r1/+/agent/inbox") as mid, \
            bus.subscribe(f"{p}/r1/e1/agent") as exact:
        await bus.publish(env(bus, "agent", "inbox", n=1))
        await bus.publish(env(bus, "user", "inbox", n=2))
        await bus.publish(env(bus, "agent", "inbox", "deep", n=3))
        await bus.publish(env(bus, "agent", n=4))
        await bus.publish(env(bus, "agent", "inbox", episode="e2", n=5))
        assert [e.payload["n"] for e in await collect(plus, 2)] == [1, 2]
        assert [e.payload["n"] for e in await collect(hash_, 4)] == [1, 2, 3, 4]
        assert [e.payload["n"] for e in await collect(mid, 2)] == [1, 5]
        assert [e.payload["n"] for e in await collect(exact, 1)] == [4]
        for s in (plus, hash_, mid, exact):
            await assert_nothing_more(s)


async def test_ordering(bus: Bus) -> None:
    async with bus.subscribe(bus.episode_filter("r1", "e1"), max_buffer=5000) as sub:
        for i in range(500):
            await bus.publish(env(bus, "agent", i=i))
        got = await collect(sub, 500)
    assert [e.payload["i"] for e in got] == list(range(500))


async def test_envelope_round_trips_intact(bus: Bus) -> None:
    async with bus.subscribe(bus.episode_filter("r1", "e1")) as sub:
        sent = env(bus, "agent", text="héllo", nested={"a": [1, None, True]})
        sent = sent.model_copy(update={"sim_time": 12.5, "seq": 7})
        await bus.publish(sent)
        (got,) = await collect(sub, 1)
    assert got == sent
    assert Envelope.model_validate_json(got.model_dump_json()) == sent


async def test_request_reply_and_timeout(bus: Bus) -> None:
    async def responder(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with bus.subscribe(f"{bus.prefix}/+/+/tools") as sub:
            task_status.started()
            async for req in sub:
                await bus.reply(req, sender="tools", kind="tool_result",
                                payload={"echo": req.payload["x"]})

    async with anyio.create_task_group() as tg:
        await tg.start(responder)
        rep = await bus.request(env(bus, "tools", x=41), timeout=5)
        assert rep.payload == {"echo": 41}
        assert rep.kind == "tool_result"
        replies = [await bus.request(env(bus, "tools", x=i), timeout=5) for i in range(5)]
        assert [r.payload["echo"] for r in replies] == list(range(5))
        with pytest.raises(BusTimeoutError, match="no reply"):
            await bus.request(env(bus, "nobody-listens", x=1), timeout=0.3)
        tg.cancel_scope.cancel()


async def test_isolation_between_episodes(bus: Bus) -> None:
    async with bus.subscribe(bus.episode_filter("r1", "e1")) as a, \
            bus.subscribe(bus.episode_filter("r1", "e2")) as b, \
            bus.subscribe(bus.episode_filter("r2", "e1")) as c:
        await bus.publish(env(bus, "agent", episode="e1", who="a"))
        await bus.publish(env(bus, "agent", episode="e2", who="b"))
        await bus.publish(env(bus, "agent", run="r2", episode="e1", who="c"))
        assert [e.payload["who"] for e in await collect(a, 1)] == ["a"]
        assert [e.payload["who"] for e in await collect(b, 1)] == ["b"]
        assert [e.payload["who"] for e in await collect(c, 1)] == ["c"]
        for s in (a, b, c):
            await assert_nothing_more(s)


async def test_close_semantics(bus: Bus) -> None:
    async with bus.subscribe(bus.episode_filter("r1", "e1")) as sub:
        await bus.publish(env(bus, "agent", i=1))
        await collect(sub, 1)
        await bus.publish(env(bus, "agent", i=2))
        if hasattr(bus, "flush"):
            await bus.flush()
        with anyio.fail_after(5):
            while sub.statistics().buffered == 0:
                await anyio.sleep(0.01)
        await bus.aclose()
        # what was delivered before close is still readable, then iteration ends
        assert [e.payload["i"] async for e in sub] == [2]
        with pytest.raises(BusClosedError):
            await sub.receive()
    with pytest.raises(BusClosedError):
        await bus.publish(env(bus, "agent", i=3))
    with pytest.raises(BusClosedError):
        async with bus.subscribe("x/#"):
            pass


async def test_cancelling_a_reader_loses_no_message(bus: Bus) -> None:
    n = 200
    got: list[int] = []
    async with bus.subscribe(bus.episode_filter("r1", "e1"), max_buffer=n) as sub:
        reader_scope = anyio.CancelScope()

        async def reader() -> None:
            with reader_scope:
                async for e in sub:
                    got.append(e.payload["i"])
                    await checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            for i in range(n):
                await bus.publish(env(bus, "agent", i=i))
                if i == n // 2:
                    with anyio.fail_after(10):
                        while not got:
                            await anyio.sleep(0.01)
                    reader_scope.cancel()  # cancel the reader mid-stream
        # a new reader on the same subscription gets every remaining envelope
        rest = await collect(sub, n - len(got))
    assert got + [e.payload["i"] for e in rest] == list(range(n))


async def test_backpressure_with_a_slow_subscriber(bus: Bus) -> None:
    n, buf = 60, 5
    received: list[int] = []
    async with bus.subscribe(bus.episode_filter("r1", "e1"), max_buffer=buf) as slow:
        async def consume() -> None:
            async for e in slow:
                received.append(e.payload["i"])
                await anyio.sleep(0.005)  # slow on purpose
                if len(received) == n:
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            for i in range(n):
                await bus.publish(env(bus, "agent", i=i))
                assert slow.statistics().buffered <= buf  # the buffer stays bounded
        stats = slow.statistics()
    assert received == list(range(n))  # nothing dropped, in order
    assert stats.waits > 0  # the publisher (or the broker side) was made to wait


async def test_memory_publisher_waits_for_a_full_subscriber() -> None:
    bus = MemoryBus("bp")
    async with bus, bus.subscribe("bp/#", max_buffer=2) as sub:
        published = 0

        async def publisher() -> None:
            nonlocal published
            for i in range(5):
                await bus.publish(env(bus, "x", i=i))
                published += 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(publisher)
            await wait_all_tasks_blocked()
            assert published == 2  # blocked on the third: the buffer holds two
            assert [e.payload["i"] for e in await collect(sub, 5)] == list(range(5))
        assert bus.statistics().subscriptions[0].waits >= 1


async def test_statistics(bus: Bus) -> None:
    async with bus.subscribe(bus.episode_filter("r1", "e1"), max_buffer=7) as sub:
        await bus.publish(env(bus, "a"))
        await collect(sub, 1)
        stats = bus.statistics()
        assert stats.published >= 1
        assert [s.max_buffer for s in stats.subscriptions] == [7]
        assert stats.subscriptions[0].delivered == 1


async def test_shared_subscription_gives_each_envelope_to_one_member(bus: Bus) -> None:
    """``$share/GROUP/FILTER``: every envelope reaches exactly one member of the group (the
    broker picks on MQTT), all of them reach a plain subscriber, and the members take turns."""
    p = bus.prefix
    group = f"$share/g{bus.bus_id}/{p}/+/+/agent/_claim"
    async with bus.subscribe(group) as a, bus.subscribe(group) as b, \
            bus.subscribe(f"{p}/+/+/agent/_claim") as everyone:
        for i in range(20):
            await bus.publish(env(bus, "agent", "_claim", episode=f"e{i}", i=i))
        seen = await collect(everyone, 20)
        got: list[int] = []
        with anyio.fail_after(10):
            while len(got) < 20:
                for sub in (a, b):
                    try:
                        got.append(sub.receive_nowait().payload["i"])  # type: ignore[arg-type]
                    except anyio.WouldBlock:
                        await anyio.sleep(0.01)
        assert sorted(got) == list(range(20)) == [e.payload["i"] for e in seen]
        assert a.statistics().delivered > 0 and b.statistics().delivered > 0
        await assert_nothing_more(a)
        await assert_nothing_more(b)
        await assert_nothing_more(everyone)  # (once each, however it travelled)


async def test_a_malformed_shared_filter_is_refused(bus: Bus) -> None:
    with pytest.raises(ValueError, match=r"expected \$share/GROUP/FILTER"):
        async with bus.subscribe("$share/onlygroup"):
            pass


@pytest.mark.mqtt
async def test_own_subscribers_are_served_in_process_and_the_broker_still_gets_everything(
        broker: tuple[str, int]) -> None:
    """MQTT 5, ``local`` (the default): a bus's own subscriber gets its envelope once, at
    publish time; the broker gets every envelope all the same, so another connection with the
    same prefix and a plain MQTT client watching both receive it."""
    import aiomqtt

    from coworkenv.bus import MqttBus, new_id

    prefix = f"cwtest-{new_id()[:10]}"
    async with MqttBus(*broker, prefix=prefix) as a, MqttBus(*broker, prefix=prefix) as b, \
            aiomqtt.Client(*broker) as watcher:
        assert a.local
        await watcher.subscribe(f"{prefix}/#", qos=1)
        async with a.subscribe(a.episode_filter("r1", "e1")) as mine, \
                b.subscribe(b.episode_filter("r1", "e1")) as theirs:
            for i in range(5):
                await a.publish(env(a, "x", i=i))
            got = [e.payload["i"] for e in (mine.receive_nowait() for _ in range(5))]
            assert got == list(range(5))  # (already there: no broker round trip)
            assert [e.payload["i"] for e in await collect(theirs, 5)] == list(range(5))
            await a.flush()
            seen: list[int] = []
            with anyio.fail_after(10):
                async for m in watcher.messages:
                    body = json.loads(m.payload)  # type: ignore[arg-type]
                    seen += [e["payload"]["i"] for e in (body if isinstance(body, list)
                                                         else [body])]
                    if len(seen) >= 5:
                        break
            assert seen == list(range(5))
            await assert_nothing_more(mine)  # the broker did not bring them back
            assert a.statistics().duplicates_dropped == 0
