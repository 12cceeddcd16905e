"""Working days and hours of a simulation: its times (``dN HH:MM``, ``HH:MM``, ISO-8601) as
seconds since its start, and working time between two times."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import datetime, timedelta


def _hm(text: str) -> int:
    h, m = text.split(":")
    return int(h) * 60 + int(m)


_SIM_TIME = re.compile(r"^(?:d(\d+)\s+)?(\d{1,2}):(\d{2})$")


@dataclass(frozen=True)
class Calendar:
    """Working days and hours of a simulation: its times, in seconds since its start.

    Its days and working windows are worked out once (with each window's working seconds
    before it), so every question about time costs a binary search, whatever the number of
    days: a 400-day simulation asks it for each of its arrivals. Working time goes on past
    the last day on the same days and hours (:attr:`DRAIN_DAYS` more), for what is still open
    then: time limits and the drain after the end count working time too."""

    DRAIN_DAYS = 30

    start: datetime
    days: int
    hours: tuple[str, str]
    _days: list[datetime] = field(init=False, repr=False, compare=False)
    _windows: list[tuple[float, float]] = field(init=False, repr=False, compare=False)
    _his: list[float] = field(init=False, repr=False, compare=False)
    _before: list[float] = field(init=False, repr=False, compare=False)
    _inside: int = field(init=False, repr=False, compare=False)
    """How many of the windows fall inside the clock's days (the rest is the drain's)."""

    def __post_init__(self) -> None:
        days: list[datetime] = []
        d = self.start.replace(hour=0, minute=0, second=0, microsecond=0)
        while len(days) < self.days + self.DRAIN_DAYS:
            if d.weekday() < 5:
                days.append(d)
            d += timedelta(days=1)
        windows = []
        for day in days:
            a = (day + timedelta(minutes=_hm(self.hours[0])) - self.start).total_seconds()
            b = (day + timedelta(minutes=_hm(self.hours[1])) - self.start).total_seconds()
            if b > 0:
                windows.append((max(0.0, a), b))
        before, total = [], 0.0
        for lo, hi in windows:
            before.append(total)
            total += hi - lo
        object.__setattr__(self, "_days", days)
        object.__setattr__(self, "_windows", windows)
        object.__setattr__(self, "_inside", sum(1 for d in days[:self.days]
                                                if (d + timedelta(minutes=_hm(self.hours[1]))
                                                    - self.start).total_seconds() > 0))
        object.__setattr__(self, "_his", [hi for _, hi in windows])
        object.__setattr__(self, "_before", before)

    def day(self, n: int) -> datetime:
        """Midnight (local) of the n-th working day (1-based)."""
        if 1 <= n <= len(self._days):
            return self._days[n - 1]
        d, k = self._days[-1], len(self._days)  # (far past the clock: counted on)
        while k < n:
            d += timedelta(days=1)
            k += d.weekday() < 5
        return d

    @property
    def end_s(self) -> float:
        """The end of the last working day."""
        last = self.day(self.days) + timedelta(minutes=_hm(self.hours[1]))
        return (last - self.start).total_seconds()

    def seconds(self, text: str) -> float:
        """Seconds from the start to a simulation time (``dN HH:MM``, ``HH:MM``, ISO-8601)."""
        m = _SIM_TIME.match(text.strip())
        if m:
            n = int(m.group(1) or 1)
            if not 1 <= n <= self.days:
                raise ValueError(f"{text!r}: day {n} is outside the simulation's "
                                 f"{self.days} working days")
            when = self.day(n) + timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        else:
            try:
                when = datetime.fromisoformat(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a time (dN HH:MM, HH:MM or ISO-8601)") \
                    from None
            if when.tzinfo is None:
                when = when.replace(tzinfo=self.start.tzinfo)
        s = (when - self.start).total_seconds()
        if s < 0:
            raise ValueError(f"{text!r} is before the simulation starts")
        return s

    def at(self, seconds: float) -> datetime:
        return self.start + timedelta(seconds=seconds)

    def working_day(self, seconds: float) -> int:
        """Which working day a time falls on, or last began before it (1-based; past the
        clock's days, counted on)."""
        when = self.at(seconds).replace(hour=0, minute=0, second=0, microsecond=0)
        n = bisect_right(self._days, when)
        if n < len(self._days) or not self._days:
            return max(n, 1)
        d, k = self._days[-1], n  # (far past the clock: counted on)
        while d < when:
            d += timedelta(days=1)
            k += d.weekday() < 5 and d <= when
        return k

    def windows(self) -> list[tuple[float, float]]:
        """Each working day's working hours, in seconds since the start."""
        return self._windows[:self._inside]

    def working_seconds(self, a: float, b: float) -> float:
        """Working seconds between two times."""
        total = 0.0
        for lo, hi in self._windows[bisect_right(self._his, a):]:
            if lo >= b:
                break
            total += max(0.0, min(b, hi) - max(a, lo))
        return total

    def from_working(self, w: float, *, past_end: bool = False) -> float | None:
        """The time after ``w`` working seconds from the start (None: after the last working
        day's end; with ``past_end``, working days go on after it)."""
        # the window holding it (at a window's end: that window, not the next one's start)
        last = len(self._windows) if past_end else self._inside
        i = max(0, bisect_left(self._before, w) - 1)
        while i < last:
            lo, hi = self._windows[i]
            rest = w - self._before[i]
            if rest <= hi - lo:
                return lo + rest
            i += 1
        return None

    def after_working(self, t: float, seconds: float) -> float:
        """The time ``seconds`` of working time after ``t``, working days going on past the
        last one (beyond :attr:`DRAIN_DAYS` more: in calendar time)."""
        w = self.working_seconds(0.0, t) + seconds
        at = self.from_working(w, past_end=True)
        if at is None:
            lo, hi = self._windows[-1]
            return hi + (w - self._before[-1] - (hi - lo))
        return at
