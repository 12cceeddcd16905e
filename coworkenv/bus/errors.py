"""Errors of the bus.

    BusError
    ├── BusClosedError       publish/subscribe on a closed bus, or iteration after close
    ├── BusTimeoutError      a request got no reply in time
    ├── BusConnectionError   the broker stayed unreachable past the reconnect budget
    └── BusURLError          a --bus value that is not 'memory' or an mqtt:// URL
"""

from __future__ import annotations

from ..errors import CoworkenvError


class BusError(CoworkenvError):
    """Base class of the bus's errors."""


class BusClosedError(BusError):
    pass


class BusTimeoutError(BusError, TimeoutError):
    pass


class BusConnectionError(BusError):
    pass


class BusURLError(BusError, ValueError):
    pass
