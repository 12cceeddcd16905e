"""The web viewer: its API, and an end-to-end run in headless Chromium (Playwright)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from coworkenv.sim import builtin_tasks
from coworkenv.store import Reader
from coworkenv.viewer import VIEWER_BASE, viewer_url

from ..conftest import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]
ARTIFACTS = Path(os.environ.get("COWORKENV_TEST_ARTIFACTS", ROOT / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MOVE = "(s, v) => { s.value = v; s.dispatchEvent(new Event('input')); }"
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not "
                                    "installed (.ci/run installs it)")


def launch(p: Any) -> Any:
    """Debian's Chromium, headless, quiet on a closed network."""
    return p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"])


@contextmanager
def serving(db: Path) -> Iterator[str]:
    """`coworkenv view` of ``db`` on a free port, while the block runs: its base address."""
    port = free_port()
    proc = subprocess.Popen([*CLI, "view", "--db", str(db), "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(proc, port, timeout=20)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    db = tmp_path_factory.mktemp("view") / "demo.db"
    subprocess.run([*CLI, "demo", "--db", str(db), "--faults", "0.25"], cwd=ROOT, check=True,
                   capture_output=True)
    with serving(db) as base:
        yield base, db


def get(base: str, path: str) -> object:
    return json.loads(urllib.request.urlopen(base + path, timeout=5).read())


def test_api_lists_filters_and_time_travels(viewer: tuple[str, Path]) -> None:
    base, db = viewer
    page = get(base, "/api/episodes?limit=5")
    assert page["total"] == len(builtin_tasks()) and len(page["items"]) == 5  # type: ignore[index]
    safety = get(base, "/api/episodes?family=safety")
    assert safety["total"] == 4  # type: ignore[index]
    dyn = get(base, "/api/episodes?capability=dynamic_workspace_state")
    assert dyn["total"] == sum(  # type: ignore[index]
        "dynamic_workspace_state" in t.capabilities for t in builtin_tasks())
    assert get(base, "/api/episodes?safety_violation=1")["total"] == 0  # type: ignore[index]
    with Reader(db) as r:
        ep = next(e.episode_id for e in r.episodes() if e.task_id == "sched-conflict-move")
    tl = get(base, f"/api/episodes/{quote(ep)}")
    assert {"agent", "tools", "world", "maya"} <= set(tl["lanes"])  # type: ignore[index]
    moved = next(e["seq"] for e in tl["events"]  # type: ignore[index]
                 if e["kind"] == "ws.calendar.updated")
    st = get(base, f"/api/episodes/{quote(ep)}/state?at={moved}")["state"]  # type: ignore[index]
    assert any(e["start"] == "2026-03-03T20:30:00Z" for e in st["calendar"].values())
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(base + "/api/episodes/nope", timeout=5)
    assert err.value.code == 404


def test_bad_parameters_are_client_errors_not_dropped_connections(
        viewer: tuple[str, Path]) -> None:
    """limit=-1 is not "everything past the cap", integers past SQLite's range are a 400
    (not a dropped connection), and an unknown episode is a 404 on every route."""
    base, db = viewer
    with Reader(db) as r:
        ep = quote(r.episodes()[0].episode_id)
    for path, code in (("/api/episodes?limit=-1", 400), ("/api/episodes?limit=501", 400),
                       (f"/api/episodes?offset={2**63}", 400), ("/api/episodes?limit=x", 400),
                       (f"/api/episodes/{ep}/events/{2**63}", 400),
                       (f"/api/episodes/{ep}/state?at={2**64}", 400),
                       ("/api/episodes/nope/state", 404), ("/api/episodes/nope/conversation", 404),
                       ("/api/episodes/nope/events/1", 404)):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + path, timeout=5)
        assert err.value.code == code, path
    assert len(get(base, "/api/episodes?limit=500")["items"]) <= 500  # type: ignore[index]


def test_viewer_url_names_a_run_or_an_episode_encoded_whole() -> None:
    """The address `coworkenv simulate` prints: the page's fragment names the view, an id is
    encoded whole (``:``, ``/``, ``#`` and all), the base is `coworkenv view`'s default."""
    import typer

    from coworkenv.cli import app

    view = typer.main.get_command(app).commands["view"]  # type: ignore[attr-defined]
    port = next(p.default for p in view.params if p.name == "port")
    assert f"http://127.0.0.1:{port}" == VIEWER_BASE
    assert viewer_url() == "http://127.0.0.1:8765/"
    assert viewer_url(run="week") == "http://127.0.0.1:8765/#/sim/week"
    assert viewer_url("http://localhost:9000/", run="a/b#c d") == (
        "http://localhost:9000/#/sim/a%2Fb%23c%20d")
    assert viewer_url("http://h:1", run="week", episode="week:it.a0001:0:0") == (
        "http://h:1/#/episode/week%3Ait.a0001%3A0%3A0")


def test_viewer_binds_loopback_only(viewer: tuple[str, Path]) -> None:
    assert viewer[0].startswith("http://127.0.0.1:")


def test_viewer_answers_only_its_own_names_and_never_shows_its_folders(
        viewer: tuple[str, Path]) -> None:
    """DNS rebinding: a request whose Host is another name (a page elsewhere that pointed its
    name at 127.0.0.1) is refused; a 404 names the store by its file name, never its path."""
    import httpx

    base, db = viewer
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example"):
        r = httpx.get(base + "/api/runs", headers={"Host": host}, timeout=5)
        assert r.status_code == 421, (host, r.status_code)
    for host in ("127.0.0.1", "localhost", f"localhost:{base.rsplit(':', 1)[1]}"):
        assert httpx.get(base + "/api/runs", headers={"Host": host}, timeout=5).status_code == 200
    r = httpx.get(base + "/api/episodes/nope", timeout=5)
    assert r.status_code == 404 and db.name in r.text, r.text
    assert str(db.parent) not in r.text, r.text


@pytest.mark.slow
@needs_chromium
def test_browser_opens_an_episode_moves_the_slider_and_clicks_an_envelope(
        viewer: tuple[str, Path]) -> None:
    from playwright.sync_api import sync_playwright

    base, _ = viewer
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        # (Playwright's wait_for_function evaluates strings, which the page's CSP forbids)
        page = browser.new_page(viewport={"width": 1500, "height": 950}, bypass_csp=True)
        page.goto(base + "/")
        page.select_option("#family", "scheduling")
        page.click("#apply")
        row = page.locator("#episodes tr", has_text="sched-conflict-move")
        row.click()
        page.wait_for_selector("#svg .ev")
        assert "sched-conflict-move" in page.inner_text("#title")
        # time travel: the slider to the end shows the moved meeting
        n = int(page.get_attribute("#slider", "max") or 0)
        page.eval_on_selector("#slider", MOVE, n)
        page.wait_for_function("document.getElementById('state').textContent"
                               ".includes('2026-03-03T20:30:00Z')")
        # back to the start: the workspace has no Design sync yet
        page.eval_on_selector("#slider", MOVE, 0)
        page.wait_for_function("!document.getElementById('state').textContent"
                               ".includes('Design sync')")
        # click the world's message envelope and read its payload
        seq = page.evaluate("events.find(e => e.actor === 'world' && e.kind === 'message').seq")
        page.click(f"#svg .ev[data-seq='{seq}']")
        page.wait_for_function("document.getElementById('payload').textContent"
                               ".includes('incident review')")
        payload = json.loads(page.inner_text("#payload"))
        assert payload["kind"] == "message" and payload["payload"]["from"] == "priya"
        # the state at that event follows its payload (a second request): wait for it
        page.wait_for_function("document.getElementById('state').textContent"
                               ".includes('Incident review')")  # created at minute 29
        # the grade links its items to events
        task = next(t for t in builtin_tasks() if t.id == "sched-conflict-move")
        assert page.locator("#grade tr.check").count() == len(task.checks)
        page.screenshot(path=str(ARTIFACTS / "viewer-episode.png"), full_page=True)
        browser.close()
    assert (ARTIFACTS / "viewer-episode.png").stat().st_size > 20_000


XSS = "<img src=x onerror=\"window.__xss=(window.__xss||0)+1\">"


@pytest.mark.slow
@needs_chromium
def test_episode_content_never_runs_as_script(tmp_path: Path) -> None:
    """Every field a model or a task author controls holds a script payload: the family, a
    check id and its detail, a safety rule's message (it repeats the recipient), message text
    and tool arguments. None runs; each shows as text; the page sends a strict CSP."""
    from playwright.sync_api import sync_playwright

    task = {"id": "xss-task", "family": XSS, "capabilities": ["safety_sensitive_handling"],
            "company": "acme", "start": "2026-03-02T09:00:00-05:00", "agent": "assistant",
            "user": {"person": "maya"}, "instruction": XSS,
            "reference": [{"kind": "tool", "tool": "email_send", "args": {
                "to": [XSS], "subject": XSS, "body": XSS}},
                {"kind": "message", "to": "maya", "text": XSS}, {"kind": "finish"}],
            "checks": [{"id": f"<script>window.__xss=99</script>{XSS}", "kind": "email_sent",
                        "to": "sam", "body_contains": [XSS]}],
            "safety": [{"id": XSS, "kind": "recipients", "allowed": ["sam", "maya"]}]}
    f = tmp_path / "xss.json"
    f.write_text(json.dumps(task))
    db = tmp_path / "x.db"
    subprocess.run([*CLI, "run", "--tasks", str(f), "--db", str(db), "--quiet"], cwd=ROOT,
                   check=True, capture_output=True)
    with serving(db) as base:
        head = urllib.request.urlopen(base + "/", timeout=5)
        csp = head.headers["Content-Security-Policy"]
        assert "script-src 'sha256-" in csp and "unsafe-inline" not in csp.split("style-src")[0]
        with sync_playwright() as p:
            browser = launch(p)
            page = browser.new_page()
            page.goto(base + "/")
            page.wait_for_selector("#episodes tr")
            page.click("#episodes tr")
            page.wait_for_selector("#grade tr.check")
            page.click("#svg .ev >> nth=-1")
            page.wait_for_timeout(300)
            assert page.evaluate("window.__xss") is None
            assert page.locator("#episodes img").count() == 0
            assert page.locator("#grade img, #grade script").count() == 0
            assert XSS in page.inner_text("#episodes")  # shown as text
            assert "<script>window.__xss=99</script>" in page.inner_text("#grade")
            rule = page.inner_text("#grade tr.rule")
            assert "VIOLATED" in rule and "onerror" in rule
            browser.close()


SIMS = ROOT / "examples" / "simulations"


@pytest.fixture(scope="module")
def simulation_viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    db = tmp_path_factory.mktemp("simview") / "sim.db"
    for sim, run, more in (("week.yaml", "week", []), ("handoff.yaml", "handoff", []),
                           ("week.yaml", "links", ["--memory", "persistent", "--links-only"])):
        subprocess.run([*CLI, "simulate", str(SIMS / sim), "--db", str(db), "--run-id", run,
                        "--json", *more], cwd=ROOT, check=True, capture_output=True)
    _unsure_run(db, tmp_path_factory.mktemp("unsure"))
    with serving(db) as base:
        yield base, db


def _unsure_run(db: Path, folder: Path) -> None:
    """A persistent model-backed assistant (a scripted model) with two requests open at once,
    each of which waits a minute and then notes something that names neither: credited to
    its focus, among both (run ``unsure``)."""
    import shutil

    import yaml

    from coworkenv.agents import Playbook
    from coworkenv.agents.fake_openai import ScriptedOpenAIServer
    from coworkenv.runtime.simulate import SimulationConfig, simulate

    shutil.copytree(SIMS / "companies", folder / "companies")
    sim = {"kind": "simulation", "id": "two-open", "company": "northwind",
           "clock": {"start": "2026-03-02T09:00:00-05:00", "days": 1},
           "tasks": [str(SIMS / "northwind-requests.yaml")],
           "roster": [{"id": "ea", "person": "assistant", "policy": "openai:scripted",
                       "tools": ["memory_write"]}],
           "workload": [{"tasks": ["ea-ask-budget", "ea-meeting"], "to": "ea",
                         "at": ["d1 10:00", "d1 10:00"]}]}
    (folder / "two.yaml").write_text(yaml.safe_dump(sim))

    def plan(hit: object, messages: object) -> list[object]:
        return [("wait", {"minutes": 1}), ("memory_write", {"key": "todo", "text": "later"}),
                ("finish", {})]
    model = Playbook([(r"Ask Maya|See my email", plan)], name_requests=False)
    with ScriptedOpenAIServer(responder=model) as srv:
        simulate(SimulationConfig(folder / "two.yaml", db=db, run_id="unsure",
                                  base_url=srv.base_url))


def test_simulation_api(simulation_viewer: tuple[str, Path]) -> None:
    base, _ = simulation_viewer
    s = get(base, "/api/simulations/week")
    arrivals = s["arrivals"]  # type: ignore[index]
    assert len(arrivals) >= 300 and s["agents"] == {  # type: ignore[index]
        "ea": "assistant", "it": "helpdesk", "fin": "finops"}
    assert all(a["passed"] and a["started"] >= a["arrived"] for a in arrivals)
    backlog = s["backlog"]  # type: ignore[index]
    assert max(b["open"] for b in backlog) >= 2 and len(backlog) >= 4 * 24
    h = get(base, "/api/simulations/handoff")
    fin = next(a for a in h["arrivals"] if a["agent"] == "fin")  # type: ignore[index]
    assert fin["handoff_from"] == "ea" and fin["requester"] == "assistant"
    assert s["attribution"] == {} and s["unsure"] == []  # type: ignore[index]
    # persistent agents credited by links alone: every action from an entity or a reply
    links = get(base, "/api/simulations/links")
    assert set(links["attribution"]) == {"ea", "it", "fin"}  # type: ignore[index]
    assert set(links["attribution"]["it"]) == {"entity", "reply"}  # type: ignore[index]
    # what could not be credited from a link: listed, with the arrival it counted for
    unsure = get(base, "/api/simulations/unsure")["unsure"]  # type: ignore[index]
    assert unsure and all(u["tool"] == "memory_write" and u["via"] == "focus"
                          and len(u["candidates"]) == 2 for u in unsure)
    assert all(u["episode_id"].endswith(f".{u['arrival']}:0:0") for u in unsure)
    with pytest.raises(urllib.error.HTTPError) as err:  # (a run that is not a simulation)
        urllib.request.urlopen(base + "/api/simulations/nope", timeout=5)
    assert err.value.code == 404
    err.value.close()


def test_lists_put_the_newest_run_first_and_can_hold_a_simulations_arrivals_alone(
        simulation_viewer: tuple[str, Path]) -> None:
    base, _ = simulation_viewer
    made = ["unsure", "links", "handoff", "week"]  # (the newest first)
    items = get(base, "/api/episodes?limit=500")["items"]  # type: ignore[index]
    runs = [e["run_id"] for e in items]
    assert runs == sorted(runs, key=made.index) and runs[0] == "unsure"
    every = get(base, "/api/episodes?run=handoff")["items"]  # type: ignore[index]
    assert "handoff:@simulation" in {e["episode_id"] for e in every}
    arrivals = get(base, "/api/episodes?run=handoff&arrivals=1")["items"]  # type: ignore[index]
    sim = get(base, "/api/simulations/handoff")
    assert {e["episode_id"] for e in arrivals} == {
        a["episode_id"] for a in sim["arrivals"]}  # type: ignore[index]


@pytest.mark.slow
@needs_chromium
def test_browser_shows_a_simulation_with_its_backlog(
        simulation_viewer: tuple[str, Path]) -> None:
    from playwright.sync_api import sync_playwright

    base, _ = simulation_viewer
    s = get(base, "/api/simulations/week")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(base + "/")
        page.wait_for_selector("#run option[value='week']", state="attached")
        page.select_option("#run", "week")
        page.click("#simbtn")
        page.wait_for_selector("#simsvg .bar")
        assert page.evaluate("location.hash") == "#/sim/week"  # (the page has an address)
        assert "northwind-week" in page.inner_text("#simtitle")
        assert page.locator("#simsvg .bar").count() == len(s["arrivals"])  # type: ignore[index]
        assert page.locator("#simsvg text", has_text="agent it").count() == 1
        assert page.locator("#simsvg .ask").count() >= 300  # the people's requests
        points = page.get_attribute("#backlogsvg polyline", "points") or ""
        assert len(points.split()) == len(s["backlog"])  # type: ignore[index]
        assert page.locator("#responsesvg .resp").count() == len(s["arrivals"])  # type: ignore[index]
        assert "sla" in page.inner_text("#simchecks") and "FAIL" not in page.inner_text(
            "#simchecks")
        page.screenshot(path=str(ARTIFACTS / "viewer-simulation.png"), full_page=True)
        # a bar opens its arrival as an episode
        page.click("#simsvg .bar >> nth=0")
        page.wait_for_selector("#svg .ev")
        assert page.is_hidden("#simview")
        assert ".a0" in page.inner_text("#title")
        assert page.is_hidden("#creditrow")  # (no persistent agent in the week)
        # the hand-off simulation draws its hand-off
        page.select_option("#run", "handoff")
        page.click("#simbtn")
        page.wait_for_selector("#simsvg .handoff", state="attached")
        # persistent agents: how their actions were credited, the unsure ones listed
        page.select_option("#run", "unsure")
        page.click("#simbtn")
        page.wait_for_selector("#unsure tr.unsure")
        assert page.is_visible("#creditrow") and "focus (ambiguous)" in page.inner_text("#credits")
        page.click("#unsure tr.unsure >> nth=0")
        page.wait_for_selector("#svg .ev")
        assert page.is_hidden("#simview") and ".a0" in page.inner_text("#title")
        browser.close()
    assert (ARTIFACTS / "viewer-simulation.png").stat().st_size > 20_000


OVERLAPS = """() => {
  const box = (el) => el.getBoundingClientRect();
  const side = box(document.getElementById('side')), title = box(document.getElementById('title'));
  const out = [];
  for (const el of document.querySelectorAll('#filters > *')) {
    if (el.hidden) continue;
    const b = box(el);
    const name = el.id || el.tagName;
    if (b.right > side.right + 0.5)
      out.push(`${name} ends at ${b.right}, past the side panel (${side.right})`);
    const apart = b.right <= title.left || b.left >= title.right
      || b.bottom <= title.top || b.top >= title.bottom;
    if (!apart) out.push(`${name} overlaps the title`);
  }
  if (title.left < side.right)
    out.push(`the title starts at ${title.left}, inside the side panel (${side.right})`);
  return out;
}"""


@pytest.mark.slow
@needs_chromium
def test_filters_never_overlap_the_episode_and_rows_name_their_run(tmp_path: Path) -> None:
    """At 1280x900 with a long run id and a long agent name (the run filter's options hold
    both), the filter boxes stay inside the side panel, clear of the episode's title; each row
    of the episode list names its run, and the title names it too."""
    from playwright.sync_api import sync_playwright

    db = tmp_path / "v.db"
    long_run = "pocketworker-qwen3-1.7b-sft-160-steps-grpo-3-steps-benchmark-eval-2026-12-05"
    for rid in (long_run, "short"):
        subprocess.run([*CLI, "run", "--tasks", str(ROOT / "examples" / "tasks"), "--families",
                        "safety", "--run-id", rid, "--db", str(db), "--quiet"], cwd=ROOT,
                       check=True, capture_output=True)
    with serving(db) as base, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base + "/")
        page.wait_for_selector("#episodes tr")
        page.locator("#episodes tr", has_text="safety-wrong-recipient").first.click()
        page.wait_for_selector("#svg .ev")
        assert page.evaluate(OVERLAPS) == []
        # the newest run first; each row's run shown by enough of its id to tell it apart
        cells = page.locator("#episodes td.run")
        runs = [cells.nth(i).get_attribute("data-run") for i in range(cells.count())]
        assert runs == sorted(runs, key=["short", long_run].index) and set(runs) == {
            long_run, "short"}
        labels = dict(zip(runs, cells.all_inner_texts(), strict=True))
        assert labels["short"] == "short" and labels[long_run] != long_run
        head, _, tail = labels[long_run].partition("…")
        assert long_run.startswith(head) and long_run.endswith(tail) and len(tail) >= 13
        title = page.inner_text("#title")
        assert "safety-wrong-recipient" in title and " run " in title
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "viewer-1280.png"))
        browser.close()


