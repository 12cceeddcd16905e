"""How far are the training tasks from the evaluation tasks? Compare their reference plans.

A model trained on synthesized tasks carries over to hand-written ones only as far as the
demonstrations show the actions and sequences the hand-written tasks need. This compares the
reference solutions of two task sets (no episode is run, no model is loaded):

- plan length: actions per task (tool calls, messages, waits; ``finish`` not counted), as
  quantiles, and the share of evaluation tasks whose length the training set covers (some
  training task is within one action of it);
- tools: the share of the evaluation set's tool calls whose tool the training set ever calls,
  and the tools it never shows;
- transitions: the share of the evaluation set's consecutive action pairs (``wait`` counted as
  an action) that appear somewhere in the training set; and the same for the first action;
- argument keys: the share of the evaluation set's tool calls whose tool the training set calls
  with exactly the same argument names, and per tool the names it never shows.

    python examples/pocketworker/coverage.py --train W/synth.jsonl --eval examples/benchmark

Several ``--train`` files or folders are one set (e.g. short and long synthesized tasks).
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any


def actions(task: Any) -> list[str]:
    """A task's reference solution as action names: the tool, ``message`` or ``wait``."""
    return [s.tool if s.kind == "tool" else s.kind for s in task.reference if s.kind != "finish"]


def call_shapes(task: Any) -> list[tuple[str, tuple[str, ...]]]:
    """A task's reference tool calls as (tool, its argument names, sorted)."""
    return [(s.tool, tuple(sorted(s.args))) for s in task.reference if s.kind == "tool"]


def compare_arguments(train: list[tuple[str, tuple[str, ...]]],
                      evaluated: list[tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    """Coverage of ``evaluated``'s tool calls' argument names by ``train``'s (call shapes)."""
    shown = set(train)
    names: dict[str, set[str]] = {}
    for tool, keys in train:
        names.setdefault(tool, set()).update(keys)
    never: dict[str, set[str]] = {}
    for tool, keys in evaluated:
        if missing := set(keys) - names.get(tool, set()):
            never.setdefault(tool, set()).update(missing)
    total = len(evaluated)
    return {"argument_keys_covered": round(sum(c in shown for c in evaluated) / total, 3)
            if total else 1.0,
            "argument_keys_never_shown": {t: sorted(k) for t, k in sorted(never.items())}}


def profile(plans: list[list[str]]) -> dict[str, Any]:
    lengths = [len(p) for p in plans]
    q = statistics.quantiles(lengths, n=10) if len(lengths) > 1 else lengths * 9
    return {"tasks": len(plans), "actions_median": statistics.median(lengths),
            "actions_p10": q[0], "actions_p90": q[-1], "actions_min": min(lengths),
            "actions_max": max(lengths)}


def compare(train: list[list[str]], evaluated: list[list[str]]) -> dict[str, Any]:
    """Coverage of ``evaluated``'s plans by ``train``'s (both lists of action-name lists)."""
    tools = Counter(a for p in train for a in p)
    pairs = {(a, b) for p in train for a, b in pairwise(p)}
    firsts = {p[0] for p in train if p}
    lengths = sorted({len(p) for p in train})
    wanted = Counter(a for p in evaluated for a in p)
    eval_pairs = [(a, b) for p in evaluated for a, b in pairwise(p)]

    def share(hits: int, total: int) -> float:
        return round(hits / total, 3) if total else 1.0

    return {
        "train": profile(train), "eval": profile(evaluated),
        "length_covered": share(sum(any(abs(len(p) - n) <= 1 for n in lengths)
                                    for p in evaluated), len(evaluated)),
        "tool_calls_covered": share(sum(c for a, c in wanted.items() if a in tools),
                                    sum(wanted.values())),
        "tools_never_shown": sorted(a for a in wanted if a not in tools),
        "transitions_covered": share(sum(pr in pairs for pr in eval_pairs), len(eval_pairs)),
        "first_action_covered": share(sum(bool(p) and p[0] in firsts for p in evaluated),
                                      len(evaluated)),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from coworkenv.sim import load_tasks

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=Path, action="append", required=True,
                    help="training task file or folder (repeat: one set)")
    ap.add_argument("--eval", type=Path, action="append", required=True,
                    help="evaluation task file or folder (repeat: one set)")
    a = ap.parse_args(argv)
    train, evaluated = load_tasks(a.train), load_tasks(a.eval)
    report = {"train_paths": [str(p) for p in a.train], "eval_paths": [str(p) for p in a.eval],
              **compare([actions(t) for t in train], [actions(t) for t in evaluated]),
              **compare_arguments([c for t in train for c in call_shapes(t)],
                                  [c for t in evaluated for c in call_shapes(t)])}
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
