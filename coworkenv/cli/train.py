"""Training data and models: `export sft|rl`, `train sft|grpo|seats`, `serve`."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import (
    DB_HELP,
    app,
    bind_or_fail,
    console,
    err,
    fail,
    known_run,
    load,
    names,
    open_reader,
    output_folder,
    select_tasks,
    toolset,
    writable_db,
)

export_app = typer.Typer(no_args_is_help=True, help="Export training data from the store.")
app.add_typer(export_app, name="export")


@export_app.command("sft")
def export_sft_cmd(
    out: Annotated[Path, typer.Option(help="Folder for train/eval JSONL (and a HF dataset)")],
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    run_id: Annotated[str | None, typer.Option("--run", help="Run id, or the start of one "
                                               "(default: the latest run)")] = None,
    all_runs: Annotated[bool, typer.Option("--all-runs", help="Every run in the store "
                                           "instead of one")] = False,
    min_score: Annotated[float, typer.Option(help="Score a demonstration needs")] = 0.75,
    split_by: Annotated[str, typer.Option(help="task | family")] = "task",
    eval_fraction: Annotated[float, typer.Option(help="Share of tasks/families held out")] = 0.2,
    all_roles: Annotated[bool, typer.Option(help="Also student episodes that passed")] = False,
    held_out: Annotated[str | None, typer.Option(help="Task ids or families (as --split-by) "
                                                 "to hold out, comma-separated, instead of "
                                                 "--eval-fraction")] = None,
    agent: Annotated[str | None, typer.Option(help="Only the arrivals this agent of a "
                                              "simulation's roster handled")] = None,
) -> None:
    """Teacher episodes that passed, as SFT conversations with tools (TRL's format)."""
    from ..training import export_sft

    if split_by not in ("task", "family"):
        raise fail(f"--split-by: expected task or family, got {split_by!r}")
    from ..training.export import NothingToExportError

    if all_runs and run_id is not None:
        raise fail("--all-runs: every run, or --run ID: one; not both")
    output_folder(out, "--out")
    with open_reader(db, checked=True) as r:
        if all_runs:
            console.print(f"exporting every run in {db} ({len(r.runs())} runs)",
                          highlight=False)
        else:
            run_id = _which_run(r, run_id, db)
        if agent is not None:  # (named before any work: a typo is one line, at once)
            from ..training.export import simulation_agents

            known = sorted(set(simulation_agents(r, run_id).values()))
            if agent not in known:
                raise fail(f"--agent: no arrival {'of run ' + run_id + ' ' if run_id else ''}"
                           f"was handled by agent {agent!r} (agents: "
                           f"{', '.join(known) or 'none: no simulation there'})")
    try:
        st = export_sft(db, out, run=run_id, min_score=min_score, split_by=split_by,  # type: ignore[arg-type]
                        eval_fraction=eval_fraction, teachers_only=not all_roles,
                        held_out=names(held_out), agent=agent)
    except NothingToExportError as exc:
        raise fail(f"{exc} (--min-score {min_score}"
                   f"{'' if all_roles else ', teacher runs only; --all-roles for any'})") from None
    console.print(f"wrote {st.written} rows to {out} ({st.considered} considered, excluded "
                  f"{dict(st.excluded)})", highlight=False)


def _which_run(reader: Any, run_id: str | None, db: Path) -> str:
    """The run an export takes (default: the latest), said in one line when it was not
    named in full."""
    rid = known_run(reader, run_id, db)
    if run_id is None:
        n = len(reader.runs())
        console.print(f"exporting run {rid}, the latest of {n} in {db} (--run ID: another"
                      f"{', --all-runs: every one' if n > 1 else ''})", highlight=False)
    elif rid != run_id:
        console.print(f"exporting run {rid}", highlight=False)
    return rid


@export_app.command("rl")
def export_rl_cmd(
    out: Annotated[Path, typer.Option(help="Folder for train/eval JSONL")],
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", help="Task files")] = None,
    db: Annotated[Path | None, typer.Option(help="Or: the tasks a run used, from this "
                                            "SQLite file of the event store (one file)")]
    = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Run id, or the start of one "
                                               "(with --db; default: the latest run)")] = None,
    split_by: Annotated[str, typer.Option(help="task | family")] = "task",
    eval_fraction: Annotated[float, typer.Option(help="Share held out")] = 0.2,
    tools: Annotated[str | None, typer.Option(help="Tools offered (as for `run --tools`)")]
    = None,
    held_out: Annotated[str | None, typer.Option(help="Task ids or families to hold out, "
                                                 "comma-separated")] = None,
    agent: Annotated[str | None, typer.Option(help="With --db: only the arrivals this agent "
                                              "of a simulation's roster handled")] = None,
) -> None:
    """Task prompts for RL (the opening conversation, tools and task id of each task). From a
    simulation's run (--db, --run), each arrival is a task of its own (the company's
    workspace with what the arrival brought), for the agent that handled it (--agent)."""
    from ..sim import Task
    from ..training import export_rl

    if (tasks is None) == (db is None):
        raise fail("give exactly one of --tasks or --db")
    if agent is not None and db is None:
        raise fail("--agent: picks a simulation's arrivals from a store; give --db")
    output_folder(out, "--out")
    if tasks is not None:
        loaded, source = load(tasks), ", ".join(map(str, tasks))
    else:
        assert db is not None
        from ..training.export import simulation_agents

        with open_reader(db, checked=True) as r:
            rid = _which_run(r, run_id, db)
            specs = r.task_specs(rid)
            if agent is not None:
                seats = simulation_agents(r, rid)
                mine = {e.split(":")[1] for e, a in seats.items() if a == agent}
                if not mine:
                    raise fail(f"--agent {agent}: no arrival of run {rid} was handled by it "
                               f"(agents: {', '.join(sorted(set(seats.values()))) or 'none'})")
                specs = {t: s for t, s in specs.items() if t in mine}
            loaded = [Task.model_validate_json(s) for s in specs.values()]
        source = f"{db}, run {rid}" + (f", agent {agent}" if agent else "")
    from ..sim import HeldOutError

    try:
        st = export_rl(loaded, out, split_by=split_by, eval_fraction=eval_fraction,  # type: ignore[arg-type]
                       source=source, tools=toolset(tools), held_out=names(held_out))
    except HeldOutError as exc:
        raise fail(str(exc)) from None
    console.print(f"wrote {st.written} prompts to {out}", highlight=False)


