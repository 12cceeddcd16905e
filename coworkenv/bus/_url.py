"""``--bus memory`` or ``--bus mqtt[s]://user:pass@host:port/prefix?qos=1&window=512``
(options: qos, window, max_batch, client_id, reconnect_timeout, protocol (5, or 4 for MQTT
3.1.1), session_expiry, local (1: this process's own subscribers get its envelopes
in-process, the default on MQTT 5; 0: everything comes back through the broker), max_age
and max_skew (seconds: envelopes sent longer ago, or before this process started by more
than the hosts' clocks may differ, are refused as stale)))."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from ._base import Bus
from .errors import BusURLError
from .memory import MemoryBus


def open_bus(url: str = "memory", *, prefix: str | None = None,
             key: bytes | None = None) -> Bus:
    """Build (not yet open) the bus a ``--bus`` value names; use it as ``async with``.
    ``key`` signs and checks envelopes on MQTT (default: :func:`bus_key`); it is never part
    of the URL, which runs record."""
    if url in ("memory", "memory://", ""):
        return MemoryBus(prefix or "coworkenv")
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts"):
        raise BusURLError(f"bus: expected 'memory' or mqtt://[user:pass@]host[:port][/prefix], "
                          f"got {url!r}")
    if not parts.hostname:
        raise BusURLError(f"bus {url!r}: no host")
    from .mqtt import MqttBus

    q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    allowed = {"qos", "window", "max_batch", "client_id", "reconnect_timeout", "protocol",
               "session_expiry", "local", "max_age", "max_skew"}
    if set(q) - allowed:
        raise BusURLError(f"bus {url!r}: unknown option(s) {sorted(set(q) - allowed)}; "
                          f"known: {sorted(allowed)}")
    try:
        qos = int(q.get("qos", 1))
        window = int(q.get("window", 4096))
        max_batch = int(q.get("max_batch", 256))
        reconnect = float(q.get("reconnect_timeout", 30))
        protocol = int(q.get("protocol", 5))
        expiry = int(q.get("session_expiry", 300))
        local = q.get("local", "1")
        max_age = float(q.get("max_age", 120))
        max_skew = float(q.get("max_skew", 10))
        if local not in ("0", "1"):
            raise ValueError(f"local must be 0 or 1, got {local!r}")
        port = parts.port or (8883 if parts.scheme == "mqtts" else 1883)
    except ValueError as exc:
        raise BusURLError(f"bus {url!r}: {exc}") from None
    if qos not in (0, 1, 2):
        raise BusURLError(f"bus {url!r}: qos must be 0, 1 or 2, got {qos}")
    if "#" in url:  # (a URL fragment to urllib; a wildcard in a topic prefix)
        raise BusURLError(f"bus {url!r}: MQTT wildcards (+, #) are not allowed in the prefix")
    path_prefix = unquote(parts.path).strip("/")
    try:
        return MqttBus(parts.hostname, port, prefix=prefix or path_prefix or "coworkenv",
                       username=unquote(parts.username) if parts.username else None,
                       password=unquote(parts.password) if parts.password else None,
                       tls=parts.scheme == "mqtts", client_id=q.get("client_id"), qos=qos,
                       window=window, max_batch=max_batch, reconnect_timeout=reconnect, key=key,
                       protocol=protocol, session_expiry=expiry, local=local == "1",
                       max_age=max_age, max_skew=max_skew)
    except ValueError as exc:
        raise BusURLError(f"bus {url!r}: {exc}") from None
