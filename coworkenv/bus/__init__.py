"""The async event bus: one contract, a memory backend (default) and an MQTT backend."""

from ._base import Bus, BusStatistics
from ._envelope import KEY_ENV, Envelope, bus_key, new_id, topic_matches
from ._router import Subscription, SubscriptionStatistics
from ._url import open_bus
from .errors import BusClosedError, BusConnectionError, BusError, BusTimeoutError, BusURLError
from .memory import MemoryBus
from .mqtt import MqttBus

__all__ = [
    "KEY_ENV",
    "Bus",
    "BusClosedError",
    "BusConnectionError",
    "BusError",
    "BusStatistics",
    "BusTimeoutError",
    "BusURLError",
    "Envelope",
    "MemoryBus",
    "MqttBus",
    "Subscription",
    "SubscriptionStatistics",
    "bus_key",
    "new_id",
    "open_bus",
    "topic_matches",
]

