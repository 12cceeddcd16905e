"""Two agents of one simulation trained together (``train seats``): each seat its own
SmolLM2 and TRL GRPOTrainer, the simulations shared, each arrival's grade the reward of its
own seat's rollout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TWO = ROOT / "examples" / "simulations" / "two-agents.yaml"
GGUF = Path(os.environ.get("COWORKENV_TEST_GGUF",
                           ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(1200)
# (TRL 1.16 reads transformers' deprecated alias while it scores a batch; not ours to mend)
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_two_seats_each_trained_on_its_own_arrivals(tmp_path: Path) -> None:
    from coworkenv.store import Reader
    from coworkenv.training.seats import SeatOptions, train_seats

    db, out = tmp_path / "s.db", tmp_path / "ckpt"
    o = SeatOptions(steps=1, batch_size=2, num_generations=2, max_turns=2, max_turn_tokens=24,
                    learning_rate=1e-5, then="oracle")
    res = train_seats(TWO, {"ea": str(GGUF), "fin": str(GGUF)}, out, db, o, run_id="t")
    assert sorted(res["rounds"]) == ["t-r0-0", "t-r0-1"]
    with Reader(db) as r:
        runs = {x["run_id"]: x["status"] for x in r.runs()}
        assert {runs[k] for k in res["rounds"]} == {"finished"}
        graded = {(g["run_id"], g["task_id"]): g for k in res["rounds"]
                  for g in r.graded_episodes(k)}
        held = {(e.run_id, e.task_id): e.agent for k in res["rounds"] for e in r.episodes(k)}
    for seat, template in (("ea", "ea-travel-budget"), ("fin", "fin-per-diem")):
        s = res["seats"][seat]
        assert len(s["reward"]) == 1  # (one optimizer step, its reward logged)
        [step] = s["rollouts"]
        assert sorted(x["run"] for x in step) == ["t-r0-0", "t-r0-1"]
        for x in step:  # (its own arrival, held from outside, its grade the reward)
            assert x["task_id"].split(".")[0] == template, (seat, x)
            assert held[(x["run"], x["task_id"])] == "session"
            g = graded[(x["run"], x["task_id"])]
            assert x["reward"] == pytest.approx(g["score"]), (seat, x, g)
            assert 1 <= x["turns"] <= 2 and 1 <= x["model_tokens"] <= 2 * 24
        assert s["reward"][0] == pytest.approx(sum(x["reward"] for x in step) / 2)
        assert (out / seat / "config.json").exists()
    saved = json.loads((out / "coworkenv-seats.json").read_text())
    assert set(saved["seats"]) == {"ea", "fin"} and saved["run"] == "t"


@pytest.mark.slow  # (reads the offline model's tokenizer, which the full suite fetches)
def test_the_multi_turn_completion_is_the_conversation_the_model_read() -> None:
    """A rollout's tokens, prompt then completion (model turns, what it was told), are what the
    chat template gives the whole conversation: what is trained is what the model saw."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_instruct_2507_chat_template

    from coworkenv.training.seats import _suffix_ids

    tok = AutoTokenizer.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name)
    tok.chat_template = qwen3_instruct_2507_chat_template
    tok = add_response_schema(tok)
    head = [{"role": "system", "content": "You are the assistant."},
            {"role": "user", "content": "Ask finance for the Q3 budget."}]
    call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "chat_send_dm", "arguments": {"to": "finops", "text": "Q3 budget?"}}}]}
    told = {"role": "tool", "name": "chat_send_dm", "content": '{"ok": true}'}
    prompt = tok.apply_chat_template(head, add_generation_prompt=True, tokenize=False)
    whole = tok.apply_chat_template([*head, call, told], add_generation_prompt=True,
                                    tokenize=False)
    turn = whole[len(prompt):whole.index(tok.eos_token, len(prompt)) + len(tok.eos_token)]
    ids = (tok(prompt, add_special_tokens=False)["input_ids"]
           + tok(turn, add_special_tokens=False)["input_ids"] + _suffix_ids(tok, [told]))
    assert tok.decode(ids) == whole
