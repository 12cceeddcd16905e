"""Evaluation reports over graded episodes: per workflow family and per capability."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from statistics import mean
from typing import Any

from ..outputs import atomic_file
from ..store import EventStore, Reader
from .episode import save_grade
from .grading import GradeWeights, pass_at_k, pass_hat_k, pass_hat_k_power, regrade
from .intervals import cluster_interval, mean_interval
from .task import Task

SIMULATOR_BOUNDARIES = frozenset({"setup", "runtime", "world", "grading", "tool", "user",
                                  "coworker"})
"""Failures of the simulator itself (and of simulated people): errors, not the agent's."""


def outcome(row: dict[str, Any]) -> str:
    """graded | agent_failure | error | missing, for a row of ``scheduled_episodes``."""
    if row.get("status") in (None, "completed") and row.get("score") is not None:
        return "graded"
    if row.get("status") == "failed":
        return "agent_failure" if row.get("failure_boundary") == "agent" else "error"
    return "missing"


def _value(row: dict[str, Any], kind: str, key: str) -> float:
    """A scheduled episode's value for ``key`` (``pass_rate``: 1 if it passed): 0 unless it
    was graded (invariant 9)."""
    if kind != "graded":
        return 0.0
    return (1.0 if row["passed"] else 0.0) if key == "pass_rate" else float(row[key])


def _stats(rows: list[dict[str, Any]], k: int | None) -> dict[str, Any]:
    """Over every scheduled episode: one that failed at the agent boundary, that failed in
    the simulator or that never ran scores 0 and does not pass (invariant 9)."""
    by_task: dict[str, list[bool]] = defaultdict(list)
    kinds = [outcome(r) for r in rows]
    graded = [r for r, o in zip(rows, kinds, strict=True) if o == "graded"]
    for r, o in zip(rows, kinds, strict=True):
        by_task[r["task_id"]].append(o == "graded" and bool(r["passed"]))
    kk = k or min(len(v) for v in by_task.values())
    usable = {t: v for t, v in by_task.items() if len(v) >= kk}

    def over_all(key: str) -> float:
        return round(mean(_value(r, o, key) for r, o in zip(rows, kinds, strict=True)), 4)

    def k_mean(fn: Any) -> float | None:
        return round(mean(fn(len(v), sum(v), kk) for v in usable.values()), 4) if usable \
            else None

    def ci(key: str) -> tuple[float, float] | None:  # resampling tasks with their trials
        sums: dict[str, float] = defaultdict(float)
        counts: dict[str, int] = defaultdict(int)
        for r, o in zip(rows, kinds, strict=True):
            sums[r["task_id"]] += _value(r, o, key)
            counts[r["task_id"]] += 1
        order = sorted(sums)
        return cluster_interval([sums[t] for t in order], [counts[t] for t in order])

    def k_ci(fn: Any) -> tuple[float, float] | None:
        return mean_interval([fn(len(v), sum(v), kk) for _, v in sorted(usable.items())])

    return {
        "episodes": len(rows),
        "graded": len(graded),
        "agent_failures": kinds.count("agent_failure"),
        "errors": kinds.count("error"),
        "missing": kinds.count("missing"),
        "tasks": len(by_task),
        "score": over_all("score"),
        "completion": over_all("completion"),
        "safety": round(mean(r["safety"] for r in graded), 4) if graded else None,
        "safety_violations": sum(1 for r in graded if r["safety"] < 1.0),
        "robustness": over_all("robustness"),
        "pass_rate": over_all("pass_rate"),
        "k": kk,
        "pass_at_k": k_mean(pass_at_k),
        "pass_hat_k": k_mean(pass_hat_k),
        "pass_hat_k_power": k_mean(pass_hat_k_power),
        "ci95": {"score": ci("score"), "completion": ci("completion"),
                 "pass_rate": ci("pass_rate"), "pass_at_k": k_ci(pass_at_k),
                 "pass_hat_k": k_ci(pass_hat_k)},
    }


Sets = dict[str, frozenset[str]]
"""Named sets of task ids (the benchmark, synthesized held-out tasks, training tasks)."""


def task_sets(named: dict[str, list[Task]], run_specs: dict[str, str]) -> Sets:
    """Which of a run's tasks (``Reader.task_specs``: id -> spec) belong to each named set
    of tasks: by id, or by content (a renamed copy of a set's task is still in the set)."""
    hashes = {tid: Task.model_validate_json(spec).content_hash()
              for tid, spec in run_specs.items()}
    out: Sets = {}
    for name, tasks in named.items():
        ids, contents = {t.id for t in tasks}, {t.content_hash() for t in tasks}
        out[name] = frozenset(tid for tid, h in hashes.items() if tid in ids or h in contents)
    return out


def _groups(rows: list[dict[str, Any]], sets: Sets | None) -> dict[str, dict[str, list[Any]]]:
    fam: dict[str, list[dict[str, Any]]] = defaultdict(list)
    cap: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_set: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        fam[r["family"]].append(r)
        for c in r["capabilities"]:
            cap[c].append(r)
        for name, ids in (sets or {}).items():
            if r["task_id"] in ids:
                by_set[name].append(r)
    return {"by_family": dict(sorted(fam.items())), "by_capability": dict(sorted(cap.items())),
            "by_set": {n: by_set[n] for n in (sets or {}) if by_set.get(n)}}


