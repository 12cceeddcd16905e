"""coworkenv as an OpenEnv environment server (``openenv-core``; ``coworkenv serve-env``).

Each OpenEnv session (one WebSocket client, or the HTTP endpoints) gets a
:class:`CoworkEnvironment`, an OpenEnv ``MCPEnvironment``: ``reset(task_id=..., seed=...)``
starts a coworkenv :class:`~coworkenv.runtime.Session` and returns the opening; a
``CallToolAction`` is the agent's action in the episode (a workspace tool, ``send_message``,
``wait`` or ``finish``) and returns what the agent was told until its next decision, with
``done`` and the reward (the grade's score once the episode is over); ``ListToolsAction``
lists the task's tools with their JSON schemas; ``state`` says where the episode stands. All
sessions of a server share one store and run on the server's own event loop
(:class:`LoopSessions`), so they are recorded, graded episodes like any run's.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from ..http_server import (
    EdgeLimits,
    SessionsPerClient,
    app_handlers,
    default_sessions_per_client,
    guard,
    on_loop,
)
from ..runtime.session import Action, Observation, Session, Sessions, check_seed
from ..sim.errors import RunConfigError, SessionFailedError


def _import_openenv() -> None:
    try:
        import fastmcp  # noqa: F401
        import openenv.core.env_server  # noqa: F401
    except ImportError as exc:
        from ..sim.errors import RunConfigError

        raise RunConfigError(f"serve-env needs the openenv extra (pip install "
                             f"'coworkenv[openenv]'): {exc}") from None


def _payload(obs: Observation, session: Session) -> dict[str, Any]:
    return {"text": obs.text, "messages": obs.messages, "state": session.state()}


def environment_class(host: Any) -> type[Any]:
    """The OpenEnv environment class of ``host`` (its factory is the class itself): a
    :class:`LoopSessions` (task episodes) or a :class:`~coworkenv.serve.simseats.SimulationSeats`
    (seats of simulations)."""
    _import_openenv()
    from .simseats import SimulationSeats

    seats = host if isinstance(host, SimulationSeats) else None
    from fastmcp import FastMCP
    from fastmcp.tools.base import Tool, ToolResult
    from mcp.types import TextContent
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolObservation, ToolError, ToolErrorType
    from openenv.core.env_server.types import State

    class EpisodeTool(Tool):  # type: ignore[misc]
        """A tool of the episode, with its own JSON schema; running it is the agent's action."""

        env: Any = None

        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            obs = await self.env._act(self.name, arguments)
            return ToolResult(content=[TextContent(type="text", text=json.dumps(
                obs.result if obs.result is not None else obs.error.model_dump()))],
                is_error=obs.error is not None)

    from fastmcp import Client
    from openenv.core.env_server.mcp_types import ListToolsObservation
    from openenv.core.env_server.mcp_types import Tool as ListedTool

    no_tools = FastMCP("coworkenv")  # (what a session serves before its first reset)

    class CoworkEnvironment(MCPEnvironment):  # type: ignore[misc]
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            self._busy = False  # (an action or reset in flight: one at a time per session)
            self._offered: list[dict[str, Any]] | None = None  # (tools not yet served)
            self._listed: list[dict[str, Any]] = []  # (this episode's tools)
            super().__init__(no_tools)
            self._no_tools_client = self.mcp_client
            self.session: Session | None = None
            self.seat = ""  # (a simulation's seat: the one this client holds, its lobby and
            self.lobby: Any = None  # its SeatSession)
            self.held: Any = None

        # The episode's FastMCP server (the task's tools; reset changes them) is built when
        # something first asks for it: OpenEnv's JSON-RPC MCP messages do; CallToolAction
        # and ListToolsAction steps, what trainers send, do not (44 tools cost about 5 ms to
        # register, more than a whole episode's steps cost the server).
        @property  # type: ignore[misc]
        def mcp_server(self) -> Any:
            self._build()
            return self.__dict__.get("_mcp_server")

        @mcp_server.setter
        def mcp_server(self, value: Any) -> None:
            self.__dict__["_mcp_server"] = value

        @property  # type: ignore[misc]
        def mcp_client(self) -> Any:
            self._build()
            return self.__dict__.get("_mcp_client")

        @mcp_client.setter
        def mcp_client(self, value: Any) -> None:
            self.__dict__["_mcp_client"] = value

        def _build(self) -> None:
            offered, self._offered = self.__dict__.get("_offered"), None
            if offered is None:
                return
            server = FastMCP("coworkenv")
            for t in offered:  # (copies: the offered lists are shared by the sessions)
                fn = t["function"]
                server.add_tool(EpisodeTool(name=fn["name"], description=fn.get("description"),
                                            parameters=copy.deepcopy(fn["parameters"]),
                                            env=self))
            self.mcp_server, self.mcp_client = server, Client(server)

        @contextlib.asynccontextmanager
        async def mcp_session(self) -> AsyncIterator[Any]:
            """The MCP client session (OpenEnv opens one per connection). Before a reset there
            is nothing to serve, so nothing is connected: connecting costs about 3 ms, more
            than the server spends on a whole episode's steps."""
            client = self._require_mcp_client()
            if client is self._no_tools_client:
                yield client
                return
            async with client:
                yield client

        def _serve_tools(self, offered: list[dict[str, Any]]) -> None:
            """This episode's tools: listed at once, served over MCP when first asked."""
            self._listed = offered
            self._offered = offered

        async def _async_handle_list_tools(self) -> Any:
            return ListToolsObservation(tools=[ListedTool(
                name=t["function"]["name"], description=t["function"].get("description") or "",
                input_schema=t["function"]["parameters"]) for t in self._listed])

        def _refused(self, name: str, message: str, invalid: bool = True) -> Any:
            kind = ToolErrorType.INVALID_ARGS if invalid else ToolErrorType.EXECUTION_ERROR
            return CallToolObservation(tool_name=name, error=ToolError(error_type=kind,
                                                                       message=message))

        # reset ---------------------------------------------------------------------------
        async def reset_async(self, seed: int | None = None, episode_id: str | None = None,
                              task_id: str | None = None, seat: str | None = None,
                              **kwargs: Any) -> Any:
            try:
                seed = check_seed(seed)
            except RunConfigError as exc:
                return self._refused("reset", str(exc))
            if seats is not None:
                return await self._exclusive("reset", lambda: self._reset_seat(seed, seat,
                                                                               task_id))
            if seat is not None:
                return self._refused("reset", f"seat {seat!r}: this server serves tasks "
                                     "(reset(task_id=...)); seats are served by `coworkenv "
                                     "serve-env --simulation FILE --seat ...`")
            return await self._exclusive("reset", lambda: self._reset(seed, task_id))

        async def _exclusive(self, name: str, work: Any) -> Any:
            """``await work()``, one at a time per session (two clients on one session: the
            second is told at once, not left waiting); a session the simulator could not
            carry is an error observation (the host is unhealthy now: /health says so)."""
            if self._busy:
                return self._refused(name, BUSY, invalid=False)
            self._busy = True
            try:
                return await work()
            except SessionFailedError as exc:
                return self._refused(name, str(exc), invalid=False)
            finally:
                self._busy = False

        async def _reset(self, seed: int | None, task_id: str | None) -> Any:
            if not task_id:
                return CallToolObservation(tool_name="reset", error=ToolError(
                    error_type=ToolErrorType.INVALID_ARGS,
                    message=f"reset needs task_id, one of {sorted(host.sessions.tasks)[:20]}"))
            if task_id not in host.sessions.tasks:
                return CallToolObservation(tool_name="reset", error=ToolError(
                    error_type=ToolErrorType.INVALID_ARGS,
                    message=f"task_id {task_id!r} is not among the server's "
                            f"{len(host.sessions.tasks)} tasks"))
            host.sessions.check_healthy()
            if self.session is not None and not self.session.done:
                await host.acall(self.session.close())
            self.session = session = host.sessions.session()
            first = await host.acall(session.reset(task_id, seed=seed))
            offered = host.sessions.offered(task_id)
            self._serve_tools(offered)
            return CallToolObservation(tool_name="reset", result={
                **_payload(first, session), "tools": [t["function"]["name"] for t in offered]},
                done=first.done, reward=0.0)

        def reset(self, seed: int | None = None, episode_id: str | None = None,
                  task_id: str | None = None, **kwargs: Any) -> Any:
            from openenv.core.utils import run_async_safely

            return run_async_safely(self.reset_async(seed, episode_id, task_id, **kwargs))

        # a seat of a simulation (serve-env --simulation) ---------------------------------
        def _seat_state(self) -> dict[str, Any]:
            held, lobby = self.held, self.lobby
            if held is None or lobby is None or seats is None:
                return {}
            info = held.info()
            task = held.task.id if held.task is not None else info.get("task_id")
            return {**info, "seat": self.seat, "simulation": seats.simulation,
                    "run": lobby.run_id, "seed": lobby.seed, "task_id": task}

        def _leave(self) -> None:
            """This client is done with its simulation (the seat's later arrivals: ``then``)."""
            lobby, self.lobby, self.held = self.lobby, None, None
            if lobby is not None and seats is not None:
                seats.call_soon(seats.let_go, lobby, self.seat)

        async def _reset_seat(self, seed: int | None, seat: str | None,
                              task_id: str | None) -> Any:
            assert seats is not None
            if task_id:
                return self._refused("reset", f"task_id {task_id!r}: this server serves the "
                                     f"seats of simulation {seats.simulation!r}: reset(seat="
                                     f"one of {seats.seats})")
            if seat is None and len(seats.seats) == 1:
                seat = seats.seats[0]
            if seat not in seats.seats:
                return self._refused("reset", f"reset needs seat=, one of {seats.seats}"
                                     if seat is None else f"seat {seat!r} is not served here "
                                     f"(seats: {', '.join(seats.seats)})")
            lobby = self.lobby
            if lobby is not None and (self.seat != seat or lobby.error is not None or
                                      (seed is not None and seed != lobby.seed)):
                self._leave()
            if self.held is not None:  # the seat's next arrival in this simulation
                first = await self._next_arrival()
                if not isinstance(first, Observation):
                    return first
                if first.done and not first.messages:  # (the simulation has ended)
                    self._leave()
            if self.held is None:  # a lobby: the next simulation, once every seat has a
                # client
                try:
                    self.lobby = await seats.join(seat, seed)
                except Exception as exc:  # (no client for a seat in time; it could not
                    # start)
                    return self._refused("reset", str(exc) if isinstance(exc, RunConfigError)
                                         else f"the simulation could not start: "
                                         f"{type(exc).__name__}: {exc}", invalid=False)
                self.seat = seat
                self.held = self.lobby.session.seats[seat]
                first = await self._next_arrival()
                if not isinstance(first, Observation):
                    return first
            task = self.held.task if self.held is not None else None
            offered = seats.offered(task) if task is not None else []
            self._serve_tools(offered)
            return CallToolObservation(tool_name="reset", result={
                "text": first.text, "messages": first.messages, "state": self._seat_state(),
                "tools": [t["function"]["name"] for t in offered]},
                done=first.done, reward=0.0)

        def _failed(self, name: str, exc: BaseException) -> Any:
            """The seat's simulation failed: the client is told, and its next reset joins
            the next simulation."""
            self._leave()
            return self._refused(name, f"the simulation failed: {type(exc).__name__}: {exc} "
                                 "(reset for the next one)", invalid=False)

        async def _next_arrival(self) -> Any:
            """The held seat's next arrival (an Observation), or the refusal of a simulation
            that failed."""
            assert self.held is not None
            try:
                return await self.held.reset()
            except Exception as exc:
                return self._failed("reset", exc)

        async def _act_seat(self, name: str, action: Action) -> Any:
            held = self.held
            if held is None:
                return self._refused(name, "reset(seat=...) takes up an arrival before any "
                                     "tool", invalid=False)

            async def step() -> Any:
                try:
                    obs, reward, done, _ = await held.step(action)
                except RunConfigError as exc:
                    if held.owner.error is not None:
                        return self._failed(name, held.owner.error)
                    return self._refused(name, f"{exc} (this arrival is over)", invalid=False)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):  # (its
                    # simulation stopped under it)
                    return self._failed(name, held.owner.error or RuntimeError(
                        "the simulation stopped"))
                return CallToolObservation(tool_name=name, result={
                    "text": obs.text, "messages": obs.messages, "state": self._seat_state()},
                    done=done, reward=reward)

            return await self._exclusive(name, step)

        # actions -------------------------------------------------------------------------
        async def _act(self, name: str, arguments: dict[str, Any]) -> Any:
            session = self.session
            if seats is None and session is None:
                return self._refused(name, "reset(task_id=...) starts an episode before any "
                                     "tool", invalid=False)
            action = Action.called(name, arguments)
            problem = action.problem()
            if problem is not None:
                return self._refused(name, json.loads(problem)["error"]["message"])
            if seats is not None:
                return await self._act_seat(name, action)
            assert session is not None

            async def step() -> Any:
                obs, reward, done, _ = await host.acall(session.step(action))
                return CallToolObservation(tool_name=name, result=_payload(obs, session),
                                           done=done, reward=reward)

            return await self._exclusive(name, step)

        async def _async_handle_call_tool(self, action: Any, timeout_s: float | None = None
                                          ) -> Any:
            return await self._act(action.tool_name, dict(action.arguments or {}))

        def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            return CallToolObservation(tool_name=str(getattr(action, "type", "?")),
                                       error=ToolError(error_type=ToolErrorType.INVALID_ARGS,
                                                       message="actions are MCP tool calls "
                                                       "(CallToolAction) or ListToolsAction"))

        @property
        def state(self) -> Any:
            s = self.session.state() if self.session is not None else self._seat_state()
            return State(episode_id=s.get("episode_id"), step_count=int(s.get("steps", 0)),
                         **{k: v for k, v in s.items() if k not in ("episode_id", "steps")})

        def close(self) -> None:
            """The client is gone (its WebSocket closed, its session expired or closed, or an
            HTTP request's environment is done): an episode it left open ends ``abandoned``."""
            self._leave()
            session, self.session = self.session, None
            if session is not None and not session.done:
                host.close(session)
            elif session is not None:
                host.release(session)
            self._offered = None  # (no server is built only to be closed)
            super().close()

    return CoworkEnvironment


