"""Bus benchmark, measured in one run, side by side.

- memory bus publish->deliver messages/s and p50/p99 latency, next to a raw asyncio.Queue
  round trip (the in-process limit);
- MQTT backend messages/s and p50/p99 through the broker, next to raw aiomqtt publishing one
  awaited QoS 1 message at a time; every message must arrive (lost counts are reported).

Broker: COWORKENV_TEST_BROKER (default 127.0.0.1:1883). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
    envs = [Envelope(run="r", episode="e", topic=pub.topic("r", "e", "agent"), sender="bench",
                     kind="message", payload={"i": i}) for i in range(n)]
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
            for e in envs:
                e.payload["t"] = time.perf_counter()
                await pub.publish(e)
            if flush:
                await pub.flush()
            with anyio.move_on_after(60):
                await done.wait()
            seconds = time.perf_counter() - t0
            tg.cancel_scope.cancel()
    return summary(n, seconds, lat, len(lat))


async def raw_aiomqtt(host: str, port: int, n: int) -> dict[str, Any]:
    topic = f"bench-raw-{new_id()[:8]}/r/e/agent"
    lat: list[float] = []
    async with aiomqtt.Client(host, port) as sub, aiomqtt.Client(host, port) as pub:
        await sub.subscribe(topic, qos=1)
        done = anyio.Event()

        async def consume() -> None:
            async for m in sub.messages:
                assert isinstance(m.payload, bytes)
                e = Envelope.model_validate_json(m.payload)
                lat.append(time.perf_counter() - e.payload["t"])
                if len(lat) == n:
                    done.set()
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            t0 = time.perf_counter()
            for i in range(n):
                e = Envelope(run="r", episode="e", topic=topic, sender="bench", kind="message",
                             payload={"i": i, "t": time.perf_counter()})
                await pub.publish(topic, e.model_dump_json().encode(), qos=1)
            with anyio.move_on_after(60):
                await done.wait()
            seconds = time.perf_counter() - t0
            tg.cancel_scope.cancel()
    return summary(n, seconds, lat, len(lat))


async def mqtt_bus(host: str, port: int, n: int) -> dict[str, Any]:
    prefix = f"bench-{new_id()[:8]}"
    async with MqttBus(host, port, prefix=prefix) as pub, \
            MqttBus(host, port, prefix=prefix) as sub_bus:
        return await through_bus(pub, n, flush=True, sub_bus=sub_bus, buffer=n)


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--mqtt-messages", type=int, default=5_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-mqtt", action="store_true")
    args = ap.parse_args()
    host, _, port = os.environ.get("COWORKENV_TEST_BROKER", "127.0.0.1:1883").partition(":")
    raw, mem, rawm, mq = [], [], [], []
    for _ in range(args.repeats):  # interleaved, so machine noise hits every variant alike
        raw.append(await raw_queue(args.messages))
        async with MemoryBus("bench") as bus:
            mem.append(await through_bus(bus, args.messages, flush=False))
        if not args.no_mqtt:
            rawm.append(await raw_aiomqtt(host, int(port or 1883), args.mqtt_messages))
            mq.append(await mqtt_bus(host, int(port or 1883), args.mqtt_messages))
    out: dict[str, Any] = {
        "repeats": args.repeats,
        "raw_asyncio_queue": median_of(raw),
        "memory_bus": median_of(mem),
        "memory_vs_raw_queue": round(median_of(mem)["messages_per_s"]
                                     / median_of(raw)["messages_per_s"], 3),
    }
    if not args.no_mqtt:
        out["raw_aiomqtt_sequential_qos1"] = median_of(rawm)
        out["mqtt_bus_qos1"] = median_of(mq)
        out["mqtt_bus_vs_raw_sequential"] = round(median_of(mq)["messages_per_s"]
                                                  / median_of(rawm)["messages_per_s"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    anyio.run(main)
