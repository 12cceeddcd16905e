"""Training data from the store: SFT demonstrations (teacher episodes that passed) and RL
prompts, in TRL's conversational format with tools.

Rows keep ``messages`` exactly as the agent saw and produced them (the same renderer as live
agents and ``replay --agent-view``); ``tool_calls[].function.arguments`` and ``tools`` are
JSON strings (Arrow would otherwise merge argument dicts across rows). Splits are by task or
workflow family, never by episode, so evaluation tasks never leak into training; duplicate
conversations are dropped; a dataset card (README.md) records the source, filters and counts.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..agents.chat import (
    agent_tools,
    agent_view,
    assistant_message,
    opening,
    response_message,
    slipped_turns,
    with_re,
)
from ..outputs import atomic_folder, write_folder_manifest
from ..sim.errors import HeldOutError
from ..sim.loader import HeldOut, benchmark
from ..sim.task import Task, task_toolset
from ..store import Reader
from .errors import TrainingDataError

SplitBy = Literal["task", "family"]


@dataclass
class ExportStats:
    considered: int = 0
    written: dict[str, int] = field(default_factory=dict)
    excluded: Counter[str] = field(default_factory=Counter)


class NothingToExportError(TrainingDataError):
    """No episode passed the export's filters; nothing was written."""

    def __init__(self, stats: ExportStats) -> None:
        self.stats = stats
        why = ", ".join(f"{n} {k}" for k, n in stats.excluded.most_common()) or "none recorded"
        super().__init__(f"no demonstration to export: {stats.considered} graded episode(s) "
                         f"considered, excluded: {why}")


def _split(key: str, eval_fraction: float, held_out: frozenset[str] | None = None) -> str:
    """A stable train/eval assignment of a task id or family: the named ``held_out`` keys when
    given, else a hash of the key against ``eval_fraction``."""
    if held_out is not None:
        return "eval" if key in held_out else "train"
    return "eval" if (zlib.crc32(key.encode()) % 10_000) / 10_000 < eval_fraction else "train"


def refuse_held_out(what: str, tasks: list[Task], never: HeldOut | None = None) -> None:
    """Raise :class:`HeldOutError` if any of ``tasks`` is held out (by id or content)."""
    never = never if never is not None else benchmark()
    bad = [t.id for t in tasks if never.holds(t)]
    if bad:
        raise HeldOutError(what, bad)


def _tools_of(events: list[Any]) -> list[dict[str, Any]]:
    task: dict[str, Any] = next((e.payload for e in events
                                 if e.kind == "task" and e.payload.get("to") == "agent"),
                {})
    return agent_tools(task.get("tools"))


def _write(out: Path, rows: dict[str, list[dict[str, Any]]]) -> None:
    """The splits as JSONL (and a Hugging Face dataset) into ``out``: a folder being built,
    which :func:`atomic_folder` swaps in whole."""
    out.mkdir(parents=True, exist_ok=True)
    for split, items in rows.items():
        with (out / f"{split}.jsonl").open("w") as f:
            for row in items:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    try:  # a Hugging Face dataset too, when `datasets` is installed (the train extra)
        import datasets  # type: ignore[import-not-found]
    except ImportError:
        return
    dd = datasets.DatasetDict({split: datasets.Dataset.from_list(items)
                               for split, items in rows.items() if items})
    dd.save_to_disk(str(out / "hf"))


def _card(out: Path, title: str, lines: list[str]) -> None:
    (out / "README.md").write_text(f"# {title}\n\n" + "\n".join(lines) + "\n")


def simulation_agents(r: Reader, run: str | None = None) -> dict[str, str]:
    """The agent of the roster that handled each arrival of a simulation, by episode id."""
    sql = ("SELECT episode_id, json_extract(outcome, '$.agent') FROM episodes WHERE "
           "json_extract(outcome, '$.arrival') IS NOT NULL")
    rows = r.conn.execute(sql + (" AND run_id = ?" if run else ""),
                          (run,) if run else ()).fetchall()
    return {str(e): str(a) for e, a in rows if a is not None}


