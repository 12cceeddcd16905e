from __future__ import annotations

import pytest

from coworkenv.bus import BusURLError, MemoryBus, MqttBus, open_bus, topic_matches


def test_memory_is_the_default() -> None:
    assert isinstance(open_bus(), MemoryBus)
    assert isinstance(open_bus("memory"), MemoryBus)


def test_mqtt_url() -> None:
    b = open_bus("mqtt://u%40x:p%3Aw@broker.example:1884/lab/a?qos=0&window=64")
    assert isinstance(b, MqttBus)
    assert (b.host, b.port, b.prefix, b.username, b.password, b.qos, b.window) == (
        "broker.example", 1884, "lab/a", "u@x", "p:w", 0, 64)
    s = open_bus("mqtts://h")
    assert isinstance(s, MqttBus)
    assert (s.port, s.prefix, s.tls_context is not None) == (8883, "coworkenv", True)
    assert s.local and not open_bus("mqtt://h?local=0").local  # type: ignore[attr-defined]
    assert not open_bus("mqtt://h?protocol=4").local  # type: ignore[attr-defined]


@pytest.mark.parametrize(("url", "msg"), [
    ("redis://h", "expected 'memory'"),
    ("mqtt://", "no host"),
    ("mqtt://h?qos=3", "qos must be"),
    ("mqtt://h?speed=1", "unknown option"),
    ("mqtt://h:99999", "Port out of range"),
    ("mqtt://h/$SYS", "belong to the broker"),
    ("mqtt://h/A+", "wildcards"),
    ("mqtt://h/#", "wildcards"),
    ("mqtt://h/lab/%23", "wildcards"),
    ("mqtt://h/a//b", "must not be empty"),
    ("mqtt://h?window=0", "window: expected at least 1"),
    ("mqtt://h?max_batch=0", "max_batch: expected at least 1"),
    ("mqtt://h?reconnect_timeout=0", "reconnect_timeout"),
    ("mqtt://h?local=yes", "local must be 0 or 1"),
])
def test_bad_urls_say_what_is_wrong(url: str, msg: str) -> None:
    with pytest.raises(BusURLError, match=msg):
        open_bus(url)


@pytest.mark.parametrize(("f", "t", "ok"), [
    ("a/b/c", "a/b/c", True), ("a/+/c", "a/b/c", True), ("a/#", "a/b/c", True),
    ("a/#", "a", True), ("#", "a/b", True), ("a/+", "a/b/c", False), ("a/b", "a/b/c", False),
    ("+/+", "a/b", True), ("a/+/c", "a/b/d", False),
])
def test_topic_matching(f: str, t: str, ok: bool) -> None:
    assert topic_matches(f, t) is ok