train_app = typer.Typer(no_args_is_help=True, help="Train a model (needs the train extra).")
app.add_typer(train_app, name="train")


@train_app.command("sft")
def train_sft_cmd(
    model: Annotated[str, typer.Option(help="Hugging Face id or folder, or a .gguf file")],
    data: Annotated[Path, typer.Option(help="Folder written by `coworkenv export sft`")],
    out: Annotated[Path, typer.Option(help="Checkpoint folder")],
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps")] = 30,
    learning_rate: Annotated[float, typer.Option(help="Learning rate")] = 5e-5,
    batch_size: Annotated[int, typer.Option(min=1, help="Per-device batch size")] = 2,
    max_length: Annotated[int, typer.Option(min=64, help="Tokens per example")] = 2048,
    truncation: Annotated[str, typer.Option(help="What a longer example keeps: keep_start "
                                            "(the task and the first turns) or keep_end (the "
                                            "last turns, for long-horizon demonstrations "
                                            "on a short max-length)")] = "keep_start",
    lora: Annotated[bool, typer.Option(help="Train LoRA adapters (peft)")] = False,
    gpu: Annotated[bool, typer.Option(help="Train on the accelerator (bf16, gradient "
                                      "checkpointing); default CPU")] = False,
    measure_rows: Annotated[int, typer.Option(min=0, help="Rows of the training set and of "
                                              "eval.jsonl whose loss is measured before and "
                                              "after training (0: none)")] = 16,
    curriculum: Annotated[bool, typer.Option(help="Short demonstrations first: the rows the "
                                             "run sees (steps x batch size, drawn at random) "
                                             "in order of length")] = False,
) -> None:
    """Supervised fine-tuning on teacher demonstrations with TRL (assistant-only loss)."""
    _train_imports("train sft")
    from ..training.sft import NothingToTrainError, SFTOptions, train_sft

    if truncation not in ("keep_start", "keep_end"):
        raise fail(f"--truncation: expected keep_start or keep_end, got {truncation!r}")
    output_folder(out, "--out")
    if not (data / "train.jsonl").exists():
        raise fail(f"--data: {data / 'train.jsonl'} not found (run `coworkenv export sft`)")
    from ..outputs import IncompleteOutputError
    from ..sim import HeldOutError

    try:
        res = train_sft(model, data, out, SFTOptions(steps, learning_rate, batch_size,
                                                     max_length, lora, cpu=not gpu,
                                                     truncation=truncation,
                                                     measure_rows=measure_rows,
                                                     curriculum=curriculum),
                        say=lambda m: err.print(f"train sft: {m}", highlight=False))
    except (HeldOutError, IncompleteOutputError, NothingToTrainError) as exc:
        raise fail(str(exc)) from None
    losses = res["losses"]
    console.print(f"trained {len(losses)} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}; "
                  f"checkpoint {res['checkpoint']}", highlight=False)
    if "curriculum_tokens" in res:
        seen = res["curriculum_tokens"]
        console.print(f"curriculum: {len(seen)} row(s), {seen[0]} to {seen[-1]} tokens",
                      highlight=False)
    for name, before in res["loss_before"].items():
        console.print(f"loss on {res['measured_rows'][name]} {name} row(s): {before:.4f} -> "
                      f"{res['loss_after'][name]:.4f}", highlight=False)