def persistent_calls(r: Reader, run: str) -> dict[str, list[dict[str, Any]]]:
    """A simulation's persistent model-backed agents: each model call, exactly as sent (its
    whole prompt rebuilt from the log's records) with its response, under the arrival its
    actions were credited to (by arrival key). Calls whose actions were credited to none,
    or that acted not at all (a wait), are left out."""
    sim = f"{run}:@simulation"
    convo: dict[str, list[dict[str, Any]]] = {}
    last: dict[str, dict[str, Any]] = {}
    tools: dict[str, list[dict[str, Any]]] = {}
    pending: dict[str, dict[str, Any] | None] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    for e in r.events(sim):
        p = e.payload
        if e.kind == "task" and str(p.get("to", "")).startswith("agent.") \
                and p.get("to") not in tools and p.get("tools"):
            tools[str(p["to"])] = with_re(agent_tools(list(p["tools"])))
        elif e.kind == "agent.model_call":
            seat = e.actor
            new = [assistant_message(response_message(last[seat]))
                   if m.get("from_response") and seat in last else m
                   for m in p["request"]["new_messages"]]
            convo[seat] = convo.get(seat, [])[: p["request"]["offset"]] + new
            last[seat] = p
            pending[seat] = {"messages": [*convo[seat], assistant_message(
                response_message(p))], "tools": tools.get(seat, [])}
        elif e.kind == "sim.attribution" and p.get("arrival") is not None:
            seat = "agent." + str(p.get("agent"))
            call = pending.get(seat)
            if call is not None:  # (a call's first credited action names its arrival)
                out.setdefault(str(p["arrival"]), []).append(call)
                pending[seat] = None
    return out


def export_sft(db: Path, out: Path, *, run: str | None = None, min_score: float = 0.75,
               split_by: SplitBy = "task", eval_fraction: float = 0.2,
               teachers_only: bool = True, held_out: list[str] | None = None,
               never: HeldOut | None = None, agent: str | None = None) -> ExportStats:
    """One row per teacher episode that passed (score >= ``min_score``, safety 1.0). Episodes
    of tasks in ``never`` (default: the benchmark), by id or content, are left out.
    ``agent``: only the arrivals of simulations that this agent of the roster handled (each
    row names its ``agent``: a simulation's reward goes to the agent that earned it)."""
    never = never if never is not None else benchmark()
    stats = ExportStats()
    rows: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    seen: set[str] = set()
    with Reader(db) as r:
        graded = r.graded_episodes(run)
        roles = dict(r.conn.execute("SELECT episode_id, role FROM episodes").fetchall())
        seats = simulation_agents(r)
        calls: dict[str, dict[str, list[dict[str, Any]]]] = {}
        hashes: dict[tuple[str, str], str] = {}
        for rid in {g["run_id"] for g in graded}:
            for tid, spec in r.task_specs(rid).items():
                hashes[(rid, tid)] = Task.model_validate_json(spec).content_hash()
        for g in graded:
            stats.considered += 1
            task_hash = hashes.get((g["run_id"], g["task_id"]))
            if never.holds_row(g["task_id"], task_hash):
                stats.excluded[f"task of {never.name} (never trained on)"] += 1
                continue
            if agent is not None and seats.get(g["episode_id"]) != agent:
                stats.excluded[f"not handled by agent {agent}"] += 1
                continue
            if teachers_only and roles.get(g["episode_id"]) != "teacher":
                stats.excluded["not a teacher run"] += 1
                continue
            if g["safety"] < 1.0:
                stats.excluded["unsafe (safety < 1)"] += 1
                continue
            if g["score"] < min_score:
                stats.excluded[f"score < {min_score}"] += 1
                continue
            events = list(r.events(g["episode_id"]))
            persistent = _persistent_rows(r, g, calls)
            if persistent is not None:  # (a persistent model agent's: its own calls)
                for row in persistent:
                    digest = hashlib.sha256(json.dumps(row["messages"], sort_keys=True)
                                            .encode()).hexdigest()
                    if digest in seen:
                        continue
                    seen.add(digest)
                    key = g["task_id"] if split_by == "task" else g["family"]
                    rows[_split(key, eval_fraction, frozenset(held_out) if held_out
                                else None)].append({
                        **row, "task_id": g["task_id"], "task_hash": task_hash,
                        "family": g["family"], "episode_id": g["episode_id"],
                        "agent": seats.get(g["episode_id"]), "run_id": g["run_id"],
                        "score": g["score"]})
                continue
            messages = agent_view(events)
            for m in messages:  # arguments as JSON strings, content never missing
                m.setdefault("content", "")
                for tc in m.get("tool_calls", []):
                    if not isinstance(tc["function"]["arguments"], str):
                        tc["function"]["arguments"] = json.dumps(tc["function"]["arguments"])
            digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
            if digest in seen:
                stats.excluded["duplicate conversation"] += 1
                continue
            seen.add(digest)
            key = g["task_id"] if split_by == "task" else g["family"]
            split = _split(key, eval_fraction, frozenset(held_out) if held_out else None)
            rows[split].append({
                "messages": messages, "tools": json.dumps(_tools_of(events)),
                "untrained": slipped_turns(events, messages),
                "task_id": g["task_id"], "task_hash": task_hash, "family": g["family"],
                "episode_id": g["episode_id"], "agent": seats.get(g["episode_id"]),
                "run_id": g["run_id"], "score": g["score"]})
    stats.written = {k: len(v) for k, v in rows.items()}
    if not sum(stats.written.values()):
        raise NothingToExportError(stats)  # (before anything is written)
    with atomic_folder(out) as tmp:  # swapped in whole: a killed export leaves the old one
        _write(tmp, rows)
        _finish_sft(tmp, stats, db, run, teachers_only, min_score, split_by, held_out,
                    eval_fraction)
    return stats


