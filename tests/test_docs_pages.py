"""What the pages show, read as a newcomer reads them (no command is run here: tests/test_docs.py
runs them): the docs home's diagram fits the site's content column, its list of guides and
design pages leaves none out, and an output block that shows part of what a command prints
says so in the text just above it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.test_docs import doc_pages

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "docs" / "index.md"

# The site's theme (Material, mkdocs.yml) at 1280 px: a 61rem grid less two 12.1rem sidebars,
# 20 px a rem, is 736 px; less the content's margins (2 x 1.2rem) and a code block's padding,
# in 13.6 px monospace (about 8.2 px a character), a line of about 80 characters fits unscrolled.
DIAGRAM_WIDTH = 80
# the columns of a run's table (`demo`, `run`): a block showing fewer says which it left out
RUN_TABLE_COLUMNS = 12


def _blocks(text: str, lang: str = "text") -> list[tuple[int, str]]:
    return [(m.start(), m[1]) for m in re.finditer(rf"```{lang}\n(.*?)```", text, re.S)]


def _lead(text: str, start: int) -> str:
    """The prose just above a block, the command blocks between them skipped."""
    before = text[:start].rstrip()
    while before.endswith("```"):
        before = before[:before.rfind("```", 0, len(before) - 3)].rstrip()
    return before.split("\n\n")[-1]


def test_the_home_pages_diagram_fits_the_content_column() -> None:
    _, diagram = _blocks(INDEX.read_text())[0]
    assert "event log" in diagram and "synth" in diagram
    widest = max(diagram.splitlines(), key=len)
    assert len(widest) <= DIAGRAM_WIDTH, \
        f"docs/index.md: the diagram's line of {len(widest)} characters is cut at 1280 px " \
        f"(at most {DIAGRAM_WIDTH}): {widest!r}"


def test_the_home_page_links_every_guide_and_design_page() -> None:
    """Each page of the navigation's how-to guides and design is linked from the home page's
    "Where to start" list."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    sections = {k: v for item in nav if isinstance(item, dict) for k, v in item.items()}
    pages = [p for name in ("How-to guides", "Design") for entry in sections[name]
             for p in entry.values()]
    assert len(pages) >= 20, pages
    text = INDEX.read_text()
    where = text[text.index("## Where to start"):text.index("\n## ", text.index("## Where"))]
    linked = set(re.findall(r"\]\(([^)#]+)", where))
    missing = [p for p in pages if p not in linked]
    assert not missing, f"docs/index.md's list leaves out {missing}"


def test_output_shown_in_part_says_so() -> None:
    """No block invents a row (a table row of dots); a run's table (`demo`, `run`) shown with
    fewer than its columns keeps the line that names the others, or the text just above the
    block says what it left out."""
    checked = 0
    for page in doc_pages():
        text = page.read_text()
        for start, block in _blocks(text):
            name = page.relative_to(ROOT)
            for line in block.splitlines():
                cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
                assert not (cells and set(filter(None, cells)) <= {"...", "…"}), \
                    f"{name}: a row no command prints: {line!r}"
            header = next((ln for ln in block.splitlines()
                           if ln.startswith("┃ task ") and "termination" in ln), None)
            if header is None:
                continue
            checked += 1
            if header.count("┃") - 1 < RUN_TABLE_COLUMNS and \
                    "(not shown at this width:" not in block:
                lead = _lead(text, start)
                assert re.search(r"column|left out", lead), \
                    f"{name}: a run's table shown with {header.count('┃') - 1} of its " \
                    f"{RUN_TABLE_COLUMNS} columns, and nothing above says so:\n{lead}"
    assert checked >= 3  # (the README's demo, the tutorial's demo and evaluation)
