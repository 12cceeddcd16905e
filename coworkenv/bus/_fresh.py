"""Freshness of signed envelopes: a signature proves who sent an envelope, not when.

Each bus between processes stamps what it sends with the wall-clock time and its own count
(``origin``: ``<bus id>:<n>``, counted from 1 for each bus instance, that is each process's
connection) before it signs it. A receiver then refuses, as ``stale``:

- an envelope sent more than ``max_age`` seconds ago (a capture played back later);
- one sent before the receiver itself started, by more than ``max_skew`` (what was captured
  from an earlier process, played to a new one: a dead worker's heartbeats to a new run, a
  runner's requests to a restarted worker);
- one whose count is further behind that sender's newest than the receiver's window (a
  capture played back after the receiver's duplicate memory has moved on);

and, as ``clock skew``, one stamped more than ``max_skew`` in the future. A count seen
before is a repeat of an envelope already taken: it is dropped as a duplicate, like the
broker's own redelivery after a reconnect (the two cannot be told apart, and dropping either
is harmless). A last will is stamped when the connection opens and published by the broker
when it drops, so it carries no time (``origin`` ``<bus id>:will``); what a will can do is
the receiver's to bound (a worker's will never outlives its next heartbeat).
"""

from __future__ import annotations

from collections import OrderedDict

from ._envelope import Envelope

WINDOW = 16_384
"""Counts of one sender a receiver remembers behind the newest it has seen: more than a
sender can have in flight (its window of unacknowledged envelopes, re-sent after a
reconnect), so that legitimate reordering across topics is never refused."""


class _Counts:
    """One sender's counts: the newest, and a bitmap of the ``WINDOW`` before it."""

    __slots__ = ("bits", "top")

    def __init__(self, n: int) -> None:
        self.top = n
        self.bits = 1

    def take(self, n: int) -> str | None:
        """None: new (now remembered); ``"seen"``; or ``"behind"`` the window."""
        if n > self.top:
            self.bits = ((self.bits << (n - self.top)) | 1) & ((1 << WINDOW) - 1)
            self.top = n
            return None
        d = self.top - n
        if d >= WINDOW:
            return "behind"
        if self.bits >> d & 1:
            return "seen"
        self.bits |= 1 << d
        return None


class Freshness:
    """A receiver's memory of what it has taken, by sender; see the module's text."""

    def __init__(self, started: float, *, max_age: float, max_skew: float,
                 max_senders: int = 4096) -> None:
        self.started = started
        self.max_age = max_age
        self.max_skew = max_skew
        self.max_senders = max_senders
        self._senders: OrderedDict[str, _Counts] = OrderedDict()

    def check(self, env: Envelope, now: float) -> tuple[str, str] | None:
        """None when ``env`` is fresh (its count is remembered from now on); else
        ``("duplicate", why)`` to drop it quietly, or ``(reason, why)`` to refuse it."""
        origin = env.origin or ""
        sender, _, count = origin.rpartition(":")
        if env.sent_ms is None:
            if count == "will" and sender:
                return None
            return "unstamped", "no send time: not sent by a bus of this version"
        if not sender or not count.isdigit():
            return "unstamped", f"origin {origin[:80]!r}: expected '<bus id>:<count>'"
        sent = env.sent_ms / 1000
        age = now - sent
        if age > self.max_age:
            return "stale", f"sent {age:.0f}s ago (max_age {self.max_age:g}s)"
        if sent < self.started - self.max_skew:
            return "stale", (f"sent {self.started - sent:.0f}s before this process "
                             "started")
        if -age > self.max_skew:
            return "clock skew", (f"stamped {-age:.0f}s in the future: the sender's clock and "
                                  f"this host's differ by more than max_skew "
                                  f"({self.max_skew:g}s)")
        n = int(count)
        counts = self._senders.get(sender)
        if counts is None:
            self._senders[sender] = _Counts(n)
            if len(self._senders) > self.max_senders:
                self._senders.popitem(last=False)
            return None
        self._senders.move_to_end(sender)
        seen = counts.take(n)
        if seen is None:
            return None
        if seen == "seen":
            return "duplicate", f"count {n} of {sender} taken before"
        return "stale", (f"count {n} of {sender} is more than {WINDOW} behind its newest "
                         f"({counts.top})")
