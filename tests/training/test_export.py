"""Training data export: the format, the filters, and no leakage between splits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.agents import OracleAgent
from coworkenv.sim import builtin_tasks
from coworkenv.sim.task import ToolStep
from coworkenv.training import export_rl, export_sft

from ..sim.conftest import run_sync

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkenv.cli"]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Teacher runs (two trials), a no-op student run, and a leaking teacher run."""
    d = tmp_path_factory.mktemp("export") / "runs.db"
    tasks = builtin_tasks()
    subprocess.run([*CLI, "run", "--tasks", "examples/tasks", "--agent", "oracle", "--trials",
                    "2", "--db", str(d), "--quiet"], cwd=ROOT, check=True, capture_output=True)
    subprocess.run([*CLI, "run", "--tasks", "examples/tasks", "--agent", "noop", "--db", str(d),
                    "--quiet"], cwd=ROOT, check=True, capture_output=True)
    trap = next(t for t in tasks if t.id == "safety-confidential-trap")
    leak = [ToolStep(tool="docs_share", args={"doc_id": "doc-pricing", "person": "pat",
                                              "permission": "view"})]
    from coworkenv.sim import RunOptions  # noqa: F401

    run_sync([trap], d, agent=lambda t: OracleAgent([*leak, *t.reference]), run_id="leaky",
             role="teacher")
    return d


def rows(folder: Path) -> dict[str, list[dict]]:  # type: ignore[type-arg]
    return {s: [json.loads(x) for x in (folder / f"{s}.jsonl").read_text().splitlines()]
            for s in ("train", "eval")}


def test_sft_rows_are_tool_conversations(db: Path, tmp_path: Path) -> None:
    st = export_sft(db, tmp_path / "sft")
    data = rows(tmp_path / "sft")
    assert sum(st.written.values()) == len(data["train"]) + len(data["eval"]) > 0
    for row in data["train"] + data["eval"]:
        msgs = row["messages"]
        assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
        tools = json.loads(row["tools"])
        names = {t["function"]["name"] for t in tools}
        for i, m in enumerate(msgs):
            assert isinstance(m["content"], str)
            for tc in m.get("tool_calls", []):
                assert isinstance(tc["function"]["arguments"], str)
                json.loads(tc["function"]["arguments"])
                assert tc["function"]["name"] in names
                if tc["function"]["name"] != "finish":
                    assert msgs[i + 1]["role"] == "tool"
                    assert msgs[i + 1]["tool_call_id"] == tc["id"]
        assert msgs[-1]["tool_calls"][0]["function"]["name"] == "finish"
    card = (tmp_path / "sft" / "README.md").read_text()
    assert "score >= 0.75" in card and "split by task" in card


def test_failed_unsafe_and_student_episodes_are_excluded(db: Path, tmp_path: Path) -> None:
    st = export_sft(db, tmp_path / "sft")
    assert st.excluded["not a teacher run"] == len(builtin_tasks())  # the no-op run
    assert st.excluded["unsafe (safety < 1)"] == 1  # the leaking teacher
    ids = {r["episode_id"] for v in rows(tmp_path / "sft").values() for r in v}
    assert not any(i.startswith("leaky:") for i in ids)
    every = export_sft(db, tmp_path / "all", teachers_only=False)
    assert every.excluded["score < 0.75"] == len(builtin_tasks())  # no-op episodes fail


def test_duplicates_are_removed(db: Path, tmp_path: Path) -> None:
    st = export_sft(db, tmp_path / "sft")
    # two oracle trials of a task without random delays are the same conversation
    assert st.excluded["duplicate conversation"] > 0
    data = rows(tmp_path / "sft")
    convs = [json.dumps(r["messages"], sort_keys=True) for v in data.values() for r in v]
    assert len(convs) == len(set(convs))


@pytest.mark.parametrize("split_by", ["task", "family"])
def test_no_leakage_between_splits(db: Path, tmp_path: Path, split_by: str) -> None:
    export_sft(db, tmp_path / "sft", split_by=split_by, eval_fraction=0.3)  # type: ignore[arg-type]
    data = rows(tmp_path / "sft")
    key = "task_id" if split_by == "task" else "family"
    train, held = {r[key] for r in data["train"]}, {r[key] for r in data["eval"]}
    assert train and held and not train & held
    export_rl(builtin_tasks(), tmp_path / "rl", split_by=split_by,  # type: ignore[arg-type]
              eval_fraction=0.3)
    rl = rows(tmp_path / "rl")
    rl_key = "task_id" if split_by == "task" else "family"
    assert not {r[rl_key] for r in rl["train"]} & {r[rl_key] for r in rl["eval"]}
    if split_by == "task":  # the same assignment in both exports
        assert {r["task_id"] for r in rl["eval"]} >= held


def test_export_cli(db: Path, tmp_path: Path) -> None:
    # (the latest run is the leaky one, which has nothing to export: every run)
    out = subprocess.run([*CLI, "export", "sft", "--db", str(db), "--out", str(tmp_path / "s"),
                          "--all-runs"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert "exporting every run" in out and "wrote" in out
    out = subprocess.run([*CLI, "export", "rl", "--db", str(db), "--out", str(tmp_path / "r")],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "prompts" in out
    prompts = rows(tmp_path / "r")
    first = (prompts["train"] + prompts["eval"])[0]
    assert first["prompt"][0]["role"] == "system" and json.loads(first["tools"])


def test_grpo_never_trains_on_held_out_families(tmp_path: Path) -> None:
    """`train grpo --held-out` drops the evaluation's families before anything is loaded;
    holding out every family leaves nothing, and says so."""
    families = ",".join(sorted({t.family for t in builtin_tasks()}))
    out = subprocess.run([*CLI, "train", "grpo", "--model", "unused", "--tasks", "examples/tasks",
                          "--out", str(tmp_path / "g"), "--held-out", families],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    assert "no task left to train on" in out.stderr and "Traceback" not in out.stderr


def test_the_benchmark_is_never_trained_on(tmp_path: Path) -> None:
    """Export leaves out episodes of benchmark tasks (by id, and by content under another
    id); RL export, SFT training and GRPO training refuse them, before any model is loaded."""
    from coworkenv.sim import HeldOutError, benchmark, load_tasks

    bench = load_tasks([ROOT / "examples/benchmark"])
    assert bench and all(benchmark().holds(t) for t in bench)
    renamed = bench[0].model_copy(update={"id": "not-a-benchmark-id", "family": "mine"})
    db = tmp_path / "b.db"
    run_sync([bench[0], renamed, builtin_tasks()[0]], db,
             agent=lambda t: OracleAgent(list(t.reference)), run_id="teach", role="teacher")
    st = export_sft(db, tmp_path / "sft", eval_fraction=0.0)
    assert st.excluded["task of the benchmark (never trained on)"] == 2
    assert [r["task_id"] for r in rows(tmp_path / "sft")["train"]] == [builtin_tasks()[0].id]
    with pytest.raises(HeldOutError, match="not-a-benchmark-id"):
        export_rl([renamed], tmp_path / "rl")
    out = subprocess.run([*CLI, "export", "rl", "--tasks", "examples/benchmark", "--out",
                          str(tmp_path / "rl")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "never trained on" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "rl").exists()
    data = tmp_path / "forged"  # an export edited by hand to hold a benchmark demonstration
    data.mkdir()
    row = json.loads((tmp_path / "sft" / "train.jsonl").read_text().splitlines()[0])
    (data / "train.jsonl").write_text(json.dumps({**row, "task_id": bench[1].id}) + "\n")
    for cmd in (["train", "sft", "--data", str(data)],
                ["train", "grpo", "--tasks", "examples/benchmark"]):
        out = subprocess.run([*CLI, *cmd, "--model", "no-such-model", "--out",
                              str(tmp_path / "ckpt")], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 2 and "never trained on" in out.stderr, (cmd, out.stderr)
        assert "Traceback" not in out.stderr
