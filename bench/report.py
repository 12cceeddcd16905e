"""The documentation's benchmark figures, rendered from one ``bench/all.py`` JSON: per
benchmark the figure, the baseline measured in the same run, their ratio, and the load
average the machine had just before it ran. Prints Markdown; ``--readme
docs/design/performance.md`` puts it in that page (any Markdown file) between its ``<!--
bench:begin -->`` and ``<!-- bench:end -->`` lines instead (so the page quotes exactly one
run, with its date). A benchmark missing from the JSON (``--only``) or one
that failed is said so, never left out silently.

``--scale FILE`` does the same for the scaling table, from one ``bench/episodes.py --scale``
JSON (between ``<!-- scale:begin -->`` and ``<!-- scale:end -->``), with its ratios to the
scaling issue's targets worked out from the rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
SCALE_BEGIN, SCALE_END = "<!-- scale:begin -->", "<!-- scale:end -->"


def _n(x: Any, digits: int = 0) -> str:
    """A figure as the README writes it (thousands separated), or n/a."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return "n/a"
    return f"{x:,.{digits}f}"


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def _store(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    raw = _get(r, "raw_executemany_rows_per_s")
    return [
        ("store: one-event append (events/s)", _n(_get(r, "async_append_single_events_per_s")),
         f"raw `executemany` {_n(raw)}", _n(_get(r, "ratio_single_vs_raw"), 3)),
        ("store: append of 8 (events/s)", _n(_get(r, "async_append_many_8_events_per_s")),
         f"raw `executemany` {_n(raw)}", _n(_get(r, "ratio_many_8_vs_raw"), 3)),
    ]


def _bus(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    mem = _get(r, "episodes_memory_bus", "round_trips_per_s")
    one = _get(r, "one_episode_round_trip_p50_us") or {}
    runs = _get(r, "runs") or {}
    rows = [
        ("bus: memory bus (messages/s)", _n(_get(r, "memory_bus", "messages_per_s")),
         f"`asyncio.Queue` {_n(_get(r, 'raw_asyncio_queue', 'messages_per_s'))}",
         _n(_get(r, "memory_vs_raw_queue"), 3)),
    ]
    window = next((k for k in r if k.startswith("raw_aiomqtt_window_")), None)
    if window:
        rows.append(("bus: MQTT bus, QoS 1 (messages/s)",
                     _n(_get(r, "mqtt_bus_qos1", "messages_per_s")),
                     f"raw aiomqtt, same window {_n(_get(r, window, 'messages_per_s'))}",
                     _n(_get(r, "mqtt_bus_vs_raw_window"), 2)))
        rows += [
            ("bus: episode-shaped, MQTT, one connection (round trips/s)",
             _n(_get(r, "episodes_mqtt_bus_one_connection", "round_trips_per_s")),
             f"memory bus {_n(mem)}", _n(_get(r, "episodes_mqtt_one_connection_vs_memory"), 3)),
            ("bus: episode-shaped, MQTT, through the broker (round trips/s)",
             _n(_get(r, "episodes_mqtt_bus", "round_trips_per_s")), f"memory bus {_n(mem)}",
             _n(_get(r, "episodes_mqtt_vs_memory"), 3)),
        ]
    for key, what in (("mqtt_one_connection", "MQTT, one connection"),
                      ("mqtt_two_connections", "MQTT through the broker as found"),
                      ("mqtt_two_connections_nodelay_broker",
                       "MQTT through a broker with `set_tcp_nodelay true`")):
        if key in one:
            rows.append((f"bus: one episode's round trip, p50 (us), {what}", _n(one[key], 0),
                         f"memory bus {_n(one.get('memory'), 0)}", "-"))
    for key, what in (("mqtt", "over MQTT"), ("mqtt_via_broker",
                                               "over MQTT, all through the broker")):
        if key in runs:
            rows.append((f"bus: whole runs {what} (episodes/s; CPU per step us)",
                         f"{_n(_get(runs, key, 'episodes_per_s'), 1)}; "
                         f"{_n(_get(runs, key, 'cpu_per_agent_step_us'))}",
                         f"memory bus {_n(_get(runs, 'memory', 'episodes_per_s'), 1)}; "
                         f"{_n(_get(runs, 'memory', 'cpu_per_agent_step_us'))}",
                         _n(_get(runs, f"{key}_vs_memory"), 3)))
    return rows


def _episodes(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    m = _get(r, "marginal_step_one_core") or {}
    rows = [("episodes: marginal agent step, office mix (us)",
             _n(m.get("marginal_per_agent_step_us")),
             f"fixed {_n(m.get('per_episode_fixed_ms'), 1)} ms per episode", f"r² {_n(m.get('r2'), 2)}")]
    for key, what in (("stub_agent_50ms_one_core", "one process"),
                      ("stub_agent_50ms_process_per_core", "one process per core")):
        e = _get(r, key)
        if e:
            rows.append((f"episodes: {_n(e.get('concurrent_episodes'))} at once, 50 ms think, "
                         f"{what} (steps/s)", _n(e.get("whole_run_steps_per_s")),
                         f"ideal {_n(e.get('ideal_steps_per_s'))}",
                         f"{_n(e.get('whole_run_efficiency'), 3)} (steady "
                         f"{_n(e.get('efficiency'), 3)})"))
    return rows


def _replay(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [("replay: events/s (state-changing share)",
             f"{_n(_get(r, 'replay_events_per_s'))} ({_n(_get(r, 'replayed_changing_state_share'), 2)})",
             f"{_n(_get(r, 'events'))} events", "-"),
            ("replay: viewer timeline (ms)", _n(_get(r, "timeline_ms"), 2), "-", "-")]


def _grading(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [("grading: regrade a synthesized episode (ms)",
             _n(_get(r, "grading_synthesized", "regrade_ms_per_episode"), 3),
             f"replay alone {_n(_get(r, 'grading_synthesized', 'replay_only_ms_per_episode'), 3)}",
             f"grader share {_n(_get(r, 'grading_synthesized', 'grader_share'), 2)}"),
            ("grading: validate a synthesized task with every mutant (s)",
             _n(_get(r, "validation_synthesized", "validate_with_mutants_s_per_task"), 3),
             f"target {_n(_get(r, 'validation_synthesized', 'target_s_per_task'), 1)}", "-")]


def _synth(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [("synth: composed and validated tasks/s", _n(_get(r, "tasks_per_s"), 2),
             f"target {_n(_get(r, 'target_tasks_per_s'))}", "-")]


def _sessions(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [("sessions: OpenEnv server (steps/s)", _n(_get(r, "openenv", "steps_per_s")),
             f"in process {_n(_get(r, 'in_process', 'steps_per_s'))}",
             _n(_get(r, "throughput_ratio_openenv_to_in_process"), 3)),
            ("sessions: what the server adds to one session's step, p50 (ms)",
             _n(_get(r, "server_overhead_per_step", "one_session_p50_ms"), 2),
             f"target {_n(_get(r, 'targets', 'server_p50_overhead_ms'), 1)}", "-")]


def _scale(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    eps = _get(r, "episodes_per_s") or {}
    rows = []
    for kind in ("processes", "ray"):
        if f"{kind}-1" in eps and f"{kind}-2" in eps:
            rows.append((f"scale: {kind} 1 and 2 (episodes/s)",
                         f"{_n(eps[f'{kind}-1'], 1)} and {_n(eps[f'{kind}-2'], 1)}",
                         f"ideal {_n(_get(r, 'ideal_episodes_per_s_per_host'), 1)} per host",
                         _n(_get(r, "scaling_efficiency", kind), 2)))
    rows.append(("scale: shards merged (events/s)", _n(_get(r, "merge", "events_per_s")), "-",
                 "-"))
    mq = _get(r, "costs", "mqtt") or {}
    if mq:
        rows.append(("scale: the same run over MQTT, 50 ms think (episodes/s)",
                     _n(mq.get("episodes_per_s"), 1),
                     f"memory bus {_n(mq.get('memory_bus_episodes_per_s'), 1)}",
                     _n((mq.get("episodes_per_s") or 0) / (mq.get("memory_bus_episodes_per_s")
                                                            or 1), 2)))
    return rows


def _simulate(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [("simulate: the Northwind week, oracle agents (s)", _n(_get(r, "week", "wall_s"), 2),
             f"its arrivals as separate episodes {_n(_get(r, 'week', 'batch_same_arrivals_wall_s'), 2)} s",
             _n(_get(r, "week", "ratio_simulation_vs_batch"), 3)),
            ("simulate: the week, events/s (working days/s)",
             f"{_n(_get(r, 'week', 'events_per_s'))} ({_n(_get(r, 'week', 'working_days_per_s'), 1)})",
             "target: the week under 30 s", "-"),
            ("simulate: heap growth per graded arrival (bytes)",
             _n(_get(r, "memory", "heap_bytes_per_graded_arrival")),
             f"of which the log {_n(_get(r, 'memory', 'log_packed_bytes_per_graded_arrival'))}",
             "-"),
            (f"simulate: {_n(_get(r, 'many', 'simulations'))} one-day simulations at once (s)",
             _n(_get(r, "many", "at_once_wall_s"), 2),
             f"one after another {_n(_get(r, 'many', 'one_after_another_wall_s'), 2)} s",
             _n(_get(r, "many", "ratio_at_once_vs_sequential"), 3)),
            *_seeds(r)]


def _seeds(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The largest batch of ``--seeds``: over every core against one process."""
    runs = _get(r, "seeds", "runs") or []
    if not runs:
        return []
    cores, big = _get(r, "seeds", "cores"), runs[-1]
    return [(f"simulate --seeds {big['simulations']}: arrivals/s over {cores} processes",
             _n(_get(big, f"p{cores}", "arrivals_per_s"), 1),
             f"one process {_n(_get(big, 'p1', 'arrivals_per_s'), 1)}",
             _n(big.get("speedup"), 3))]


def _persistent(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    rows = []
    for run in r.get("runs") or []:
        rows.append((f"persistent: one agent, {_n(r.get('days'))} working days, trim "
                     f"{run.get('trim')}: largest prompt (tokens, estimated)",
                     _n(run.get("largest_prompt_estimate")),
                     f"budget {_n(run.get('budget_tokens'))}; {_n(run.get('context_cuts'))} cuts, "
                     f"day-{_n(run.get('recall_day'))} recall "
                     f"{'passed' if run.get('recall_passed') else 'FAILED'}",
                     _n((run.get("largest_prompt_estimate") or 0)
                        / max(1, run.get("budget_tokens") or 1), 3)))
    return rows


RENDER: dict[str, Callable[[dict[str, Any]], list[tuple[str, str, str, str]]]] = {
    "store": _store, "bus": _bus, "episodes": _episodes, "replay": _replay,
    "grading": _grading, "synth": _synth, "sessions": _sessions, "scale": _scale,
    "simulate": _simulate, "persistent": _persistent}
"""Each benchmark of bench/all.py, and the rows it contributes."""


def render(report: dict[str, Any]) -> str:
    machine = report.get("machine", {})
    lines = [f"Measured by `python bench/all.py{' --quick' if report.get('quick') else ''}` on "
             f"{report.get('date', 'an unknown date')} ({machine.get('cores', '?')} cores, "
             f"Python {machine.get('python', '?')}); each row's load is the 1-minute load "
             f"average just before its benchmark ran.", "",
             "| figure | measured | baseline, same run | ratio | load |",
             "|---|---|---|---|---|"]
    benches = report.get("benchmarks", {})
    missing = []
    for name, rows_of in RENDER.items():
        b = benches.get(name)
        if b is None:
            missing.append(name)
            continue
        load = _n((b.get("load_before") or [None])[0], 2)
        if b.get("exit") != 0 or "result" not in b:
            lines.append(f"| {name}: failed (exit {b.get('exit')}) | - | - | - | {load} |")
            continue
        for figure, value, base, ratio in rows_of(b["result"]):
            lines.append(f"| {figure} | {value} | {base} | {ratio} | {load} |")
    if missing:
        lines += ["", f"Not in this run: {', '.join(missing)}."]
    return "\n".join(lines) + "\n"


def render_scale(report: dict[str, Any]) -> str:
    """The scaling table of one ``bench/episodes.py --scale`` run, and what it says against
    the targets (efficiency at least 0.9 from 100 live episodes up; CPU per step at the most
    live episodes within 1.2x of its value at 100; at most 100 KiB per live episode)."""
    rows = report["scale"]
    load = report.get("offered_steps_per_s", 0)
    before, after = report.get("load_before") or [None], report.get("load_average") or [None]
    lines = [f"Measured by `python bench/episodes.py --scale` on "
             f"{report.get('date', 'an unknown date')} ({report.get('cores', '?')} cores; load "
             f"{_n(before[0], 2)} before, {_n(after[0], 2)} after): each N in its own process, "
             f"think time N / {_n(load)} s, so the ideal is {_n(load)} agent steps/s at every "
             f"N; {report.get('steps_per_episode', '?')} steps of the load agent's office mix "
             f"per episode; one process.", "",
             "| live episodes | think (s) | efficiency, steady | efficiency, whole run | "
             "CPU per agent step, steady (us) | of which the event loop's thread (us) | "
             "CPU per agent step, whole run (us) | memory per live episode (KiB) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {_n(r['live_episodes'])} | {r['think_s']:g} | "
                     f"{_n(r.get('efficiency'), 2)} | {_n(r.get('whole_run_efficiency'), 2)} | "
                     f"{_n(r.get('cpu_per_agent_step_us'))} | "
                     f"{_n(r.get('loop_cpu_per_agent_step_us'))} | "
                     f"{_n(r.get('whole_run_cpu_per_agent_step_us'))} | "
                     f"{_n(r.get('rss_per_live_episode_kib'))} |")
    by_n = {r["live_episodes"]: r for r in rows}
    big = [r for r in rows if r["live_episodes"] >= 100]
    notes = []
    if 100 in by_n and big:
        top = max(big, key=lambda r: r["live_episodes"])
        base = by_n[100].get("cpu_per_agent_step_us")
        cpus = [r.get("cpu_per_agent_step_us") for r in big]
        if base and all(cpus):  # (None: no two CPU samples fell inside a row's steady stretch)
            cpu = (f"{top['cpu_per_agent_step_us'] / base:.2f} times its value at 100 (target "
                   f"at most 1.2; the largest ratio of any row from 100 up: "
                   f"{max(cpus) / base:.2f}). ")
        else:
            cpu = "not measured in every row from 100 up (no steady stretch to sample). "
        effs = [r["efficiency"] for r in big if r.get("efficiency") is not None]
        notes.append(f"CPU per agent step (steady) at {_n(top['live_episodes'])} live episodes: "
                     + cpu + "Efficiency from 100 up: "
                     + (f"{min(effs):.2f} at least (target 0.9). " if effs else "n/a. ")
                     + "Memory per live episode from 100 up: at most "
                     f"{max(r['rss_per_live_episode_kib'] for r in big):,.0f} KiB "
                     "(target 100).")
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"


def _check(readme: Path, begin: str, end: str) -> str:
    try:
        body = readme.read_text()
    except OSError as exc:
        sys.exit(f"{readme}: cannot read it ({exc.strerror or exc})")
    if body.count(begin) != 1 or body.count(end) != 1 or body.index(begin) > body.index(end):
        sys.exit(f"{readme}: expected one {begin} line before one {end} line")
    return body


def _rewrite(readme: Path, begin: str, end: str, text: str) -> None:
    """Put ``text`` between the one ``begin`` line and the one ``end`` line of ``readme``."""
    head, rest = _check(readme, begin, end).split(begin)
    _, tail = rest.split(end)
    readme.write_text(f"{head}{begin}\n{text}{end}{tail}")


def _load(path: Path, what: str, key: str) -> dict[str, Any]:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        sys.exit(f"{path}: not a {what} report: {exc}")
    if not isinstance(report, dict) or key not in report:
        sys.exit(f"{path}: not a {what} report (no {key!r})")
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", type=Path, nargs="?", default=None,
                    help="the JSON bench/all.py wrote (--out)")
    ap.add_argument("--scale", type=Path, default=None,
                    help="the JSON `bench/episodes.py --scale` printed: the scaling table")
    ap.add_argument("--readme", type=Path, default=None,
                    help=f"rewrite this file's section between {BEGIN} and {END} (and, with "
                         f"--scale, between {SCALE_BEGIN} and {SCALE_END})")
    args = ap.parse_args()
    if args.report is None and args.scale is None:
        ap.error("give a bench/all.py report, --scale FILE, or both")
    sections = []
    if args.report is not None:
        report = _load(args.report, "bench/all.py", "benchmarks")
        sections.append((BEGIN, END, render(report), args.report, report.get("date")))
    if args.scale is not None:
        scale = _load(args.scale, "bench/episodes.py --scale", "scale")
        sections.append((SCALE_BEGIN, SCALE_END, render_scale(scale), args.scale,
                         scale.get("date")))
    if args.readme is None:
        print("\n".join(text for _, _, text, _, _ in sections), end="")
        return
    for begin, end, _, _, _ in sections:  # every marker pair checked before anything is written
        _check(args.readme, begin, end)
    for begin, end, text, src, date in sections:
        _rewrite(args.readme, begin, end, text)
        print(f"{args.readme}: {'scaling' if begin == SCALE_BEGIN else 'benchmark'} section "
              f"from {src} ({date})")


if __name__ == "__main__":
    main()
