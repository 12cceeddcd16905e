"""tau2-bench's side of ``bench/tau2_agreement.py``: run inside tau2-bench's own environment
(its Python 3.12 venv, with ``tau2`` installed from a checkout), never imported by coworkenv.

Reads cases (a tau2 retail task id and the tool calls of one trajectory) as JSON on stdin;
for each, replays the calls in a fresh tau2 retail environment (``Environment.get_response``,
as tau2's orchestrator does), and grades the trajectory with tau2's own evaluator
(``EnvironmentEvaluator.calculate_reward``: the final database against the gold actions' one).
Writes, per case, each call's error flag, the final users and orders asked for, tau2's DB
reward, and the time taken, as JSON on stdout.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    import logging

    from loguru import logger

    logger.remove()
    logging.disable(logging.WARNING)
    from tau2.data_model.message import AssistantMessage, ToolCall
    from tau2.domains.retail.data_model import RetailDB
    from tau2.domains.retail.environment import get_environment, get_tasks
    from tau2.domains.retail.utils import RETAIL_DB_PATH
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    request = json.load(sys.stdin)
    tasks = {t.id: t for t in get_tasks(None)}
    base = RetailDB.load(RETAIL_DB_PATH)

    def fresh(**_: object) -> object:
        return get_environment(db=base.model_copy(deep=True))

    out = []
    for case in request["cases"]:
        began = time.perf_counter()
        env = fresh()
        messages: list[object] = []
        errors = []
        for i, call in enumerate(case["calls"]):
            tc = ToolCall(id=f"c{i}", name=call["name"], arguments=call["arguments"])
            messages.append(AssistantMessage.text("", tool_calls=[tc]))
            response = env.get_response(tc)  # type: ignore[attr-defined]
            messages.append(response)
            errors.append(bool(response.error))
        replayed = time.perf_counter() - began
        reward = EnvironmentEvaluator.calculate_reward(
            environment_constructor=fresh, task=tasks[case["task_id"]],
            full_trajectory=messages)
        db = env.tools.db  # type: ignore[attr-defined]
        out.append({
            "case": case["case"], "errors": errors,
            "db_reward": reward.db_check.db_reward if reward.db_check else reward.reward,
            "reward": reward.reward,
            "users": {u: db.users[u].model_dump(mode="json") for u in case["users"]
                      if u in db.users},
            "orders": {o: db.orders[o].model_dump(mode="json") for o in case["orders"]
                       if o in db.orders},
            "replay_s": replayed, "total_s": time.perf_counter() - began})
    json.dump({"cases": out}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
