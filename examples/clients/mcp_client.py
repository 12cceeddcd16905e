"""An MCP client (the official SDK) as the agent of one coworkenv episode: it starts
`coworkenv mcp` over stdio, reads the opening, calls the workspace's tools and finishes.

    pip install 'coworkenv[mcp]'
    python examples/clients/mcp_client.py --db runs/mcp-client.db
"""

import argparse
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(db: str) -> None:
    server = StdioServerParameters(command=sys.executable, args=[
        "-m", "coworkenv.cli", "mcp", "--task", "share-onboarding", "--db", db])
    async with Client(server) as client:
        print((client.instructions or "")[:200])  # the opening: system prompt, task
        tools = await client.list_tools()
        print(len(tools.tools), "tools, e.g.", [t.name for t in tools.tools][:4])
        for name, args in [
            ("docs_share", {"doc_id": "doc-onboard", "person": "kai", "permission": "view"}),
            ("email_send", {"to": ["kai"], "subject": "Onboarding guide",
                            "body": "Welcome Kai! The onboarding guide is shared with you: doc-onboard."}),
            ("finish", {"summary": "Shared the onboarding guide with Kai and told him."}),
        ]:
            result = await client.call_tool(name, args)
            print(name, "->", result.content[0].text[:100])
    # the episode is graded and recorded as the client leaves: `coworkenv eval --db DB`


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="runs/mcp-client.db")
    anyio.run(main, ap.parse_args().db)
