"""coworkenv's own workflow primitives, one module each, registered in the entry-point group
``coworkenv.primitives`` like a plugin's (see :mod:`coworkenv.synth.primitive` for the
contract). The registry is :data:`PRIMITIVES`."""

from ..primitive import PRIMITIVES, Composition, Primitive, catalog

__all__ = ["PRIMITIVES", "Composition", "Primitive", "catalog"]
