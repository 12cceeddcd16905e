"""SFT on exported teacher demonstrations with TRL's ``SFTTrainer`` (needs the ``train`` extra).

The model may be a Hugging Face id or folder, or a GGUF file: a GGUF is loaded by
transformers, its quantisation removed, and the dense model saved once next to it (cached),
since a quantised model can be neither trained nor saved. The chat template is TRL's Qwen3
template (ChatML tokens, tool calls as ``<tool_call>`` JSON), which TRL recognises for
assistant-only loss.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import TrainingDataError


@dataclass(frozen=True)
class SFTOptions:
    steps: int = 30
    learning_rate: float = 5e-5
    batch_size: int = 2
    max_length: int = 2048
    lora: bool = False
    seed: int = 0
    cpu: bool = True
    """False: train on the accelerator in bf16."""
    truncation: str = "keep_start"
    """What an example longer than ``max_length`` keeps: ``keep_start`` (the task and the
    first turns) or ``keep_end`` (the last turns; the system prompt and task are cut)."""
    curriculum: bool = False
    """Short demonstrations first: the rows the run trains on (``steps`` x ``batch_size``,
    drawn at random when there are more) in order of length in tokens; with fewer rows than
    that, every pass over them goes from short to long."""
    measure_rows: int = 16
    """Rows of the training set (its first ones) and of ``eval.jsonl`` whose loss is measured
    before and after training (0: not measured). Per-step losses are of different rows, so
    with small batches they do not show whether the model learned; these do."""


def no_hub_kernels() -> None:
    """transformers swaps in kernels it downloads from the Hub when it trains on a GPU (a
    rotary kernel in the first step, with transformers 5.25), and fails where nothing can be
    downloaded; coworkenv downloads nothing at run time, so training keeps transformers' own
    code unless the user has set ``USE_HUB_KERNELS`` themselves."""
    os.environ.setdefault("USE_HUB_KERNELS", "0")


def checkpointing(config: type, on: bool) -> dict[str, bool]:
    """The keyword that turns activation (gradient) checkpointing on or off in a TRL config:
    ``activation_checkpointing`` where transformers has it (``gradient_checkpointing`` is its
    deprecated alias there, with a warning), else ``gradient_checkpointing``."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(config)}
    return {"activation_checkpointing" if "activation_checkpointing" in names
            else "gradient_checkpointing": on}


def prepare_model(model: str, cache: Path | None = None) -> str:
    """A folder (or hub id) transformers can train: GGUF files are converted once.

    The conversion is written to a folder of its own and renamed into place, so processes that
    start from the same file at once (an evaluation server beside a training run) each see
    either no conversion or a whole one."""
    p = Path(model)
    if p.suffix != ".gguf":
        return model
    dest = (cache or p.parent) / f"{p.stem}-hf"
    if (dest / "config.json").exists():
        return str(dest)
    if dest.exists():
        raise OSError(f"{dest}: a folder without config.json is where the conversion of {p} "
                      "goes (an interrupted conversion?); remove it")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name)
    if getattr(m, "hf_quantizer", None) is not None:
        m.hf_quantizer.remove_quantization_config(m)
    tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    part = dest.with_name(f"{dest.name}.part-{os.getpid()}")
    shutil.rmtree(part, ignore_errors=True)
    m.save_pretrained(part)
    tok.save_pretrained(part)
    try:
        part.rename(dest)
    except OSError:  # another process's conversion came first: it is whole, keep it
        shutil.rmtree(part, ignore_errors=True)
        if not (dest / "config.json").exists():
            raise
    return str(dest)


def _rows(path: Path) -> list[dict[str, Any]]:
    """The demonstrations of an export; rows of held-out tasks (the benchmark's, by id or
    content hash) are refused with :class:`HeldOutError`."""
    from ..outputs import IncompleteOutputError, check_folder_file
    from ..sim.errors import HeldOutError
    from ..sim.loader import benchmark

    mismatch = check_folder_file(path.parent, path.name)
    if mismatch is not None:
        raise IncompleteOutputError(f"{path}: {mismatch}")
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    never = benchmark()
    bad = sorted({str(r.get("task_id")) for r in rows
                  if never.holds_row(str(r.get("task_id")), r.get("task_hash"))})
    if bad:
        raise HeldOutError(f"train sft: {path}", bad)
    return [{"messages": r["messages"], "tools": r["tools"],
             "untrained": r.get("untrained") or []} for r in rows]


def _runs(mask: list[int]) -> list[tuple[int, int]]:
    """The [start, end) spans of consecutive 1s of an assistant-token mask."""
    spans: list[tuple[int, int]] = []
    start = None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            spans.append((start, i))
            start = None
    return spans


