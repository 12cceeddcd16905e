"""Confidence intervals for evaluation figures: a percentile bootstrap over tasks.

Episodes of one task are not independent (its trials share the task's difficulty), so the
unit that is resampled is the task, with all its trials (a cluster bootstrap). A paired
comparison of two runs resamples the tasks both ran and takes the mean per-task difference,
so a task that both runs find hard does not widen the interval of their difference. The
generator is seeded: the same rows give the same interval.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

RESAMPLES = 2000
LEVEL = 0.95


def _percentiles(values: list[float], level: float) -> tuple[float, float]:
    values.sort()
    lo = (1 - level) / 2
    n = len(values)
    return values[int(lo * (n - 1))], values[round((1 - lo) * (n - 1))]


def cluster_interval(sums: Sequence[float], counts: Sequence[int], *,
                     resamples: int = RESAMPLES, level: float = LEVEL,
                     seed: int = 0) -> tuple[float, float] | None:
    """Interval of ``sum(sums) / sum(counts)`` (a mean over episodes) when the clusters
    (tasks, each with the sum of its episodes' values and their count) are resampled."""
    n = len(sums)
    if n == 0 or sum(counts) == 0:
        return None
    if n == 1:
        v = sums[0] / counts[0]
        return v, v
    rng = random.Random(seed)
    stats: list[float] = []
    idx = range(n)
    for _ in range(resamples):
        pick = rng.choices(idx, k=n)
        c = sum(counts[i] for i in pick)
        stats.append(sum(sums[i] for i in pick) / c if c else 0.0)
    a, b = _percentiles(stats, level)
    return round(a, 4), round(b, 4)


def mean_interval(values: Sequence[float], *, resamples: int = RESAMPLES, level: float = LEVEL,
                  seed: int = 0) -> tuple[float, float] | None:
    """Interval of the mean of per-task values (pass@k, pass^k, paired differences)."""
    return cluster_interval(list(values), [1] * len(values), resamples=resamples,
                            level=level, seed=seed)
