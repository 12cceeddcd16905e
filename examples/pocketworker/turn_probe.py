"""What does a model do next, one turn at a time? Probes cut from recorded oracle episodes.

Whole-episode evaluation (``coworkenv eval``) is the measure of a checkpoint, but on CPU it
takes hours for a benchmark and says little while a small model still fails every task. This
probe asks narrow questions cheaply, with contexts cut from an oracle run on the evaluation
tasks (never trained on), greedy decoding, one turn, the chat template ``train sft`` trains
with:

- ``--contexts recovery`` (default): each context ends at the ``not_found`` a slipped call (a
  wrong name) got. Does the model look the person up (``directory_search``), repeat the
  failed call, or do something else? Record the run with ``--slips 1``:

    coworkenv run --tasks examples/benchmark --agent oracle --slips 1 \\
        --tools reference,directory_search --db probe.db --run-id probe
    python examples/pocketworker/turn_probe.py --db probe.db \\
        --model base=.cache/models/SmolLM2-135M-Instruct.Q4_1-hf --model sft=ckpt/sft

- ``--contexts steps``: a context before every action of the oracle's solution (the
  conversation so far, the oracle's own turns included). Does the model call the tool the
  oracle called next, another tool, or none? This is how far a checkpoint follows the
  hand-written tasks' plans step by step, even when it finishes none of them. Record the run
  without slips (``--slips 0``); ``--limit N`` keeps N contexts spread over the episodes.

- ``--contexts people``: the contexts of ``steps`` whose oracle action names a person of the
  task's directory (a recipient, an attendee, an owner). Does the model name the person the
  oracle named, another person of this company, someone who is not in it (a name recalled from
  training, a display name for an id), or no one? Give it room to write the argument
  (``--max-new-tokens 48``).

Prints JSON: per model the share of probes of each outcome with a 95% bootstrap interval, and
for each model after the first the paired difference in the share of the key outcome (a
lookup; the oracle's tool).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OUTCOMES = ("lookup", "repeat", "same_tool_other_args", "other_tool", "no_call")
STEP_OUTCOMES = ("oracle_tool", "other_tool", "no_call")
PEOPLE_OUTCOMES = ("oracle_person", "other_person", "unknown_person", "no_person", "no_call")
KEY = {"recovery": "lookup", "steps": "oracle_tool", "people": "oracle_person"}
PERSON_KEYS = ("to", "person", "people", "attendees", "owner", "assignee", "new_owner",
               "recipients", "cc", "members", "approver", "user")
"""Tool arguments that name people (a person id, or their email)."""


def _episodes(db: Path) -> Iterator[tuple[str, list[Any]]]:
    """(task id, events) of each graded episode in the store, each read once."""
    from coworkenv.store import Reader

    with Reader(db) as r:
        for g in r.graded_episodes(None):
            yield g["task_id"], list(r.events(g["episode_id"]))


def probes(db: Path) -> list[dict[str, Any]]:
    """One context per episode that slipped: its conversation up to and including the first
    ``not_found`` a slipped call got, the tools it offered, and the failed call."""
    from coworkenv.agents.chat import agent_view, slipped_turns
    from coworkenv.training.export import _tools_of

    out = []
    for task_id, events in _episodes(db):
        messages = agent_view(events)
        slips = slipped_turns(events, messages)
        if not slips:
            continue
        at = next(i for i in range(slips[0] + 1, len(messages))
                  if messages[i]["role"] == "tool" and '"not_found"' in messages[i]["content"])
        failed = messages[at - 1]["tool_calls"][0]["function"]
        out.append({"task_id": task_id, "messages": messages[: at + 1],
                    "tools": _tools_of(events),
                    "failed": [failed["name"], json.loads(failed["arguments"])]})
    return out


def _steps(task_id: str, events: list[Any]) -> list[dict[str, Any]]:
    """One context before each action of an oracle episode: the conversation up to that
    assistant turn, the tools offered, and the tool the oracle called (``[name, arguments]``)."""
    from coworkenv.agents.chat import agent_view
    from coworkenv.training.export import _tools_of

    messages, tools = agent_view(events), _tools_of(events)
    out = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and m.get("tool_calls"):
            fn = m["tool_calls"][0]["function"]
            out.append({"task_id": task_id, "messages": messages[:i], "tools": tools,
                        "expected": [fn["name"], json.loads(fn["arguments"] or "{}")]})
    return out


def step_probes(db: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """One context before each action of each recorded oracle episode (:func:`_steps`). With
    ``limit``, that many spread evenly over them."""
    return _spread([c for task_id, events in _episodes(db) for c in _steps(task_id, events)],
                   limit)


def person_probes(db: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The step contexts whose oracle action names a person of the task's directory, each with
    the people it named and the directory's ids (``people``)."""
    out = []
    for task_id, events in _episodes(db):
        ids = {str(e.payload["id"]) for e in events if e.kind == "ws.directory.seeded"}
        for p in _steps(task_id, events):
            named = [v for v in _people_named(json.dumps(p["expected"][1])) if _who(v, ids)]
            if named:
                out.append({**p, "people": {"named": sorted({_who(v, ids) for v in named}),
                                            "directory": sorted(ids)}})
    return _spread(out, limit)