def _train_imports(what: str) -> None:
    try:
        import trl  # noqa: F401
    except ImportError as exc:
        raise fail(f"{what} needs the train extra: pip install -e '.[train]' ({exc})") from None


@train_app.command("grpo")
def train_grpo_cmd(
    model: Annotated[str, typer.Option(help="Hugging Face id or folder (e.g. an SFT "
                                       "checkpoint), or a .gguf file")],
    tasks: Annotated[list[Path], typer.Option("--tasks", help="Task files or folders to roll "
                                              "out (RL prompts)")],
    out: Annotated[Path, typer.Option(help="Checkpoint folder")],
    db: Annotated[Path, typer.Option(help="SQLite file the rollout episodes are recorded "
                                       "in (one file)")]
    = Path("runs/coworkenv.db"),
    only: Annotated[list[str] | None, typer.Option(help="Only these task ids")] = None,
    families: Annotated[str | None, typer.Option(help="Only these families, comma-separated")]
    = None,
    held_out: Annotated[str | None, typer.Option(help="Never train on these families or task "
                                                 "ids, comma-separated (the evaluation's; as "
                                                 "`export --held-out`)")] = None,
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps")] = 2,
    learning_rate: Annotated[float, typer.Option(help="Learning rate")] = 1e-6,
    batch_size: Annotated[int, typer.Option(min=1, help="Rollouts per step (a multiple of "
                                            "--num-generations)")] = 2,
    num_generations: Annotated[int, typer.Option(min=2, help="Rollouts per prompt (the GRPO "
                                                 "group)")] = 2,
    max_completion_length: Annotated[int, typer.Option(min=16, help="Tokens per rollout "
                                                       "(model turns and tool results)")] = 256,
    max_tool_calls: Annotated[int, typer.Option(min=1, help="Tool-calling iterations per "
                                                "rollout")] = 6,
    temperature: Annotated[float, typer.Option(help="Sampling temperature")] = 1.0,
    beta: Annotated[float, typer.Option(help="KL coefficient (0: no reference model)")] = 0.0,
    reward_weights: Annotated[str, typer.Option(help="Weights of score,completion,safety,"
                                                "robustness,no_repeat (missing ones 0; "
                                                "no_repeat: no failed call repeated)")]
    = "1,0,0,0,0",
    tools: Annotated[str, typer.Option(help="Tools each episode offers: `reference` (those "
                                       "its reference solution calls), or tool/app names")]
    = "reference",
    use_vllm: Annotated[bool, typer.Option(help="Generate with vLLM (GPU hosts)")] = False,
    vllm_mode: Annotated[str, typer.Option(help="colocate | server")] = "colocate",
    gpu: Annotated[bool, typer.Option(help="Train on the accelerator (bf16); default CPU")]
    = False,
    run_id: Annotated[str | None, typer.Option(help="Run id of the rollout episodes")] = None,
) -> None:
    """GRPO with TRL where every rollout is a live, recorded coworkenv episode, rewarded
    with its grade (score, completion, safety, robustness logged separately)."""
    _train_imports("train grpo")
    from ..training.grpo import GRPOOptions, train_grpo

    writable_db(db)
    output_folder(out, "--out")
    loaded = select_tasks(load(tasks), only, families)
    excluded = set(names(held_out) or [])
    loaded = [t for t in loaded if t.family not in excluded and t.id not in excluded]
    if not loaded:
        raise fail("no task left to train on (check --only / --families / --held-out)")
    try:
        weights = tuple(float(x) for x in reward_weights.split(","))
    except ValueError:
        weights = ()
    if not 1 <= len(weights) <= 5:
        raise fail(f"--reward-weights: expected 1 to 5 numbers (score,completion,safety,"
                   f"robustness,no_repeat), got {reward_weights!r}")
    if batch_size % num_generations:
        raise fail(f"--batch-size ({batch_size}) must be a multiple of --num-generations "
                   f"({num_generations})")
    opts = GRPOOptions(steps=steps, learning_rate=learning_rate, batch_size=batch_size,
                       num_generations=num_generations,
                       max_completion_length=max_completion_length, max_tool_calls=max_tool_calls,
                       temperature=temperature, beta=beta,
                       reward_weights=weights,  # type: ignore[arg-type]
                       tools=toolset(tools), use_vllm=use_vllm, vllm_mode=vllm_mode, cpu=not gpu)
    from ..sim import HeldOutError
    from ..training.export import refuse_held_out

    try:
        refuse_held_out("train grpo", loaded)  # (before the model is loaded)
    except HeldOutError as exc:
        raise fail(str(exc)) from None
    res = train_grpo(model, loaded, out, db, opts, run_id=run_id)
    r = res["rewards"]
    console.print(f"trained {steps} GRPO steps on {len(loaded)} task(s); reward per step: "
                  + "; ".join(f"{k} {[round(v, 3) for v in vals]}" for k, vals in r.items())
                  + f"; rollouts: run {res['rollout_run']} in {db}; checkpoint {out}",
                  highlight=False)


