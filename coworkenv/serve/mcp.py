"""One live episode served over MCP, with any MCP client as the agent under test
(``coworkenv mcp``; the official ``mcp`` SDK, the ``mcp`` extra).

The episode is a :class:`~coworkenv.runtime.Session`: it starts when the server starts; the
server's instructions are the agent's opening (system prompt and task); its tools are the
task's workspace tools (their own JSON schemas) plus ``send_message``, ``wait`` and ``finish``.
Each tool call is the agent's action in the episode (an event in the log, like any agent's);
its result is what the agent was told until it is next asked to act: the tool's result, then
messages and notifications from people, rendered as for a model agent. When the client goes
away (stdio) or the episode is over (HTTP), the episode is ended, graded and recorded.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from ..http_server import EdgeLimits
from ..runtime.session import EPISODE_OVER, Action, Session, Sessions, answer_texts
from ..sim.task import Task

TRANSPORTS = ("stdio", "http")


def _import_mcp() -> Any:
    try:
        import mcp.server.lowlevel
    except ImportError as exc:
        from ..sim.errors import RunConfigError

        raise RunConfigError(f"transport: serving over MCP needs the mcp extra "
                             f"(pip install 'coworkenv[mcp]'): {exc}") from None
    return mcp


def episode_server(session: Session, tools: list[dict[str, Any]], instructions: str,
                   on_over: Callable[[], None] | None = None) -> Any:
    """An MCP low-level server whose tools act in ``session`` (one action at a time)."""
    _import_mcp()
    from mcp.server.lowlevel import Server
    from mcp_types import CallToolResult, ListToolsResult, TextContent, Tool

    listed = [Tool(name=t["function"]["name"], description=t["function"].get("description"),
                   input_schema=t["function"]["parameters"]) for t in tools]
    lock = anyio.Lock()

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        action = Action.called(params.name, params.arguments)
        async with lock:  # one action at a time, in the order they came
            refused = EPISODE_OVER if session.done else action.problem()
            if refused is not None:
                return CallToolResult(content=[TextContent(text=refused)], is_error=True)
            obs, _, done, _ = await session.step(action)
        texts = answer_texts(action, obs)
        if done:
            texts.append("[the episode has ended]")
            if on_over is not None:
                on_over()
        return CallToolResult(content=[TextContent(text=t) for t in texts or ["(nothing new)"]])

    return Server("coworkenv", instructions=instructions, on_list_tools=list_tools,
                  on_call_tool=call_tool)


GRACE_S = 10.0
"""How long an HTTP episode server waits, once the episode is over, for the client to close
its connections before it stops anyway."""


class HttpEpisode:
    """An episode's MCP endpoint over streamable HTTP (see :func:`episode_http`)."""

    def __init__(self, web: Any, url: str) -> None:
        self.web, self.url, self.stopped = web, url, anyio.Event()
        self.idle = False
        """Stopped because no client came for ``idle_s`` seconds (the episode is left)."""
        self.idle_s = 0.0

    def stop(self) -> None:
        """Stop serving once the answers in flight have gone out."""
        self.web.should_exit = True


@contextlib.asynccontextmanager
async def episode_http(session: Session, tools: list[dict[str, Any]], instructions: str, *,
                       host: str = "127.0.0.1", port: int = 0, stop_when_over: bool = False,
                       sock: Any = None, limits: EdgeLimits | None = None,
                       max_sessions: int = 8) -> AsyncIterator[HttpEpisode]:
    """Serve ``session``'s tools over streamable HTTP (uvicorn) while the block runs
    (``port=0``: a free port). ``stopped`` is set when the server ends (its own signal
    handling included); ``stop_when_over`` stops it once the episode is over and the client
    has gone (or :data:`GRACE_S` later), or once no client has had a connection open for
    ``limits.session_idle_s`` (``idle`` says so: the episode was left).

    Behind :func:`~coworkenv.http_server.guard` (``limits``); MCP sessions (the SDK's) are
    capped at ``max_sessions`` at once (a client over the cap gets 503), at
    ``limits.sessions_per_client`` from one client address (default: a quarter of
    ``max_sessions``; one more gets 429), and each expires after ``session_idle_s`` without
    a request."""
    import uvicorn

    from ..http_server import (
        SessionsPerClient,
        bound_socket,
        default_sessions_per_client,
        guard,
    )

    sock = sock or bound_socket(host, port)  # (given: bound before anything was recorded)
    bound = sock.getsockname()[1]
    ended = anyio.Event()
    server = episode_server(session, tools, instructions,
                            on_over=ended.set if stop_when_over else None)
    limits = limits or EdgeLimits()
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def health(request: Any) -> JSONResponse:  # (unhealthy: the guard answers 503)
        return JSONResponse({"status": "healthy"})

    # (the SDK caps and expires sessions from mcp 2.3, which the `mcp` extra asks for; an
    # older one, as verifiers' environments may bring, serves without)
    known = inspect.signature(server.streamable_http_app).parameters
    caps = {k: v for k, v in (("session_idle_timeout", limits.session_idle_s),
                              ("max_sessions", max_sessions)) if k in known}
    app = guard(server.streamable_http_app(
        host=host, max_request_body_size=limits.max_body_bytes,
        custom_starlette_routes=[Route("/health", health, methods=["GET"])], **caps),
        lambda: session.host.failure, limits,
        SessionsPerClient(limits.sessions_per_client
                          or default_sessions_per_client(max_sessions), McpHttpSessions(server)))
    web = uvicorn.Server(uvicorn.Config(app, host=host, log_level="warning", lifespan="on",
                                        ws_max_size=limits.max_message_bytes))
    served = HttpEpisode(web, f"http://{host}:{bound}/mcp")
    served.idle_s = limits.session_idle_s

    async def serve() -> None:
        try:
            await web.serve(sockets=[sock])
        finally:
            served.stopped.set()
            sock.close()

    watching = anyio.CancelScope()

    async def stop_after_the_client() -> None:
        """Once the episode is over, stop when the client has closed its connections (its
        session's last request, a DELETE, comes after the last answer), or after a grace."""
        await ended.wait()
        with anyio.move_on_after(GRACE_S):
            # (uvicorn keeps its open connections in a set, and says nothing when it changes)
            while web.server_state.connections:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        served.stop()

    async def stop_when_left() -> None:
        """No connection open for ``session_idle_s``: the client left the episode."""
        quiet_since = anyio.current_time()
        while True:
            await anyio.sleep(min(1.0, limits.session_idle_s / 4))
            if web.server_state.connections:
                quiet_since = anyio.current_time()
            elif anyio.current_time() - quiet_since > limits.session_idle_s:
                served.idle = True
                served.stop()
                return

    async def watch() -> None:
        with watching:
            async with anyio.create_task_group() as both:
                both.start_soon(stop_after_the_client)
                both.start_soon(stop_when_left)

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        if stop_when_over:
            tg.start_soon(watch)
        # (uvicorn says it has started only by a flag)
        while not web.started and not served.stopped.is_set():  # noqa: ASYNC110
            await anyio.sleep(0.005)
        if not web.started:
            from ..sim.errors import RunConfigError

            raise RunConfigError(f"transport: the MCP server on {host}:{bound} did not start")
        try:
            yield served
        finally:
            served.stop()
            watching.cancel()


