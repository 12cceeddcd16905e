"""Task synthesis: workflow requirements to validated, capability-guided tasks."""

from .contract import PrimitiveReport, check_primitive_contract
from .errors import PrimitiveError, SynthError
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
from .primitive import PRIMITIVES, Composition, Primitive, Value, catalog
from .reading import load_requirement
from .requirement import WorkflowRequirement
from .validate import Rejection, Report, validate_task, validate_task_async

__all__ = ["FAMILIES", "PRIMITIVES", "Attempt", "Composition", "Family", "OpenAIGenerator",
           "OpenAIPlanGenerator", "Primitive", "PrimitiveError", "PrimitiveReport",
           "ProceduralGenerator", "Rejection", "Report", "SynthError", "SynthStats", "Value",
           "WorkflowRequirement", "catalog", "check_primitive_contract", "families_for",
           "load_requirement", "spec_fingerprint", "synthesize", "validate_task",
           "validate_task_async"]
