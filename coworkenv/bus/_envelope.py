"""The one envelope that travels on the bus, and topic helpers."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def new_id() -> str:
    return uuid.uuid4().hex


class Envelope(BaseModel):
    """Everything that travels on the bus; serialised as JSON for any MQTT client to read."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id, description="Unique id; receivers deduplicate by it")
    run: str = Field(description="Run id")
    episode: str = Field(description="Episode id")
    topic: str = Field(description="Full topic: <prefix>/<run>/<episode>/...")
    sender: str = Field(description="The actor that sent it")
    kind: str = Field(description="What it is: message, tool_call, tool_result, notify, ...")
    payload: dict[str, Any] = Field(default_factory=dict)
    sim_time: float = Field(default=0.0, description="Simulated seconds since the episode began")
    seq: int = Field(default=0, description="Sender-assigned sequence number")
    correlation_id: str | None = Field(default=None, description="Pairs a reply with its request")
    reply_to: str | None = Field(default=None, description="Topic a reply should go to")
    sent_ms: int | None = Field(default=None, description="Wall-clock time (Unix "
                                "milliseconds) the sending bus stamped it with (buses "
                                "between processes)")
    origin: str | None = Field(default=None, description="'<sending bus id>:<count>', each "
                               "count used once (buses between processes); receivers refuse "
                               "stale or repeated ones")
    sig: str | None = Field(default=None, description="HMAC-SHA256 of the envelope without "
                            "this field, with the run's bus key (buses between processes)")

    def canonical(self) -> bytes:
        """The signed text: the envelope as JSON, without its signature."""
        return self.model_dump_json(exclude={"sig"}).encode()

    def signed(self, key: bytes) -> Envelope:
        return self.model_copy(update={"sig": hmac.new(key, self.canonical(),
                                                       hashlib.sha256).hexdigest()})

    def signed_json(self, key: bytes) -> bytes:
        """``signed(key).model_dump_json()``, built from one serialisation."""
        return _with_sig(self.canonical(), key)

    def stamped_json(self, key: bytes, sent_ms: int, origin: str) -> bytes:
        """``model_copy(update={"sent_ms": ..., "origin": ...}).signed_json(key)``, from one
        serialisation (the stamps are the last fields before the signature)."""
        body = self.model_dump_json(exclude=_STAMPS).encode()
        return _with_sig(body[:-1] + b',"sent_ms":%d,"origin":"%s"}'
                         % (sent_ms, origin.encode()), key)

    def verify(self, key: bytes) -> bool:
        """Whether the signature is the key's over this envelope (constant-time compare)."""
        if self.sig is None:
            return False
        want = hmac.new(key, self.canonical(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(want, self.sig)


_STAMPS = {"sent_ms", "origin", "sig"}


def _with_sig(body: bytes, key: bytes) -> bytes:
    """A signed text (a JSON object) with its signature added as the last field."""
    sig = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    return body[:-1] + b',"sig":"' + sig + b'"}'

KEY_ENV = "COWORKENV_BUS_KEY"
"""The environment variable that holds the bus key of runs spread over several hosts."""
_PROCESS_KEY = secrets.token_bytes(32)


def bus_key(required: bool = False) -> bytes:
    """The key that signs and checks envelopes between processes: ``COWORKENV_BUS_KEY`` when
    set (every runner and worker of a run must share it), else one made at random for this
    process and the processes it forks. ``required``: a key made at random would be of no
    use (peers started separately), so its absence is an error."""
    given = os.environ.get(KEY_ENV)
    if given:
        return given.encode()
    if required:
        raise ValueError(f"set {KEY_ENV} to the same secret on the runner and on every worker "
                         "(envelopes on a shared broker are signed with it)")
    return _PROCESS_KEY


SHARE = "$share/"


def shared(topic_filter: str) -> tuple[str | None, str]:
    """An MQTT 5 shared subscription ``$share/GROUP/FILTER`` as (group, filter); a plain
    filter as (None, filter). Each message matching a group's filter goes to one member of
    the group (the broker picks, in turn), not to all."""
    if not topic_filter.startswith(SHARE):
        return None, topic_filter
    group, sep, rest = topic_filter[len(SHARE):].partition("/")
    if not group or not sep or not rest or "+" in group or "#" in group:
        raise ValueError(f"topic filter {topic_filter!r}: expected $share/GROUP/FILTER")
    return group, rest


def topic_matches(topic_filter: str, topic: str) -> bool:
    """MQTT wildcard matching: ``+`` is one level, ``#`` (last) is any number of levels."""
    topic_filter = shared(topic_filter)[1]
    f = topic_filter.split("/")
    t = topic.split("/")
    for i, part in enumerate(f):
        if part == "#":
            return True
        if i >= len(t):
            return False
        if part != "+" and part != t[i]:
            return False
    return len(f) == len(t)


def validate_filter(topic_filter: str) -> None:
    parts = shared(topic_filter)[1].split("/")
    for i, p in enumerate(parts):
        if "#" in p and (p != "#" or i != len(parts) - 1):
            raise ValueError(f"topic filter {topic_filter!r}: '#' must be a whole last level")
        if "+" in p and p != "+":
            raise ValueError(f"topic filter {topic_filter!r}: '+' must be a whole level")


def validate_prefix(prefix: str) -> str:
    """A topic prefix: one or more levels, none empty, no wildcard, not a ``$`` topic."""
    levels = prefix.split("/")
    if not prefix or any(not lv for lv in levels):
        raise ValueError(f"topic prefix {prefix!r}: levels must not be empty")
    if any("+" in lv or "#" in lv for lv in levels):
        raise ValueError(f"topic prefix {prefix!r}: MQTT wildcards (+, #) are not allowed")
    if prefix.startswith("$"):
        raise ValueError(f"topic prefix {prefix!r}: topics starting with $ belong to the broker")
    if "\x00" in prefix:
        raise ValueError(f"topic prefix {prefix!r}: no NUL characters")
    return prefix
