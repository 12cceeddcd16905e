"""Errors of synthesis.

    SynthError
    └── PrimitiveError   a primitive plugin that cannot be loaded or breaks the contract
"""

from __future__ import annotations

from ..errors import CoworkenvError


class SynthError(CoworkenvError):
    """Base class of synthesis' errors."""


class PrimitiveError(SynthError):
    """A registered primitive that cannot be loaded or breaks the contract (the message
    names the entry point and each problem)."""
