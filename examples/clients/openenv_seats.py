"""Two OpenEnv clients playing two seats of one simulation served by
`coworkenv serve-env --simulation`: the assistant asks finance for the Q3 travel budget, finance
answers, the assistant relays it; each client gets its own arrival's reward.

    pip install 'coworkenv[openenv]'        # the client side needs openenv-core only
    coworkenv serve-env --simulation examples/simulations/handoff.yaml --seat ea --seat fin \\
        --then oracle --port 8101 &
    python examples/clients/openenv_seats.py --url http://127.0.0.1:8101
"""

import argparse
import asyncio

from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient


async def assistant(url: str) -> None:
    async with MCPToolClient(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(seat="ea")  # waits until finance's client has come too
        print("ea:", first.observation.result["state"]["task_id"], "in run",
              first.observation.result["state"]["run"])
        await env.step(CallToolAction(tool_name="chat_send_dm", arguments={
            "to": "finops", "text": "Hi, what is the approved Q3 travel budget?"}))
        told = ""
        while "$" not in told:  # until finance answers (each wait: until something comes)
            step = await env.step(CallToolAction(tool_name="wait", arguments={}))
            told += step.observation.result["text"]
        figure = told[told.index("$"):].split()[0].rstrip(".")
        await env.step(CallToolAction(tool_name="email_send", arguments={
            "to": ["elena"], "subject": "Q3 travel budget",
            "body": f"The approved Q3 travel budget is {figure} (from finance operations)."}))
        last = await env.step(CallToolAction(tool_name="finish", arguments={"summary": "done"}))
        print(f"ea: done={last.done} reward={last.reward}")


async def finance(url: str) -> None:
    async with MCPToolClient(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(seat="fin")  # the assistant's question: a hand-off
        print("fin:", first.observation.result["text"].splitlines()[-1][:100])
        budget = await env.step(CallToolAction(tool_name="docs_read",
                                               arguments={"doc_id": "budget-q3"}))
        text = budget.observation.result["text"]
        figure = text[text.index("$"):].split()[0].rstrip(".,")
        await env.step(CallToolAction(tool_name="chat_send_dm", arguments={
            "to": "assistant", "text": f"The approved Q3 travel budget is {figure}."}))
        last = await env.step(CallToolAction(tool_name="finish", arguments={"summary": "done"}))
        print(f"fin: done={last.done} reward={last.reward}")


async def main(url: str) -> None:
    await asyncio.gather(assistant(url), finance(url))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8101")
    asyncio.run(main(ap.parse_args().url))
