"""The one-turn probes of the PocketWorker recipe (``examples/pocketworker/turn_probe.py``):
recovery contexts end where a slipped call was told ``not_found``, step contexts before each
oracle action; outcomes are read from the first ``<tool_call>``, and both run end to end on a
checkpoint (a tiny random model here, saved with a tokenizer trained in memory: the plumbing,
not a result)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from coworkenv.runtime import RunConfig
from coworkenv.runtime.run import run

from .test_sft_loss_mask import small_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "turn_probe", ROOT / "examples/pocketworker/turn_probe.py")
assert spec and spec.loader
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("probe") / "probe.db"
    run(RunConfig(tasks=[ROOT / "examples/tasks"], agent="oracle", db=d, slips=1.0,
                  tools=["reference", "directory_search"]))
    return d


def test_each_context_ends_at_the_not_found_of_a_slip(db: Path) -> None:
    contexts = probe.probes(db)
    assert len(contexts) >= 15  # (20 tasks; a few name no one)
    for p in contexts:
        last, call = p["messages"][-1], p["messages"][-2]
        assert last["role"] == "tool" and json.loads(last["content"])["error"]["code"] == \
            "not_found"
        fn = call["tool_calls"][0]["function"]
        assert [fn["name"], json.loads(fn["arguments"])] == p["failed"]
        assert "directory_search" in {t["function"]["name"] for t in p["tools"]}
        assert not any(m.get("tool_calls", [{}])[0].get("function", {}).get("name") ==
                       "directory_search" for m in p["messages"] if m["role"] == "assistant")


def test_step_contexts_end_before_each_oracle_action(db: Path) -> None:
    contexts = probe.step_probes(db)
    episodes = {p["task_id"] for p in contexts}
    assert len(episodes) >= 15 and len(contexts) > 3 * len(episodes)
    for p in contexts:
        assert p["messages"][-1]["role"] in ("user", "tool")  # the model's turn is next
        assert p["expected"][0] in {t["function"]["name"] for t in p["tools"]}
    spread = probe.step_probes(db, limit=10)
    assert len(spread) == 10 and len({p["task_id"] for p in spread}) >= 5
    call = '<tool_call>\n{"name": "%s", "arguments": {}}\n</tool_call>'
    assert probe.step_outcome(call % "docs_search", ["docs_search", {"query": "x"}]) == \
        "oracle_tool"
    assert probe.step_outcome(call % "docs_read", ["docs_search", {}]) == "other_tool"
    assert probe.step_outcome("Sure, I will search.", ["docs_search", {}]) == "no_call"
    cut = '<tool_call>\n{"name": "docs_search", "arguments": {"qu'  # (max-new-tokens)
    assert probe.step_outcome(cut, ["docs_search", {}]) == "oracle_tool"


def test_people_contexts_name_a_person_of_the_directory(db: Path) -> None:
    contexts = probe.person_probes(db)
    assert len({p["task_id"] for p in contexts}) >= 10
    for p in contexts:
        assert p["people"]["named"] and set(p["people"]["named"]) <= set(p["people"]["directory"])
    people = {"named": ["leo"], "directory": ["leo", "maya", "priya"]}

    def call(args: str) -> str:
        return '<tool_call>\n{"name": "chat_send_dm", "arguments": {' + args + '}}\n</tool_call>'
    assert probe.people_outcome(call('"to": "leo", "text": "hi"'), people) == "oracle_person"
    assert probe.people_outcome(call('"to": "leo@acme.test"'), people) == "oracle_person"
    assert probe.people_outcome(call('"attendees": ["maya", "leo"]'), people) == "oracle_person"
    assert probe.people_outcome(call('"to": "priya", "text": "hi"'), people) == "other_person"
    assert probe.people_outcome(call('"to": " Leo"'), people) == "unknown_person"
    assert probe.people_outcome(call('"to": "jules"'), people) == "unknown_person"
    assert probe.people_outcome(call('"query": "leo"'), people) == "no_person"
    assert probe.people_outcome("I will write to Leo.", people) == "no_call"
    assert probe.people_outcome('<tool_call>\n{"name": "chat_send_dm", "arguments": {"to": "le',
                                people) == "no_person"  # (cut before the value closed)


def test_outcomes() -> None:
    failed = ["chat_send_dm", {"to": "Leo", "text": "hi"}]

    def call(name: str, args: dict) -> str:  # type: ignore[type-arg]
        return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'
    assert probe.outcome(call("directory_search", {"query": "Leo"}), failed) == "lookup"
    assert probe.outcome(call("chat_send_dm", {"to": "Leo", "text": "hi"}), failed) == "repeat"
    assert probe.outcome(call("chat_send_dm", {"to": "leo", "text": "hi"}), failed) == \
        "same_tool_other_args"
    assert probe.outcome(call("email_send", {}), failed) == "other_tool"
    assert probe.outcome("I could not find Leo.", failed) == "no_call"
    assert probe.outcome("<tool_call>{not json}</tool_call>", failed) == "no_call"


def test_it_runs_on_a_checkpoint(db: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    contexts = probe.probes(db)
    tiny_model(small_tokenizer([json.dumps(p["messages"]) for p in contexts]), tmp_path / "tiny")
    report = probe.main(["--db", str(db), "--model", f"a={tmp_path / 'tiny'}",
                         "--model", f"b={tmp_path / 'tiny'}", "--max-new-tokens", "8"])
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(report))
    assert report["probes"] == len(contexts)
    for m in report["models"].values():
        assert sum(m[o]["share"] for o in probe.OUTCOMES) == pytest.approx(1.0, abs=0.01)
    assert report["models"]["b"]["lookup_minus_first"]["delta"] == 0.0  # the same weights
    steps = probe.main(["--db", str(db), "--contexts", "steps", "--limit", "12",
                        "--model", f"a={tmp_path / 'tiny'}", "--max-new-tokens", "8"])
    capsys.readouterr()
    assert steps["contexts"] == "steps" and steps["probes"] == 12
    assert sum(steps["models"]["a"][o]["share"] for o in probe.STEP_OUTCOMES) == \
        pytest.approx(1.0, abs=0.01)
    with pytest.raises(SystemExit, match="expected NAME=PATH"):
        probe.main(["--db", str(db), "--model", str(tmp_path / "tiny")])
