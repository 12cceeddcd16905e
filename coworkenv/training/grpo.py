"""GRPO on live coworkenv episodes with TRL's ``GRPOTrainer`` (needs the ``train`` extra).

Every rollout is a real episode (see :mod:`coworkenv.training.environment`): TRL generates,
its tool loop calls the environment's tool methods, the simulated workplace answers, and the
reward is coworkenv's grade, one reward function per component (``score`` weighted 1 by
default; ``completion``, ``safety``, ``robustness`` logged beside it, weight 0 unless set).
Generation runs with transformers on CPU, or vLLM on GPU hosts (``use_vllm``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..sim.task import Task
from .environment import EpisodeHost, environment_class, new_grpo_run_id, reward_functions


@dataclass(frozen=True)
class GRPOOptions:
    steps: int = 2
    learning_rate: float = 1e-6
    batch_size: int = 2
    """Rollouts per device per step (a multiple of num_generations)."""
    num_generations: int = 2
    max_completion_length: int = 256
    """Tokens of the whole multi-turn completion (model turns and tool results)."""
    max_tool_calls: int = 6
    """Tool-calling iterations per rollout (TRL's max_tool_calling_iterations)."""
    temperature: float = 1.0
    beta: float = 0.0
    reward_weights: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0, 0.0)
    """Weights of score, completion, safety, robustness and no_repeat (a shorter tuple is
    padded with zeros)."""
    tools: list[str] | None = field(default_factory=lambda: ["reference"])
    """Tools each episode offers (default: those its reference solution calls)."""
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    cpu: bool = True
    seed: int = 0
    episode_wall_s: float = 3600.0


def train_grpo(model: str, tasks: list[Task], out: Path, db: Path,
               options: GRPOOptions | None = None, run_id: str | None = None) -> dict[str, Any]:
    """Train; return the log history (rewards per component), the rollouts' run id and the
    checkpoint folder. Rollout episodes are written to ``db``."""
    import datasets
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    from ..agents.chat import opening
    from .export import refuse_held_out
    from .serve import chat_tokenizer
    from .sft import no_hub_kernels, prepare_model

    refuse_held_out("train grpo", tasks)
    no_hub_kernels()
    o = options or GRPOOptions()
    if o.batch_size % o.num_generations:
        raise ValueError(f"batch_size ({o.batch_size}) must be a multiple of num_generations "
                         f"({o.num_generations})")
    path = prepare_model(model)
    tok = chat_tokenizer(path)
    tok.padding_side = "left"
    rid = run_id or new_grpo_run_id()
    host = EpisodeHost(db, rid, f"grpo:{Path(path).name}", tasks, tools=o.tools,
                       episode_wall_s=o.episode_wall_s)
    try:
        factories: dict[str, Any] = {}
        by_toolset: dict[tuple[str, ...], str] = {}
        rows = []
        for t in tasks:
            toolset = tuple(host.toolset(t.id))
            if toolset not in by_toolset:
                name = f"tools-{len(by_toolset)}"
                by_toolset[toolset] = name
                factories[name] = environment_class(host, toolset)
            me = next(p for p in t.seed.people if p.id == t.agent).model_dump(mode="json")
            rows.append({"prompt": opening(t.opening(me)),
                         "task_id": t.id, "environment": by_toolset[toolset]})
        ds = datasets.Dataset.from_list(rows)
        cfg = grpo_config(out, o, max_tool_calling_iterations=o.max_tool_calls,
                          reward_weights=_weights(o.reward_weights), use_vllm=o.use_vllm,
                          vllm_mode=o.vllm_mode)
        lm = AutoModelForCausalLM.from_pretrained(path)
        trainer = GRPOTrainer(model=lm, reward_funcs=reward_functions(), args=cfg,
                              train_dataset=ds, processing_class=tok,
                              environment_factory=factories)
        trainer.train()
        trainer.save_model(str(out))
        tok.save_pretrained(str(out))
    finally:
        host.close()
    history = trainer.state.log_history
    rewards: dict[str, list[float]] = defaultdict(list)
    for h in history:
        for k, v in h.items():
            if k.startswith("rewards/") and k.endswith("/mean"):
                rewards[k.split("/")[1]].append(v)
    summary = {"model": model, "checkpoint": str(out), "db": str(db), "rollout_run": rid,
               "tasks": [t.id for t in tasks], "options": asdict(o),
               "rewards": dict(rewards), "log_history": history}
    (out / "coworkenv-grpo.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def grpo_config(out: Path, o: Any, **extra: Any) -> Any:
    """TRL's ``GRPOConfig`` as coworkenv trains: ``o``'s steps, learning rate, batch size,
    group size, completion length, temperature, KL coefficient, seed and device (``cpu``),
    a log line a step, no checkpoints during training, no reporting; ``extra``: the rest."""
    from trl import GRPOConfig

    from .sft import checkpointing

    return GRPOConfig(
        output_dir=str(out), max_steps=o.steps, learning_rate=o.learning_rate,
        per_device_train_batch_size=o.batch_size, num_generations=o.num_generations,
        max_completion_length=o.max_completion_length, temperature=o.temperature,
        beta=o.beta, logging_steps=1, save_strategy="no", report_to="none", seed=o.seed,
        use_cpu=o.cpu, bf16=not o.cpu, **checkpointing(GRPOConfig, False),
        log_completions=False, **extra)


def _weights(given: tuple[float, ...]) -> list[float]:
    """One weight per reward function (see ``COMPONENTS``), missing ones 0."""
    from .environment import COMPONENTS

    if len(given) > len(COMPONENTS):
        raise ValueError(f"reward_weights: at most {len(COMPONENTS)} ({', '.join(COMPONENTS)}), "
                         f"got {len(given)}")
    return [*given, *[0.0] * (len(COMPONENTS) - len(given))]
