"""Fresh people for each synthesized task.

Every task a requirement yields happens in the same company, so the same ten colleagues (and the
same user) appear in thousands of demonstrations, and a model trained on them learns to recall
those names instead of reading who a task is about: on hand-written tasks it writes to people of
the training company who do not exist there. :func:`fresh_people` gives one task its own
colleagues: the company's directory is written into the task, and each person of it (the agent
and outside contacts excepted) gets a name drawn for this task, replaced everywhere the task
says it (ids, display and first names, emails, instructions, replies, checks)."""

from __future__ import annotations

import copy
import random
import re
from typing import Any

from ..agents.openai_agent import strings_in
from ..sim.loader import _merge_company

FIRST_NAMES = (
    "Abena", "Adil", "Aiko", "Alba", "Alma", "Amara", "Anders", "Anouk", "Arjun", "Astrid",
    "Aurelio", "Ayla", "Bao", "Beatriz", "Bilal", "Bram", "Calla", "Camille", "Caspian", "Cato",
    "Chidi", "Cleo", "Dalia", "Dario", "Darius", "Delphine", "Dev", "Dimitri", "Ebba", "Efua",
    "Elif", "Emeka", "Enzo", "Esme", "Ezra", "Farah", "Femi", "Fenna", "Filipa", "Freya", "Gael",
    "Giulia", "Goran", "Hakon", "Halima", "Ibrahim", "Ilse", "Imani", "Isak",
    "Ivo", "Jasper", "Jin", "Joaquin", "Kaito", "Kamala", "Karim", "Kasia", "Keanu", "Kenji",
    "Kiri", "Lars", "Leila", "Lian", "Linnea", "Lorenzo", "Luca", "Lucia", "Mads", "Malak",
    "Marisol", "Mateo", "Matilde", "Milan", "Mira", "Mirela", "Musa", "Nadia", "Nalani", "Naveen",
    "Nia", "Niklas", "Noor", "Oksana", "Olu", "Orla", "Oskar", "Paloma", "Pavel", "Petra", "Quinn",
    "Rafael", "Rania", "Rashid", "Renata", "Rhea", "Rohan", "Rosa", "Rui", "Sabine", "Samir",
    "Sanna", "Santiago", "Selin", "Seo", "Shira", "Sigrid", "Soren", "Stellan", "Suki",
    "Tariq", "Tavi", "Teodor", "Thandi", "Tobias", "Ugo", "Uma", "Valentina", "Vesna", "Vikram",
    "Wanjiru", "Wen", "Xenia", "Yara", "Yusuf", "Zainab", "Zeno", "Zofia",
)
LAST_NAMES = (
    "Abara", "Achterberg", "Alvarez", "Amadi", "Andersen", "Aydin", "Bakker", "Banerjee", "Barros",
    "Bianchi", "Bjork", "Brennan", "Castellano", "Chandra", "Cortez", "Dahl", "Dimitrov",
    "Eklund", "Esposito", "Farouk", "Fischer", "Fonseca", "Galloway", "Grassi", "Haddadi",
    "Hartmann", "Horvath", "Ibsen", "Iwata", "Jaramillo", "Jovanovic", "Kader", "Kapoor",
    "Karlsson", "Kowalczyk", "Kruger", "Lindqvist", "Lombardi", "Mahlangu", "Marchetti", "Mbeki",
    "Moreau", "Murata", "Nakamura", "Nasser", "Novotny", "Nyberg", "Obi", "Oliveira", "Ortega",
    "Osei", "Petrov", "Quintero", "Rahman", "Reyes", "Rossi", "Sandoval", "Schmidt", "Sorensen",
    "Suzuki", "Takahashi", "Teixeira", "Toivonen", "Varga", "Vasquez", "Weber", "Yamada", "Yilmaz",
    "Zamora", "Zielinski",
)


def fresh_people(spec: dict[str, Any], rng: random.Random,
                 keep: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """The task ``spec`` with its company's directory written into it and every internal person
    but those in ``keep`` (the agent) under a name drawn from ``rng`` for this task alone.

    A person is renamed where their id is their first name in lower case (as the company's and
    the colleagues a plan hires are); the new names are words the task never used, so a
    replacement can never meet another word of it."""
    task = _merge_company(copy.deepcopy(spec))
    people = (task.get("seed") or {}).get("people") or []
    words = {w.lower() for s in strings_in(task) for w in re.findall(r"[A-Za-z]+", s)}
    firsts = [f for f in FIRST_NAMES if f.lower() not in words]
    lasts = [n for n in LAST_NAMES if n.lower() not in words]
    rng.shuffle(firsts)
    subs: dict[str, str] = {}
    for p in people:
        pid, name = str(p.get("id", "")), str(p.get("name", ""))
        first = name.split()[0] if name.split() else ""
        if pid in keep or p.get("external") or first.lower() != pid or not firsts:
            continue
        new_first = firsts.pop()
        subs[pid] = new_first.lower()
        subs[first] = new_first
        if " " in name:
            subs[name] = f"{new_first} {rng.choice(lasts)}"
    if not subs:
        return task
    pattern = re.compile(r"\b(?:" + "|".join(
        re.escape(k) for k in sorted(subs, key=len, reverse=True)) + r")\b")
    renamed: dict[str, Any] = _map(task, lambda s: pattern.sub(lambda m: subs[m.group(0)], s))
    return renamed


def _map(x: Any, f: Any) -> Any:
    """``x`` with ``f`` applied to every string in it (keys too: a record keyed by person)."""
    if isinstance(x, str):
        return f(x)
    if isinstance(x, dict):
        return {f(k) if isinstance(k, str) else k: _map(v, f) for k, v in x.items()}
    if isinstance(x, list):
        return [_map(v, f) for v in x]
    return x