def _spread(contexts: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """At most ``limit`` of the contexts, spread evenly over them (all with no limit)."""
    if limit is None or len(contexts) <= limit:
        return contexts
    return [contexts[i * len(contexts) // limit] for i in range(limit)]


def _people_named(text: str) -> list[str]:
    """The values of person arguments in (possibly cut) call JSON: strings and lists of them."""
    keys = "|".join(PERSON_KEYS)
    found = re.findall(rf'"(?:{keys})"\s*:\s*"([^"]*)"', text)
    for inner in re.findall(rf'"(?:{keys})"\s*:\s*\[([^\]]*)', text):
        found += re.findall(r'"([^"]*)"', inner)
    return found


def _who(value: str, ids: set[str]) -> str:
    """The person id a value names in a directory (an id, or an id's email), or ""."""
    v = value.split("@")[0] if "@" in value else value
    return v if v in ids else ""


def people_outcome(text: str, people: dict[str, Any]) -> str:
    """Whom a generated turn's first call names: the oracle's person, another of the company,
    someone not in it, or no one."""
    if "<tool_call>" not in text:
        return "no_call"
    call = text.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0]
    values = _people_named(call)
    if not values:
        return "no_person"
    ids = set(people["directory"])
    who = {_who(v, ids) for v in values}
    if who & set(people["named"]):
        return "oracle_person"
    return "other_person" if who - {""} else "unknown_person"


def first_call(text: str) -> dict[str, Any] | None:
    """The first ``<tool_call>`` of a generated turn, or None."""
    m = re.search(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", text, re.S)
    try:
        call = json.loads(m.group(1)) if m else None
    except json.JSONDecodeError:
        call = None
    return call if isinstance(call, dict) else None


def step_outcome(text: str, expected: list[Any]) -> str:
    """Whether a generated turn calls the tool the oracle called next: the name its first
    ``<tool_call>`` opens with (the call may be cut by ``--max-new-tokens``)."""
    m = re.search(r'<tool_call>\s*\{\s*"name"\s*:\s*"([^"]*)"', text)
    if m is None:
        return "no_call"
    return "oracle_tool" if m.group(1) == expected[0] else "other_tool"


def outcome(text: str, failed: list[Any]) -> str:
    """What a generated turn does after a ``not_found``, from its first ``<tool_call>``."""
    call = first_call(text)
    if call is None:
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
    ap.add_argument("--db", type=Path, required=True,
                    help="an oracle run (with --slips 1 for --contexts recovery)")
    ap.add_argument("--model", action="append", required=True, metavar="NAME=PATH",
                    help="a checkpoint folder (repeat; the first is the baseline)")
    ap.add_argument("--contexts", choices=sorted(KEY), default="recovery",
                    help="recovery: after a not_found; steps: before each oracle action; "
                    "people: before each oracle action that names a person")
    ap.add_argument("--limit", type=int, default=None,
                    help="steps, people: at most this many contexts")
    ap.add_argument("--max-new-tokens", type=int, default=80)
    a = ap.parse_args(argv)
    if a.contexts in ("steps", "people"):
        if a.contexts == "steps":
            contexts, outcomes = step_probes(a.db, a.limit), STEP_OUTCOMES
            judge, wanted = step_outcome, "expected"
        else:
            contexts, outcomes = person_probes(a.db, a.limit), PEOPLE_OUTCOMES
            judge, wanted = people_outcome, "people"
        if not contexts:
            sys.exit(f"{a.db}: no recorded episode with a tool call (record one with `run "
                     "--agent oracle`)")
    else:
        contexts, outcomes, judge, wanted = probes(a.db), OUTCOMES, outcome, "failed"
        if not contexts:
            sys.exit(f"{a.db}: no episode with a slip (record it with `run --agent oracle "
                     "--slips 1 --tools reference,directory_search`)")
    key = KEY[a.contexts]
    report: dict[str, Any] = {"db": str(a.db), "contexts": a.contexts, "probes": len(contexts),
                              "models": {}}
    first: list[float] | None = None
    for spec in a.model:
        name, _, path = spec.partition("=")
        if not path:
            sys.exit(f"--model: expected NAME=PATH, got {spec!r}")
        t0 = time.perf_counter()
        got = [judge(t, p[wanted]) for t, p in
               zip(answer(path, contexts, a.max_new_tokens), contexts, strict=True)]
        m: dict[str, Any] = {"path": path, "seconds": round(time.perf_counter() - t0, 1)}
        for o in outcomes:
            hits = [float(g == o) for g in got]
            m[o] = {"share": round(sum(hits) / len(hits), 3), "ci95": mean_interval(hits)}
        keyed = [float(g == key) for g in got]
        if first is None:
            first = keyed
        else:
            diff = [y - x for x, y in zip(first, keyed, strict=True)]
            m[f"{key}_minus_first"] = {"delta": round(sum(diff) / len(diff), 3),
                                       "ci95": mean_interval(diff)}
        report["models"][name] = m
        print(f"{name}: " + ", ".join(f"{o} {m[o]['share']:.2f}" for o in outcomes),
              file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