@train_app.command("seats")
def train_seats_cmd(
    file: Annotated[Path, typer.Argument(help="Simulation file (kind: simulation)")],
    model: Annotated[list[str], typer.Option(
        "--model", help="SEAT=MODEL, once per agent of the roster to train (a Hugging Face "
        "id or folder, or a .gguf file); each seat its own model and trainer")],
    out: Annotated[Path, typer.Option(help="Checkpoint folder (one folder per seat in it)")],
    db: Annotated[Path, typer.Option(help=DB_HELP)] = Path("runs/coworkenv.db"),
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps of each seat (one round "
                                       "of simulations each)")] = 2,
    learning_rate: Annotated[float, typer.Option(help="Learning rate")] = 1e-6,
    batch_size: Annotated[int, typer.Option(min=1, help="Simulations per round (a multiple "
                                            "of --num-generations)")] = 2,
    num_generations: Annotated[int, typer.Option(min=2, help="Simulations of one seed per "
                                                 "round (the GRPO group)")] = 2,
    max_turns: Annotated[int, typer.Option(min=1, help="Model turns per arrival")] = 4,
    max_turn_tokens: Annotated[int, typer.Option(min=4, help="Tokens per model turn")] = 96,
    max_completion_length: Annotated[int, typer.Option(min=16, help="Tokens of an arrival's "
                                                       "completion (turns and what the agent "
                                                       "was told)")] = 512,
    temperature: Annotated[float, typer.Option(help="Sampling temperature")] = 1.0,
    beta: Annotated[float, typer.Option(help="KL coefficient (0: no reference model)")] = 0.0,
    tools: Annotated[str, typer.Option(help="Tools offered at each arrival: `reference` "
                                       "(those its task's reference solution calls), or "
                                       "tool/app names; `all`: every tool")] = "reference",
    then: Annotated[str, typer.Option(help="Policy of a seat's arrivals after its trained "
                                      "one (noop, oracle, ...)")] = "noop",
    seed: Annotated[int, typer.Option(help="Workload seed of the first round")] = 0,
    gpu: Annotated[bool, typer.Option(help="Train on the accelerator (bf16); default CPU")]
    = False,
    run_id: Annotated[str | None, typer.Option(help="Prefix of the rounds' run ids")] = None,
) -> None:
    """GRPO for several agents of one simulation at once, each with its own model: every
    round plays --batch-size simulations of FILE with every seat stepped by its model, and
    each seat is rewarded with the grade of its own arrival (see docs/how-to/train.md)."""
    _train_imports("train seats")
    from ..training.seats import SeatOptions, train_seats

    writable_db(db)
    output_folder(out, "--out")
    from ..sim import TaskFileError
    from ..sim.simulation import load_simulation

    try:
        loaded = load_simulation(file)
    except TaskFileError as exc:
        raise fail(str(exc)) from None
    roster = {a.id for a in loaded.sim.roster}
    models: dict[str, str] = {}
    for given in model:
        seat, sep, path = given.partition("=")
        if not sep or not seat or not path:
            raise fail(f"--model: expected SEAT=MODEL, got {given!r}")
        if seat not in roster:
            raise fail(f"--model {given}: {file} has no agent {seat!r} in its roster "
                       f"(agents: {', '.join(sorted(roster))})")
        if seat in models:
            raise fail(f"--model: seat {seat!r} given twice")
        models[seat] = path
    if batch_size % num_generations:
        raise fail(f"--batch-size ({batch_size}) must be a multiple of --num-generations "
                   f"({num_generations})")
    opts = SeatOptions(steps=steps, learning_rate=learning_rate, batch_size=batch_size,
                       num_generations=num_generations, max_turns=max_turns,
                       max_turn_tokens=max_turn_tokens,
                       max_completion_length=max_completion_length, temperature=temperature,
                       beta=beta, tools=None if tools == "all" else toolset(tools), then=then,
                       seed=seed, cpu=not gpu)
    res = train_seats(file, models, out, db, opts, run_id=run_id)
    for seat, r in res["seats"].items():
        arrivals = sum(1 for step in r["rollouts"] for x in step if x["arrival"])
        console.print(f"{seat}: {steps} step(s), {arrivals} arrival(s) trained on, score per "
                      f"step {[round(v, 3) for v in r['reward']]}; checkpoint {r['checkpoint']}",
                      highlight=False)
    console.print(f"rounds: {len(res['rounds'])} simulations recorded in {db} (runs "
                  f"{res['run']}-r*); summary {out / 'coworkenv-seats.json'}", highlight=False)


