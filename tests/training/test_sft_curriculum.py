"""SFT's curriculum (``train sft --curriculum``): the rows a run trains on, short to long.

The run trains a tiny random model (one layer) with a tokenizer trained in memory on real
oracle demonstrations: the plumbing and the order, not a result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkenv.runtime import RunConfig
from coworkenv.runtime.run import run
from coworkenv.training import export_sft
from coworkenv.training.sft import SFTOptions, _rows, curriculum_order, train_sft

from .test_sft_loss_mask import small_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parents[2]


def test_the_order_draws_the_rows_a_run_sees_then_sorts_them_by_length() -> None:
    lengths = [50, 10, 40, 10, 30, 20, 60, 5]
    order = curriculum_order(lengths, 5, seed=1)
    assert len(order) == len(set(order)) == 5
    assert [lengths[i] for i in order] == sorted(lengths[i] for i in order)
    assert curriculum_order(lengths, 5, seed=1) == order  # seeded
    assert {tuple(curriculum_order(lengths, 5, seed=s)) for s in range(8)} != {tuple(order)}
    everything = curriculum_order(lengths, 100)  # fewer rows than the run sees: all of them
    assert sorted(everything) == list(range(8))
    assert [lengths[i] for i in everything] == sorted(lengths)


def test_a_curriculum_run_trains_short_rows_first(tmp_path: Path) -> None:
    run(RunConfig(tasks=[ROOT / "examples/tasks"], agent="oracle", db=tmp_path / "a.db",
                  tools=["reference"]))
    export_sft(tmp_path / "a.db", tmp_path / "sft", eval_fraction=0.0)
    rows = _rows(tmp_path / "sft" / "train.jsonl")
    tok = small_tokenizer([json.dumps(r["messages"]) for r in rows])
    res = train_sft(str(tiny_model(tok, tmp_path / "tiny")), tmp_path / "sft", tmp_path / "ckpt",
                    SFTOptions(steps=3, batch_size=2, max_length=8192, curriculum=True,
                               measure_rows=0))
    seen = res["curriculum_tokens"]
    assert len(seen) == 6 and seen == sorted(seen)
    saved = json.loads((tmp_path / "ckpt" / "coworkenv-sft.json").read_text())
    assert saved["options"]["curriculum"] is True and saved["curriculum_tokens"] == seen
    assert len(res["losses"]) == 3
    assert all(v == pytest.approx(v) for v in res["losses"])  # (numbers, not NaN)
