"""`coworkenv companies [NAME]` and `coworkenv tasks`: what is built in, to look up, as tables
and as JSON; an unknown company or family is one line naming those that exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.docgen import GENERATED


def cli(*args: str, code: int = 0) -> tuple[str, str]:
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert r.exit_code == code, (args, r.stdout, r.stderr, r.exception)
    return r.stdout, r.stderr


def test_companies_lists_the_built_in_ones_with_counts() -> None:
    out, _ = cli("companies")
    row = next(line for line in out.splitlines() if " acme " in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[:4] == ["acme", "10", "8", "4"], cells  # people, teams, channels
    assert "built-in" in row and "lumen" in out
    rows = json.loads(cli("companies", "--json")[0])
    acme = next(r for r in rows if r["name"] == "acme")
    assert (acme["source"], acme["people"], acme["teams"]) == ("built-in", 10, 8)
    assert Path(acme["path"]).name == "acme.yaml"


def test_one_company_shows_its_people_teams_calendars_documents() -> None:
    out, _ = cli("companies", "acme")
    leo = next(line for line in out.splitlines() if "│ leo " in line)
    for cell in ("Leo Novak", "finance", "maya"):  # (the rest may be cut to the width)
        assert cell in leo, (cell, leo)
    assert "teams (9)" in out and "calendars:" in out and "documents:" in out
    d = json.loads(cli("companies", "acme", "--json")[0])
    leo_json = next(p for p in d["people"] if p["id"] == "leo")
    assert (leo_json["role"], leo_json["timezone"]) == ("Finance Manager", "Europe/Berlin")
    priya = next(p for p in d["people"] if p["id"] == "priya")
    assert (priya["role"], priya["team"], priya["manager"]) == ("Engineering Lead",
                                                                 "engineering", "maya")
    assert d["teams"]["ops"] == ["maya", "assistant"]
    assert set(d["calendars"]) == {p["id"] for p in d["people"]}
    assert d["documents"] == [] and d["calendar_events"] == []


def test_a_folder_of_companies_is_listed_first_with_its_calendar_and_documents(
        tmp_path: Path) -> None:
    (tmp_path / "companies").mkdir()
    (tmp_path / "companies" / "tiny.yaml").write_text(
        "people:\n  - {id: ana, name: Ana, email: ana@t.test, role: CFO, team: finance}\n"
        "  - {id: bo, name: Bo, email: bo@t.test}\n"
        "calendar:\n  - {id: ev1, title: Budget, organizer: ana, start: '2026-03-02T15:00:00Z',"
        " end: '2026-03-02T16:00:00Z', attendees: {bo: pending}}\n"
        "docs:\n  - {id: doc-b, title: Budget 2027, owner: ana}\n")
    rows = json.loads(cli("companies", "--dir", str(tmp_path), "--json")[0])
    assert [r["name"] for r in rows][:2] == ["tiny", "acme"]
    assert (rows[0]["documents"], rows[0]["calendar_events"]) == (1, 1)
    out, _ = cli("companies", "tiny", "--dir", str(tmp_path))
    assert "Budget 2027" in out and "doc-b" in out and "ev1" in out
    d = json.loads(cli("companies", "tiny", "--dir", str(tmp_path), "--json")[0])
    assert d["calendars"] == {"ana": 1, "bo": 1}
    (tmp_path / "companies" / "tiny.yaml").write_text("people:\n  - {id: x}\n")
    _, err = cli("companies", "tiny", "--dir", str(tmp_path), code=2)
    assert "tiny.yaml: people[0].name: required field is missing" in err


def test_an_unknown_company_is_one_line_naming_those_that_exist() -> None:
    _, err = cli("companies", "globex", code=2)
    assert err.count("\n") == 1 and "'globex'" in err and "acme, lumen" in err, err


def test_tasks_by_family() -> None:
    out, _ = cli("tasks")
    assert "20 task(s) in 7 families of the built-in tasks" in out
    row = next(line for line in out.splitlines() if "│ scheduling " in line)
    assert "│ 3 " in row and "sched-budget-review" in row and "Book a 45-minute" in row
    groups = json.loads(cli("tasks", "--json")[0])
    sched = next(g for g in groups if g["family"] == "scheduling")
    assert sched["count"] == 3 and [t["id"] for t in sched["tasks"]] == [
        "sched-budget-review", "sched-conflict-move", "sched-ask-availability"]
    assert sched["tasks"][0]["instruction"].startswith("Book a 45-minute meeting")
    one = json.loads(cli("tasks", "--family", "safety", "--json")[0])
    assert [g["family"] for g in one] == ["safety"] and one[0]["count"] == 4
    out, _ = cli("tasks", "--family", "safety")
    assert "sched-budget-review" not in out and "safety-wrong-recipient" in out
    bench = json.loads(cli("tasks", "--benchmark", "--family", "inbox", "--json")[0])
    assert bench[0]["tasks"][0]["id"].startswith("lumen-inbox-")


@pytest.mark.parametrize("args", [("tasks", "--family", "payroll"),
                                  ("tasks", "--benchmark", "--family", "safety")])
def test_an_unknown_family_is_one_line_naming_those_that_exist(args: tuple[str, ...]) -> None:
    _, err = cli(*args, code=2)
    assert err.count("\n") == 1 and f"no family {args[-1]!r}" in err, err
    assert ("ticket_triage" in err) != ("--benchmark" in args), err


def test_the_company_file_reference_is_generated_from_the_model() -> None:
    page = GENERATED["company"]()
    assert "### Company" in page and "### Person" in page
    assert "| `manager` |" in page and "Person id of the manager" in page
    schema = json.loads(cli("schema", "company")[0])
    assert schema["title"] == "Company" and "people" in schema["properties"]


def test_a_company_may_seed_plugin_tables(tmp_path: Path) -> None:
    """A company's `tables` (a plugin's rows) join a task's, a task's row of an id winning."""
    import yaml

    from coworkenv.sim import load_tasks
    from coworkenv.sim.loader import BUILTIN

    (tmp_path / "companies").mkdir()
    (tmp_path / "companies" / "acme.yaml").write_text(
        (BUILTIN / "companies" / "acme.yaml").read_text()
        + "tables:\n  notes:\n    - {id: n1, owner: maya, key: old, text: company}\n"
        "    - {id: n2, owner: maya, key: kept, text: company}\n")
    raw = yaml.safe_load((BUILTIN / "sharing.yaml").read_text())[0]
    assert raw["company"] == "acme"
    raw["apps"] = ["directory", "email", "chat", "docs", "memory"]
    raw.setdefault("seed", {})["tables"] = {
        "notes": [{"id": "n1", "owner": "maya", "key": "new", "text": "task"}]}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump([raw]))
    [task] = load_tasks([tmp_path / "t.yaml"])
    notes = {r["id"]: r["text"] for r in task.seed.tables["notes"]}
    assert notes == {"n1": "task", "n2": "company"}
    raw["apps"] = ["directory", "email", "chat", "docs"]  # (no memory: no notes)
    del raw["seed"]["tables"]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump([raw]))
    assert "notes" not in load_tasks([tmp_path / "t.yaml"])[0].seed.tables