@app.command(short_help="Serve a checkpoint as an OpenAI-compatible endpoint.")
def serve(
    model: Annotated[str, typer.Option(help="Checkpoint folder or hub id, or a .gguf file")],
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port")] = 8000,
    name: Annotated[str | None, typer.Option(help="Model name clients use (default: the "
                                             "folder's name)")] = None,
    device: Annotated[str, typer.Option(help="auto (the GPU when there is one), cpu, cuda, "
                                        "cuda:N")] = "auto",
    max_batch: Annotated[int, typer.Option(min=1, help="Concurrent requests generated together "
                                           "(1: one at a time)")] = 64,
    max_batch_tokens: Annotated[int | None, typer.Option(
        min=1, help="Most padded tokens a batch may hold (rows x longest prompt and its new "
        "tokens): bounds the server's memory, e.g. beside training on one GPU (default: no "
        "cap; a batch that runs out of memory is served again in halves and lowers the cap)")
    ] = None,
    prefix_cache_mb: Annotated[float | None, typer.Option(
        min=0, help="Megabytes of key/value caches kept for requests that continue a "
        "conversation (an episode's next turn): only the tokens they add are computed, and "
        "requests are generated one at a time (0: none, batches). Default: 2048 on the CPU, "
        "where computing prompts is most of a call; 0 on a GPU")] = None,
    request_timeout_s: Annotated[float, typer.Option(
        min=1, help="A request not answered in this many seconds gets 504")] = 600.0,
    max_body_bytes: Annotated[int, typer.Option(
        min=1024, help="Largest request body (a long conversation with its tools)")] = 16 << 20,
) -> None:
    """Serve a checkpoint as an OpenAI-compatible chat endpoint (transformers; the chat
    template and tool-call parser training uses), for `coworkenv run --agent openai:NAME`.
    Concurrent requests are generated in batches, similar lengths together; on the CPU, one
    at a time, each continuing its conversation's cached prefix (--prefix-cache-mb)."""
    _train_imports("serve")
    from ..http_server import EdgeLimits
    from ..training.serve import ChatModel, ChatServer, default_prefix_cache_mb

    if prefix_cache_mb is None:
        prefix_cache_mb = default_prefix_cache_mb(device)
    limits = EdgeLimits(max_body_bytes=max_body_bytes, request_timeout_s=request_timeout_s)
    m = ChatModel(model, name=name or "", device=device, prefix_cache_mb=prefix_cache_mb)
    srv = bind_or_fail(lambda: ChatServer(m, host, port, max_batch=max_batch,
                                          max_batch_tokens=max_batch_tokens, limits=limits),
                       host, port)
    if m.prefixes is not None:
        how = f"one request at a time, reusing up to {prefix_cache_mb:g} MB of cached prefixes"
    else:
        cap = f" and {max_batch_tokens} padded tokens" if max_batch_tokens else ""
        off = " (this model's caches cannot be cut to a prefix)" if prefix_cache_mb else ""
        how = f"up to {max_batch} requests{cap} a batch{off}"
    console.print(f"serving {m.name} (checkpoint {m.path}, weights sha256 {m.sha}) on {m.device} "
                  f"at {srv.base_url}, {how}", highlight=False)
    with contextlib.suppress(KeyboardInterrupt):
        srv.serve_forever()
    failure = srv.failure()
    if failure is not None:
        raise fail(f"serve: stopped answering: the generation thread stopped: "
                   f"{type(failure).__name__}: {failure}", code=1)
