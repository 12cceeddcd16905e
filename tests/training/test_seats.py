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


def test_keyed_sampling_samples_at_its_temperature() -> None:
    """The keyed sampler is a sampler: tokens at the frequencies softmax(scores / T) gives,
    the same draws for the same seed whatever the process's random state."""
    import torch

    from coworkenv.training.seats import KeyedSampling, sample_seed

    scores = torch.log(torch.tensor([[0.7, 0.2, 0.1]]))

    def draws(temperature: float, seed: int, n: int = 4000) -> list[int]:
        g = torch.Generator().manual_seed(seed)
        sampler = KeyedSampling(temperature, g)
        out = []
        for _ in range(n):
            kept = sampler(None, scores)
            assert int(torch.isfinite(kept).sum()) == 1  # (one token left: greedy takes it)
            out.append(int(kept.argmax()))
        return out

    at_1 = draws(1.0, 7)
    assert abs(at_1.count(0) / len(at_1) - 0.7) < 0.03
    hot = torch.softmax(scores / 0.5, dim=-1)[0]  # (0.7^2 / (0.49 + 0.04 + 0.01))
    at_half = draws(0.5, 7)
    assert abs(at_half.count(0) / len(at_half) - float(hot[0])) < 0.03
    torch.manual_seed(123)
    again = draws(1.0, 7, 200)
    torch.rand(1000)
    assert draws(1.0, 7, 200) == again == at_1[:200]
    assert sample_seed(0, "ea", 0, 1, 2) == sample_seed(0, "ea", 0, 1, 2)
    assert len({sample_seed(0, "ea", 0, i, 0) for i in range(50)} |
               {sample_seed(0, "fin", 0, i, 0) for i in range(50)}) == 100


@pytest.mark.slow
@pytest.mark.model
def test_a_seats_turn_depends_on_its_key_not_on_other_threads() -> None:
    """A seat's model turn is a function of what it read and its key (seat, round,
    simulation, turn): the same with the process's random state moved, the same when two
    seats' models generate at once in two threads; another key, another sample."""
    import threading
    from types import SimpleNamespace

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.training.seats import SeatOptions, SeatPolicy
    from coworkenv.training.sft import prepare_model

    if not GGUF.exists():
        pytest.fail(f"{GGUF}: the offline model is missing (scripts/test.sh fetches it)")
    path = prepare_model(str(GGUF))
    tok = AutoTokenizer.from_pretrained(path)
    o = SeatOptions(temperature=1.0, seed=3)

    def policy(seat: str) -> SeatPolicy:  # (what a seat needs of TRL's trainer: its model)
        trainer = SimpleNamespace(model=AutoModelForCausalLM.from_pretrained(path),
                                  accelerator=SimpleNamespace(unwrap_model=lambda m: m))
        return SeatPolicy(trainer, tok, o, seat)

    ea, fin = policy("ea"), policy("fin")
    ids = list(tok.apply_chat_template([{"role": "user", "content": "Ask finance for the Q3 "
                                         "budget."}], add_generation_prompt=True,
                                       tokenize=True, return_dict=True)["input_ids"])
    alone = ea.generate(ids, 12, (0, 1, 0))
    torch.manual_seed(99)
    torch.rand(10_000)
    assert ea.generate(ids, 12, (0, 1, 0)) == alone
    side: dict[str, list[int]] = {}

    def turn(p: SeatPolicy, key: tuple[object, ...]) -> None:
        for _ in range(3):
            side[f"{p.seat}{key}"] = p.generate(ids, 12, key)

    threads = [threading.Thread(target=turn, args=(ea, (0, 1, 0))),
               threading.Thread(target=turn, args=(fin, (0, 1, 0)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert side["ea(0, 1, 0)"] == alone
    assert side["fin(0, 1, 0)"] == fin.generate(ids, 12, (0, 1, 0))
    others = [ea.generate(ids, 12, (0, i, 0)) for i in (2, 3, 4)]
    assert any(x != alone for x in others)  # (another simulation of the group: its own draw)