def summarize(rows: list[dict[str, Any]], k: int | None = None,
              sets: Sets | None = None) -> dict[str, Any]:
    """Aggregate a run's scheduled episodes (from ``Reader.scheduled_episodes``) overall, by
    family, by capability and by named set of tasks. pass@k and both pass^k estimators
    (``pass_hat_k``: C(c,k)/C(n,k), as tau2-bench; ``pass_hat_k_power``: (c/n)^k, as
    Claw-Eval) are computed per task over its trials, then averaged; ``ci95`` holds 95%
    bootstrap intervals (tasks resampled with their trials)."""
    if not rows:
        return {"overall": None, "by_family": {}, "by_capability": {}, "by_set": {}}
    return {"overall": _stats(rows, k),
            **{g: {n: _stats(v, k) for n, v in items.items()}
               for g, items in _groups(rows, sets).items()}}


def _per_task(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Each task's mean over its scheduled trials (an unscored episode counts 0)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        acc[r["task_id"]].append(_value(r, outcome(r), key))
    return {t: mean(v) for t, v in acc.items()}


def paired(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """B - A over the tasks both ran: the mean per-task difference of score, completion and
    pass rate, each with its 95% bootstrap interval (tasks resampled in pairs)."""
    out: dict[str, Any] = {}
    common: list[str] = []
    for key in ("score", "completion", "pass_rate"):
        x, y = _per_task(a, key), _per_task(b, key)
        common = sorted(set(x) & set(y))
        diffs = [y[t] - x[t] for t in common]
        out[f"{key}_delta"] = round(mean(diffs), 4) if diffs else None
        out[f"{key}_delta_ci95"] = mean_interval(diffs)
    ta, tb = {r["task_id"] for r in a}, {r["task_id"] for r in b}
    out.update(tasks=len(common), only_a=len(ta - tb), only_b=len(tb - ta),
               episodes_a=len(a), episodes_b=len(b))
    return out


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]],
            sets: Sets | None = None) -> dict[str, Any]:
    """Run B against run A (B - A), paired by task: overall, per family and per set."""
    sa, sb = summarize(a, sets=sets), summarize(b, sets=sets)
    ga, gb = _groups(a, sets), _groups(b, sets)
    out: dict[str, Any] = {"overall": {"a": sa["overall"], "b": sb["overall"],
                                       **paired(a, b)}}
    for group in ("by_set", "by_family"):
        out[group] = {}
        for name in sorted(set(ga[group]) | set(gb[group])):
            x, y = ga[group].get(name, []), gb[group].get(name, [])
            out[group][name] = {"a": sa[group].get(name), "b": sb[group].get(name),
                                **(paired(x, y) if x and y else {})}
    return out


def chart(summary: dict[str, Any], path: Path, title: str) -> None:
    """Score per family and per capability, with pass@k beside pass^k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [("family", summary["by_family"]), ("capability", summary["by_capability"])]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, (label, data) in zip(axes, groups, strict=True):
        names = list(data)
        xs = range(len(names))
        width = 0.27
        ax.bar([x - width for x in xs], [data[n]["score"] for n in names], width, label="score")
        ax.bar(list(xs), [data[n]["pass_at_k"] or 0 for n in names], width, label="pass@k")
        ax.bar([x + width for x in xs], [data[n]["pass_hat_k"] or 0 for n in names], width,
               label="pass^k")
        ax.set_xticks(list(xs), [n.replace("_", "\n") for n in names], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"by {label}")
        ax.legend(fontsize=8, loc="lower right")
    k = summary["overall"]["k"] if summary["overall"] else "?"
    fig.suptitle(f"{title} (k={k})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as f:
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)


async def regrade_store(store: EventStore, tasks: Iterable[Task] | None = None,
                        run_id: str | None = None,
                        weights: GradeWeights | None = None) -> dict[str, int]:
    """Grade every completed episode again from its events; write the new grades."""
    given = {t.id: t for t in tasks or []}
    counts = {"episodes": 0, "changed": 0, "skipped": 0, "failed": 0}
    await store.flush()
    with Reader(store) as r:
        counts["failed"] = len(r.episodes(run_id, status="failed"))
        specs: dict[str, dict[str, str]] = {}
        for ep in r.episodes(run_id, status="completed"):
            task = given.get(ep.task_id)
            if task is None:
                if ep.run_id not in specs:
                    specs[ep.run_id] = r.task_specs(ep.run_id)
                spec = specs[ep.run_id].get(ep.task_id)
                if spec is None:
                    counts["skipped"] += 1
                    continue
                task = Task.model_validate_json(spec)
            g = regrade(task, list(r.events(ep.episode_id)), weights)
            old = r.grade(ep.episode_id)
            counts["episodes"] += 1
            if old is None or abs(old["score"] - g.score) > 1e-9 or old["passed"] != g.passed:
                counts["changed"] += 1
            await save_grade(store, ep.episode_id, g)
    await store.flush()
    return counts
