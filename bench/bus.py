"""Bus benchmark, measured in one run, side by side. Every side builds (and, over MQTT,
serialises) each message inside its timed loop.

- memory bus publish->deliver messages/s and p50/p99 latency, next to a raw asyncio.Queue
  round trip (the in-process limit);
- MQTT backend messages/s and p50/p99 through the broker, next to raw aiomqtt publishing
  QoS 1 envelopes two ways: one awaited at a time, and with as many PUBACKs outstanding as
  the bus's own window (the fair baseline for a bus that publishes concurrently); every
  message must arrive (lost counts are reported);
- episode-shaped traffic: N episodes at once, each with one message in flight (a request and
  its reply, ``Bus.request``/``Bus.reply``, as a remote agent's turns go), over the memory bus
  and over MQTT: round trips/s, and the round trip's p50/p99.

Broker: COWORKENV_TEST_BROKER (default 127.0.0.1:1883). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiomqtt
import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.bus import Bus, Envelope, MemoryBus, MqttBus, new_id


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1e6


def summary(n: int, seconds: float, lat: list[float], received: int) -> dict[str, Any]:
    return {"messages_per_s": round(n / seconds), "p50_us": round(pct(lat, 0.5), 1),
            "p99_us": round(pct(lat, 0.99), 1), "lost": n - received}


async def raw_queue(n: int) -> dict[str, Any]:
    q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1024)
    lat: list[float] = []

    async def consume() -> None:
        for _ in range(n):
            item = await q.get()
            lat.append(time.perf_counter() - item["t"])

    task = asyncio.ensure_future(consume())
    t0 = time.perf_counter()
    for i in range(n):
        await q.put({"i": i, "t": time.perf_counter()})
    await task
    return summary(n, time.perf_counter() - t0, lat, len(lat))


async def through_bus(pub: Bus, n: int, *, flush: bool, sub_bus: Bus | None = None,
                      buffer: int = 1024) -> dict[str, Any]:
    """Publish ``n`` envelopes on ``pub``; receive them on ``sub_bus`` (default: the same bus)."""
    sub_bus = sub_bus or pub
    lat: list[float] = []
    topic = pub.topic("r", "e", "agent")
    async with sub_bus.subscribe(sub_bus.episode_filter("r", "e"), max_buffer=buffer) as sub:
        done = anyio.Event()

        async def consume() -> None:
            async for e in sub:
                lat.append(time.perf_counter() - e.payload["t"])
                if len(lat) == n:
                    done.set()
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            t0 = time.perf_counter()
            for i in range(n):  # (built inside the timed loop, as the baselines build theirs)
                await pub.publish(Envelope(run="r", episode="e", topic=topic, sender="bench",
                                           kind="message",
                                           payload={"i": i, "t": time.perf_counter()}))
            if flush:
                await pub.flush()
            with anyio.move_on_after(60):
                await done.wait()
            seconds = time.perf_counter() - t0
            tg.cancel_scope.cancel()
    return summary(n, seconds, lat, len(lat))


async def raw_aiomqtt(host: str, port: int, n: int, window: int = 1) -> dict[str, Any]:
    """Raw aiomqtt: each envelope built and serialised in the loop, published at QoS 1 with
    up to ``window`` PUBACKs outstanding (1: one awaited at a time)."""
    topic = f"bench-raw-{new_id()[:8]}/r/e/agent"
    lat: list[float] = []
    quiet = logging.getLogger("bench.raw-aiomqtt")  # (it warns of many pending publishes)
    quiet.setLevel(logging.ERROR)
    async with aiomqtt.Client(host, port, max_inflight_messages=max(20, window),
                              logger=quiet) as sub, \
            aiomqtt.Client(host, port, max_inflight_messages=max(20, window),
                           logger=quiet) as pub:
        await sub.subscribe(topic, qos=1)
        done = anyio.Event()
        room = anyio.Semaphore(window)

        async def consume() -> None:
            async for m in sub.messages:
                assert isinstance(m.payload, bytes)
                e = Envelope.model_validate_json(m.payload)
                lat.append(time.perf_counter() - e.payload["t"])
                if len(lat) == n:
                    done.set()
                    return

        async def send(data: bytes) -> None:
            try:
                await pub.publish(topic, data, qos=1)
            finally:
                room.release()

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            t0 = time.perf_counter()
            async with anyio.create_task_group() as sends:
                for i in range(n):
                    e = Envelope(run="r", episode="e", topic=topic, sender="bench",
                                 kind="message", payload={"i": i, "t": time.perf_counter()})
                    await room.acquire()
                    sends.start_soon(send, e.model_dump_json().encode())
            with anyio.move_on_after(60):
                await done.wait()
            seconds = time.perf_counter() - t0
            tg.cancel_scope.cancel()
    return summary(n, seconds, lat, len(lat))


async def episodes(requester: Bus, responder: Bus, n: int, turns: int) -> dict[str, Any]:
    """``n`` episodes at once, each ``turns`` requests one after another (one message in
    flight per episode), answered by a responder on its own bus connection."""
    lat: list[float] = []
    served = responder.subscribe(f"{responder.prefix}/+/+/service", max_buffer=4 * n)
    async with served as sub, anyio.create_task_group() as tg:
        async def serve() -> None:
            async for req in sub:
                await responder.reply(req, sender="service", kind="message",
                                      payload={"i": req.payload["i"]})

        async def episode(k: int) -> None:
            for i in range(turns):
                t = time.perf_counter()
                await requester.request(Envelope(
                    run="r", episode=f"e{k}", topic=requester.topic("r", f"e{k}", "service"),
                    sender="agent", kind="message", payload={"i": i}), timeout=60)
                lat.append(time.perf_counter() - t)

        tg.start_soon(serve)
        t0 = time.perf_counter()
        async with anyio.create_task_group() as eps:
            for k in range(n):
                eps.start_soon(episode, k)
        seconds = time.perf_counter() - t0
        tg.cancel_scope.cancel()
    return {"episodes": n, "round_trips_per_s": round(n * turns / seconds),
            "round_trip_p50_us": round(pct(lat, 0.5), 1),
            "round_trip_p99_us": round(pct(lat, 0.99), 1)}


async def mqtt_bus(host: str, port: int, n: int) -> dict[str, Any]:
    prefix = f"bench-{new_id()[:8]}"
    async with MqttBus(host, port, prefix=prefix) as pub, \
            MqttBus(host, port, prefix=prefix) as sub_bus:
        return await through_bus(pub, n, flush=True, sub_bus=sub_bus, buffer=n)


async def episodes_memory(n: int, turns: int) -> dict[str, Any]:
    async with MemoryBus("bench-ep") as bus:
        return await episodes(bus, bus, n, turns)


async def episodes_mqtt(host: str, port: int, n: int, turns: int) -> dict[str, Any]:
    prefix = f"bench-ep-{new_id()[:8]}"
    async with MqttBus(host, port, prefix=prefix) as a, MqttBus(host, port, prefix=prefix) as b:
        return await episodes(a, b, n, turns)


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--mqtt-messages", type=int, default=5_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-mqtt", action="store_true")
    ap.add_argument("--episodes", type=int, default=100,
                    help="episodes at once for the episode-shaped test")
    ap.add_argument("--turns", type=int, default=20, help="round trips per episode")
    args = ap.parse_args()
    host, _, port = os.environ.get("COWORKENV_TEST_BROKER", "127.0.0.1:1883").partition(":")
    raw, mem, rawm, raww, mq, epm, epq = [], [], [], [], [], [], []
    window = MqttBus("127.0.0.1").window  # (the bus's default window, for the baseline)
    for _ in range(args.repeats):  # interleaved, so machine noise hits every variant alike
        raw.append(await raw_queue(args.messages))
        async with MemoryBus("bench") as bus:
            mem.append(await through_bus(bus, args.messages, flush=False))
        epm.append(await episodes_memory(args.episodes, args.turns))
        if not args.no_mqtt:
            p = int(port or 1883)
            rawm.append(await raw_aiomqtt(host, p, args.mqtt_messages))
            raww.append(await raw_aiomqtt(host, p, args.mqtt_messages, window))
            mq.append(await mqtt_bus(host, p, args.mqtt_messages))
            epq.append(await episodes_mqtt(host, p, args.episodes, args.turns))
    out: dict[str, Any] = {
        "repeats": args.repeats,
        "raw_asyncio_queue": median_of(raw),
        "memory_bus": median_of(mem),
        "memory_vs_raw_queue": round(median_of(mem)["messages_per_s"]
                                     / median_of(raw)["messages_per_s"], 3),
        "episodes_memory_bus": median_of(epm),
    }
    if not args.no_mqtt:
        out["raw_aiomqtt_sequential_qos1"] = median_of(rawm)
        out[f"raw_aiomqtt_window_{window}_qos1"] = median_of(raww)
        out["mqtt_bus_qos1"] = median_of(mq)
        out["mqtt_bus_vs_raw_sequential"] = round(median_of(mq)["messages_per_s"]
                                                  / median_of(rawm)["messages_per_s"], 2)
        out["mqtt_bus_vs_raw_window"] = round(median_of(mq)["messages_per_s"]
                                              / median_of(raww)["messages_per_s"], 2)
        out["episodes_mqtt_bus"] = median_of(epq)
        out["episodes_mqtt_vs_memory"] = round(median_of(epq)["round_trips_per_s"]
                                               / median_of(epm)["round_trips_per_s"], 3)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    anyio.run(main)
