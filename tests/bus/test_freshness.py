"""Validly signed traffic played back later is refused (the real Mosquitto): a signature says
who sent an envelope, the stamp says when, and each sender's count is taken once. Each test
plays back what an attacker on the broker could have captured; each fails on a bus that
believes every well-signed envelope."""

from __future__ import annotations

import time
from typing import Any

import aiomqtt
import anyio
import pytest

from coworkenv.agents.oracle import NoopAgent
from coworkenv.agents.remote import RemotePool, Worker
from coworkenv.bus import Envelope, MqttBus, new_id
from coworkenv.bus._fresh import WINDOW, Freshness

pytestmark = [pytest.mark.anyio, pytest.mark.mqtt]


def env(prefix: str, i: int, **kw: Any) -> Envelope:
    return Envelope(run="r", episode="e", topic=f"{prefix}/r/e/stream", sender="p",
                    kind="message", payload={"i": i}, **kw)


async def play(broker: tuple[str, int], topic: str, *messages: bytes) -> None:
    async with aiomqtt.Client(*broker) as other:
        for m in messages:
            await other.publish(topic, m, qos=1)


async def refusals(bus: MqttBus, topic_filter: str, seconds: float,
                   got: list[Envelope]) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    with bus.watch_rejections(topic_filter, lambda t, r, d: seen.append((r, d))):
        async with bus.subscribe(topic_filter) as sub:
            with anyio.move_on_after(seconds):
                async for e in sub:
                    got.append(e)
    return seen


async def test_what_was_sent_before_a_process_started_is_stale_there(
        broker: tuple[str, int]) -> None:
    """Captured from one process, played to the next (a new run, a restarted worker)."""
    prefix = f"fresh{new_id()[:6]}"
    async with MqttBus(*broker, prefix=prefix) as old:
        captured = old.wire(env(prefix, 1))
    await anyio.sleep(0.3)
    new = MqttBus(*broker, prefix=prefix, max_skew=0.1)
    got: list[Envelope] = []
    async with new, anyio.create_task_group() as tg:
        tg.start_soon(play, broker, f"{prefix}/r/e/stream", captured)
        seen = await refusals(new, f"{prefix}/r/e/#", 1.5, got)
    assert got == []
    assert [r for r, _ in seen] == ["stale"]
    assert "before this process started" in seen[0][1]["why"]


async def test_what_is_older_than_max_age_is_stale_and_a_fresh_one_is_taken(
        broker: tuple[str, int]) -> None:
    prefix = f"fresh{new_id()[:6]}"
    sender = MqttBus(*broker, prefix=prefix)
    receiver = MqttBus(*broker, prefix=prefix, reconnect_timeout=0.5, max_age=1.0)
    got: list[Envelope] = []
    async with sender, receiver:
        old = sender.wire(env(prefix, 1))
        await anyio.sleep(1.3)
        async with anyio.create_task_group() as tg:
            tg.start_soon(play, broker, f"{prefix}/r/e/stream", old, sender.wire(env(prefix, 2)))
            seen = await refusals(receiver, f"{prefix}/r/e/#", 1.5, got)
    assert [e.payload["i"] for e in got] == [2]
    assert got[0].sent_ms is None and got[0].origin is None  # (as it was published)
    assert [r for r, _ in seen] == ["stale"] and "max_age" in seen[0][1]["why"]


async def test_a_repeat_after_the_duplicate_memory_moved_on_is_not_taken_twice(
        broker: tuple[str, int]) -> None:
    """Ids are remembered up to ``dedup_size``; a sender's counts are remembered apart from
    every other sender's traffic."""
    prefix = f"fresh{new_id()[:6]}"
    sender = MqttBus(*broker, prefix=prefix)
    receiver = MqttBus(*broker, prefix=prefix, dedup_size=5)
    got: list[Envelope] = []
    async with sender, receiver:
        first = sender.wire(env(prefix, 0))
        rest = [sender.wire(env(prefix, i)) for i in range(1, 20)]
        async with anyio.create_task_group() as tg:
            tg.start_soon(play, broker, f"{prefix}/r/e/stream", first, *rest, first)
            seen = await refusals(receiver, f"{prefix}/r/e/#", 1.5, got)
    assert sorted(e.payload["i"] for e in got) == list(range(20))
    assert seen == []  # a repeat is dropped like a redelivery, not reported
    assert receiver.statistics().duplicates_dropped == 1


