"""Pin every public ``__all__``: adding or removing a public name is a deliberate change."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PUBLIC = {
    "coworkenv": ["CoworkenvError", "__version__"],
    "coworkenv.bus": ["Bus", "BusClosedError", "BusConnectionError", "BusError", "BusStatistics",
                      "BusTimeoutError", "BusURLError", "Envelope", "KEY_ENV", "MemoryBus", "MqttBus",
                      "Subscription", "SubscriptionStatistics", "bus_key", "new_id", "open_bus",
                      "topic_matches"],
    "coworkenv.runtime": ["Action", "EndpointUnreachableError", "Observation", "Played",
                          "RunConfig", "RunResult", "Scenario", "Session", "Sessions",
                          "SimulationConfig", "SimulationResult", "SimulationSession", "arun",
                          "asimulate", "check_db", "check_endpoint", "play_reference",
                          "resolve_tasks", "run", "select_tasks", "simulate",
                          "simulation_report"],
    "coworkenv.sim.simulation": ["SEAT_PREFIX", "SIM_RULE", "Arrival", "ArrivalOutcome", "Away",
                                 "Calendar", "Clock", "Join", "Leave", "Live", "Loaded", "On",
                                 "OnMessage", "Outage", "Person", "Poisson", "Reorg", "Resume",
                                 "Route", "Seat", "SimCheck", "SimChecks", "Simulation",
                                 "SimulationError", "Stream", "check_simulation", "instantiate",
                                 "load_simulation", "simulation_schema", "timed_arrivals"],
    "coworkenv.synth": ["FAMILIES", "PRIMITIVES", "Attempt", "Composition", "Family",
                        "OpenAIGenerator", "OpenAIPlanGenerator", "Primitive", "PrimitiveError",
                        "PrimitiveReport", "ProceduralGenerator", "Rejection", "Report",
                        "SynthError", "SynthStats", "Value", "WorkflowRequirement", "catalog",
                        "check_primitive_contract", "families_for", "load_requirement",
                        "spec_fingerprint", "synthesize", "validate_task",
                        "validate_task_async"],
    "coworkenv.store": ["SCHEMA_VERSION", "EpisodeRecord", "EventRecord", "EventStore",
                        "LeaseHeldError", "LeaseLostError", "MAX_SHARDS", "MEASURED", "MergeConflictError",
                        "MergeStats",
                        "RunLease", "NotFoundError", "Reader", "SchemaError", "StoreClosedError",
                        "StoreError", "WriterSettings", "WriterStatistics", "delete_runs",
                        "events_hash", "EventsHasher", "UNHASHED", "adopt_shards",
                        "verify_shard",
                        "hash_line", "merge_connection", "merge_stores", "migrate",
                        "shard_files", "writable_store"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_all_is_pinned(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    for name in mod.__all__:
        assert hasattr(mod, name), name


ROOT = Path(__file__).resolve().parents[1]


def test_ruff() -> None:
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "coworkenv", "tests", "bench", "examples"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy_strict() -> None:
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


ERROR_MODULES = ["coworkenv.bus", "coworkenv.store", "coworkenv.sim", "coworkenv.runtime",
                 "coworkenv.workspace.errors",
                 "coworkenv.outputs", "coworkenv.training.errors", "coworkenv.training.export",
                 "coworkenv.training.sft"]


def test_one_error_root() -> None:
    """Every error class of the package derives from CoworkenvError, and the root's docstring
    draws each of them."""
    import re

    from coworkenv import CoworkenvError
    from coworkenv import errors as root

    found: dict[str, type] = {}
    for name in ERROR_MODULES:
        mod = importlib.import_module(name)
        for attr, value in vars(mod).items():
            if isinstance(value, type) and issubclass(value, Exception) and \
                    value.__module__.startswith("coworkenv"):
                found[attr] = value
    assert len(found) >= 20, sorted(found)
    outside = sorted(n for n, c in found.items() if not issubclass(c, CoworkenvError))
    assert outside == []
    drawn = set(re.findall(r"\b([A-Z][A-Za-z]+(?:Error|Failure|Interrupted))\b",
                           root.__doc__ or ""))
    assert set(found) - {"CoworkenvError"} <= drawn, sorted(set(found) - drawn)
