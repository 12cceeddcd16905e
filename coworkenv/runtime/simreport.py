"""A simulation's figures: per agent and per family, arrivals, pass rate, score, response
times in working hours; and the report of a simulation run as the store holds it."""

from __future__ import annotations

from statistics import median
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sim.simulation import ArrivalOutcome


def figures_by(outcomes: list[ArrivalOutcome], key: str) -> dict[str, dict[str, Any]]:
    """:func:`figures` of the arrivals grouped by one of their fields."""
    groups: dict[str, list[ArrivalOutcome]] = {}
    for o in outcomes:
        groups.setdefault(str(getattr(o, key)), []).append(o)
    return {k: figures(v) for k, v in sorted(groups.items())}


def figures(outcomes: list[ArrivalOutcome]) -> dict[str, Any]:
    """Arrivals, pass rate, mean score and response times (working hours) of some arrivals."""
    resp = sorted(o.response_hours for o in outcomes)
    n = len(outcomes)
    return {"arrivals": n, "passed": sum(o.passed for o in outcomes),
            "pass_rate": round(sum(o.passed for o in outcomes) / n, 4) if n else 0.0,
            "score": round(sum(o.score for o in outcomes) / n, 4) if n else 0.0,
            "completed": sum(o.termination == "agent_finished" for o in outcomes),
            "response_h_median": round(median(resp), 3) if resp else None,
            "response_h_p90": round(resp[min(n - 1, int(0.9 * n))], 3) if resp else None,
            "response_h_max": round(resp[-1], 3) if resp else None}


def simulation_report(reader: Any, run_id: str) -> dict[str, Any] | None:
    """A simulation run's own figures as the store holds them (None: not a simulation): its
    checks (SLA, nothing dropped, budgets, a script's), and per agent and per family the
    arrivals, pass rate, score and response times in working hours."""
    from ..sim.simulation import ArrivalOutcome
    from ..store import NotFoundError

    try:
        sim = reader.episode(f"{run_id}:@simulation")
    except NotFoundError:
        return None
    grades = {r["episode_id"]: r for r in reader.scheduled_episodes(run_id)}
    outcomes = []
    for e in reader.episodes(run_id):
        o, g = e.outcome, grades.get(e.episode_id)
        if "arrival" not in o or g is None:
            continue
        outcomes.append(ArrivalOutcome(
            str(o["arrival"]), e.task_id, str(o.get("template", "")), e.family,
            str(o.get("agent", "")), float(o.get("arrived", 0.0)), o.get("started"),
            float(o.get("finished", 0.0)), str(e.termination), e.status,
            float(g["completion"] or 0.0), float(g["score"] or 0.0), bool(g["passed"]),
            float(o.get("response_hours", 0.0)), str(e.events_hash or "")))
    return {"simulation": sim.outcome.get("simulation"), "status": sim.status,
            "checks": sim.outcome.get("checks", []), "arrivals": len(outcomes),
            "events": sim.event_count, "events_hash": sim.events_hash,
            "by_agent": figures_by(outcomes, "agent"),
            "by_family": figures_by(outcomes, "family")}
