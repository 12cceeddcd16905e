"""An episode's event log in memory, kept small while the episode lives.

A live episode keeps every event it has recorded (grading reads them at the end), as the row
it is stored as: ``(episode_id, seq, sim_time, wall_time, actor, kind, payload JSON text)``.
As Python objects such a row costs about 450 bytes (a 7-tuple, two floats, the text); a
100-step episode of the office mix records about 300 of them. The log keeps the newest
``CHUNK`` rows as they are and packs each full chunk into one ``bytes`` (marshal, then zlib
at level 1): about 30 bytes a row, for about 2 us a row of packing, paid once per row, and
unpacking only when the log is read (grading, the mutation check, training rewards).

Every chunk after the first is packed with the first one (unpacked) as zlib's preset
dictionary: an episode's later events repeat the names, addresses, ids and keys of its start
(measured on the office mix, 32 rows a chunk: 28 bytes a row with it, 48 without; 39 at 64
rows without), so small chunks pack well and half as many rows stay unpacked.
"""

from __future__ import annotations

import marshal
import zlib
from collections.abc import Iterator
from typing import Any

Row = tuple[Any, ...]
_MEM_LEVEL = 4
"""zlib's memory level for packing: 4 sets up in less time than the default 8 (a packing's
cost is mostly setting up) and packs these chunks within 1% as small."""


class EventLog:
    """Rows in the order they were appended. ``len`` is O(1); iterating unpacks the packed
    chunks (each one once per pass); :meth:`copy` shares the packed chunks (immutable)."""

    CHUNK = 32
    """Rows per packed chunk: larger chunks keep more rows unpacked (about 450 bytes each),
    smaller ones cost more time a row to pack."""

    __slots__ = ("_packed", "_tail")

    def __init__(self) -> None:
        self._packed: list[bytes] = []  # each of CHUNK rows
        self._tail: list[Row] = []

    def append(self, row: Row) -> None:
        tail = self._tail
        tail.append(row)
        if len(tail) >= self.CHUNK:
            # (marshal keeps one copy of an object that recurs by identity, so the episode id
            # is written once a chunk; every value in a row is a str, int or float)
            raw = marshal.dumps(tail)
            # (the first chunk, unpacked, is the dictionary of the others)
            co = zlib.compressobj(1, zlib.DEFLATED, 15, _MEM_LEVEL,
                                  zdict=zlib.decompress(self._packed[0]) if self._packed else b"")
            self._packed.append(co.compress(raw) + co.flush())
            self._tail = []

    def __len__(self) -> int:
        return len(self._packed) * self.CHUNK + len(self._tail)

    def __iter__(self) -> Iterator[Row]:
        packed = list(self._packed)
        if packed:
            first = zlib.decompress(packed[0])
            yield from marshal.loads(first)
            for chunk in packed[1:]:
                do = zlib.decompressobj(zdict=first)
                yield from marshal.loads(do.decompress(chunk) + do.flush())
        yield from list(self._tail)

    def rows_from(self, start: int) -> Iterator[Row]:
        """The rows from ``start`` on, unpacking only the chunks that hold them (a long
        simulation grades each arrival from the row it arrived at)."""
        first_chunk = start // self.CHUNK
        packed = list(self._packed)
        if first_chunk < len(packed):
            first = zlib.decompress(packed[0])
            for i in range(first_chunk, len(packed)):
                if i == 0:
                    rows = marshal.loads(first)
                else:
                    do = zlib.decompressobj(zdict=first)
                    rows = marshal.loads(do.decompress(packed[i]) + do.flush())
                skip = start - i * self.CHUNK
                yield from rows[skip:] if skip > 0 else rows
        tail_start = len(packed) * self.CHUNK
        yield from self._tail[max(0, start - tail_start):]

    def copy(self) -> EventLog:
        new = EventLog()
        new._packed, new._tail = list(self._packed), list(self._tail)
        return new

    def nbytes(self) -> int:
        """Bytes held by the packed chunks (the unpacked tail not counted): for benchmarks."""
        return sum(len(c) for c in self._packed)
