"""Fault injection: tool failures and delays, deterministic for an episode's seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..workspace import REGISTRY
from .task import FaultPlan

MESSAGES = {
    "rate_limited": "rate limited: too many requests, retry in a moment",
    "server_error": "the service had an internal error; the call was not carried out",
}


@dataclass
class FaultInjector:
    plan: FaultPlan
    rng: random.Random

    @classmethod
    def for_episode(cls, plan: FaultPlan, seed: int) -> FaultInjector:
        return cls(plan, random.Random(seed ^ 0x5F3759DF))

    def _applies(self, tool: str) -> bool:
        t = REGISTRY.get(tool)
        if t is None:
            return False
        if self.plan.tools == "all":
            return True
        if self.plan.tools == "write":
            return t.writes
        return tool in self.plan.tools

    def failure(self, tool: str) -> dict[str, Any] | None:
        """An error observation to return instead of running the call, or None."""
        if self.plan.rate <= 0 or not self._applies(tool) or self.rng.random() >= self.plan.rate:
            return None
        kind = self.plan.kinds[self.rng.randrange(len(self.plan.kinds))]
        return {"ok": False, "error": {"code": kind, "field": None, "message": MESSAGES[kind]},
                "injected": True}

    def delay(self, tool: str) -> float:
        """Extra simulated seconds before the result comes back."""
        if self.plan.delay_rate <= 0 or not self._applies(tool) \
                or self.rng.random() >= self.plan.delay_rate:
            return 0.0
        lo, hi = self.plan.delay_minutes
        return self.rng.uniform(lo, hi) * 60
