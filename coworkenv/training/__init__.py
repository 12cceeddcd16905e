"""Training data and (with the ``train`` extra) TRL entry points."""

from .export import ExportStats, export_rl, export_sft

__all__ = ["ExportStats", "export_rl", "export_sft"]
