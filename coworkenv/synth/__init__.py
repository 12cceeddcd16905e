"""Task synthesis: workflow requirements to validated, capability-guided tasks."""

from .families import FAMILIES, Family, families_for
from .generate import (
    Attempt,
    OpenAIGenerator,
    OpenAIPlanGenerator,
    ProceduralGenerator,
    SynthStats,
    spec_fingerprint,
    synthesize,
)
from .reading import load_requirement
from .requirement import WorkflowRequirement
from .validate import Rejection, Report, validate_task, validate_task_async

__all__ = ["FAMILIES", "Attempt", "Family", "OpenAIGenerator", "OpenAIPlanGenerator",
           "ProceduralGenerator",
           "Rejection", "Report", "SynthStats", "WorkflowRequirement", "families_for",
           "load_requirement", "spec_fingerprint", "synthesize", "validate_task",
           "validate_task_async"]
