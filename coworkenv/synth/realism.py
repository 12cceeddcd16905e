"""Does synthesized text read as a person would write it? Measures over a set of tasks, for
``OUT.report.json`` (``realism``) and the tests:

- ``counters_in_names``: names and titles a person sees (people, channels, documents,
  meetings, queues, tickets, groups, email subjects) and the instruction that carry a task
  number, a lowercase id (``q-00042-3``, ``product-00042``) or a counted placeholder
  (``figure 7``): a model trained on them learns that names are counters;
- ``figures_in_other_subject_docs``: figures written into a document whose title is about
  something else (the consulting spend put into "Security policy (team copy)");
- ``sentence_frames``: the instruction sentences with names, figures, quotes and times taken
  out; how many distinct frames there are, and the share of the commonest;
- ``openings``: the instructions' first three words; how many distinct.

Each finding keeps the task id and the text, so a report says where to look.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_ID = re.compile(r"(?<![\w-])[a-z]+(?:-[a-z]+)*-\d+(?:-[a-z]*\d+)*(?![\w-])")
_COUNTED = re.compile(r"\bfigure \d+\b", re.I)
_MONEY = re.compile(r"\$\d[\d,]*(?:\.\d+)?")
GENERIC = {"report", "sheet", "summary", "notes", "team", "copy", "tracker", "weekly", "open",
           "items", "figures", "figure", "updates", "update", "and", "the", "of", "for", "doc",
           "document", "working", "overview", "draft", "final", "confidential", "total"}
"""Title words that say what kind of document it is, not what it is about."""


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in GENERIC}


def visible_names(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, text) of every name and title a person sees in a task."""
    seed = spec.get("seed") or {}
    out: list[tuple[str, str]] = []
    for kind, keys in (("people", ("name",)), ("channels", ("id", "name")),
                       ("docs", ("title",)), ("calendar", ("title",)),
                       ("queues", ("id", "name")), ("tickets", ("title",)),
                       ("groups", ("name",)), ("emails", ("subject",))):
        for i, row in enumerate(seed.get(kind) or []):
            for k in keys:
                if row.get(k):
                    out.append((f"seed.{kind}[{i}].{k}", str(row[k])))
    for i, step in enumerate(spec.get("reference") or []):
        args = step.get("args") or {}
        for k in ("title", "name", "subject", "channel", "queue"):
            if isinstance(args.get(k), str):
                out.append((f"reference[{i}].args.{k}", args[k]))
    out.append(("instruction", str(spec.get("instruction", ""))))
    return out


def counters(spec: dict[str, Any]) -> list[str]:
    """Names, titles and instruction text of ``spec`` that carry a counter or an id."""
    tid = str(spec.get("id", ""))
    number = tid.rsplit("-", 1)[-1] if tid.rsplit("-", 1)[-1].isdigit() else None
    found = []
    for where, text in visible_names(spec):
        hits = [m.group(0) for m in _ID.finditer(text)] + _COUNTED.findall(text)
        if number and len(number) >= 3 and number in text:
            hits.append(number)
        if hits:
            found.append(f"{where}: {text!r} ({', '.join(dict.fromkeys(hits))})")
    return found


def misplaced_figures(spec: dict[str, Any]) -> list[str]:
    """Figures written into a document about something else: for each document the task
    writes figures into (its seed content, or what the reference adds), every figure whose
    name shares no word with the document's subject (the title's words that are not
    :data:`GENERIC`; a document with none, a tracker say, fits any figure)."""
    names = {f["text"]: f["name"] for f in (spec.get("plan") or {}).get("figures", [])}
    docs = {d["id"]: d for d in (spec.get("seed") or {}).get("docs") or []}
    writes: list[tuple[str, str]] = [(d["id"], str(d.get("content", ""))) for d in docs.values()]
    for step in spec.get("reference") or []:
        if step.get("tool") == "docs_edit":
            a = step.get("args") or {}
            writes.append((str(a.get("doc_id")), f"{a.get('content', '')} {a.get('append', '')}"))
    found = []
    for doc_id, text in writes:
        doc = docs.get(doc_id)
        if doc is None:
            continue
        subject = _words(str(doc.get("title", "")))
        for amount in _MONEY.findall(text):
            name = names.get(amount)
            if name is None or not subject:
                continue
            if not subject & _words(name):
                found.append(f"{name} ({amount}) in {doc.get('title')!r}")
    return found


_FRAME_SUBS = [(re.compile(r"\"[^\"]*\"|'[^']*'"), "Q"), (_MONEY, "$"),
               (re.compile(r"#[\w-]+"), "#C"), (re.compile(r"\b\d[\d:.,]*\b"), "N"),
               (re.compile(r"(?<=[a-z,;:] )[A-Z][\w'-]+(?: [A-Z][\w'-]+)*"), "X")]


def frames(instruction: str) -> list[str]:
    """The instruction's sentences with quotes, figures, channels, numbers and names taken
    out (what is left is the template a sentence was made from)."""
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+", instruction.strip()):
        f = sentence
        for pattern, repl in _FRAME_SUBS:
            f = pattern.sub(repl, f)
        if f:
            out.append(f)
    return out


@dataclass
class Realism:
    """Realism measures, added to task by task."""

    tasks: int = 0
    counter_findings: list[str] = field(default_factory=list)
    figure_findings: list[str] = field(default_factory=list)
    frame_counts: Counter[str] = field(default_factory=Counter)
    openings: Counter[str] = field(default_factory=Counter)

    def add(self, spec: dict[str, Any]) -> None:
        self.tasks += 1
        tid = spec.get("id", "?")
        self.counter_findings += [f"{tid}: {x}" for x in counters(spec)]
        self.figure_findings += [f"{tid}: {x}" for x in misplaced_figures(spec)]
        instruction = str(spec.get("instruction", ""))
        self.frame_counts.update(frames(instruction))
        self.openings[" ".join(instruction.split()[:3]).lower()] += 1

    def to_json(self) -> dict[str, Any]:
        sentences = sum(self.frame_counts.values())
        top = self.frame_counts.most_common(1)
        return {
            "tasks": self.tasks,
            "counters_in_names": len(self.counter_findings),
            "counters_in_names_examples": self.counter_findings[:5],
            "figures_in_other_subject_docs": len(self.figure_findings),
            "figures_in_other_subject_docs_examples": self.figure_findings[:5],
            "sentence_frames": {
                "sentences": sentences, "distinct": len(self.frame_counts),
                "commonest_share": round(top[0][1] / sentences, 4) if top else 0.0,
                "commonest": top[0][0] if top else ""},
            "openings": {"distinct": len(self.openings),
                         "distinct_share": round(len(self.openings) / max(1, self.tasks), 4),
                         "commonest": dict(self.openings.most_common(3))}}


def realism(specs: list[dict[str, Any]]) -> dict[str, Any]:
    """The realism measures of ``specs`` (see the module's docstring)."""
    r = Realism()
    for spec in specs:
        r.add(spec)
    return r.to_json()