def tokenize(rows: list[dict[str, Any]], tok: Any, template: str,
             source: Path | str = "train.jsonl") -> list[dict[str, list[int]]]:
    """Rows as ``input_ids`` and ``labels``: the assistant turns' tokens are trained on
    (TRL's assistant-only loss, from the template's ``{% generation %}`` spans) except the
    turns a row names in ``untrained`` (the oracle's deliberate slips), which stay in the
    context with their labels set to -100."""
    out = []
    for n, r in enumerate(rows, 1):
        tools = json.loads(r["tools"]) if isinstance(r["tools"], str) else r["tools"]
        enc = tok.apply_chat_template(r["messages"], tools=tools or None, chat_template=template,
                                      tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        ids = list(enc["input_ids"])
        spans = _runs(list(enc["assistant_masks"]))
        turns = [i for i, m in enumerate(r["messages"]) if m.get("role") == "assistant"]
        if len(spans) != len(turns):
            raise TrainingDataError(
                f"{source}: row {n}: the chat template marks {len(spans)} assistant span(s) for "
                f"{len(turns)} assistant message(s), so turns cannot be told apart for the loss")
        labels = [-100] * len(ids)
        skip = set(r.get("untrained") or ())
        for (a, b), i in zip(spans, turns, strict=True):
            if i not in skip:
                labels[a:b] = ids[a:b]
        out.append({"input_ids": ids, "labels": labels})
    return out


def curriculum_order(lengths: list[int], rows_seen: int, seed: int = 0) -> list[int]:
    """The rows a curriculum trains on, in the order it trains on them: ``rows_seen`` rows
    drawn at random (all of them when there are fewer), shortest first (ties in the drawn
    order)."""
    idx = list(range(len(lengths)))
    random.Random(seed).shuffle(idx)
    return sorted(idx[:rows_seen], key=lambda i: lengths[i])


class NothingToTrainError(TrainingDataError):
    """Every demonstration was dropped before training (too long for ``max_length``)."""


def train_sft(model: str, data: Path, out: Path, options: SFTOptions | None = None, *,
              say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train; return the log history (losses per step) and where the checkpoint is. ``say``
    hears what it is doing before each stage that takes a while (preparing the model, the
    loss measured before and after training, the steps), with the rows it trains on."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import get_training_chat_template, qwen3_instruct_2507_chat_template

    no_hub_kernels()
    o = options or SFTOptions()
    tell = say or (lambda _: None)
    demonstrations = _rows(data / "train.jsonl")  # (held-out tasks refused before any load)
    held = _rows(data / "eval.jsonl") if o.measure_rows and (data / "eval.jsonl").exists() else []
    tell(f"{len(demonstrations)} demonstration row(s) in {data / 'train.jsonl'}"
         + (f", {len(held)} in eval.jsonl" if held else "") + f"; {o.steps} step(s) of "
         f"{o.batch_size} row(s) ({o.steps * o.batch_size} rows seen), at most {o.max_length} "
         f"tokens each, on the {'CPU' if o.cpu else 'accelerator'}")
    tell(f"loading {model}" + (" (a .gguf is converted to a Transformers folder once, then "
                               "cached: the first time takes minutes)"
                               if str(model).endswith(".gguf") else ""))
    path = prepare_model(model)
    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = qwen3_instruct_2507_chat_template
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    lm = AutoModelForCausalLM.from_pretrained(path)
    template = get_training_chat_template(tok) or tok.chat_template
    ds = datasets.Dataset.from_list(tokenize(demonstrations, tok, template,
                                             data / "train.jsonl"))
    measured = {"train": ds.select(range(min(o.measure_rows, len(ds))))} if o.measure_rows else {}
    seen: list[int] | None = None  # (with a curriculum: tokens of each row, in training order)
    if o.curriculum:
        lengths = [len(x) for x in ds["input_ids"]]
        order = curriculum_order(lengths, o.steps * o.batch_size, o.seed)
        ds = ds.select(order)
        seen = [lengths[i] for i in order]
    if measured and held:
        measured["eval"] = datasets.Dataset.from_list(
            tokenize(held[:o.measure_rows], tok, template, data / "eval.jsonl"))
    cfg = SFTConfig(output_dir=str(out), max_steps=o.steps, learning_rate=o.learning_rate,
                    per_device_train_batch_size=o.batch_size, max_length=o.max_length,
                    truncation_mode=o.truncation, logging_steps=1, save_strategy="no",
                    report_to="none", bf16=not o.cpu, use_cpu=o.cpu,
                    **checkpointing(SFTConfig, not o.cpu),
                    train_sampling_strategy="sequential" if o.curriculum else "random",
                    seed=o.seed)
    peft_config = None
    if o.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                 task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=lm, args=cfg, train_dataset=ds, processing_class=tok,
                         peft_config=peft_config,
                         # (prepared as the training rows are: truncated, rows without an
                         # answer token dropped; evaluated only when measured below)
                         eval_dataset=measured or None)
    kept = trainer.train_dataset
    if kept is not None and hasattr(kept, "__len__") and len(kept) == 0:
        raise NothingToTrainError(
            f"{data / 'train.jsonl'}: none of its {len(demonstrations)} demonstration(s) has "
            f"an assistant turn within max_length {o.max_length} tokens (TRL dropped every "
            "row); raise max_length, train on their last turns (truncation keep_end), or "
            "record shorter demonstrations (fewer tools offered: `run --tools reference`)")
    if measured:
        tell(f"measuring the loss of {', '.join(f'{len(v)} {k}' for k, v in measured.items())} "
             "row(s) before training (--measure-rows 0: none)")
    before = _measure(trainer)
    rows = len(kept) if kept is not None and hasattr(kept, "__len__") else "?"
    tell(f"training: {o.steps} step(s) on {rows} row(s) kept within max length")
    trainer.train()
    if measured:
        tell("measuring the loss again after training")
    after = _measure(trainer)
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    res: dict[str, Any] = {
        "losses": losses, "loss_before": before, "loss_after": after,
        "measured_rows": {k: len(v) for k, v in (trainer.eval_dataset or {}).items()}}
    if seen is not None:  # (before truncation)
        res["curriculum_tokens"] = seen
    (out / "coworkenv-sft.json").write_text(json.dumps({"model": model, "data": str(data),
                                                        "options": o.__dict__, **res},
                                                       indent=2))
    return {**res, "checkpoint": str(out)}


def _measure(trainer: Any) -> dict[str, float]:
    """Mean token loss of the model on each measured set (train rows, held-out rows), with
    the trainer's own collator and loss (assistant tokens, slips left out)."""
    out = {}
    for name, rows in (trainer.eval_dataset or {}).items():
        if len(rows):
            out[name] = float(trainer.evaluate(eval_dataset=rows, metric_key_prefix=name)
                              [f"{name}_loss"])
    return out
