"""Grading a simulation: each arrival the moment it ends, on its own view of the shared log,
recorded as an episode of the run; and the simulation's own checks over all of them (SLA,
nothing dropped, safety, budgets, a script's). A part of :class:`~.kernel.SimulationKernel`
(its mixin), apart so that the kernel's running and its grading read on their own."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...store import EventRecord, EventStore
from ...store._records import EventsHasher, encode_payload, hash_lines
from ...workspace import WorkspaceState, apply_event
from ...workspace.models import canonical_json, follow
from ..actor import Actor, let_go
from ..clock import Clock
from ..episode import save_grade
from ..eventlog import EventLog
from ..grading import Grade, GradeWeights, grade
from ..handoffs import LINKS, TAKEN_UP, task_outputs
from ..selectors import Followed, occurrences
from ..task import CROSS_ARRIVAL, Task
from .arrivals import Arrival
from .calendar import Calendar
from .language import SIM_RULE, Simulation
from .records import ArrivalOutcome, Live, Resume, SimCheck
from .view import arrival_view
from .world import PersonHub


class CompanyView:
    """The company as every arrival's view begins (the setup's rows, the same for each): its
    records decoded, its workspace replayed and each of its tables' canonical JSON, once, so
    that grading an arrival costs what its own events cost, not what the company's size
    does (a company of 1,000 people is 1,700 setup rows to decode, replay and hash for every
    arrival otherwise). What it gives equals what the arrival's own rows give: its records
    are the setup rows' (under the arrival's episode id), its workspace is the one they
    replay to (copied: entities are replaced, never changed in place), and its state hash is
    :meth:`~coworkenv.workspace.WorkspaceState.state_hash`'s, composed from the tables' texts
    (checked against it on the first arrival; where they differ, the state's own is used)."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows
        """The kernel's setup rows (the list it is for)."""
        self.shared = all(r[1] == i and r[2] == 0.0 for i, r in enumerate(rows, 1))
        """An arrival's setup rows are the simulation episode's events 1..n as they are
        (seq and time): the store keeps them once (:meth:`EventStore.share_prefix`)."""
        self._records: list[EventRecord] = []
        self._state: WorkspaceState | None = None
        self._texts: dict[str, str] = {}
        self._entity_texts: dict[str, dict[str, str]] = {}
        self._composed: bool | None = None
        """Whether the composed state hash is the state's (None: not checked yet)."""
        self._lines: bytes | None = None
        self._only_state: bool | None = None
        self._known: dict[tuple[str, str], dict[str, Any]] | None = None

    def records(self, rows: list[tuple[Any, ...]]) -> list[EventRecord]:
        """The records of an arrival's setup rows (those of its view after its
        ``episode.start``): where they are the simulation episode's events 1..n as they are
        (:attr:`shared`, as the store keeps them), those events' records, made once and
        given to every arrival's grading (frozen; their ``episode_id`` is the simulation's,
        as the store's prefix names it); else the arrival's own."""
        if not self._records:
            source = self.rows if self.shared else rows
            self._records = [EventRecord.from_row(r) for r in source]
        if self.shared:
            return self._records
        vid = rows[0][0] if rows else ""
        return [EventRecord(vid, e.seq, e.sim_time, e.wall_time, e.actor, e.kind, e.payload,
                            e.text) for e in self._records]

    def events_hash(self, start: EventRecord, own: list[EventRecord]) -> str:
        """:func:`~coworkenv.store.events_hash` of an arrival's view: its ``episode.start``,
        the setup's records, its own; the setup's lines made once."""
        h = EventsHasher()
        h.update(start.seq, start.sim_time, start.actor, start.kind, start.payload_text())
        if self.only_state:  # (state events: none left out of hashes)
            if self._lines is None:
                self._lines = hash_lines(self._records)
            h.update_lines(self._lines)
        else:
            for e in self._records:
                h.update(e.seq, e.sim_time, e.actor, e.kind, e.payload_text())
        for e in own:
            h.update(e.seq, e.sim_time, e.actor, e.kind, e.payload_text())
        return h.hexdigest()

    @property
    def only_state(self) -> bool:
        """The setup's records are all state events (``ws.*``)."""
        if self._only_state is None:
            self._only_state = all(e.kind.startswith("ws.") for e in self._records)
        return self._only_state

    def known(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Each entity of the setup as JSON (:func:`~coworkenv.workspace.models.follow`
        through the setup's records): what a reader of an arrival's view knows after them."""
        if self._known is None:
            known: dict[tuple[str, str], dict[str, Any]] = {}
            for e in self._records:
                if e.kind.startswith("ws."):
                    follow(known, e.kind, e.payload)
            self._known = known
        return self._known

    def replay(self, events: list[EventRecord]) -> tuple[WorkspaceState, set[str]]:
        """The workspace of the setup's records with ``events`` (the view's after them)
        applied, as :func:`~coworkenv.workspace.replay_events` of the whole view gives it, and
        the tables those events touched."""
        if self._state is None:
            base = WorkspaceState()
            for ev in self._records:
                if ev.kind.startswith("ws."):
                    apply_event(base, ev.kind, ev.payload)
            self._state = base
        state = self._state.copy()
        touched: set[str] = set()
        for ev in events:
            if ev.kind.startswith("ws."):
                apply_event(state, ev.kind, ev.payload)
                touched.add(ev.kind.split(".", 2)[1])
        return state, touched

    def state_hash(self, state: WorkspaceState, touched: set[str]) -> str:
        """``state.state_hash()`` of a state :meth:`replay` gave: the setup's tables, and the
        setup's entities in the tables the arrival's events touched, dumped once for every
        arrival."""
        if self._composed is False:
            return state.state_hash()
        base = self._state.tables if self._state is not None else {}
        parts = []
        for app in sorted(state.tables):
            text = self._texts.get(app) if app not in touched else None
            if text is None:
                known = base.get(app, {})
                texts = self._entity_texts.setdefault(app, {})
                items = []
                for k, v in sorted(state.tables[app].items()):
                    t = texts.get(k) if known.get(k) is v else None
                    if t is None:
                        t = canonical_json(v.model_dump(mode="json"))
                        if known.get(k) is v:
                            texts[k] = t
                    items.append(f"{canonical_json(k)}:{t}")
                text = "{" + ",".join(items) + "}"
                if app not in touched:
                    self._texts[app] = text
            parts.append(f"{canonical_json(app)}:{text}")
        digest = hashlib.sha256(("{" + ",".join(parts) + "}").encode()).hexdigest()
        if self._composed is None:
            self._composed = digest == state.state_hash()
            if not self._composed:
                return state.state_hash()
        return digest


class Grading:
    """The kernel's grading (see the module's docstring); what it uses of the kernel is
    declared here."""

    sim: Simulation
    cal: Calendar
    clock: Clock
    run_id: str
    episode_id: str
    store: EventStore | None
    weights: GradeWeights | None
    state: WorkspaceState
    actors: dict[str, Actor]
    live: dict[str, Live]
    queues: dict[str, deque[Live]]
    open: dict[str, dict[str, Live]]
    outcomes: list[ArrivalOutcome]
    seat_of_person: dict[str, str]
    seat_turns: dict[str, int]
    over_budget: set[str]
    agent_names: dict[str, str]
    resume_state: Resume
    on_closed: list[Callable[[Live, ArrivalOutcome], None]]
    extra_checks: list[SimCheck]
    _log: EventLog
    _hash: Any
    _setup_rows: list[tuple[Any, ...]]
    _structural: list[tuple[Any, ...]]
    persistent_seats: set[str]
    causes: dict[str, str]
    caused: dict[str, list[str]]
    unmatched: dict[str, list[str]]
    handoff_info: dict[str, dict[str, Any]]
    pending: dict[str, Arrival]
    model_use: dict[str, dict[str, int]]
    model_by_day: dict[str, dict[str, int]]
    model_by_arrival: dict[str, dict[str, int]]
    attribution_counts: dict[str, dict[str, int]]
    unsure: list[dict[str, Any]]
    company_ids: set[tuple[str, str]]
    entity_rows: dict[str, list[int]]
    _company_view: CompanyView | None = None

    if TYPE_CHECKING:  # (the kernel's own)
        def _record(self, actor: str, kind: str, payload: dict[str, Any],
                    text: str | None = None) -> None: ...

        async def _save(self) -> None: ...

        def _seed_of(self, name: str) -> int: ...

        def _note_backlog(self) -> None: ...

        def _new_arrival(self, stream: int, at: float, requester: str | None,
                         said: str | None = None) -> None: ...

    @staticmethod
    def _reached(task: Task, state: WorkspaceState, events: list[EventRecord],
                 person: str) -> bool:
        """Whether the arrival's agent reached ``person`` (a message, mail, chat, a comment on
        their ticket, a share)."""
        occs = occurrences(task, state, events)
        return any(o.actor == "agent" and o.ok and person in o.to for o in occs)

    async def _close(self, live: Live) -> None:
        if live.closed:
            return
        live.closed = True
        a, task = live.arrival, live.task
        termination = live.end or "sim_end"
        rows = arrival_view(self, live)
        t = round(self.clock.now - a.at, 6)
        links = self._links(live)
        if links is not None:  # (what its checks read of the hand-offs it made)
            rows.append((rows[0][0], len(rows), t, 0.0, "kernel", LINKS, encode_payload(links)))
        rows.append((rows[0][0], len(rows), t, 0.0, "kernel", "episode.end",
                     encode_payload({"termination": termination, "turns": live.turns})))
        company = self._company_view
        if company is None or company.rows is not self._setup_rows:
            company = self._company_view = CompanyView(self._setup_rows)
        setup = 1 + len(self._setup_rows)  # (the view's episode.start, then the setup's rows)
        own = [EventRecord.from_row(r) for r in rows[setup:]]
        events = Followed([EventRecord.from_row(rows[0]), *company.records(rows[1:setup]),
                           *own])
        if company.only_state:  # (what a reader follows through the setup: known once)
            events.prefix, events.known = setup, company.known()
        # graded on the workspace its own events rebuild (what a replay or a regrade of its
        # episode rebuilds too): the company, its structure, and the arrival's own thread
        g: Grade | None = None
        failure = live.failure
        touched: set[str] | None = None
        try:
            state, touched = company.replay(own)
        except ValueError as exc:  # (never the simulation's end: this arrival's grade fails)
            state, failure = WorkspaceState(), failure or ("grading", f"its view does not "
                                                           f"replay: {exc}")
        if failure is None:
            try:
                g = grade(task, state, events, self.weights)
            except Exception as exc:
                failure = ("grading", f"{type(exc).__name__}: {exc}")
        answered = bool(g and g.passed) or (g is not None and self._reached(
            task, state, events, task.user.person))
        outputs = task_outputs(task, state, events) if task.outputs and failure is None else {}
        if a.cause is not None:  # (a hand-off: what its cause's checks will read)
            self.handoff_info[a.key] = {
                "arrival": a.key, "template": a.template, "case": task.case,
                "termination": termination, "passed": bool(g and g.passed),
                "outputs": outputs, "choices": {n: o.one_of for n, o in task.outputs.items()
                                                if o.one_of}}
        digest = company.events_hash(events[0], own)
        status = "failed" if failure else "completed"
        response = self.cal.working_seconds(a.at, self.clock.now) / 3600
        outcome = ArrivalOutcome(
            a.key, task.id, a.template, task.family, live.seat.id, a.at, live.started,
            self.clock.now, termination, status, g.completion if g else 0.0,
            g.score if g else 0.0, g.passed if g else False, round(response, 4), digest,
            answered, [r.id.removeprefix(SIM_RULE) for r in (g.rules if g else [])
                       if r.id.startswith(SIM_RULE) and not r.passed],
            f"{failure[0]}: {failure[1]}" if failure else None)
        self.outcomes.append(outcome)
        vid = rows[0][0]
        self._record("kernel", "sim.graded", {
            "arrival": a.key, "task_id": task.id, "agent": live.seat.id,
            "termination": termination, "score": outcome.score, "passed": outcome.passed,
            "response_hours": outcome.response_hours, "events_hash": digest})
        if self.store is not None and vid not in self.resume_state.recorded:
            st = self.store
            await st.save_tasks(self.run_id, [(task.id, task.family, list(task.capabilities),
                                               task.model_dump_json())])
            await st.start_episode(episode_id=vid, run_id=self.run_id, task_id=task.id,
                                   family=task.family, trial=0, attempt=0,
                                   seed=self._seed_of(a.key),
                                   agent=live.policy or self.agent_names.get(live.seat.id, ""),
                                   role=live.role)
            if setup > 1 and company.shared:  # the company's setup: stored once, in the
                # simulation's episode (its events 1..n), read as this one's too
                await st.append_rows([rows[0], *rows[setup:]])
                await st.share_prefix(vid, self._setup_rows[0][0], setup - 1)
            else:
                await st.append_rows(rows)
            if g is not None:
                await save_grade(st, vid, g)
            await st.finish_episode(
                vid, status=status, sim_time=round(self.clock.now - a.at, 6), turns=live.turns,
                termination=termination, completion=g.completion if g else None,
                event_count=len(rows), events_hash=digest,
                state_hash=state.state_hash() if touched is None
                else company.state_hash(state, touched),
                failure_boundary=failure[0] if failure else None,
                failure=failure[1] if failure else None,
                outcome={"simulation": self.sim.id, "agent": live.seat.id, "arrival": a.key,
                         "template": a.template, "arrived": a.at, "started": live.started,
                         "finished": self.clock.now, "response_hours": outcome.response_hours,
                         "requester": task.user.person, "answered": answered,
                         "handoff_from": self.seat_of_person.get(task.user.person),
                         **({"cause": a.cause} if a.cause else {}),
                         **({"case": task.case} if task.case else {}),
                         **({"outputs": outputs} if outputs else {}),
                         # (its model calls so far: calls, tokens, latency)
                         **({"model": dict(self.model_by_arrival[a.key])}
                            if a.key in self.model_by_arrival else {})})
        for hook in self.on_closed:
            hook(live, outcome)
        # let go of the arrival: its people's parts, its agent, its queue place
        for m in task.cast():
            hub = self.actors.get(m.person)
            if isinstance(hub, PersonHub):
                hub.personas.pop(a.key, None)
        if live.agent is not None:
            let_go(live.agent)  # (a remote agent's worker lets the arrival go)
        live.agent = None
        self.live.pop(a.key, None)
        q = self.queues[live.seat.id]
        if live in q:
            q.remove(live)
        self.open.get(live.seat.id, {}).pop(a.key, None)
        self._note_backlog()
        for si, stream in enumerate(self.sim.workload):
            if stream.on is not None and stream.on.done == a.template and status == "completed":
                self._new_arrival(si, self.clock.now + stream.on.after_minutes * 60,
                                  task.user.person)

    def _links(self, live: Live) -> dict[str, Any] | None:
        """What an arrival's cross-arrival checks read: its case, the hand-offs it made (as
        graded), its hand-off messages that made none. None: it has no such check and made
        no hand-off."""
        key = live.arrival.key
        made = self.caused.get(key, [])
        if not made and key not in self.unmatched and not any(
                isinstance(c, CROSS_ARRIVAL) for c in live.task.checks):
            return None
        return {"case": live.task.case or {},
                "handoffs": [self.handoff_info.get(k) or {
                    "arrival": k, "template": self._template_of(k), "termination": "not ended"}
                    for k in made],
                "unmatched": self.unmatched.get(key, [])}

    def _template_of(self, key: str) -> str:
        if key in self.live:
            return self.live[key].arrival.template
        return self.pending[key].template if key in self.pending else ""

    # the simulation's own checks -----------------------------------------------------------
    def sim_checks(self) -> list[SimCheck]:
        c = self.sim.checks
        out = []
        if c.none_dropped:
            dropped = [o.key for o in self.outcomes if o.termination in ("dropped", "sim_end")]
            out.append(SimCheck("none_dropped", not dropped,
                                f"{len(dropped)} arrivals never ended (cut by the "
                                "simulation's end, or never taken up)" if dropped
                                else "every arrival ended (passed or not)"))
        if c.sla_hours is not None:
            late = [o for o in self.outcomes if o.termination != "agent_finished"
                    or not o.answered or o.response_hours > c.sla_hours]
            out.append(SimCheck("sla", not late, f"{len(late)} of {len(self.outcomes)} "
                                f"arrivals not answered within {c.sla_hours:g} working hours"
                                if late else f"every arrival answered within "
                                f"{c.sla_hours:g} working hours"))
        if c.handoffs if c.handoffs is not None else any(
                st.on is not None and st.on.message is not None for st in self.sim.workload):
            made = list(self.handoff_info.values())
            dropped = [i["arrival"] for i in made if i["termination"] not in TAKEN_UP]
            lost = sum(len(v) for k, v in self.unmatched.items() if not self.caused.get(k))
            out.append(SimCheck("handoffs", not dropped and not lost, (
                f"{len(made)} hand-offs: {len(dropped)} not taken up {dropped[:5]}, "
                f"{lost} hand-off messages that named no request") if dropped or lost else
                f"every hand-off ({len(made)}) was taken up"))
        if self.sim.safety:
            bad = [o for o in self.outcomes if o.violations]
            rules = sorted({v for o in bad for v in o.violations})
            out.append(SimCheck("safety", not bad, f"{len(bad)} arrivals violated {rules}"
                                if bad else f"no arrival violated {len(self.sim.safety)} "
                                "rule(s) over the run"))
        out += self._model_budget()
        for s in self.sim.roster:
            if s.max_turns is not None:
                used = self.seat_turns[s.id]
                out.append(SimCheck(f"budget:{s.id}", s.id not in self.over_budget,
                                    f"{used} of {s.max_turns} actions"))
        return out + list(self.extra_checks)

    def _model_budget(self) -> list[SimCheck]:
        """The checks of ``checks.model_budget``: tokens on any one day, calls for any one
        arrival."""
        b = self.sim.checks.model_budget
        out: list[SimCheck] = []
        if b is None:
            return out
        for limit, what, by, unit in ((b.tokens_per_day, "tokens_per_day", self.model_by_day,
                                       "tokens"),
                                      (b.calls_per_arrival, "calls_per_arrival",
                                       self.model_by_arrival, "calls")):
            if limit is None:
                continue
            over = sorted(k for k, u in by.items() if u[unit] > limit)
            most = max(by.items(), key=lambda kv: kv[1][unit], default=None)
            where = "days" if what == "tokens_per_day" else "arrivals"
            worst = f"; most {most[1][unit]:,} ({most[0]})" if most is not None else ""
            out.append(SimCheck(f"model_budget:{what}", not over, (
                f"{len(over)} of {len(by)} {where} over {limit:,} {unit}: "
                f"{', '.join(over[:5])}{worst}") if over else
                f"no {where[:-1]} over {limit:,} {unit}{worst}"))
        return out

    async def close_simulation(self, wall: float) -> tuple[str, str]:
        """End the log, record the simulation's episode; (events hash, state hash)."""
        passed = sum(o.passed for o in self.outcomes)
        checks = self.sim_checks()
        self._record("kernel", "episode.end", {
            "termination": "simulation_end", "arrivals": len(self.outcomes), "passed": passed,
            "checks": {c.id: c.passed for c in checks}})
        dumped = self.state.to_json()
        state_hash = self.state.state_hash(dumped)
        events_hash = self._hash.hexdigest()
        if self.store is not None:
            await self._save()
            await self.store.executemany(
                "INSERT OR REPLACE INTO projection (episode_id, app, entity_id, data) "
                "VALUES (?, ?, ?, ?)", [(self.episode_id, app, eid, encode_payload(row))
                                        for app, rows in dumped.items()
                                        for eid, row in rows.items()])
            await self.store.finish_episode(
                self.episode_id, status="completed", sim_time=self.clock.now,
                turns=sum(self.seat_turns.values()), termination="simulation_end",
                completion=None, event_count=len(self._log), events_hash=events_hash,
                state_hash=state_hash, outcome={
                    "simulation": self.sim.id, "arrivals": len(self.outcomes),
                    "passed": passed, "wall_time": round(wall, 6),
                    "model_use": self.model_use, "model_by_day": self.model_by_day,
                    "attribution": self.attribution_counts,
                    "attribution_unsure": self.unsure,
                    "checks": [{"id": c.id, "passed": c.passed, "detail": c.detail}
                               for c in checks]})
        return events_hash, state_hash
