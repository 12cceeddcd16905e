"""The MQTT backend against brokers this test starts, restarts and kills itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import aiomqtt
import anyio
import anyio.lowlevel
import pytest

from coworkenv.bus import BusConnectionError, Envelope, MqttBus

from ..conftest import Broker, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.mqtt, pytest.mark.slow]



def env(bus: MqttBus, i: int) -> Envelope:
    return Envelope(run="r", episode="e", topic=bus.topic("r", "e", "stream"), sender="p",
                    kind="message", payload={"i": i})


async def test_broker_restart_mid_stream_delivers_every_message_once(own_broker: Broker) -> None:
    n = 3000
    got: list[int] = []
    sub_bus = MqttBus("127.0.0.1", own_broker.port, prefix="fault")
    pub_bus = MqttBus("127.0.0.1", own_broker.port, prefix="fault")
    async with sub_bus, pub_bus, sub_bus.subscribe("fault/r/e/#", max_buffer=n) as sub:
        async def receive_all() -> None:
            async for e in sub:
                got.append(e.payload["i"])
                if len(set(got)) == n:
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(receive_all)
            for i in range(n):
                await pub_bus.publish(env(pub_bus, i))
                if i == n // 3:
                    await pub_bus.flush()
                    own_broker.stop()  # graceful restart: the broker saves its queues
                    await anyio.sleep(0.3)
                    own_broker.start()
                if i % 100 == 0:
                    await anyio.lowlevel.checkpoint()
            with anyio.fail_after(60):
                await pub_bus.flush()
            with anyio.move_on_after(20):
                while len(set(got)) < n:
                    await anyio.sleep(0.05)
            missing = sorted(set(range(n)) - set(got))
            assert not missing, (len(missing), missing[:5], missing[-5:],
                                 pub_bus.statistics().reconnects,
                                 sub_bus.statistics().reconnects)
            tg.cancel_scope.cancel()
        assert sorted(got) == list(range(n))  # every message, exactly once after dedup
        assert pub_bus.statistics().reconnects >= 1
        assert sub_bus.statistics().reconnects >= 1


async def test_what_the_broker_queued_while_we_were_away_is_delivered(
        own_broker: Broker) -> None:
    """A reconnect resumes the session the broker kept: a message published after the broker
    is back but before our reconnect (its backoff has grown to a second by then) waits in the
    session's queue for us, and is delivered; a clean start would have dropped it."""
    sub_bus = MqttBus("127.0.0.1", own_broker.port, prefix="away")
    async with sub_bus, sub_bus.subscribe("away/r/e/#") as sub:
        own_broker.stop()  # graceful: the broker saves our session (its subscription)
        await anyio.sleep(2.5)  # our reconnect attempts fail; the backoff reaches 1 s
        own_broker.start()
        planted = env(sub_bus, 7)
        async with aiomqtt.Client("127.0.0.1", own_broker.port) as other:
            await other.publish(planted.topic, sub_bus.wire(planted), qos=1)
        with anyio.fail_after(20):
            got = await sub.__anext__()
        assert got.payload == {"i": 7}
        assert sub_bus.statistics().reconnects == 1