BUSY = ("this session is answering another request (one action at a time per session; "
        "is a second client using its id?)")


class LoopSessions:
    """The sessions on the server's own event loop: the app's lifespan opens them (one store,
    one run, one task group) and closes them on shutdown, ending and grading the open ones.
    Environment methods await sessions directly; a worker thread of the server (OpenEnv runs
    ``close`` in one) reaches the loop through :meth:`call`."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.loop: asyncio.AbstractEventLoop | None = None
        self._closing: set[asyncio.Future[Any]] = set()

    @property
    def failure(self) -> BaseException | None:
        """What makes the server unhealthy (see :attr:`Sessions.failure`)."""
        return self.sessions.failure

    async def acall(self, coro: Any) -> Any:
        return await coro

    def call(self, coro: Any, timeout: float | None = 900.0) -> Any:
        if self.loop is None:
            raise RuntimeError("the app is not serving (its lifespan has not started)")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self, session: Session) -> None:
        """End ``session`` as ``abandoned``, from the loop's thread or any other: on the loop
        it goes on in the background (blocking there would stop the server: OpenEnv closes
        an HTTP request's environment on the loop); from another thread this waits for it.
        A failure is the host's (``failure``), not the closer's."""
        if self.loop is None:
            return  # (the lifespan's end closes every open session)
        if on_loop(self.loop):
            task = self.loop.create_task(self._close(session), name="coworkenv-session-close")
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            return
        with contextlib.suppress(Exception):
            self.call(self._close(session))

    def release(self, session: Session) -> None:
        """Let go of a finished session, on the loop's thread (its streams are the loop's)."""
        if self.loop is None or on_loop(self.loop):
            session.release()
        else:
            self.loop.call_soon_threadsafe(session.release)

    async def _close(self, session: Session) -> None:
        with contextlib.suppress(Exception):  # (on record in self.failure)
            await session.close(abandoned=True)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Open the sessions, then run the app's own start-up handlers (OpenEnv's idle-session
        reaper is one: a lifespan replaces them); on shutdown the reverse. A store that failed
        is not raised again here: ``failure`` holds it, and the server reports it."""
        from ..store import StoreClosedError

        try:
            async with self.sessions:
                self.loop = asyncio.get_running_loop()
                try:
                    async with app_handlers(app):
                        yield
                finally:
                    if self._closing:
                        await asyncio.gather(*self._closing, return_exceptions=True)
                    self.loop = None
        except StoreClosedError:
            if self.failure is None:
                raise


