"""Servers to the outside, on the library API (``coworkenv.runtime``): one live episode over MCP
(:mod:`coworkenv.serve.mcp`, ``coworkenv mcp``) and tasks as an OpenEnv environment
(:mod:`coworkenv.serve.openenv`, ``coworkenv serve-env``). Each needs its extra (``mcp``,
``openenv``); importing this package needs neither."""