async def test_a_chosen_client_id_starts_without_an_earlier_run_s_session(
        own_broker: Broker) -> None:
    """A bus opened under a client id of the user's choosing never begins clean (so that its
    session survives a broker restart), so a session an earlier run left under that id is
    cleared first: its subscriptions must not bring that run's traffic to this bus."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.SessionExpiryInterval = 300
    async with aiomqtt.Client("127.0.0.1", own_broker.port, identifier="chosen-id",
                              protocol=aiomqtt.ProtocolVersion.V5, properties=props,
                              clean_start=False) as earlier:
        await earlier.subscribe("earlier/#", qos=1)  # left behind: the client just goes
    bus = MqttBus("127.0.0.1", own_broker.port, prefix="later", client_id="chosen-id")
    async with bus:
        async with aiomqtt.Client("127.0.0.1", own_broker.port) as other:
            await other.publish("earlier/x", b"not for this run", qos=1)
        await anyio.sleep(0.5)
        assert bus.statistics().rejected == 0  # it never reached the bus


async def test_broker_killed_for_good_raises_a_clear_error(own_broker: Broker) -> None:
    bus = MqttBus("127.0.0.1", own_broker.port, prefix="dead", reconnect_timeout=1.5)
    async with bus, bus.subscribe("dead/#") as sub:
        own_broker.stop(signal.SIGKILL)
        with anyio.fail_after(15), pytest.raises(BusConnectionError, match="unreachable"):
            async for _ in sub:
                pass
        with pytest.raises(BusConnectionError):
            await bus.publish(env(bus, 1))


async def test_unreachable_broker_fails_fast_on_open() -> None:
    bus = MqttBus("127.0.0.1", free_port(), prefix="none", reconnect_timeout=1.0)
    with anyio.fail_after(15), pytest.raises(BusConnectionError, match="unreachable"):
        async with bus:
            pass


async def test_mosquitto_sub_reads_our_json_envelopes(broker: tuple[str, int]) -> None:
    """Interoperability: a third-party client sees plain JSON on our topics: one envelope per
    message, or a JSON array of envelopes when a burst was batched."""
    host, port = broker
    prefix = f"interop-{time.time_ns()}"
    proc = subprocess.Popen(["mosquitto_sub", "-h", host, "-p", str(port), "-t", f"{prefix}/#",
                             "-v", "-C", "4", "-W", "20"], stdout=subprocess.PIPE, text=True)
    await anyio.sleep(0.5)  # let it subscribe
    bus = MqttBus(host, port, prefix=prefix)

    def make(i: int) -> Envelope:
        return Envelope(run="r", episode="e", topic=bus.topic("r", "e", "agent"),
                        sender="agent", kind="tool_call", payload={"tool": "email_list", "i": i})

    async with bus:
        for i in range(3):  # one at a time: each travels alone
            await bus.publish(make(i))
            await bus.flush()
        for i in range(3, 6):  # a burst: one message carrying three envelopes
            await bus.publish(make(i))
        await bus.flush()
    out, _ = proc.communicate(timeout=30)
    lines = out.strip().splitlines()
    assert len(lines) == 4
    seen = []
    for line in lines:
        topic, _, body = line.partition(" ")
        assert topic == f"{prefix}/r/e/agent"
        data = json.loads(body)
        for item in data if isinstance(data, list) else [data]:
            e = Envelope.model_validate(item)
            assert (e.kind, e.sender) == ("tool_call", "agent")
            seen.append(e.payload["i"])
    assert seen == list(range(6))
    assert isinstance(json.loads(lines[-1].partition(" ")[2]), list)


async def test_a_killed_client_s_last_will_is_published_by_the_broker(
        own_broker: Broker) -> None:
    """The will travels with the connection: the broker publishes it (signed, as any
    envelope) when the client's connection drops without a close, and not on a close."""
    watcher = MqttBus("127.0.0.1", own_broker.port, prefix="will", key=b"k")
    will = Envelope(run="_", episode="_", topic="will/_workers/w1", sender="w1",
                    kind="worker.heartbeat", payload={"lost": True})
    code = (
        "import anyio, os, sys\n"
        "from coworkenv.bus import MqttBus, Envelope\n"
        "async def main():\n"
        f"    b = MqttBus('127.0.0.1', {own_broker.port}, prefix='will', key=b'k')\n"
        f"    b.set_last_will(Envelope.model_validate_json({will.model_dump_json()!r}))\n"
        "    async with b:\n"
        "        print('up', flush=True)\n"
        "        if sys.argv[1] == 'close':\n"
        "            return\n"
        "        await anyio.sleep(60)\n"
        "anyio.run(main)\n")
    async with watcher, watcher.subscribe("will/_workers/+") as sub:
        for how in ("close", "kill"):
            proc = await anyio.open_process([sys.executable, "-c", code, how],
                                            env={**os.environ})
            assert proc.stdout is not None
            with anyio.fail_after(20):
                assert b"up" in await proc.stdout.receive()
            if how == "kill":
                proc.kill()
            with anyio.fail_after(20):
                await proc.wait()
            if how == "close":
                await assert_no_will(sub)
            else:
                with anyio.fail_after(10):
                    got = await sub.receive()
                assert got.payload == {"lost": True} and got.sender == "w1"


async def assert_no_will(sub) -> None:  # type: ignore[no-untyped-def]
    with anyio.move_on_after(1.0):
        extra = await sub.receive()
        pytest.fail(f"a will after a clean close: {extra}")