def create_app(tasks: list[Any], db: str | Path, *, run_id: str | None = None,
               tools: list[str] | None = None, max_sessions: int = 64,
               agent_name: str = "openenv", limits: EdgeLimits | None = None,
               ) -> tuple[Any, LoopSessions]:
    """The OpenEnv FastAPI app serving ``tasks``; its sessions run on the app's own loop
    (opened by its lifespan: serve it with lifespan on, as uvicorn does by default).
    ``limits``: what a request, a message and a session may take (:class:`EdgeLimits`); an
    idle session expires after ``limits.session_idle_s`` and its episode ends ``abandoned``;
    one client address holds at most ``limits.sessions_per_client`` sessions at once (default:
    a quarter of ``max_sessions``), WebSockets and HTTP sessions together: one more is
    answered 429."""
    _import_openenv()
    host = LoopSessions(Sessions(db, tasks=tasks, run_id=run_id, agent_name=agent_name,
                                 tools=tools, source="openenv", wall_timeout_s=3600.0))
    return _app(host, max_sessions, limits or EdgeLimits()), host


def create_simulation_app(file: str | Path, seats: list[str], db: str | Path, *,
                          agents: dict[str, str] | None = None, policy: str | None = None,
                          then: str = "noop", seed: int | None = None,
                          tools: list[str] | None = None, max_sessions: int = 64,
                          lobby_timeout_s: float = 300.0, limits: EdgeLimits | None = None,
                          ) -> tuple[Any, Any]:
    """The OpenEnv FastAPI app serving the ``seats`` (agents of the roster; empty: all) of
    simulations of ``file``: each client's ``reset(seat=...)`` holds one seat, a simulation
    starts once every seat has a client (see :mod:`coworkenv.serve.simseats`). ``agents`` and
    ``policy``: the other agents' policies (as ``simulate --agents/--agent``); ``then``: the
    policy a seat's arrivals go to once its client has left. Returns the app and its
    :class:`~coworkenv.serve.simseats.SimulationSeats`."""
    _import_openenv()
    from .simseats import SimulationSeats

    host = SimulationSeats(file, seats, db, agents=agents, policy=policy, then=then, seed=seed,
                           tools=tools, lobby_timeout_s=lobby_timeout_s)
    return _app(host, max_sessions, limits or EdgeLimits()), host