class McpHttpSessions:
    """The MCP SDK's streamable HTTP sessions (:class:`~coworkenv.http_server.HttpSessions`):
    a ``POST`` without an ``mcp-session-id`` header opens one (the answer's header names it),
    alive until the client's ``DELETE``, its idle expiry or its failure."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def opens(self, scope: dict[str, Any], body: bytes) -> bool:
        return scope.get("method") == "POST" and not any(
            k.lower() == b"mcp-session-id" for k, _ in scope.get("headers") or ())

    def opened(self, status: int, headers: dict[bytes, bytes], body: bytes) -> str | None:
        session_id = headers.get(b"mcp-session-id")
        return session_id.decode("latin-1") if session_id else None

    def alive(self, session_id: str) -> bool:
        # (the SDK's session manager says which sessions are open only in a private dict;
        # an SDK without it: none is counted once opened, so no client is ever locked out)
        open_now = getattr(self.server.session_manager, "_server_instances", None)
        return open_now is not None and session_id in open_now


def _say(text: str) -> None:
    """Progress for the person running the server: stderr (stdout may be the protocol)."""
    print(text, file=sys.stderr, flush=True)


async def serve_episode(task: Task, db: str | Path, *, transport: str = "stdio",
                        host: str = "127.0.0.1", port: int = 8200,
                        run_id: str | None = None, tools: Sequence[str] | None = None,
                        agent_name: str = "mcp", seed: int | None = None,
                        limits: EdgeLimits | None = None, max_sessions: int = 8) -> Any:
    """Serve one episode of ``task`` over MCP until the client leaves (stdio) or the episode
    is over (HTTP: or no client came for ``limits.session_idle_s``); return its graded result
    (recorded in ``db``). An episode the client left unfinished ends ``abandoned``."""
    if transport not in TRANSPORTS:
        from ..sim.errors import RunConfigError

        raise RunConfigError(f"transport: expected stdio or http, got {transport!r}")
    _import_mcp()
    sock = None
    if transport == "http":  # bound first: a busy port stops here, with nothing recorded
        from ..http_server import bound_socket

        sock = bound_socket(host, port)
    async with Sessions(db, tasks=[task], run_id=run_id, agent_name=agent_name,
                        tools=list(tools) if tools is not None else None,
                        source="mcp") as sessions:
        session = sessions.session()
        first = await session.reset(task, seed=seed)
        offered = sessions.offered(task.id)
        instructions = "\n\n".join(str(m.get("content") or "") for m in first.messages)
        assert session.spec is not None
        _say(f"coworkenv mcp: episode {session.spec.episode_id} of task {task.id} over "
             f"{transport}; {len(offered)} tools; recording in {db} (run {sessions.run_id})")
        if transport == "stdio":
            from mcp.server.stdio import stdio_server

            server = episode_server(session, offered, instructions)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            async with episode_http(session, offered, instructions, host=host, port=port,
                                    stop_when_over=True, sock=sock, limits=limits,
                                    max_sessions=max_sessions) as served:
                _say(f"coworkenv mcp: serving {served.url}")
                await served.stopped.wait()
            if served.idle:
                _say(f"coworkenv mcp: no client for {served.idle_s:g}s: the episode is "
                     "left unfinished")
        result = await session.close(abandoned=not session.done)
    _say(f"coworkenv mcp: episode {result.episode_id}: {result.termination}, score "
         f"{result.score:.3f} (completion {result.completion:.3f}, safety {result.safety:.3f}, "
         f"robustness {result.robustness:.3f}), {result.turns} actions")
    return result