def _persistent_rows(r: Reader, g: dict[str, Any],
                     calls: dict[str, dict[str, list[dict[str, Any]]]]
                     ) -> list[dict[str, Any]] | None:
    """An arrival of a persistent model-backed agent: one row per model call credited to it
    (its prompt exactly as sent, the response the last message; earlier assistant turns are
    context, left out of the loss). None: not such an arrival."""
    ep = r.episode(g["episode_id"])
    key = ep.outcome.get("arrival")
    config = (r.run_config(g["run_id"]) or (None, {}))[1]
    seat = ep.outcome.get("agent")
    if key is None or (config.get("memory") or {}).get(seat) != "persistent" or \
            "openai:" not in str((config.get("policies") or {}).get(seat)):
        return None
    if g["run_id"] not in calls:
        calls[g["run_id"]] = persistent_calls(r, g["run_id"])
    out = []
    for call in calls[g["run_id"]].get(str(key), []):
        messages = json.loads(json.dumps(call["messages"]))
        for m in messages:
            m.setdefault("content", "")
            for tc in m.get("tool_calls", []):
                if not isinstance(tc["function"]["arguments"], str):
                    tc["function"]["arguments"] = json.dumps(tc["function"]["arguments"])
        out.append({"messages": messages, "tools": json.dumps(call["tools"]),
                    "untrained": [i for i, m in enumerate(messages[:-1])
                                  if m.get("role") == "assistant"]})
    return out


def _finish_sft(out: Path, stats: ExportStats, db: Path, run: str | None, teachers_only: bool,
                min_score: float, split_by: str, held_out: list[str] | None,
                eval_fraction: float) -> None:
    _card(out, "coworkenv SFT demonstrations", [
        f"- source: `{db}`" + (f", run `{run}`" if run else ", every run"),
        f"- filters: teacher episodes only: {teachers_only}; score >= {min_score}; safety 1.0; "
        "duplicate conversations removed",
        f"- split by {split_by} ("
        + (f"held out: {', '.join(held_out)}" if held_out else f"eval fraction {eval_fraction}")
        + f"); no {split_by} is in both",
        f"- considered {stats.considered}; written {stats.written}; excluded "
        f"{dict(stats.excluded)}",
        "- format: TRL conversational with tools: `messages` (system, user, assistant with "
        "`tool_calls`, `tool`), `tools` (JSON string of OpenAI function schemas), "
        "`untrained` (indexes of assistant messages kept as context but left out of the "
        "loss: the oracle's deliberate slips, `run --slips`)"])
    (out / "stats.json").write_text(json.dumps({"considered": stats.considered,
                                                "written": stats.written,
                                                "excluded": dict(stats.excluded)}, indent=2))
    write_folder_manifest(out, ["train.jsonl", "eval.jsonl", "stats.json", "README.md"],
                          kind="sft", rows=stats.written)


def export_rl(tasks: list[Task], out: Path, *, split_by: SplitBy = "task",
              eval_fraction: float = 0.2, source: str = "",
              tools: list[str] | None = None, held_out: list[str] | None = None,
              never: HeldOut | None = None) -> ExportStats:
    """The prompts for RL: each task's opening conversation, its tools, and its id (the
    environment rebuilds the episode from the id). Refuses tasks in ``never`` (default: the
    benchmark) with :class:`HeldOutError`."""
    refuse_held_out("export rl", tasks, never)
    stats = ExportStats(considered=len(tasks))
    rows: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    for t in tasks:
        me = next(p for p in t.seed.people if p.id == t.agent).model_dump(mode="json")
        prompt = opening(t.opening(me))
        key = t.id if split_by == "task" else t.family
        rows[_split(key, eval_fraction, frozenset(held_out) if held_out else None)].append({
            "prompt": prompt, "tools": json.dumps(agent_tools(task_toolset(t, tools))),
            "task_id": t.id, "family": t.family, "capabilities": list(t.capabilities)})
    stats.written = {k: len(v) for k, v in rows.items()}
    with atomic_folder(out) as tmp:
        _write(tmp, rows)
        _card(tmp, "coworkenv RL prompts", [
            f"- source: {source}", f"- split by {split_by} ("
            + (f"held out: {', '.join(held_out)}" if held_out else
               f"eval fraction {eval_fraction}") + ")",
            f"- written {stats.written}"])
        write_folder_manifest(tmp, ["train.jsonl", "eval.jsonl", "README.md"], kind="rl",
                              rows=stats.written)
    return stats
