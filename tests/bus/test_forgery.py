"""Forged traffic on a shared broker changes nothing and leaves a trace (the real Mosquitto).

An attacker here is any client of the broker: it publishes envelopes with the ids the runner
would use, plants retained messages on a run's topics before the run starts, or signs with
the wrong key. Each test fails on a bus that trusts what it reads."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import aiomqtt
import anyio
import paho.mqtt.client as paho
import pytest

from coworkenv.bus import Envelope, MqttBus, new_id
from coworkenv.sim import builtin_tasks

from ..sim.conftest import run_sync

pytestmark = pytest.mark.mqtt

TASKS = [t for t in builtin_tasks() if t.id in ("report-q3-travel", "sched-conflict-move",
                                                  "approval-expense-filing")]


def _forged(prefix: str, run: str, episode: str, to: str, seq: int, **kw: Any) -> bytes:
    env = Envelope(id=f"{episode}#{seq}", run=run, episode=episode,
                   topic=f"{prefix}/{run}/{episode}/{to}", sender="tools", kind="tool_result",
                   payload={"to": to, "call_id": "agent-1", "ok": False,
                            "error": {"code": "forbidden", "message": "forged"}}, seq=seq, **kw)
    return env.model_dump_json().encode()


def _clean(db: Path) -> dict[tuple[str, int], tuple[float, bool, list[tuple[str, str, str]]]]:
    """Per (task, trial): score, passed, and the events other than refusals."""
    with sqlite3.connect(db) as c:
        out = {}
        for eid, task, trial, score, passed in c.execute(
                "SELECT e.episode_id, e.task_id, e.trial, g.score, g.passed FROM episodes e "
                "JOIN grades g USING (episode_id)"):
            evs = [(a, k, p) for a, k, p in c.execute(
                "SELECT actor, kind, payload FROM events WHERE episode_id=? AND kind != "
                "'bus.rejected' ORDER BY seq", (eid,))]
            out[(task, trial)] = (score, bool(passed), [(a, k, json.loads(p).get("to", ""))
                                                        for a, k, p in evs])
    return out


def _rejections(db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as c:
        return [json.loads(p) for (p,) in c.execute(
            "SELECT payload FROM events WHERE kind='bus.rejected'")]


def test_forged_envelopes_with_the_next_ids_change_no_grade(tmp_path: Path,
                                                            broker: tuple[str, int]) -> None:
    """An attacker floods every episode topic with envelopes carrying the ids the kernel once
    used (EPISODE#seq) and a failing tool result: grades and events are those of a clean run,
    and the refusals are on record."""
    prefix, run = f"cwforge-{new_id()[:8]}", "forged-run"
    clean = run_sync(TASKS, tmp_path / "clean.db", trials=2, run_id=run)
    stop = threading.Event()

    def attack() -> None:
        async def go() -> None:
            async with aiomqtt.Client(*broker) as c:
                while not stop.is_set():
                    for r in clean:
                        for to in ("agent", "tools", "kernel"):
                            for seq in range(0, 60, 3):
                                await c.publish(f"{prefix}/{run}/{r.episode_id}/{to}",
                                                _forged(prefix, run, r.episode_id, to, seq))
                    await anyio.sleep(0.01)
        anyio.run(go)

    t = threading.Thread(target=attack, daemon=True)
    t.start()
    time.sleep(0.3)
    try:
        # (every envelope through the broker, local=False: served in-process, the six episodes
        # can end within milliseconds, before the flood reaches them; the refusal is the same
        # code either way, for whatever comes from the broker)
        run_sync(TASKS, tmp_path / "attacked.db", trials=2, run_id=run,
                 bus=MqttBus(*broker, prefix=prefix, local=False))
    finally:
        stop.set()
        t.join(10)
    assert _clean(tmp_path / "attacked.db") == _clean(tmp_path / "clean.db")
    refused = _rejections(tmp_path / "attacked.db")
    assert refused and {r["reason"] for r in refused} == {"unsigned"}


def test_retained_messages_planted_before_the_run_are_refused(tmp_path: Path,
                                                              broker: tuple[str, int]) -> None:
    prefix, run = f"cwretain-{new_id()[:8]}", "planted-run"
    clean = run_sync(TASKS, tmp_path / "clean.db", run_id=run)
    planted = [f"{prefix}/{run}/{r.episode_id}/{to}" for r in clean for to in ("agent", "tools")]

    async def plant(empty: bool) -> None:
        async with aiomqtt.Client(*broker) as c:
            for topic in planted:
                ep = topic.split("/")[2]
                await c.publish(topic, b"" if empty else _forged(prefix, run, ep, "agent", 1),
                                qos=1, retain=True)

    anyio.run(plant, False)
    try:
        run_sync(TASKS, tmp_path / "planted.db", run_id=run,
                 bus=MqttBus(*broker, prefix=prefix))
    finally:
        anyio.run(plant, True)  # remove them from the broker
    assert _clean(tmp_path / "planted.db") == _clean(tmp_path / "clean.db")
    assert {r["reason"] for r in _rejections(tmp_path / "planted.db")} == {"retained"}


def test_a_wrong_key_is_refused_and_a_shared_key_is_accepted(broker: tuple[str, int]) -> None:
    prefix = f"cwkey-{new_id()[:8]}"

    async def go() -> tuple[list[str], list[tuple[str, str]], int]:
        got: list[str] = []
        refused: list[tuple[str, str]] = []
        async with MqttBus(*broker, prefix=prefix, key=b"k1") as rx, \
                MqttBus(*broker, prefix=prefix, key=b"k1") as friend, \
                MqttBus(*broker, prefix=prefix, key=b"k2") as stranger:
            topic = rx.topic("r", "e", "agent")
            with rx.watch_rejections(rx.topic("r", "e", "+"),
                                     lambda t, why, d: refused.append((why, d["sender"]))):
                async with rx.subscribe(rx.topic("r", "e", "+")) as sub:
                    for bus, who in ((stranger, "stranger"), (friend, "friend")):
                        await bus.publish(Envelope(run="r", episode="e", topic=topic,
                                                   sender=who, kind="message"))
                        await bus.flush()
                    got.append((await sub.receive()).sender)
            return got, refused, rx.statistics().rejected

    got, refused, count = anyio.run(go)
    assert got == ["friend"] and refused == [("bad signature", "stranger")] and count == 1


def test_a_closed_bus_leaves_no_session_on_the_broker(broker: tuple[str, int]) -> None:
    client_id = f"cwsession-{new_id()[:8]}"

    async def use() -> None:
        async with MqttBus(*broker, prefix="cwsession", client_id=client_id) as b, \
                b.subscribe("cwsession/x/y/+"):
            pass

    anyio.run(use)
    present: list[bool] = []
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
    c.on_connect = lambda cl, ud, flags, rc, props: present.append(bool(flags.session_present))
    c.connect(*broker)
    c.loop_start()
    deadline = time.monotonic() + 5
    while not present and time.monotonic() < deadline:
        time.sleep(0.05)
    c.disconnect()
    c.loop_stop()
    # (this check's own session is removed again by a clean connect)
    c2 = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
    c2.connect(*broker)
    c2.disconnect()
    assert present == [False]