def _app(host: Any, max_sessions: int, limits: EdgeLimits) -> Any:
    """OpenEnv's routes for ``host``'s environment (what openenv's create_fastapi_app does,
    keeping its server: it says which sessions live), behind the edge limits."""
    from fastapi import FastAPI
    from openenv.core.env_server.http_server import HTTPEnvServer
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import ConcurrencyConfig

    env = environment_class(host)
    app = FastAPI(title="coworkenv: an OpenEnv environment",
                  description="OpenEnv's HTTP and WebSocket API; see `coworkenv serve-env`.")
    server = HTTPEnvServer(env, CallToolAction, CallToolObservation,
                           concurrency_config=ConcurrencyConfig(
                               max_concurrent_envs=max_sessions,
                               session_timeout=limits.session_idle_s))
    server.register_routes(app)
    app.router.lifespan_context = host.lifespan
    app.add_middleware(QuietDisconnects)
    per_client = SessionsPerClient(limits.sessions_per_client
                                   or default_sessions_per_client(max_sessions),
                                   OpenEnvHttpSessions(server))
    return guard(app, lambda: host.failure, limits, per_client)


class OpenEnvHttpSessions:
    """OpenEnv's sessions held over HTTP (:class:`~coworkenv.http_server.HttpSessions`): a
    ``POST /mcp`` JSON-RPC ``openenv/session/create`` opens one (the answer's
    ``result.session_id``), alive until ``openenv/session/close`` or its idle expiry."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def opens(self, scope: dict[str, Any], body: bytes) -> bool:
        if scope.get("method") != "POST" or scope.get("path") != "/mcp":
            return False
        try:
            request = json.loads(body)
        except ValueError:
            return False
        return isinstance(request, dict) and request.get("method") == "openenv/session/create"

    def opened(self, status: int, headers: dict[bytes, bytes], body: bytes) -> str | None:
        try:
            result = json.loads(body).get("result")
        except (ValueError, AttributeError):
            return None
        session_id = result.get("session_id") if isinstance(result, dict) else None
        return session_id if isinstance(session_id, str) else None

    def alive(self, session_id: str) -> bool:
        return self.server.get_session_info(session_id) is not None


class QuietDisconnects:
    """ASGI middleware: a WebSocket whose client has already gone is not an error. (OpenEnv's
    endpoint closes the socket after the client's ``close`` message, when the client may have
    disconnected already; uvicorn would log that as a traceback per episode, and formatting it
    costs the server more than the episode's steps.)"""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "websocket":
            await self.app(scope, receive, send)
            return
        from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

        # (WebSocketDisconnected: OpenEnv answers a step whose client left mid-step)
        with contextlib.suppress(WebSocketDisconnect, WebSocketDisconnected):
            await self.app(scope, receive, send)


def __getattr__(name: str) -> Any:
    """``app``: the app for OpenEnv's tooling (``openenv.yaml``: ``uvicorn
    coworkenv.serve.openenv:app``), serving ``COWORKENV_TASKS`` (task files or folders,
    separated by the path separator; default: the built-in tasks) into ``COWORKENV_DB``."""
    if name != "app":
        raise AttributeError(name)
    import os

    from ..sim import builtin_tasks, load_tasks

    given = [Path(p) for p in os.environ.get("COWORKENV_TASKS", "").split(os.pathsep) if p]
    web, _ = create_app(load_tasks(given) if given else builtin_tasks(),
                        os.environ.get("COWORKENV_DB", "runs/coworkenv.db"))
    globals()["app"] = web
    return web
