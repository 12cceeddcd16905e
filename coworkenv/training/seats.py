"""Several agents of one simulation trained together, each its own model (``train seats``).

Each held agent (a *seat* of the simulation's roster) has its own model and its own TRL
``GRPOTrainer``; the simulations are shared. A training step is one *round*: when every
seat's trainer asks for its rollouts (TRL's ``rollout_func``), the round plays
``batch_size`` simulations of the file at once (``num_generations`` of each seed: a GRPO
group is the same company day, played again), every seat held from outside
(:class:`~coworkenv.runtime.SimulationSession` with several seats) and stepped by its own
model, as its trainer holds it at that step. A seat's rollout in a simulation is its first
arrival there, from the opening to the end of the arrival (model turns, and what the agent
was told after each action, masked out of the loss); its reward is that arrival's grade, so
each arrival's reward goes to its own seat. After its arrival a seat is let go and its later
arrivals go to ``then`` (``noop`` by default; ``oracle`` keeps the company working), and the
simulation runs to its end like any. A seat that got no arrival in a simulation (a hand-off
that never came) gives a rollout no reward function scores: TRL leaves it out of its group's
baseline and gives it no advantage.

So a hand-off between two trained agents is learned by both: the assistant is rewarded for
asking finance and relaying its answer, finance for answering what it was asked.

While a round plays, the trainers wait; after it, they train one at a time (each trainer
holds the turn from its rollouts to its next request), so two trainers never share the
process's accelerator state at once. Every simulation of every round is a recorded run in the
store (run ids ``<run>-r<round>-<i>``), replayable and re-gradable like any.

Sampling is keyed, not drawn from the process's random state: each model turn is sampled
with a generator of its own, seeded by ``seed``, the seat, the round, the simulation and the
turn (:class:`KeyedSampling`). Models generate side by side in threads and simulations take
turns in whatever order they reach a model, yet a turn's tokens depend only on the model's
weights, what it read and that key.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..runtime.session import Action, Observation, answer_texts

ROUND_WAIT_S = 6 * 3600.0
"""How long a trainer waits for the others to ask for a round before it gives up."""


@dataclass(frozen=True)
class SeatOptions:
    steps: int = 2
    learning_rate: float = 1e-6
    batch_size: int = 2
    """Simulations per round (one rollout of each seat in each; a multiple of
    num_generations)."""
    num_generations: int = 2
    """Simulations of one seed per round (the GRPO group)."""
    max_turns: int = 4
    """Model turns per arrival; the arrival ends after the last."""
    max_turn_tokens: int = 96
    max_completion_length: int = 512
    """Tokens of an arrival's whole completion (model turns and what the agent was told)."""
    temperature: float = 1.0
    beta: float = 0.0
    tools: list[str] | None = field(default_factory=lambda: ["reference"])
    """Tools offered at each arrival: tool or app names, ``reference`` (the tools the
    arrival's task's reference solution calls); None: every tool."""
    then: str = "noop"
    """Who takes a seat's arrivals after its trained one."""
    seed: int = 0
    """The first round's workload seed (round r plays seeds seed + r x groups ...)."""
    cpu: bool = True


@dataclass
class SeatRollout:
    """One seat's arrival in one simulation, as TRL trains on it."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    """1: a token the model generated; 0: one the simulation told it (no loss)."""
    reward: float | None
    """The arrival's score (None: the seat had no arrival in this simulation)."""
    run: str
    arrival: str | None = None
    task_id: str | None = None
    turns: int = 0


def _suffix_ids(tok: Any, messages: list[dict[str, Any]]) -> list[int]:
    """The tokens the chat template puts after an assistant turn's end-of-turn token for
    ``messages`` (what the agent was told) up to the start of its next turn."""
    base = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    before = tok.apply_chat_template(base, tokenize=False)
    after = tok.apply_chat_template([*base, *messages], tokenize=False,
                                    add_generation_prompt=True)
    end = before.rindex(tok.eos_token) + len(tok.eos_token)
    if not after.startswith(before[:end]):
        raise ValueError("the chat template renders a conversation's earlier turns "
                         "differently once more follow: cannot build a multi-turn completion")
    return list(tok(after[end:], add_special_tokens=False)["input_ids"])


class KeyedSampling:
    """A logits processor that samples the next token itself, with a generator of its own
    (at ``temperature``), and leaves only that token possible: generation run greedily then
    takes it. The sample is a function of the generator's seed alone, not of the process's
    random state, which other threads' generations move."""

    def __init__(self, temperature: float, generator: Any) -> None:
        self.temperature, self.generator = temperature, generator

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        pick = torch.multinomial(probs, 1, generator=self.generator)
        return torch.full_like(scores, float("-inf")).scatter_(1, pick, 0.0)


