"""Bus benchmark, measured in one run, side by side. Every side builds (and, over MQTT,
serialises) each message inside its timed loop.

- memory bus publish->deliver messages/s and p50/p99 latency, next to a raw asyncio.Queue
  round trip (the in-process limit);
- MQTT backend messages/s and p50/p99 through the broker, next to raw aiomqtt publishing
  QoS 1 envelopes two ways: one awaited at a time, and with as many PUBACKs outstanding as
  the bus's own window (the fair baseline for a bus that publishes concurrently); every
  message must arrive (lost counts are reported);
- episode-shaped traffic: N episodes at once, each with one message in flight (a request and
  its reply, ``Bus.request``/``Bus.reply``, as a remote agent's turns go), over the memory bus,
  over MQTT between two connections (each message through the broker: the remote-worker path)
  and over MQTT within one connection (its own subscribers served in-process, every envelope
  still published to the broker: a one-process run's path): round trips/s, and the round
  trip's p50/p99; and the round trip of one episode alone (one message in flight in the
  process: the latency inside an episode, half of it per message). The broker path is
  measured twice: on the broker as found, and, where a ``mosquitto`` binary is on PATH, on a
  private Mosquitto started with ``set_tcp_nodelay true`` (without it the broker holds a
  small packet that follows an unacknowledged one for the client's delayed ACK, about 40 ms;
  README: "MQTT latency");
- whole runs: the same episodes (``--run-episodes`` of the load agent's office mix, writes
  that notify someone and reads, ``--run-steps`` each, 64 at once, no think time, so CPU
  bound) over the memory bus, over MQTT as a run uses it, and over MQTT with every envelope
  coming back through the broker (``local=0``): episodes/s, CPU per agent step, and the ratio
  to the memory bus, interleaved ``--repeats`` times.

Broker: COWORKENV_TEST_BROKER (default 127.0.0.1:1883). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiomqtt
import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.agents import LoadAgent
from coworkenv.bus import Bus, Envelope, MemoryBus, MqttBus, new_id
from coworkenv.runtime import RunConfig, run
from coworkenv.sim import builtin_tasks


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
    """Requester and responder on two connections: every message through the broker."""
    prefix = f"bench-ep-{new_id()[:8]}"
    async with MqttBus(host, port, prefix=prefix) as a, MqttBus(host, port, prefix=prefix) as b:
        return await episodes(a, b, n, turns)


async def episodes_mqtt_local(host: str, port: int, n: int, turns: int) -> dict[str, Any]:
    """Both on one connection (a one-process run): served in-process, published to the
    broker all the same."""
    async with MqttBus(host, port, prefix=f"bench-epl-{new_id()[:8]}") as bus:
        assert bus.local
        return await episodes(bus, bus, n, turns)


@contextmanager
def nodelay_broker() -> Iterator[int | None]:
    """A private Mosquitto on a free port with ``set_tcp_nodelay true`` (None without the
    binary)."""
    binary = shutil.which("mosquitto")
    if binary is None:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with tempfile.TemporaryDirectory() as d:
        conf = Path(d) / "mosquitto.conf"
        conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                        "set_tcp_nodelay true\n")
        proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            yield port
        finally:
            proc.terminate()
            proc.wait(10)


def whole_run(bus: str, episodes: int, steps: int, d: Path) -> dict[str, Any]:
    """``episodes`` episodes of the load agent's office mix over ``bus``: episodes/s and CPU
    per agent step of the whole process (kernel, store writer, grading, bus)."""
    task = next(t for t in builtin_tasks() if t.id == "share-onboarding")
    task = task.model_copy(update={"limits": task.limits.model_copy(
        update={"max_turns": steps + 1})})
    rid = f"bus-{time.time_ns()}"
    c0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = run(RunConfig([task], agent=lambda t: LoadAgent.for_task(t, steps),
                           agent_name="load", role="student", db=d / f"{rid}.db",
                           trials=episodes, concurrency=64, run_id=rid, bus=bus))
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime
    assert result.overall["episodes"] == episodes, result.overall
    agent_steps = sum(r.turns for r in result.episodes)
    return {"episodes_per_s": round(episodes / wall, 1),
            "cpu_per_agent_step_us": round(cpu / agent_steps * 1e6, 1)}


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
    ap.add_argument("--run-episodes", type=int, default=256,
                    help="episodes per whole run (0 skips the runs)")
    ap.add_argument("--run-steps", type=int, default=20, help="agent steps per episode")
    args = ap.parse_args()
    host, _, port = os.environ.get("COWORKENV_TEST_BROKER", "127.0.0.1:1883").partition(":")
    p = int(port or 1883)
    raw, mem, rawm, raww, mq, epm, epq, epl, epn = [], [], [], [], [], [], [], [], []
    runs: dict[str, list[dict[str, Any]]] = {"memory": [], "mqtt": [], "mqtt_via_broker": []}
    one: dict[str, list[dict[str, Any]]] = {
        "memory": [], "mqtt_one_connection": [], "mqtt_two_connections": [],
        "mqtt_two_connections_nodelay_broker": []}
    window = MqttBus("127.0.0.1").window  # (the bus's default window, for the baseline)
    run_dir = Path(tempfile.mkdtemp(prefix="bench-bus-"))
    with nodelay_broker() as nd_port:
        for _ in range(args.repeats):  # interleaved, so machine noise hits every variant alike
            raw.append(await raw_queue(args.messages))
            async with MemoryBus("bench") as bus:
                mem.append(await through_bus(bus, args.messages, flush=False))
            epm.append(await episodes_memory(args.episodes, args.turns))
            if not args.no_mqtt:
                rawm.append(await raw_aiomqtt(host, p, args.mqtt_messages))
                raww.append(await raw_aiomqtt(host, p, args.mqtt_messages, window))
                mq.append(await mqtt_bus(host, p, args.mqtt_messages))
                epq.append(await episodes_mqtt(host, p, args.episodes, args.turns))
                epl.append(await episodes_mqtt_local(host, p, args.episodes, args.turns))
                if nd_port is not None:
                    epn.append(await episodes_mqtt(host, nd_port, args.episodes, args.turns))
                # latency: one episode, so one message in flight in the whole process
                one["memory"].append(await episodes_memory(1, args.turns))
                one["mqtt_two_connections"].append(await episodes_mqtt(host, p, 1, args.turns))
                one["mqtt_one_connection"].append(
                    await episodes_mqtt_local(host, p, 1, args.turns))
                if nd_port is not None:
                    one["mqtt_two_connections_nodelay_broker"].append(
                        await episodes_mqtt(host, nd_port, 1, args.turns))
            if args.run_episodes:
                url = f"mqtt://{host}:{p}/bench-run-{new_id()[:8]}"
                for name, bus_url in (("memory", "memory"), ("mqtt", url),
                                      ("mqtt_via_broker", url + "?local=0")):
                    if bus_url == "memory" or not args.no_mqtt:
                        runs[name].append(await anyio.to_thread.run_sync(
                            whole_run, bus_url, args.run_episodes, args.run_steps, run_dir))
    shutil.rmtree(run_dir, ignore_errors=True)
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
        out["episodes_mqtt_bus_one_connection"] = median_of(epl)
        out["episodes_mqtt_one_connection_vs_memory"] = round(
            median_of(epl)["round_trips_per_s"] / median_of(epm)["round_trips_per_s"], 3)
        out["episodes_mqtt_bus_nodelay_broker"] = (
            median_of(epn) if epn else "no mosquitto binary on PATH")
        out["one_episode_round_trip_p50_us"] = {
            k: median_of(v)["round_trip_p50_us"] for k, v in one.items() if v}
    if args.run_episodes:
        out["runs"] = {"episodes": args.run_episodes, "steps": args.run_steps,
                       **{k: median_of(v) for k, v in runs.items() if v}}
        for k in ("mqtt", "mqtt_via_broker"):
            if runs[k]:
                out["runs"][f"{k}_vs_memory"] = round(
                    median_of(runs[k])["episodes_per_s"]
                    / median_of(runs["memory"])["episodes_per_s"], 3)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    anyio.run(main)
