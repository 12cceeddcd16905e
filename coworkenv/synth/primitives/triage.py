"""The ``triage`` primitive: an inbox with a sender's newsletters and a real email that
mentions the sender."""

from __future__ import annotations

from typing import Any

from ..palette import (
    VENDORS,
)
from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    """A sender's newsletters to label; a colleague's email about the sender is not one."""
    vendor = c.rng.choice(VENDORS)
    news = c.outsider(vendor, "news", "News")
    label = c.rng.choice(["newsletters", "vendor-news", "read-later"])
    subjects = c.rng.sample([f"{vendor} product update", f"{vendor} monthly digest",
                                f"Webinar: getting more from {vendor}",
                                f"{vendor} customer stories"], c.rng.choice([2, 3]))
    ids = [c.email(news, subj, f"{subj}. Read the latest from the {vendor} team. "
                      "Unsubscribe at any time.", f"0{7 + i}:15")
           for i, subj in enumerate(subjects)]
    colleague = c.person()
    c.email(colleague, f"{vendor} renewal", f"Hi, the {vendor} renewal comes up next "
               f"month; shall we discuss? {c.name(colleague)}", "10:05")
    c.buckets["setup"] += [
        {"kind": "tool", "tool": "email_search", "args": {"query": vendor}},
        *({"kind": "tool", "tool": "email_label", "args": {"email_id": e, "add": [label]}}
          for e in ids)]
    c.checks.append({
        "id": c.cid("labelled"), "kind": "sql", "gate": True, "weight": 2,
        "description": f"exactly the {vendor} newsletters carry the label {label}",
        "query": "SELECT email_id FROM email_labels WHERE person = "
                 f"'{c.agent}' AND label = '{label}' ORDER BY email_id",
        "expect": [[e] for e in sorted(ids)]})
    c.goals.append(c.rng.choice([
        f"Label the {vendor} newsletters in my inbox \"{label}\" (only the newsletters).",
        f"Tidy my inbox: the newsletters from {vendor} get the label \"{label}\"."]))


TRIAGE = Primitive(
    "triage", "setup", (frozenset({"email"}),), ("tool_coordination",),
    provides=("an inbox with a sender's newsletters and a real email that mentions the sender"),
    grading=("exactly the newsletters carry the label"),
    build=build)
