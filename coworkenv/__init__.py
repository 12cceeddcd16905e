"""coworkenv: synthesize, run, grade and export training environments for AI coworker agents."""

from .errors import CoworkenvError

__version__ = "0.1.0"
__all__ = ["CoworkenvError", "__version__"]