async def test_a_stamp_from_the_future_is_a_clock_skew(broker: tuple[str, int]) -> None:
    prefix = f"fresh{new_id()[:6]}"
    receiver = MqttBus(*broker, prefix=prefix)
    ahead = env(prefix, 1, sent_ms=int((time.time() + 60) * 1000), origin="somebus:1").signed_json(
        receiver.key)
    unstamped = env(prefix, 2).signed_json(receiver.key)
    got: list[Envelope] = []
    async with receiver, anyio.create_task_group() as tg:
        tg.start_soon(play, broker, f"{prefix}/r/e/stream", ahead, unstamped)
        seen = await refusals(receiver, f"{prefix}/r/e/#", 1.5, got)
    assert got == []
    assert [r for r, _ in seen] == ["clock skew", "unstamped"]
    assert "max_skew" in seen[0][1]["why"]


async def test_a_dead_worker_s_heartbeats_played_to_a_new_run_raise_no_ghost(
        broker: tuple[str, int]) -> None:
    prefix = f"fresh{new_id()[:6]}"
    captured: list[bytes] = []

    async def capture(task_status: anyio.abc.TaskStatus[None]) -> None:
        async with aiomqtt.Client(*broker) as spy:
            await spy.subscribe(f"{prefix}/_workers/#", qos=1)
            task_status.started()
            async for m in spy.messages:
                assert isinstance(m.payload, bytes)
                captured.append(m.payload)

    async with anyio.create_task_group() as tg:
        await tg.start(capture)
        wbus = MqttBus(*broker, prefix=prefix)
        worker = Worker(wbus, lambda setup: NoopAgent(), "noop", heartbeat=0.1, worker_id="wG")
        async with wbus:
            with anyio.move_on_after(1.0):
                await worker.serve()
        tg.cancel_scope.cancel()
    beats = [m for m in captured if b'"stopping":false' in m]
    assert len(beats) >= 5
    await anyio.sleep(0.3)
    runner = MqttBus(*broker, prefix=prefix, max_skew=0.1)
    async with runner, RemotePool(runner, wait_for_worker=1.0) as pool:
        for _ in range(3):  # played back in a loop, as a ghost's keeper would
            await play(broker, f"{prefix}/_workers/wG", *beats)
        await anyio.sleep(0.5)
        assert pool.workers == {}
        assert runner.statistics().rejected >= len(beats)
        with pytest.raises(Exception, match="no remote worker"):
            await pool.assign("r", "e")


async def test_a_worker_starts_only_episodes_it_claimed(broker: tuple[str, int]) -> None:
    """A request played back to a worker restarted under the same id (or any request it did
    not claim) holds none of its room."""
    prefix = f"fresh{new_id()[:6]}"
    wbus, rbus = MqttBus(*broker, prefix=prefix), MqttBus(*broker, prefix=prefix)
    worker = Worker(wbus, lambda setup: NoopAgent(), "noop", capacity=2, worker_id="wC")
    async with wbus, rbus, anyio.create_task_group() as tg:
        await tg.start(worker.serve)
        first = Envelope(run="r", episode="e", topic=rbus.topic("r", "e", "agent"),
                         sender="u", kind="task", payload={})
        req = Envelope(run="r", episode="e", topic=rbus.topic("r", "e", "agent", "wC"),
                       sender="kernel", kind="agent.request",
                       payload={"envelope": first.model_dump(mode="json"),
                                "setup": {"seed": 1, "person": "p", "actors": {},
                                          "start": "2026-01-05T09:00:00", "reference": None}})
        reply = await rbus.request(req, timeout=10)
        assert reply.kind == "agent.error" and "not claimed" in reply.payload["error"]
        assert worker.episodes == {}
        tg.cancel_scope.cancel()


