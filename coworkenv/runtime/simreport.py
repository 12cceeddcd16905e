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


def failed(outcomes: list[ArrivalOutcome]) -> dict[str, Any]:
    """The arrivals that failed (not a poor grade: the agent, its worker, its model server or
    a grader could not carry them): how many, and the first one's reason."""
    bad = [o for o in outcomes if o.failure]
    return {"arrivals": len(bad), "first": f"{bad[0].key}: {bad[0].failure}"} if bad else \
        {"arrivals": 0}


def simulation_report(reader: Any, run_id: str, price: tuple[float, float] | None = None
                      ) -> dict[str, Any] | None:
    """A simulation run's own figures as the store holds them (None: not a simulation): its
    checks (SLA, nothing dropped, budgets, a script's), per agent and per family the
    arrivals, pass rate, score and response times in working hours, and its model use
    (:func:`model_figures`; ``price``: dollars per million prompt and completion tokens)."""
    from ..sim.simulation import ArrivalOutcome
    from ..store import NotFoundError

    try:
        sim = reader.episode(f"{run_id}:@simulation")
    except NotFoundError:
        return None
    grades = {r["episode_id"]: r for r in reader.scheduled_episodes(run_id)}
    outcomes = []
    by_arrival: dict[str, dict[str, int]] = {}
    for e in reader.episodes(run_id):
        o, g = e.outcome, grades.get(e.episode_id)
        if "arrival" not in o or g is None:
            continue
        if o.get("model"):
            by_arrival[str(o["arrival"])] = o["model"]
        outcomes.append(ArrivalOutcome(
            str(o["arrival"]), e.task_id, str(o.get("template", "")), e.family,
            str(o.get("agent", "")), float(o.get("arrived", 0.0)), o.get("started"),
            float(o.get("finished", 0.0)), str(e.termination), e.status,
            float(g["completion"] or 0.0), float(g["score"] or 0.0), bool(g["passed"]),
            float(o.get("response_hours", 0.0)), str(e.events_hash or ""),
            failure=f"{e.failure_boundary}: {e.failure}" if e.failure else None))
    return {"simulation": sim.outcome.get("simulation"), "status": sim.status,
            "checks": sim.outcome.get("checks", []), "arrivals": len(outcomes),
            "events": sim.event_count, "events_hash": sim.events_hash,
            "by_agent": figures_by(outcomes, "agent"), "failed": failed(outcomes),
            "by_family": figures_by(outcomes, "family"),
            "model": model_figures(sim.outcome.get("model_use") or {},
                                   sim.outcome.get("model_by_day") or {}, by_arrival,
                                   {o.key: o.agent for o in outcomes}, price)}


def model_figures(use: dict[str, dict[str, int]], by_day: dict[str, dict[str, int]],
                  by_arrival: dict[str, dict[str, int]], agent_of: dict[str, str],
                  price: tuple[float, float] | None = None) -> dict[str, Any]:
    """A simulation's model use: per agent (and ``people``, the model-played ones) its calls,
    tokens (prompt, completion), the calls' latency in seconds and, over the arrivals it
    handled, the median and most calls, tokens and seconds one arrival cost (an arrival's
    are every call made while its envelopes were handled, a model-played person's too); per
    simulated day the same; and the whole. ``price``: dollars per million prompt and
    completion tokens, which adds each one's ``cost``."""
    def cost(f: dict[str, Any], prompt: int, completion: int) -> dict[str, Any]:
        if price is not None:
            f["cost"] = round((prompt * price[0] + completion * price[1]) / 1e6, 4)
        return f

    def slot(u: dict[str, int]) -> dict[str, Any]:
        p, c = int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
        return cost({"calls": int(u.get("calls", 0)), "prompt_tokens": p,
                     "completion_tokens": c, "tokens": int(u.get("tokens", p + c)),
                     "model_s": round(int(u.get("latency_ms", 0)) / 1000, 3)}, p, c)

    def spread(slots: list[dict[str, int]]) -> dict[str, Any]:
        out: dict[str, Any] = {"arrivals": len(slots)}
        for key, name in (("calls", "calls"), ("tokens", "tokens"), ("latency_ms", "model_s")):
            xs = sorted(int(s.get(key, 0)) for s in slots)
            scale = 1000 if key == "latency_ms" else 1
            out[f"{name}_median"] = round(median(xs) / scale, 3)
            out[f"{name}_max"] = round(xs[-1] / scale, 3)
        return out

    of_agent: dict[str, list[dict[str, int]]] = {}
    for key, s in by_arrival.items():
        of_agent.setdefault(agent_of.get(key, ""), []).append(s)
    agents: dict[str, Any] = {}
    for who, u in sorted(use.items()):
        f = slot(u)
        f["prompt_max"] = int(u.get("prompt_max", 0))
        if who in of_agent:
            f["per_arrival"] = spread(of_agent[who])
        agents[who] = f
    whole = slot({k: sum(int(u.get(k, 0)) for u in use.values())
                  for k in ("calls", "prompt_tokens", "completion_tokens", "latency_ms")})
    if by_arrival:
        whole["per_arrival"] = spread(list(by_arrival.values()))
    return {"by_agent": agents, "by_day": {d: slot(u) for d, u in sorted(by_day.items())},
            "total": whole}

