"""The composer's output, pinned: 1,000 tasks composed from the example requirements (drawn
plans, plans cut to a length, process paths and the fixed families) hash to a recorded
digest. A change that moves one byte of one task fails here; a change meant to alter what is
composed records the new digest (``COWORKENV_GOLDEN=print``) and says why in its commit."""

from __future__ import annotations

import hashlib
import json
import os
import random
import zlib
from pathlib import Path

from coworkenv.synth import FAMILIES, load_requirement
from coworkenv.synth.compose import compose

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "44b85ac56b5b51a39129f62dee2aa71aecd624cc5654ad4a9044583bf92a0ed4"


def composed(n: int = 1000) -> list[dict[str, object]]:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    procs = [load_requirement(p) for p in sorted((ROOT / "examples/processes").glob("*.bpmn"))]
    fams = sorted(FAMILIES)
    out: list[dict[str, object]] = []
    for i in range(n):
        rng = random.Random(zlib.crc32(f"golden:{i}".encode()))
        kind = i % 10
        if kind < 6:
            req = reqs[i % len(reqs)]
            out.append(compose(req, rng, f"{req.id}-{i:05d}"))
        elif kind < 8:
            req = reqs[i % len(reqs)]
            out.append(compose(req, rng, f"{req.id}-{i:05d}", stages=(2, 5)))
        elif kind == 8:
            req = procs[i % len(procs)]
            out.append(compose(req, rng, f"{req.id}-{i:05d}"))
        else:
            fam = FAMILIES[fams[i % len(fams)]]
            req = reqs[i % len(reqs)]
            out.append(fam.build(req, rng, f"{req.id}-{i:05d}"))
    return out


def digest(specs: list[dict[str, object]]) -> str:
    h = hashlib.sha256()
    for spec in specs:
        h.update(json.dumps(spec, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def test_a_thousand_composed_tasks_are_byte_identical_to_the_recorded_ones() -> None:
    got = digest(composed())
    if os.environ.get("COWORKENV_GOLDEN") == "print":
        print(got)
    assert got == DIGEST


def test_a_thousand_composed_tasks_read_as_a_person_wrote_them() -> None:
    """The realism report (``OUT.report.json``'s ``realism``) on the pinned tasks: no task
    number, id or counted placeholder in a name, a title or the instruction; no figure in a
    document about something else; openings and sentence frames varied."""
    from coworkenv.synth.realism import realism

    r = realism(composed())
    assert r["counters_in_names"] == 0, r["counters_in_names_examples"]
    assert r["figures_in_other_subject_docs"] == 0, r["figures_in_other_subject_docs_examples"]
    assert r["openings"]["distinct"] >= 160, r["openings"]
    assert r["sentence_frames"]["commonest_share"] < 0.03, r["sentence_frames"]


def test_the_realism_report_finds_counters_and_misplaced_figures() -> None:
    from coworkenv.synth.realism import realism

    spec = {"id": "ops-00042", "instruction": "Book \"Vendor check-in\" and file it in the "
            "q-00042-3 queue. Use figure 7.",
            "seed": {"calendar": [{"title": "Vendor check-in 00042"}],
                     "channels": [{"id": "product-00042", "name": "product-00042"}],
                     "docs": [{"id": "d1", "title": "Security policy (team copy)",
                               "content": "Notes. Figures: $8,270"},
                              {"id": "d2", "title": "Weekly tracker", "content": "x"}]},
            "reference": [{"kind": "tool", "tool": "docs_edit",
                           "args": {"doc_id": "d2", "append": "Summary: $8,270"}}],
            "plan": {"figures": [{"name": "consulting spend", "text": "$8,270"}]}}
    r = realism([spec])
    assert r["counters_in_names"] == 4, r  # the title, the channel (id, name), the instruction
    assert r["figures_in_other_subject_docs"] == 1, r  # (the tracker is about anything)
    assert "Security policy" in r["figures_in_other_subject_docs_examples"][0]
