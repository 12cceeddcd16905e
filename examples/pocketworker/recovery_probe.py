"""What does a model call right after a ``not_found`` on a wrong name? A one-turn probe.

Whole-episode evaluation (``coworkenv eval``) is the measure of a checkpoint, but on CPU it
takes hours for a benchmark and says little while a small model still fails every task. This
probe asks one narrow question cheaply: given a conversation that ends in the error a wrong
person argument gets, does the model look the person up (``directory_search``), repeat the
failed call, or do something else? Its contexts come from an oracle run with slips on the
evaluation tasks (never trained on), each cut at the first ``not_found`` of a slipped call:

    coworkenv run --tasks examples/benchmark --agent oracle --slips 1 \\
        --tools reference,directory_search --db probe.db --run-id probe
    python examples/pocketworker/recovery_probe.py --db probe.db \\
        --model base=.cache/models/SmolLM2-135M-Instruct.Q4_1-hf --model sft=ckpt/sft

Greedy decoding, one turn, the chat template ``train sft`` trains with. Prints JSON: per model
the share of probes of each outcome with a 95% bootstrap interval, and for each model after
the first the paired difference in the share that looks the person up.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

OUTCOMES = ("lookup", "repeat", "same_tool_other_args", "other_tool", "no_call")


def probes(db: Path) -> list[dict[str, Any]]:
    """One context per episode that slipped: its conversation up to and including the first
    ``not_found`` a slipped call got, the tools it offered, and the failed call."""
    from coworkenv.agents.chat import agent_view, slipped_turns
    from coworkenv.store import Reader
    from coworkenv.training.export import _tools_of

    out = []
    with Reader(db) as r:
        for g in r.graded_episodes(None):
            events = list(r.events(g["episode_id"]))
            messages = agent_view(events)
            slips = slipped_turns(events, messages)
            if not slips:
                continue
            at = next(i for i in range(slips[0] + 1, len(messages))
                      if messages[i]["role"] == "tool" and '"not_found"' in messages[i]["content"])
            failed = messages[at - 1]["tool_calls"][0]["function"]
            out.append({"task_id": g["task_id"], "messages": messages[: at + 1],
                        "tools": _tools_of(events),
                        "failed": [failed["name"], json.loads(failed["arguments"])]})
    return out


def outcome(text: str, failed: list[Any]) -> str:
    """What a generated turn does, from its first ``<tool_call>``."""
    m = re.search(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", text, re.S)
    try:
        call = json.loads(m.group(1)) if m else None
    except json.JSONDecodeError:
        call = None
    if not isinstance(call, dict):
        return "no_call"
    if call.get("name") == "directory_search":
        return "lookup"
    if call.get("name") == failed[0]:
        return "repeat" if call.get("arguments") == failed[1] else "same_tool_other_args"
    return "other_tool"


def answer(path: str, contexts: list[dict[str, Any]], max_new_tokens: int) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen3_instruct_2507_chat_template

    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = qwen3_instruct_2507_chat_template  # (as `train sft` trains)
    lm = AutoModelForCausalLM.from_pretrained(path).eval()
    texts = []
    for p in contexts:
        enc = tok.apply_chat_template(p["messages"], tools=p["tools"], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = lm.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                              pad_token_id=tok.pad_token_id or tok.eos_token_id)
        texts.append(tok.decode(out[0][enc["input_ids"].shape[1]:], skip_special_tokens=False))
    return texts


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from coworkenv.sim.intervals import mean_interval

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, required=True, help="an oracle run with --slips")
    ap.add_argument("--model", action="append", required=True, metavar="NAME=PATH",
                    help="a checkpoint folder (repeat; the first is the baseline)")
    ap.add_argument("--max-new-tokens", type=int, default=80)
    a = ap.parse_args(argv)
    contexts = probes(a.db)
    if not contexts:
        sys.exit(f"{a.db}: no episode with a slip (record it with `run --agent oracle "
                 "--slips 1 --tools reference,directory_search`)")
    report: dict[str, Any] = {"db": str(a.db), "probes": len(contexts), "models": {}}
    first: list[float] | None = None
    for spec in a.model:
        name, _, path = spec.partition("=")
        if not path:
            sys.exit(f"--model: expected NAME=PATH, got {spec!r}")
        t0 = time.perf_counter()
        got = [outcome(t, p["failed"]) for t, p in
               zip(answer(path, contexts, a.max_new_tokens), contexts, strict=True)]
        m: dict[str, Any] = {"path": path, "seconds": round(time.perf_counter() - t0, 1)}
        for o in OUTCOMES:
            hits = [float(g == o) for g in got]
            m[o] = {"share": round(sum(hits) / len(hits), 3), "ci95": mean_interval(hits)}
        lookups = [float(g == "lookup") for g in got]
        if first is None:
            first = lookups
        else:
            diff = [y - x for x, y in zip(first, lookups, strict=True)]
            m["lookup_minus_first"] = {"delta": round(sum(diff) / len(diff), 3),
                                       "ci95": mean_interval(diff)}
        report["models"][name] = m
        print(f"{name}: " + ", ".join(f"{o} {m[o]['share']:.2f}" for o in OUTCOMES),
              file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