def sample_seed(seed: int, *key: object) -> int:
    """A generator's seed for one model turn: ``seed`` and the turn's key (seat, round,
    simulation, turn), stable across processes and Python versions."""
    text = ":".join(str(x) for x in (seed, *key))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


class SeatPolicy:
    """One seat's model as its trainer holds it, generating one turn at a time (sampled with
    a generator keyed by the turn: :class:`KeyedSampling`), one turn at a time per model (a
    lock: its simulations take turns; other seats' models run beside it)."""

    def __init__(self, trainer: Any, tok: Any, options: SeatOptions, seat: str = "") -> None:
        self.trainer, self.tok, self.o, self.seat = trainer, tok, options, seat
        self.lock = threading.Lock()

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        return list(self.tok.apply_chat_template(messages, tools=tools or None,
                                                 add_generation_prompt=True, tokenize=True,
                                                 return_dict=True)["input_ids"])

    def generate(self, ids: list[int], max_new: int, key: tuple[object, ...] = ()) -> list[int]:
        """The model's next turn after ``ids`` (at most ``max_new`` tokens, its end-of-turn
        token kept), sampled with the generator of ``key`` (greedy at temperature 0)."""
        import torch
        from transformers import LogitsProcessorList

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        with self.lock, torch.no_grad():
            was = model.training
            model.eval()
            try:
                x = torch.tensor([ids], device=model.device)
                keyed = LogitsProcessorList()
                if self.o.temperature > 0:
                    g = torch.Generator(device=model.device)
                    g.manual_seed(sample_seed(self.o.seed, self.seat, *key))
                    keyed.append(KeyedSampling(self.o.temperature, g))
                out = model.generate(
                    x, attention_mask=torch.ones_like(x), max_new_tokens=max_new,
                    do_sample=False, temperature=None, top_p=None, top_k=None,
                    logits_processor=keyed, pad_token_id=self.tok.pad_token_id,
                    eos_token_id=self.tok.eos_token_id)
            finally:
                model.train(was)
        new: list[int] = out[0, len(ids):].tolist()
        eos = self.tok.eos_token_id
        return new[:new.index(eos) + 1] if eos in new else new

    def parse(self, new: list[int], prompt: list[int],
              tools: list[dict[str, Any]]) -> dict[str, Any]:
        from trl.chat_template_utils import parse_response

        try:
            return dict(parse_response(self.tok, new, prefix=prompt, tools=tools or None))
        except Exception:  # (a turn the parser cannot read: its text, no call)
            return {"content": self.tok.decode(new, skip_special_tokens=True)}


async def play_seat(seat: Any, policy: SeatPolicy, run: str, tools: list[str] | None,
                    placeholder: list[int], key: tuple[object, ...] = ()) -> SeatRollout:
    """Step ``seat`` (a :class:`~coworkenv.runtime.simsession.SeatSession`) through its next
    arrival with ``policy``; let it go after. The rollout's tokens are what the model read
    and wrote; model turn t is sampled with the key ``(*key, t)``."""
    from ..agents.chat import agent_tools
    from ..sim.task import resolve_toolset

    o = policy.o
    obs = await seat.reset()
    if obs.done:
        await seat.release()
        return SeatRollout(placeholder, [policy.tok.eos_token_id], [0], None, run)
    task = seat.task
    offered = agent_tools(resolve_toolset(tools, task) if tools else None)
    head, told = obs.messages[:2], obs.messages[2:]
    if told:  # (what came before its first decision: part of its request)
        extra = "\n".join(str(m.get("content") or "") for m in told)
        head = [head[0], {**head[1], "content": f"{head[1]['content']}\n\n{extra}"}]
    prompt = policy.prompt(head, offered)
    completion: list[int] = []
    mask: list[int] = []
    reward, info, done, turns = 0.0, dict(seat.info()), False, 0
    while not done:
        room = o.max_completion_length - len(completion)
        if turns >= o.max_turns or room < 8:
            _, reward, done, info = await seat.step(Action.end())
            break
        new = await anyio.to_thread.run_sync(policy.generate, prompt + completion,
                                             min(o.max_turn_tokens, room), (*key, turns))
        turns += 1
        completion += new
        mask += [1] * len(new)
        parsed = policy.parse(new, prompt + completion[:-len(new)], offered)
        calls = parsed.get("tool_calls") or []
        if not calls:  # (the model stopped: its words go to whoever asked)
            _, reward, done, info = await seat.step(
                Action.end(str(parsed.get("content") or "")))
            break
        fn = calls[0].get("function") or {}
        args = fn.get("arguments") or {}
        if isinstance(args, str):
            try:
                args = json.loads(args or "{}")
            except ValueError:
                args = {}
        action = Action.called(str(fn.get("name") or ""), args if isinstance(args, dict) else {})
        problem = action.problem()
        if problem is not None:
            said = [problem]
        else:
            obs_: Observation
            obs_, reward, done, info = await seat.step(action)
            said = answer_texts(action, obs_)
        if done:
            break
        if new[-1] != policy.tok.eos_token_id:  # (cut at the turn's length: closed here)
            completion.append(policy.tok.eos_token_id)
            mask.append(0)
        suffix = _suffix_ids(policy.tok, [{"role": "tool", "name": action.name,
                                           "content": "\n".join(said)}])
        completion += suffix
        mask += [0] * len(suffix)
    await seat.release()
    return SeatRollout(prompt, completion or [policy.tok.eos_token_id], mask or [0],
                       float(reward), run, info.get("arrival"), info.get("task_id"), turns)