async def test_a_worker_lets_an_episode_go_when_told_or_when_idle(
        broker: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """An episode that has not finished holds its place of the worker's capacity until the
    runner says it is over (``agent.end``), or, with no word from its runner (killed), until
    it has had no request for IDLE_HELD_S."""
    from coworkenv.agents import remote
    from coworkenv.sim.actor import Actor, ActorContext

    class Silent(Actor):  # (an agent that never finishes)
        async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
            return

    prefix = f"fresh{new_id()[:6]}"
    wbus, rbus = MqttBus(*broker, prefix=prefix), MqttBus(*broker, prefix=prefix)
    worker = Worker(wbus, lambda setup: Silent(), "silent", capacity=1, worker_id="wI")

    def to_worker(ep: str, kind: str, payload: dict[str, Any]) -> Envelope:
        return Envelope(run="r", episode=ep, topic=rbus.topic("r", ep, "agent", "wI"),
                        sender="kernel", kind=kind, payload=payload)

    async def start(ep: str) -> str:
        reply = await rbus.request(to_worker(ep, "agent.claim", {"group": ""}), timeout=10)
        if reply.kind != "agent.claimed":
            return reply.kind
        first = Envelope(run="r", episode=ep, topic=rbus.topic("r", ep, "agent"), sender="u",
                         kind="task", payload={})
        reply = await rbus.request(to_worker(ep, "agent.request", {
            "envelope": first.model_dump(mode="json"),
            "setup": {"seed": 1, "person": "p", "actors": {}, "start": "2026-01-05T09:00:00",
                      "reference": None}}), timeout=10)
        assert reply.kind == "agent.actions", reply.payload
        return "held"

    async with wbus, rbus, anyio.create_task_group() as tg:
        await tg.start(worker.serve)
        assert await start("e1") == "held"
        assert await start("e2") == "agent.full"  # (e1 is not over)
        await rbus.publish(to_worker("e1", "agent.end", {}))
        with anyio.fail_after(5):
            while "r/e1" in worker.episodes:
                await anyio.sleep(0.05)
        assert await start("e2") == "held"
        monkeypatch.setattr(remote, "IDLE_HELD_S", 0.2)
        await anyio.sleep(0.3)
        assert await start("e3") == "held"  # (e2, idle past IDLE_HELD_S, let go at the claim)
        assert set(worker.episodes) == {"r/e3"}
        tg.cancel_scope.cancel()


def test_a_sender_s_counts_out_of_order_are_taken_once_and_far_behind_refused() -> None:
    f = Freshness(time.time(), max_age=60, max_skew=5)
    now = time.time()

    def check(n: int) -> str | None:
        r = f.check(Envelope(run="r", episode="e", topic="t", sender="s", kind="k",
                             sent_ms=int(now * 1000), origin=f"b1:{n}"), now)
        return None if r is None else r[0]

    assert [check(n) for n in (5, 3, 4, 1, 2)] == [None] * 5  # reordered across topics
    assert [check(n) for n in (3, 5)] == ["duplicate"] * 2
    assert check(WINDOW + 10) is None
    assert check(9) == "stale"  # further behind than the window
    assert check(11) is None
    assert f.check(Envelope(run="r", episode="e", topic="t", sender="s", kind="k",
                            origin="b1:will"), now) is None  # a last will: no time


def test_a_stamped_envelope_is_the_envelope_with_its_stamps_signed() -> None:
    e = env("p", 1, correlation_id="c", reply_to="p/r/e/_reply/x")
    wire = e.stamped_json(b"k", 1_796_000_000_123, "bus1:7")
    assert wire == e.model_copy(update={"sent_ms": 1_796_000_000_123,
                                        "origin": "bus1:7"}).signed_json(b"k")
    assert Envelope.model_validate_json(wire).verify(b"k")
