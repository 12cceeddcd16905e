"""An OpenEnv client driving one coworkenv episode served by `coworkenv serve-env`.

    pip install 'coworkenv[openenv]'        # the client side needs openenv-core only
    coworkenv serve-env --port 8100 &
    python examples/clients/openenv_client.py --url http://127.0.0.1:8100
"""

import argparse
import asyncio

from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient


async def main(url: str) -> None:
    async with MCPToolClient(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(task_id="share-onboarding")
        print(first.observation.result["text"][:200])  # the opening: system prompt and task
        print(sorted(t.name for t in await env.list_tools())[:5], "...")
        for name, args in [
            ("docs_share", {"doc_id": "doc-onboard", "person": "kai", "permission": "view"}),
            ("email_send", {"to": ["kai"], "subject": "Onboarding guide",
                            "body": "Welcome Kai! The onboarding guide is shared with you: doc-onboard."}),
            ("finish", {"summary": "Shared the onboarding guide with Kai and told him."}),
        ]:
            step = await env.step(CallToolAction(tool_name=name, arguments=args))
            print(f"{name}: done={step.done} reward={step.reward}")
        state = await env.state()
        print("episode", state.episode_id, "steps", state.step_count)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8100")
    asyncio.run(main(ap.parse_args().url))