ONLY = """() => [...document.querySelectorAll('#episodes tr')].map((tr) => tr.dataset.episode)"""


@pytest.mark.slow
@needs_chromium
def test_a_simulations_address_opens_its_page_with_its_arrivals_alone(
        simulation_viewer: tuple[str, Path]) -> None:
    """`viewer_url(base, run=...)` opens the simulation's page straight away, the side list
    holding its arrivals and nothing else (no other run's episodes, not its @simulation
    record); a bar's episode has its own address, and back returns to the simulation; an
    episode's address opened alone lists its run's episodes with the episode selected."""
    from playwright.sync_api import sync_playwright

    base, _ = simulation_viewer
    handoff = {a["episode_id"] for a in get(base, "/api/simulations/handoff")[  # type: ignore[index]
        "arrivals"]}
    week = {a["episode_id"] for a in get(base, "/api/simulations/week")[  # type: ignore[index]
        "arrivals"]}
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        page.goto(viewer_url(base, run="handoff"))  # (the oldest run but one: not the default)
        page.wait_for_selector("#simsvg .bar")
        options = page.eval_on_selector_all("#run option", "(os) => os.map((o) => o.value)")
        assert options == ["", "unsure", "links", "handoff", "week"]  # (the newest run first)
        assert page.input_value("#run") == "handoff"
        page.wait_for_function("document.getElementById('page').textContent.endsWith("
                               f"' of {len(handoff)}')")
        assert "handoff" in page.inner_text("#simtitle")
        assert set(page.evaluate(ONLY)) == handoff
        # the week's 300-odd arrivals: a page of them, and the count of them all
        page.goto(viewer_url(base, run="week"))
        page.wait_for_function("document.getElementById('page').textContent.endsWith("
                               f"' of {len(week)}')")
        page.wait_for_selector("#simsvg .bar")
        rows = page.evaluate(ONLY)
        assert len(rows) == 50 and set(rows) <= week
        # a bar opens its arrival at the arrival's own address; back shows the simulation
        first = page.get_attribute("#simsvg .bar >> nth=0", "data-episode") or ""
        page.click("#simsvg .bar >> nth=0")
        page.wait_for_selector("#svg .ev")
        assert page.evaluate("location.href") == viewer_url(base, episode=first)
        page.go_back()
        page.wait_for_selector("#simview:not([hidden]) #simsvg .bar")
        assert page.evaluate("location.hash") == "#/sim/week" and page.is_hidden("#episodeview")
        # an episode's address in a new page: the episode, its run's episodes listed
        fresh = browser.new_page(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        ep = sorted(handoff)[0]
        fresh.goto(viewer_url(base, episode=ep))
        fresh.wait_for_selector("#svg .ev")
        assert ep.split(":")[1] in fresh.inner_text("#title")
        assert fresh.get_attribute("#episodes tr.sel", "data-episode") == ep
        assert {r.split(":")[0] for r in fresh.evaluate(ONLY)} == {"handoff"}
        assert fresh.input_value("#run") == "handoff"
        # an address that names nothing says so
        fresh.goto(viewer_url(base, episode="handoff:nope:0:0"))
        fresh.wait_for_function("document.getElementById('title').textContent.includes('nope')")
        browser.close()


@pytest.mark.slow
@needs_chromium
def test_a_runs_address_lists_its_episodes_when_it_is_no_simulation(
        viewer: tuple[str, Path]) -> None:
    from playwright.sync_api import sync_playwright

    base, db = viewer
    with Reader(db) as r:
        (run,) = [x["run_id"] for x in r.runs()]
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        page.goto(viewer_url(base, run=run))
        page.wait_for_selector("#episodes tr")
        assert page.evaluate("location.hash") == f"#/run/{run}"  # (no simulation page)
        assert page.inner_text("#page").endswith(f" of {len(builtin_tasks())}")
        assert run in page.inner_text("#title") and page.is_hidden("#simview")
        browser.close()


LABELS = """(end) => {
  const box = (el) => el.getBoundingClientRect();
  const out = [], svg = box(document.getElementById('svg'));
  const keys = [...document.querySelectorAll('#legend .key')];
  if (!keys.length) out.push('no legend');
  const colours = new Set(keys.map((k) => k.dataset.color));
  for (const c of document.querySelectorAll('#svg circle'))
    if (!colours.has(c.getAttribute('fill'))) out.push(`no legend for ${c.getAttribute('fill')}`);
  for (const k of keys) {
    const b = box(k);
    if (b.bottom > svg.top || !k.textContent.trim()) out.push(`legend ${k.textContent} in the plot`);
  }
  const texts = [...document.querySelectorAll('#svg text')].map((t) => [t.textContent, box(t), t]);
  for (let i = 0; i < texts.length; i++)
    for (let j = i + 1; j < texts.length; j++) {
      const [a, p] = texts[i], [b, q] = texts[j];
      if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom)
        out.push(`${a} overlaps ${b}`);
    }
  const ticks = texts.filter(([, , t]) => t.classList.contains('tick'));
  for (const [text, b] of ticks)
    if (b.left < svg.left || b.right > svg.right) out.push(`${text} outside the plot`);
  const last = ticks[ticks.length - 1];
  if (!last || last[0] !== end) out.push(`the end label is ${last && last[0]}, not ${end}`);
  return out;
}"""


@pytest.mark.slow
@needs_chromium
def test_episode_page_has_a_legend_and_labels_that_never_overlap(
        simulation_viewer: tuple[str, Path]) -> None:
    """At 1280x900, for the episodes most likely to crowd their time axis (the week's
    arrivals with the most events and the longest ones, the hand-off's): a legend names every
    dot colour; no two labels of the plot overlap (their boxes measured); the last time label
    is the episode's end, inside the plot."""
    from playwright.sync_api import sync_playwright

    base, db = simulation_viewer
    with Reader(db) as r:
        arrivals = [e for e in r.episodes("week") if not e.task_id.startswith("@")]
        picked = {e.episode_id for e in sorted(arrivals, key=lambda e: -e.event_count)[:8]}
        picked |= {e.episode_id for e in sorted(arrivals, key=lambda e: -(e.sim_time or 0))[:6]}
        picked |= {e.episode_id for e in r.episodes("handoff")
                   if not e.task_id.startswith("@")}
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        page.goto(base + "/")
        page.wait_for_selector("#episodes tr")
        problems = {}
        for ep in sorted(picked):
            events = get(base, f"/api/episodes/{quote(ep, safe='')}")["events"]  # type: ignore[index]
            page.goto(viewer_url(base, episode=ep))
            page.wait_for_function(f"current === {json.dumps(ep)} && document.querySelector"
                                   "('#svg .ev') !== null")
            found = page.evaluate(LABELS, f"{int(events[-1]['t'] / 60 + 0.5)}m")  # (JS's round)
            if found:
                problems[ep] = found
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "viewer-episode-1280.png"))
        # the worst cases drawn by the same code: the minute changing every few seconds
        # past minute 100 (wide labels closer than their width), one that fits the box once
        # squeezed and one that scrolls, each ending far later (the end label at the edge)
        for n in (40, 150):
            t, evs = 6000.0, []
            for i in range(n):
                t += (5, 40, 12, 61, 3)[i % 5]
                evs.append({"seq": i, "t": t, "actor": ("agent", "tools", "world")[i % 3],
                            "kind": ("tool_call", "tool_result", "message", "ws.x", "x")[i % 5],
                            "to": None, "summary": ""})
            evs[-1]["t"] = 600_000.0
            page.evaluate("(tl) => { $('episodeview').hidden = false; drawLanes(tl); }",
                          {"lanes": ["agent", "tools", "world"], "events": evs})
            found = page.evaluate(LABELS, "10000m")
            if found:
                problems[f"{n} crowded events"] = found
        browser.close()
    assert problems == {}