class Rounds:
    """The trainers' meeting point: a round is played when every seat's trainer has asked for
    it, by the thread that asked last; each takes its seat's rollouts. See the module doc."""

    def __init__(self, file: Path, seats: list[str], db: Path, run: str,
                 options: SeatOptions, placeholder: Callable[[str], list[int]]) -> None:
        self.file, self.seats, self.db, self.run, self.o = file, seats, db, run, options
        self.placeholder = placeholder
        self.policies: dict[str, SeatPolicy] = {}
        self.cond = threading.Condition()
        self.turn = threading.Lock()
        self.asked: dict[str, int] = defaultdict(int)
        self.waiting: dict[int, set[str]] = defaultdict(set)
        self.played: dict[int, dict[str, list[SeatRollout]]] = {}
        self.failed: BaseException | None = None
        self.holding: str | None = None
        self.rollouts: dict[str, list[list[SeatRollout]]] = defaultdict(list)
        self.runs: list[str] = []

    def fail(self, exc: BaseException) -> None:
        with self.cond:
            if self.failed is None:
                self.failed = exc
            self.cond.notify_all()

    def let_go(self, seat: str) -> None:
        """``seat``'s trainer is done (or failed): it gives the turn back."""
        if self.holding == seat:
            self.holding = None
            self.turn.release()

    def rollout_func(self, seat: str, tok: Any) -> Callable[[list[Any], Any], dict[str, Any]]:
        def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            self.policies.setdefault(seat, SeatPolicy(trainer, tok, self.o, seat))
            self.let_go(seat)  # (its training step is over: the others may train)
            got = self._take(seat, len(prompts))
            self.turn.acquire()
            self.holding = seat
            self.rollouts[seat].append(got)
            return {"prompt_ids": [r.prompt_ids for r in got],
                    "completion_ids": [r.completion_ids for r in got],
                    "logprobs": None, "env_mask": [r.env_mask for r in got],
                    "seat_reward": [r.reward for r in got],
                    "arrival": [r.arrival for r in got]}

        return rollout

    def _take(self, seat: str, n: int) -> list[SeatRollout]:
        with self.cond:
            k = self.asked[seat]
            self.asked[seat] += 1
            self.waiting[k].add(seat)
            last = len(self.waiting[k]) == len(self.seats)
            if not last:
                ok = self.cond.wait_for(lambda: k in self.played or self.failed is not None,
                                        timeout=ROUND_WAIT_S)
                if self.failed is not None:
                    raise RuntimeError(f"seat {seat}: round {k} was not played "
                                       f"({self.failed!r})") from self.failed
                if not ok:
                    raise TimeoutError(f"seat {seat}: the other seats' trainers did not ask "
                                       f"for round {k} within {ROUND_WAIT_S:.0f} s")
        if last:
            try:
                played = anyio.run(self._play, k, n)
            except BaseException as exc:
                self.fail(exc)
                raise
            with self.cond:
                self.played[k] = played
                self.cond.notify_all()
        out = self.played[k][seat]
        if len(out) != n:
            raise ValueError(f"seat {seat}: its trainer asked for {n} rollouts, the round "
                             f"played {len(out)} simulations (one batch size for every seat)")
        return out

    async def _play(self, k: int, n: int) -> dict[str, list[SeatRollout]]:
        from ..runtime import SimulationSession

        g = self.o.num_generations
        got: dict[str, list[SeatRollout | None]] = {s: [None] * n for s in self.seats}

        async def one(i: int) -> None:
            run = f"{self.run}-r{k}-{i}"
            seed = self.o.seed + k * (n // g) + i // g
            async with SimulationSession(self.file, agent=self.seats, db=self.db, run_id=run,
                                         then=self.o.then, seed=seed) as s:
                async def seat(sid: str) -> None:
                    got[sid][i] = await play_seat(s.seats[sid], self.policies[sid], run,
                                                  self.o.tools, self.placeholder(sid), (k, i))

                async with anyio.create_task_group() as tg:
                    for sid in self.seats:
                        tg.start_soon(seat, sid)
            self.runs.append(run)

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        return {s: [r for r in rs if r is not None] for s, rs in got.items()}


def arrival_score(completions: list[Any], seat_reward: list[float | None] | None = None,
                  **kwargs: Any) -> list[float | None]:
    """The reward: the score of the seat's arrival in the rollout's simulation (None where
    the seat had no arrival there)."""
    return list(seat_reward or [None] * len(completions))


arrival_score.__name__ = arrival_score.__qualname__ = "score"


def train_seats(file: Path, models: Mapping[str, str], out: Path, db: Path,
                options: SeatOptions | None = None, run_id: str | None = None,
                ) -> dict[str, Any]:
    """Train one model per seat of ``file``'s roster (``models``: seat id -> model) on
    simulations of ``file``; each checkpoint in ``out/<seat>``. Returns the summary written
    to ``out/coworkenv-seats.json``: per seat its rewards per step and log history, the
    rounds' run ids."""
    import datasets
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    from .environment import new_grpo_run_id
    from .grpo import grpo_config
    from .serve import chat_tokenizer
    from .sft import no_hub_kernels, prepare_model

    no_hub_kernels()
    # rollout_func is TRL's experimental API: the warning says so on every trainer; this
    # module is where coworkenv depends on it (tests/training/test_seats.py pins its shape)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    o = options or SeatOptions()
    if not models:
        raise ValueError("models: give a model for each seat to train (seat=model)")
    if o.batch_size % o.num_generations:
        raise ValueError(f"batch_size ({o.batch_size}) must be a multiple of num_generations "
                         f"({o.num_generations})")
    from ..agents.factory import agent_factory

    try:
        agent_factory(o.then)  # (before any model is loaded)
    except ValueError as exc:
        raise ValueError(f"then: {exc}") from None
    rid = run_id or new_grpo_run_id("seats")
    seats = list(models)
    paths = {sid: prepare_model(m) for sid, m in models.items()}
    toks: dict[str, Any] = {}
    for sid, path in paths.items():
        toks[sid] = chat_tokenizer(path)
        toks[sid].padding_side = "left"

    def placeholder(sid: str) -> list[int]:
        return list(toks[sid].apply_chat_template(
            [{"role": "user", "content": f"(no arrival for {sid} in this simulation)"}],
            add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])

    rounds = Rounds(Path(file), seats, db, rid, o, placeholder)
    trainers: dict[str, Any] = {}
    for sid, path in paths.items():
        rows = [{"prompt": [{"role": "user", "content": f"arrivals of {sid} in {file}"}]}
                for _ in range(o.steps * o.batch_size // o.num_generations)]
        trainers[sid] = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(path), reward_funcs=[arrival_score],
            args=grpo_config(out / sid, o), train_dataset=datasets.Dataset.from_list(rows),
            processing_class=toks[sid], rollout_func=rounds.rollout_func(sid, toks[sid]))
    errors: dict[str, BaseException] = {}

    def train(sid: str) -> None:
        try:
            trainers[sid].train()
        except BaseException as exc:
            errors[sid] = exc
            rounds.fail(exc)
        finally:
            rounds.let_go(sid)

    threads = [threading.Thread(target=train, args=(sid,), name=f"train-{sid}", daemon=True)
               for sid in seats]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = next(iter(errors.values()))
        raise first
    summary: dict[str, Any] = {"file": str(file), "db": str(db), "run": rid,
                               "rounds": sorted(rounds.runs), "options": asdict(o), "seats": {}}
    for sid, tr in trainers.items():
        tr.save_model(str(out / sid))
        toks[sid].save_pretrained(str(out / sid))
        history = tr.state.log_history
        summary["seats"][sid] = {
            "model": models[sid], "checkpoint": str(out / sid),
            "reward": [h["rewards/score/mean"] for h in history if "rewards/score/mean" in h],
            "rollouts": [[{"run": r.run, "arrival": r.arrival, "task_id": r.task_id,
                           "reward": r.reward, "turns": r.turns,
                           "model_tokens": sum(r.env_mask)} for r in step]
                         for step in rounds.rollouts[sid]],
            "log_history": history}
    out.mkdir(parents=True, exist_ok=True)
    (out / "coworkenv-seats.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary
