"""The coverage comparison of the PocketWorker recipe (``examples/pocketworker/coverage.py``):
how much of an evaluation set's reference plans a training set's plans show."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("coverage_script",
                                              ROOT / "examples/pocketworker/coverage.py")
assert spec and spec.loader
coverage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(coverage)


def test_shares_count_calls_transitions_first_actions_and_lengths() -> None:
    train = [["email_read", "chat_send_dm", "wait", "email_send"]] * 3
    evaluated = [["email_read", "chat_send_dm", "wait", "email_send"],  # all covered
                 ["tickets_read", "chat_send_dm", "wait", "chat_send_dm", "wait", "chat_post",
                  "email_send"]]  # 7 actions: no training plan within one of it
    r = coverage.compare(train, evaluated)
    assert r["length_covered"] == 0.5
    assert r["tool_calls_covered"] == round(9 / 11, 3)  # tickets_read and chat_post unseen
    assert r["tools_never_shown"] == ["chat_post", "tickets_read"]
    # pairs: 3 + 6; covered: the first plan's 3, and chat_send_dm>wait twice in the second
    assert r["transitions_covered"] == round(5 / 9, 3)
    assert r["first_action_covered"] == 0.5
    assert r["train"]["actions_median"] == 4 and r["eval"]["actions_max"] == 7


def test_argument_keys_count_exact_shapes_and_name_what_is_never_shown() -> None:
    train = [("email_send", ("body", "subject", "to")), ("docs_edit", ("append", "doc_id"))]
    evaluated = [("email_send", ("body", "subject", "to")),  # shown exactly
                 ("email_send", ("body", "to")),  # its names all shown, not this shape
                 ("docs_edit", ("content", "doc_id")),  # `content` never shown
                 ("tickets_read", ("ticket_id",))]  # a tool never shown
    r = coverage.compare_arguments(train, evaluated)
    assert r["argument_keys_covered"] == 0.25
    assert r["argument_keys_never_shown"] == {"docs_edit": ["content"],
                                              "tickets_read": ["ticket_id"]}


def test_runs_on_task_folders(capsys) -> None:  # type: ignore[no-untyped-def]
    r = coverage.main(["--train", str(ROOT / "coworkenv/builtin_tasks"),
                       "--eval", str(ROOT / "examples/benchmark")])
    assert r["eval"]["tasks"] >= 40 and r["train"]["tasks"] >= 16
    assert 0 < r["tool_calls_covered"] <= 1 and '"transitions_covered"' in capsys.readouterr().out
    assert 0 < r["argument_keys_covered"] <= 1
