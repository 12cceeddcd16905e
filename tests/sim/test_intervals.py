"""Evaluation intervals: the task is the unit resampled, comparisons are paired by task, and
a task set is recognised by id or by content."""

from __future__ import annotations

from typing import Any

from coworkenv.sim import builtin_tasks
from coworkenv.sim.intervals import cluster_interval, mean_interval
from coworkenv.sim.report import compare, summarize, task_sets


def _rows(scores: dict[str, list[float]], family: str = "f") -> list[dict[str, Any]]:
    return [{"task_id": t, "trial": i, "family": family, "capabilities": ["tool_coordination"],
             "status": "completed", "failure_boundary": None, "score": s, "completion": s,
             "safety": 1.0, "robustness": 1.0, "passed": s >= 1.0}
            for t, v in scores.items() for i, s in enumerate(v)]


def test_interval_holds_the_estimate_is_seeded_and_narrows_with_tasks() -> None:
    few = [0.0, 1.0, 0.5, 0.25, 0.75]
    many = few * 20
    a = mean_interval(few)
    assert a is not None and a == mean_interval(few)  # seeded: the same rows, the same interval
    assert a[0] <= sum(few) / len(few) <= a[1]
    b = mean_interval(many)
    assert b is not None and (b[1] - b[0]) < (a[1] - a[0]) / 2
    assert mean_interval([0.4] * 30) == (0.4, 0.4)
    assert mean_interval([]) is None and mean_interval([0.3]) == (0.3, 0.3)


def test_trials_of_one_task_are_resampled_together() -> None:
    """Ten tasks of three identical trials each are ten observations, not thirty: their
    interval is as wide as the ten per-task means alone give."""
    per_task = [float(i % 2) for i in range(10)]
    clustered = cluster_interval([3 * v for v in per_task], [3] * 10)
    assert clustered == mean_interval(per_task)
    s = summarize(_rows({f"t{i}": [v] * 3 for i, v in enumerate(per_task)}))["overall"]
    assert s["ci95"]["score"] == clustered and s["score"] == 0.5
    assert s["ci95"]["pass_at_k"] == clustered  # all trials alike: pass@3 is the pass rate


def test_paired_difference_sees_a_constant_gain_that_unpaired_scores_hide() -> None:
    base = {f"t{i}": [i / 20] * 3 for i in range(20)}  # tasks of every difficulty
    better = {t: [min(1.0, v + 0.05) for v in s] for t, s in base.items()}
    d = compare(_rows(base), _rows(better))["overall"]
    assert d["tasks"] == 20 and d["score_delta"] > 0
    lo, hi = d["score_delta_ci95"]
    assert 0 < lo <= d["score_delta"] <= hi  # paired: clearly above zero
    a, b = d["a"]["ci95"]["score"], d["b"]["ci95"]["score"]
    assert a[1] > b[0]  # the two unpaired intervals overlap
    same = compare(_rows(base), _rows(base))["overall"]
    assert same["score_delta"] == 0 and same["score_delta_ci95"] == (0.0, 0.0)


def test_sets_are_matched_by_id_or_by_content() -> None:
    tasks = builtin_tasks()[:4]
    renamed = tasks[0].model_copy(update={"id": "copy-of-first", "family": "other"})
    specs = {t.id: t.model_dump_json() for t in [*tasks[1:], renamed]}
    member = task_sets({"bench": tasks[:2]}, specs)["bench"]
    assert member == {"copy-of-first", tasks[1].id}
    rows = _rows({"copy-of-first": [1.0], tasks[1].id: [0.0], tasks[2].id: [1.0]})
    s = summarize(rows, sets={"bench": member})
    assert s["by_set"]["bench"]["tasks"] == 2 and s["by_set"]["bench"]["score"] == 0.5
    assert renamed.content_hash() == tasks[0].content_hash() != tasks[1].content_hash()
