"""The viewer's read-only API: paginated listings, one episode's timeline, state at a seq.

Every function takes a :class:`~coworkenv.store.Reader` (a read-only connection) and returns
JSON-ready data; the HTTP server only routes to them.
"""

from __future__ import annotations

import json
from typing import Any

from ..agents.chat import agent_view
from ..store import Reader
from ..workspace import replay_events

LANE_ORDER = {"kernel": 0, "agent": 1, "tools": 3, "world": 4, "setup": 5}


def runs(r: Reader) -> list[dict[str, Any]]:
    """Every run, the oldest first (the page lists them the newest first)."""
    return r.runs()


def episodes(r: Reader, *, run: str | None = None, family: str | None = None,
             capability: str | None = None, passed: bool | None = None,
             safety_violation: bool | None = None, arrivals: bool = False, limit: int = 50,
             offset: int = 0) -> dict[str, Any]:
    """One page of episodes with their grades, filtered, the newest run's first (then by task,
    trial and attempt); uses the (run, ...) indexes. ``arrivals``: only a simulation's
    arrivals (its ``@simulation`` record, or any ``@`` record of a run, left out)."""
    where: list[str] = []
    params: list[Any] = []
    if run:
        where.append("e.run_id = ?")
        params.append(run)
    if arrivals:
        where.append("substr(e.task_id, 1, 1) <> '@'")
    if family:
        where.append("e.family = ?")
        params.append(family)
    if capability:
        where.append("t.capabilities LIKE ?")
        params.append(f'%"{capability}"%')
    if passed is not None:
        where.append("g.passed = ?")
        params.append(int(passed))
    if safety_violation is not None:
        where.append("g.safety < 1" if safety_violation else "g.safety >= 1")
    sql_from = ("FROM episodes e LEFT JOIN grades g USING (episode_id) "
                "LEFT JOIN tasks t ON t.run_id = e.run_id AND t.task_id = e.task_id")
    cond = (" WHERE " + " AND ".join(where)) if where else ""
    total = r.conn.execute(f"SELECT count(*) {sql_from}{cond}", params).fetchone()[0]
    rows = r.conn.execute(
        f"SELECT e.episode_id, e.run_id, e.task_id, e.family, e.trial, e.status, e.termination,"
        f" e.turns, e.sim_time, e.event_count, g.completion, g.safety, g.robustness, g.score,"
        f" g.passed, t.capabilities {sql_from} LEFT JOIN runs r ON r.run_id = e.run_id{cond}"
        f" ORDER BY r.created_at DESC, e.run_id, e.task_id, e.trial, e.attempt"
        f" LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()
    keys = ("episode_id", "run_id", "task_id", "family", "trial", "status", "termination",
            "turns", "sim_time", "event_count", "completion", "safety", "robustness", "score",
            "passed", "capabilities")
    items = []
    for row in rows:
        d = dict(zip(keys, row, strict=True))
        d["capabilities"] = json.loads(d["capabilities"] or "[]")
        d["passed"] = None if d["passed"] is None else bool(d["passed"])
        items.append(d)
    return {"total": total, "limit": limit, "offset": offset, "items": items}


def _summary(kind: str, p: dict[str, Any]) -> str:
    if kind == "tool_call":
        return f"{p.get('tool')}({json.dumps(p.get('arguments'), ensure_ascii=False)[:80]})"
    if kind == "tool_result":
        if p.get("ok"):
            return f"ok {json.dumps(p.get('result'), ensure_ascii=False)[:80]}"
        err = p.get("error") or {}
        return f"error {err.get('code')}: {err.get('message')}"
    if kind in ("message", "task"):
        return str(p.get("text") or p.get("instruction") or "")[:120]
    if kind == "notify":
        return f"{p.get('notification')}: {p.get('text') or p.get('subject') or p.get('title') or ''}"
    if kind.startswith("ws."):
        return f"{kind[3:]} {p.get('id')}"
    return json.dumps({k: v for k, v in p.items() if k != "to"}, ensure_ascii=False)[:120]


def timeline(r: Reader, episode_id: str) -> dict[str, Any]:
    """An episode's meta, grade and events (one summary line each), with lanes per actor."""
    ep = r.episode(episode_id)
    events = []
    lanes: dict[str, int] = {}
    for e in r.events(episode_id):
        if e.actor == "setup":
            continue
        lane = e.actor
        lanes.setdefault(lane, LANE_ORDER.get(lane, 2))
        events.append({"seq": e.seq, "t": e.sim_time, "actor": e.actor, "kind": e.kind,
                       "to": e.payload.get("to"), "summary": _summary(e.kind, e.payload)})
    grade = r.grade(episode_id)
    return {
        "episode": {k: getattr(ep, k) for k in (
            "episode_id", "run_id", "task_id", "family", "trial", "status", "termination",
            "turns", "sim_time", "event_count", "failure", "failure_boundary", "role")},
        "lanes": sorted(lanes, key=lambda a: (lanes[a], a)),
        "events": events,
        "grade": grade,
        "checks": r.check_results(episode_id),
    }


def event(r: Reader, episode_id: str, seq: int) -> dict[str, Any]:
    found = list(r.events(episode_id, upto=seq, since=seq))
    if not found:
        raise KeyError(f"episode {episode_id!r} has no event {seq}")
    e = found[0]
    return {"seq": e.seq, "t": e.sim_time, "wall_time": e.wall_time, "actor": e.actor,
            "kind": e.kind, "payload": e.payload}


def state_at(r: Reader, episode_id: str, seq: int) -> dict[str, Any]:
    state = replay_events(r.events(episode_id, upto=seq))
    return {"seq": seq, "hash": state.state_hash(), "state": state.to_json()}


def conversation(r: Reader, episode_id: str) -> list[dict[str, Any]]:
    return agent_view(r.events(episode_id))


def simulation(r: Reader, run_id: str) -> dict[str, Any]:
    """A simulation's run for its page: the simulation (its clock, agents, checks), every
    arrival (who asked, which agent took it, when it arrived, started and ended, its grade),
    the backlog per simulated hour (arrivals waiting or in work), and for persistent agents
    how their actions were credited to arrivals (counts; the ambiguous and uncredited ones
    listed), and the model use by agent, by arrival and by simulated day."""
    from ..runtime.simreport import model_figures

    sim = r.episode(f"{run_id}:@simulation")  # (a run that is no simulation: a 404)
    start = next((e.payload for e in r.events(sim.episode_id, upto=0)), {})
    grades = {g["episode_id"]: g for g in r.scheduled_episodes(run_id)}
    arrivals = []
    for e in r.episodes(run_id):
        o = e.outcome
        if "arrival" not in o:
            continue
        g = grades.get(e.episode_id) or {}
        arrivals.append({
            "episode_id": e.episode_id, "key": o["arrival"], "task_id": e.task_id,
            "family": e.family, "agent": o.get("agent"), "requester": o.get("requester"),
            "handoff_from": o.get("handoff_from"), "arrived": o.get("arrived"),
            "started": o.get("started"), "finished": o.get("finished"),
            "termination": e.termination, "passed": bool(g.get("passed")),
            "score": g.get("score"), "response_hours": o.get("response_hours"),
            "model": o.get("model")})
    arrivals.sort(key=lambda a: (a["arrived"] or 0.0, a["key"]))
    end = max([a["finished"] or 0.0 for a in arrivals] + [sim.sim_time or 0.0])
    hours = int(end // 3600) + 1
    backlog = [0] * hours
    for a in arrivals:  # open during each hour it overlaps
        lo, hi = a["arrived"] or 0.0, a["finished"] or end
        for h in range(int(lo // 3600), min(hours, int(hi // 3600) + 1)):
            backlog[h] += 1
    episode_of = {a["key"]: a["episode_id"] for a in arrivals}
    unsure = [{**u, "episode_id": episode_of.get(str(u.get("arrival")))}
              for u in sim.outcome.get("attribution_unsure", [])]
    return {"run_id": run_id, "simulation": sim.outcome.get("simulation"),
            "status": sim.status, "start": start.get("start"), "days": start.get("days"),
            "agents": start.get("agents", {}), "checks": sim.outcome.get("checks", []),
            "sim_time": sim.sim_time, "arrivals": arrivals,
            "backlog": [{"hour": h, "open": n} for h, n in enumerate(backlog)],
            "attribution": sim.outcome.get("attribution", {}), "unsure": unsure,
            "model_use": sim.outcome.get("model_use", {}),
            "model": model_figures(sim.outcome.get("model_use") or {},
                                   sim.outcome.get("model_by_day") or {},
                                   {a["key"]: a["model"] for a in arrivals if a["model"]},
                                   {a["key"]: str(a["agent"]) for a in arrivals})}
