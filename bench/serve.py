"""`coworkenv serve` on the CPU: whole evaluation episodes, batched against prefix-cached.

Real benchmark episodes (``examples/benchmark``, the first ``--episodes`` families' first
task, one trial, the recipe's tools ``reference,directory_search``) played by a model behind
``coworkenv serve`` over HTTP, all episodes at once, in two modes measured side by side in one
run, each building its server the same way inside the timed loop:

- ``batched``: no prefix cache; the waiting requests are generated together (left-padded),
  every prompt computed whole (the server's behaviour on a GPU);
- ``prefix``: a prefix cache (``--prefix-cache-mb``); requests one at a time, each computing
  only the tokens it adds to its conversation's cached prefix (the CPU default).

With ``--repeats R`` the modes alternate (batched, prefix, batched, ...) and medians are
reported. Per mode: wall time of the whole run, model calls, seconds per model call and per
episode, prompt tokens computed and reused; and ``same_outcome``, the share of episodes whose
final workspace state (``state_hash``) and grade are the same in both modes (greedy decoding:
a cache changes the arithmetic's order, rarely a token). Prints one JSON object.

    python bench/serve.py --episodes 4 --max-turns 8 --max-tokens 96
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coworkenv.runtime import RunConfig, run  # noqa: E402
from coworkenv.sim.loader import load_tasks  # noqa: E402


def _tasks(n: int) -> list[Any]:
    """The first task of each of the first ``n`` benchmark families."""
    first: dict[str, Any] = {}
    for t in load_tasks([ROOT / "examples/benchmark"]):
        first.setdefault(t.family, t)
    return list(first.values())[:n]


def _mode(model_path: str, cache_mb: float, tasks: list[Any], args: Any, db: Path,
          run_id: str) -> dict[str, Any]:
    """One run of every task against a fresh server (model loaded, cache empty)."""
    from coworkenv.training.serve import ChatModel, ChatServer

    t0 = time.perf_counter()
    model = ChatModel(model_path, name="bench", device="cpu", prefix_cache_mb=cache_mb)
    with ChatServer(model, max_batch=len(tasks)) as srv:
        result = run(RunConfig(
            tasks, agent="openai:bench", base_url=srv.base_url, db=db, run_id=run_id,
            tools=["reference", "directory_search"], max_turns=args.max_turns,
            max_tokens=args.max_tokens, concurrency=len(tasks), model_concurrency=len(tasks),
            model_timeout=3600))
    wall = time.perf_counter() - t0
    stats = model.prefix_stats()
    cached = model.prefixes is not None
    return {"wall_s": wall, "model_calls": model.calls, "batches": model.batches,
            "episodes": len(result.episodes),
            "s_per_call": wall / max(model.calls, 1), "s_per_episode": wall / len(tasks),
            # (counted by the cache: without one, every prompt is computed whole, padded)
            "prompt_tokens_reused": stats["prefix_tokens_reused"] if cached else None,
            "prompt_tokens_computed": stats["prefix_tokens_computed"] if cached else None,
            "outcomes": {e.task_id: (e.state_hash, e.score, e.completion)
                         for e in result.episodes}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
                    help="checkpoint folder or .gguf (default: the offline SmolLM2-135M)")
    ap.add_argument("--episodes", type=int, default=4, help="benchmark families, a task each")
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--prefix-cache-mb", type=float, default=2048)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    tasks = _tasks(args.episodes)
    modes = {"batched": 0.0, "prefix": args.prefix_cache_mb}
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as d:
        for rep in range(args.repeats):
            for name, mb in modes.items():
                runs[name].append(_mode(args.model, mb, tasks, args, Path(d) / "bench.db",
                                        f"{name}-{rep}"))
                print(f"{name} {rep + 1}/{args.repeats}: {runs[name][-1]['wall_s']:.0f} s, "
                      f"{runs[name][-1]['model_calls']} model calls", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"model": args.model, "episodes": len(tasks),
                           "tasks": [t.id for t in tasks], "max_turns": args.max_turns,
                           "max_tokens": args.max_tokens, "threads": args.threads,
                           "repeats": args.repeats}
    for name, rs in runs.items():
        out[name] = {k: None if rs[0][k] is None else round(statistics.median(r[k] for r in rs), 3)
                     for k in ("wall_s", "model_calls", "batches", "s_per_call", "s_per_episode",
                               "prompt_tokens_reused", "prompt_tokens_computed")}
    b, p = runs["batched"][0]["outcomes"], runs["prefix"][0]["outcomes"]
    out["same_outcome"] = round(sum(b[k] == p.get(k) for k in b) / len(b), 3)
    out["speedup_per_call"] = round(out["batched"]["s_per_call"] / out["prefix"]["s_per_call"], 2)
    out["speedup_wall"] = round(out["batched"]["wall_s"] / out["prefix"]["wall_s"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
