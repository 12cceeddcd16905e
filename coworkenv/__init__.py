"""coworkenv: synthesize, run, grade and export training environments for AI coworker agents."""

__version__ = "0.1.0"
__all__ = ["__version__"]
