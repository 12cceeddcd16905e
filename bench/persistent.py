"""Persistent seats over a long run: one model-backed agent of finance operations lives
through ``--days`` working days at Northwind (about a dozen requests a day) behind the
package's scripted OpenAI-compatible server, whose scripted model follows a plan per request
(coworkenv.agents.Playbook): on day 1 Tom tells it Acme Supplies' new remittance account and
it notes it (memory_write); on day ``--recall-day`` Ana asks for the account, Tom is away, and
it looks it up (memory_search). Printed as JSON, for each way of cutting the prompt
(``oldest``, ``summarize``):

- the prompt budget and the largest prompt sent (estimated as the agent keeps it, and as the
  server counted it), model calls and context cuts: the prompt stays under the budget however
  long the run;
- whether day 1's request was still in the prompt on the recall day (it was cut), whether the
  note came back from memory, and whether the recall arrival passed;
- arrivals, pass rate, wall seconds and model calls per wall second.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.agents import Playbook
from coworkenv.agents.chat import request_messages
from coworkenv.agents.fake_openai import ScriptedOpenAIServer
from coworkenv.agents.playbook import Messages, Step, last_result
from coworkenv.runtime.simulate import SimulationConfig, simulate
from coworkenv.store import Reader

SIMS = Path(__file__).resolve().parents[1] / "examples" / "simulations"
TOOLS = ["memory_write", "memory_search", "chat_send_dm", "chat_post", "email_send",
         "email_reply", "docs_read", "tickets_comment", "tickets_update"]


def plans() -> list[tuple[str, Any]]:
    def remember(hit: re.Match[str], m: Messages) -> list[Step]:
        return [("memory_write", {"key": "Acme Supplies remittance account",
                                  "text": "Acme Supplies' remittance account ends in 4471"}),
                ("chat_send_dm", {"to": "tom", "text": "Noted: it now ends in 4471."}),
                ("finish", {})]

    def recall(hit: re.Match[str], m: Messages) -> list[Step]:
        def mail(messages: Messages) -> dict[str, Any]:
            notes = last_result(messages).get("result", {}).get("notes") or [{}]
            return {"to": ["ana"], "subject": "INV-2291", "body": "Pay INV-2291 to "
                    f"{notes[0].get('text', 'an account I do not know')}."}
        return [("memory_search", {"query": "Acme Supplies remittance account"}),
                ("email_send", mail), ("finish", {})]

    def invoice(hit: re.Match[str], m: Messages) -> list[Step]:
        ticket, order = hit[1], hit[2]
        return [("docs_read", {"doc_id": order}),
                ("tickets_comment", {"ticket_id": ticket, "text": "Within the purchase order: "
                                     "approved for Friday's payment run, $4,200."}),
                ("tickets_update", {"ticket_id": ticket, "status": "resolved"}),
                ("chat_post", {"channel": "finance", "text": f"{ticket} approved for "
                               "Friday's payment run."}),
                ("finish", {})]

    def per_diem(hit: re.Match[str], m: Messages) -> list[Step]:
        return [("docs_read", {"doc_id": "travel-policy"}),
                ("email_reply", {"email_id": hit[1], "body": "The per diem for Berlin is "
                                 f"EUR 85 per day (travel policy). Re: {hit[1]}."}),
                ("finish", {})]

    return [(r"Acme Supplies changed their remittance account", remember),
            (r"invoice INV-2291", recall),
            (r"Check invoice ticket (T5-\d+) against its purchase order \((D5-\d+)\)", invoice),
            (r"email (E2-\d+) from the travel policy", per_diem)]


def simulation(folder: Path, days: int, recall_day: int, budget: int, trim: str,
               per_hour: float) -> Path:
    shutil.copytree(SIMS / "companies", folder / "companies", dirs_exist_ok=True)
    sim = {"kind": "simulation", "id": f"persistent-{trim}", "company": "northwind",
           "clock": {"start": "2026-03-02T09:00:00-05:00", "days": days}, "seed": 5,
           "tasks": [str(SIMS / "remember-requests.yaml"), str(SIMS / "northwind-requests.yaml")],
           "roster": [{"id": "fin", "person": "finops", "policy": "openai:scripted",
                       "tools": TOOLS, "context": {"budget_tokens": budget, "trim": trim}}],
           "workload": [{"task": "fin-remember-account", "to": "fin", "at": ["d1 09:30"]},
                        {"task": "fin-pay-acme", "to": "fin", "at": [f"d{recall_day} 10:00"]},
                        {"tasks": ["fin-invoice", "fin-per-diem"], "to": "fin",
                         "poisson": {"per_hour": per_hour},
                         "requesters": ["ana", "bea", "cole", "omar", "dev"]}],
           "events": [{"kind": "out_of_office", "person": "tom", "from": "d2 09:00",
                       "to": f"d{days} 17:00", "auto_reply": "I'm on leave."}]}
    path = folder / f"{sim['id']}.yaml"
    path.write_text(yaml.safe_dump(sim))
    return path


def one(folder: Path, args: argparse.Namespace, trim: str) -> dict[str, Any]:
    sim = simulation(folder, args.days, args.recall_day, args.budget, trim, args.per_hour)
    with ScriptedOpenAIServer(responder=Playbook(plans()), count_tokens=True, keep=4) as srv:
        t0 = time.perf_counter()
        r = simulate(SimulationConfig(sim, db=folder / f"{trim}.db", run_id=trim,
                                      base_url=srv.base_url, model_concurrency=1))
        wall = time.perf_counter() - t0
    recall = next(o for o in r.outcomes if o.template == "fin-pay-acme")
    with Reader(folder / f"{trim}.db") as rd:
        calls = [e for e in rd.events(f"{trim}:@simulation")
                 if e.kind in ("agent.model_call", "agent.context_cut")]
    model = [e for e in calls if e.kind == "agent.model_call"]
    prompts = request_messages([e.payload for e in model])  # (each call's prompt, whole)
    on_recall = [json.dumps(p) for e, p in zip(model, prompts, strict=True)
                 if recall.arrived <= e.sim_time <= recall.finished]
    held = any("Acme Supplies changed their remittance account" in p for p in on_recall)
    found = any('"memory_search"' in p and "ends in 4471" in p for p in on_recall)
    use = r.model_use["fin"]
    return {"trim": trim, "budget_tokens": args.budget,
            "largest_prompt_estimate": max(e.payload["prompt_estimate"] for e in model),
            "largest_prompt_server": use["prompt_max"],
            "under_budget": max(e.payload["prompt_estimate"] for e in model) <= args.budget,
            "model_calls": use["calls"], "summaries": use["summaries"],
            "context_cuts": sum(e.kind == "agent.context_cut" for e in calls),
            "day1_request_in_recall_prompt": held, "note_found_in_memory": found,
            "recall_passed": recall.passed, "recall_day": args.recall_day,
            "arrivals": len(r.outcomes), "pass_rate": round(r.pass_rate, 4),
            "wall_s": round(wall, 2), "calls_per_s": round(use["calls"] / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=int, default=20)
    ap.add_argument("--recall-day", type=int, default=15)
    ap.add_argument("--budget", type=int, default=8000)
    ap.add_argument("--per-hour", type=float, default=0.3, help="requests per working hour "
                    "per requester (five requesters)")
    ap.add_argument("--trims", default="oldest,summarize", help="ways of cutting the prompt "
                    "to run, comma-separated")
    args = ap.parse_args()
    if not 1 < args.recall_day <= args.days:
        ap.error("--recall-day: a day after the first, within --days")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one(Path(tmp), args, trim) for trim in args.trims.split(",")]
    print(json.dumps({"benchmark": "persistent", "days": args.days, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
