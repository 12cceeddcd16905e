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
DIGEST = "beedf983e1cda57943bc70d5e2e853bcd52c9eed53c6d6618a5dca3541cdc09e"


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
