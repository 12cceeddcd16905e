"""Which tokens SFT trains on: every assistant turn of a demonstration, except the oracle's
deliberate slips, which stay in the context (the model sees the error it recovers from) but
are never a target (it must not learn to make them).

A small byte-level tokenizer is trained here, in memory, so the test needs no model; the
chat template is TRL's Qwen3 template, as ``train_sft`` uses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from trl.chat_template_utils import (
    get_training_chat_template,
    qwen3_instruct_2507_chat_template,
)

from coworkenv.runtime import RunConfig
from coworkenv.runtime.run import run
from coworkenv.training import export_sft
from coworkenv.training.errors import TrainingDataError
from coworkenv.training.sft import _rows, tokenize

ROOT = Path(__file__).resolve().parents[2]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:  # type: ignore[type-arg]
    d = tmp_path_factory.mktemp("mask")
    run(RunConfig(tasks=[ROOT / "examples/tasks"], agent="oracle", db=d / "a.db", slips=0.5,
                  tools=["reference", "directory_search"]))
    export_sft(d / "a.db", d / "sft", eval_fraction=0.0)
    return _rows(d / "sft" / "train.jsonl")


@pytest.fixture(scope="module")
def tok(demos: list[dict]) -> PreTrainedTokenizerFast:  # type: ignore[type-arg]
    return small_tokenizer([json.dumps(r["messages"]) for r in demos])


def small_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``texts`` in memory, with ChatML's special tokens
    and TRL's Qwen3 chat template: real tokenization without a model to fetch."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=2000, special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    t = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                pad_token="<|endoftext|>")
    t.chat_template = qwen3_instruct_2507_chat_template
    return t


def tiny_model(tok: PreTrainedTokenizerFast, folder: Path) -> Path:  # type: ignore[type-arg]
    """A one-layer random Llama for ``tok``, saved with it to ``folder``: a checkpoint to run
    the plumbing on (training, generation), not to learn anything."""
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16384,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _trained(tok: PreTrainedTokenizerFast, row: dict) -> str:  # type: ignore[type-arg]
    return str(tok.decode([i for i in row["labels"] if i != -100]))


def test_slipped_turns_are_context_not_targets(demos: list[dict],  # type: ignore[type-arg]
                                               tok: PreTrainedTokenizerFast) -> None:
    template = get_training_chat_template(tok) or tok.chat_template
    slipped = [r for r in demos if r["untrained"]]
    assert slipped, "no demonstration with a slip"
    for row, enc in zip(slipped, tokenize(slipped, tok, template), strict=True):
        context = str(tok.decode(enc["input_ids"]))
        trained = _trained(tok, enc)
        for i in row["untrained"]:
            call = row["messages"][i]["tool_calls"][0]["function"]
            wrong = json.dumps({"name": call["name"],
                                "arguments": json.loads(call["arguments"])}, ensure_ascii=False)
            assert wrong in context  # seen, with the not_found that follows it
            assert row["messages"][i + 1]["content"].startswith('{"error": {"code": "not_found"')
            assert wrong not in trained  # never a target
            after = row["messages"][i + 2]["tool_calls"][0]["function"]
            assert after["name"] == "directory_search"
            assert f'"name": "directory_search", "arguments": {after["arguments"]}' in trained
        assert "<|im_end|>" in trained  # the turns' ends are targets (the model learns to stop)


def test_without_slips_every_assistant_turn_is_a_target(
        demos: list[dict], tok: PreTrainedTokenizerFast) -> None:  # type: ignore[type-arg]
    template = get_training_chat_template(tok) or tok.chat_template
    row = next(r for r in demos if r["untrained"])
    whole = tokenize([{**row, "untrained": []}], tok, template)[0]
    masked = tokenize([row], tok, template)[0]
    assert whole["input_ids"] == masked["input_ids"]
    n_whole = sum(i != -100 for i in whole["labels"])
    n_masked = sum(i != -100 for i in masked["labels"])
    assert 0 < n_masked < n_whole
    turns = sum(m["role"] == "assistant" for m in row["messages"])
    assert _trained(tok, whole).count("<|im_end|>") == turns
    assert _trained(tok, masked).count("<|im_end|>") == turns - len(row["untrained"])


def test_a_template_without_turn_markers_is_refused(
        demos: list[dict], tok: PreTrainedTokenizerFast) -> None:  # type: ignore[type-arg]
    with pytest.raises(TrainingDataError, match=r"demo.jsonl: row 1: the chat template marks 0 "
                                                r"assistant span\(s\) for \d+ assistant"):
        tokenize(demos[:1], tok, str(tok.chat_template), "demo.jsonl")


def test_training_never_fetches_kernels_from_the_hub_unless_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from coworkenv.training.sft import no_hub_kernels

    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    no_hub_kernels()
    assert os.environ["USE_HUB_KERNELS"] == "0"
    monkeypatch.setenv("USE_HUB_KERNELS", "YES")  # (a user who wants them keeps them)
    no_hub_kernels()
    assert os.environ["USE_HUB_KERNELS"] == "YES"
