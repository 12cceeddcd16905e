"""The episode's in-memory log gives back exactly the rows appended, in order, however many
were packed; a copy goes on independently (the mutation check forks episodes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coworkenv.sim.eventlog import EventLog

rows = st.tuples(st.just("run:task:0:0"), st.integers(0, 10**6),
                 st.floats(allow_nan=False), st.floats(allow_nan=False),
                 st.sampled_from(["agent", "tools", "kernel", "dana"]), st.text(max_size=12),
                 st.text(max_size=300))


@given(st.lists(rows, max_size=3 * EventLog.CHUNK + 5), st.lists(rows, max_size=EventLog.CHUNK))
def test_rows_come_back_as_appended_and_copies_are_independent(
        first: list[tuple[object, ...]], more: list[tuple[object, ...]]) -> None:
    log = EventLog()
    for r in first:
        log.append(r)
    assert len(log) == len(first) and list(log) == first
    fork = log.copy()
    for r in more:
        fork.append(r)
    assert list(log) == first  # the original does not see the fork's rows
    assert list(fork) == first + more and len(fork) == len(first) + len(more)
    assert all(type(a) is type(b) for x, y in zip(fork, first + more, strict=True)
               for a, b in zip(x, y, strict=True))


def test_packed_rows_are_small() -> None:
    log = EventLog()
    text = '{"call_id":"c%d","ok":true,"result":{"id":"email-%d","thread":"t-7","to":["sam"]}}'
    for i in range(10 * EventLog.CHUNK):
        log.append(("run:task:0:0", i, i * 60.0, 1.7e9 + i / 1000, "tools", "tool_result",
                    text % (i, i)))
    raw = sum(len(text % (i, i)) for i in range(10 * EventLog.CHUNK))
    assert log.nbytes() < raw / 3, (log.nbytes(), raw)


def test_later_chunks_are_packed_against_the_first() -> None:
    """A log's first chunk is the preset dictionary of its later chunks: rows that repeat the
    episode's names and keys pack smaller than each chunk alone, and read back the same."""
    import marshal
    import zlib

    text = '{"arguments":{"body":"Status of the Q3 plan for %s","to":["%s"]},"call_id":"a-%d"}'
    people = ["dana.whitfield@lumen.example", "omar.castellanos@lumen.example"]
    rows = [("ep-7f3a", i, float(i), 0.0, "agent", "tool_call",
             text % (people[i % 2], people[(i + 1) % 2], i)) for i in range(4 * EventLog.CHUNK)]
    log = EventLog()
    for row in rows:
        log.append(row)
    assert list(log) == rows and list(log.copy()) == rows
    alone = sum(len(zlib.compress(marshal.dumps(rows[i:i + EventLog.CHUNK]), 1))
                for i in range(0, len(rows), EventLog.CHUNK))
    assert log.nbytes() < alone, (log.nbytes(), alone)
