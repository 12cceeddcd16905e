"""An ASGI app (Starlette) served by uvicorn on a socket bound at construction: a busy port
fails there, with the OS's error, and ``port=0`` knows its port before serving. Used by the
viewer (``coworkenv view``) and the model server (``coworkenv serve``); the MCP episode server
binds its socket the same way (:func:`bound_socket`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port=0``: a free one), not yet listening; a busy
    port raises the OS's error here, with the socket closed."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class AppServer:
    """``serve_forever()`` in the calling thread (Ctrl-C or SIGTERM stops it), or
    ``serve_in_thread()``; ``shutdown()`` asks it to stop once the requests in flight are
    answered, or, with ``grace_s``, after that many seconds at most (the rest are cut)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *,
                 name: str = "coworkenv-http", grace_s: float | None = None,
                 lifespan: bool = False, max_message_bytes: int = 1 << 20) -> None:
        import uvicorn

        self.app, self.name = app, name
        self._socket = bound_socket(host, port)
        self.server_address: tuple[str, int] = self._socket.getsockname()[:2]
        self._server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", lifespan="on" if lifespan else "off",
            ws_max_size=max_message_bytes, ws_per_message_deflate=False,
            timeout_graceful_shutdown=None if grace_s is None else max(1, round(grace_s))))

    def serve_forever(self) -> None:
        self._server.run(sockets=[self._socket])

    def serve_in_thread(self, timeout_s: float = 30.0) -> threading.Thread:
        """Serve from a daemon thread; return once the server accepts connections."""
        t = threading.Thread(target=self.serve_forever, name=self.name, daemon=True)
        t.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not self._server.started:
            raise RuntimeError(f"{self.name}: the server on {self.server_address} did not start")
        return t

    def shutdown(self) -> None:
        self._server.should_exit = True

    def server_close(self) -> None:
        self._socket.close()


@dataclass(frozen=True)
class EdgeLimits:
    """What one client may take of a server (:func:`guard`): a request body, a WebSocket
    message, a request's time, an idle session, sessions from one address, the ``Host``
    names answered."""

    max_body_bytes: int = 1 << 20
    """An HTTP request body larger than this is refused (413) before the app reads it."""
    max_message_bytes: int = 1 << 20
    """A WebSocket message larger than this closes the connection (1009)."""
    request_timeout_s: float = 120.0
    """An HTTP request not answered within this is answered 504 and its work cancelled."""
    session_idle_s: float = 300.0
    """A session with no request for this long expires (its episode ends ``abandoned``)."""
    sessions_per_client: int | None = None
    """Sessions open at once from one client address (:class:`SessionsPerClient`; None: the
    server's default, :func:`default_sessions_per_client`)."""
    allowed_hosts: tuple[str, ...] | None = None
    """``Host`` header names answered (None: any); others get 421 (DNS rebinding)."""

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_message_bytes", "request_timeout_s",
                     "session_idle_s"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name}: expected a positive number, got {value!r}")
        if self.sessions_per_client is not None and self.sessions_per_client < 1:
            raise ValueError(f"sessions_per_client: expected at least 1, got "
                             f"{self.sessions_per_client}")


def default_sessions_per_client(max_sessions: int) -> int:
    """A quarter of a server's ``max_sessions`` (at least 1): no one address can hold them all."""
    return max(1, max_sessions // 4)


class HttpSessions(Protocol):
    """How a server's HTTP requests open sessions, for :class:`SessionsPerClient`."""

    def opens(self, scope: dict[str, Any], body: bytes) -> bool:
        """Whether this request (its whole body read) asks for a new session."""

    def opened(self, status: int, headers: dict[bytes, bytes], body: bytes) -> str | None:
        """The id of the session the answer opened, if it did (``body``: its first 64 KiB)."""

    def alive(self, session_id: str) -> bool:
        """Whether the session is still open (not closed, expired or failed)."""


class SessionsPerClient:
    """Sessions open at once from one client address, at most ``cap`` (:func:`guard` refuses
    one more with 429, naming the cap, how many the address holds and ``flag``). The address
    is the TCP peer's: behind a proxy, every client is the proxy. A WebSocket connection is a
    session while it is open; an HTTP request that ``http`` says opens one holds a slot while
    it is answered, then holds the session it opened while ``http.alive`` says so (closed,
    expired or failed, its slot is free)."""

    def __init__(self, cap: int, http: HttpSessions | None = None, *,
                 flag: str = "--sessions-per-client") -> None:
        if cap < 1:
            raise ValueError(f"sessions_per_client: expected at least 1, got {cap}")
        self.cap, self.http, self.flag = cap, http, flag
        self._sockets: Counter[str] = Counter()
        self._opening: Counter[str] = Counter()
        self._ids: dict[str, set[str]] = {}

    def held(self, client: str) -> int:
        """Sessions ``client`` holds now (those it is opening included)."""
        self._forget_ended()
        return self._sockets[client] + self._opening[client] + len(self._ids.get(client, ()))

    def refusal(self, client: str) -> dict[str, Any] | None:
        """Why ``client`` may not open another session now (None: it may)."""
        held = self.held(client)
        if held < self.cap:
            return None
        return {"error": f"{held} sessions are open from {client}, the most one client address "
                         f"may hold ({self.flag} {self.cap}): close one (or let it expire), or "
                         f"start the server with a higher {self.flag}",
                "client": client, "held": held, "sessions_per_client": self.cap}

    def _forget_ended(self) -> None:
        if self.http is None:
            return
        alive = self.http.alive
        for client in list(self._ids):
            live = {sid for sid in self._ids[client] if alive(sid)}
            if live:
                self._ids[client] = live
            else:
                del self._ids[client]

    def connected(self, client: str, n: int = 1) -> None:
        """``client`` opened a WebSocket (``n=-1``: closed it)."""
        _count(self._sockets, client, n)

    def opening(self, client: str, n: int = 1) -> None:
        """``client`` asked for a session over HTTP (``n=-1``: it was answered)."""
        _count(self._opening, client, n)

    def opened(self, client: str, session_id: str) -> None:
        """``client``'s request opened ``session_id``: it holds it while it lives."""
        self._ids.setdefault(client, set()).add(session_id)


def _count(counter: Counter[str], client: str, n: int) -> None:
    counter[client] += n
    if counter[client] <= 0:
        del counter[client]


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def guard(app: Any, failure: Callable[[], BaseException | None],
          limits: EdgeLimits | None = None, sessions: SessionsPerClient | None = None) -> Any:
    """``app`` behind the limits of :class:`EdgeLimits` (and ``sessions``' cap per client
    address), and with ``GET /health`` answered 503 (with the reason) once ``failure()`` says
    the server can no longer do its work."""
    return _Edge(app, failure, limits or EdgeLimits(), sessions)


def _client(scope: dict[str, Any]) -> str:
    """The client's address: the TCP peer's."""
    return str((scope.get("client") or ("?",))[0])


class _Edge:
    def __init__(self, app: Any, failure: Callable[[], BaseException | None],
                 limits: EdgeLimits, sessions: SessionsPerClient | None = None) -> None:
        self.app, self.failure, self.limits, self.sessions = app, failure, limits, sessions

    def __getattr__(self, name: str) -> Any:  # (the wrapped app's own attributes: routes, ...)
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self._host_allowed(scope):
            if kind == "http":
                await _answer(send, 421, {"error": "unknown Host header"})
            else:
                await receive()
                await send({"type": "websocket.close", "code": 1008})
            return
        if kind == "http":
            await self._http(scope, receive, send)
        else:
            await self._websocket(scope, receive, send)

    def _host_allowed(self, scope: dict[str, Any]) -> bool:
        allowed = self.limits.allowed_hosts
        if allowed is None:
            return True
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.strip("[]").lower() in allowed

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        limits = self.limits
        if scope.get("path") == "/health":
            failure = self.failure()
            if failure is not None:
                await _answer(send, 503, {"status": "unhealthy",
                                          "error": f"{type(failure).__name__}: {failure}"[:500]})
                return
        too_large = {"error": f"request body over {limits.max_body_bytes} bytes"}
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limits.max_body_bytes):
            await _answer(send, 413, too_large)
            return
        body, more = bytearray(), True
        while more:  # (read here, bounded: the app gets it whole)
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > limits.max_body_bytes:
                await _answer(send, 413, too_large)
                return
        sessions, client = self.sessions, _client(scope)
        opening = (sessions is not None and sessions.http is not None
                   and sessions.http.opens(scope, bytes(body)))
        if opening and sessions is not None:
            refused = sessions.refusal(client)
            if refused is not None:
                await _answer(send, 429, refused)
                return
        await self._answered(scope, bytes(body), receive, send,
                             opening=client if opening else None)

    async def _answered(self, scope: dict[str, Any], body: bytes, receive: Receive, send: Send,
                        opening: str | None = None) -> None:
        """The app answers the request (its ``body`` read). ``opening``: the client whose
        request asks for a session: it holds a slot while the request is answered, then the
        session the answer opened, if any."""
        limits, sessions = self.limits, self.sessions
        sent_body = False

        async def replay() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        started = False
        status, headers, answer = 0, dict[bytes, bytes](), bytearray()

        def opened() -> None:
            """The whole answer is out: the session it opened, if any, is the client's."""
            nonlocal opening
            if sessions is None or sessions.http is None or opening is None:
                return
            session_id = (sessions.http.opened(status, headers, bytes(answer))
                          if 200 <= status < 300 else None)
            if session_id is not None:
                sessions.opened(opening, session_id)
            sessions.opening(opening, -1)
            opening = None

        async def watch(message: dict[str, Any]) -> None:
            nonlocal started, status, headers
            started = True
            if opening is not None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    headers = {bytes(k).lower(): bytes(v) for k, v in message.get("headers", ())}
                elif message["type"] == "http.response.body":
                    if len(answer) < 1 << 16:  # (an id is in the first bytes, if at all)
                        answer.extend(message.get("body", b""))
                    if not message.get("more_body"):
                        opened()
            await send(message)

        if sessions is not None and opening is not None:
            sessions.opening(opening)
        try:
            with anyio.fail_after(limits.request_timeout_s):
                await self.app(scope, replay, watch)
        except TimeoutError:
            if not started:
                await _answer(send, 504, {"error": f"not answered within "
                                                   f"{limits.request_timeout_s:g} s"})
        finally:
            if sessions is not None and opening is not None:  # (no whole answer: none opened)
                sessions.opening(opening, -1)

    async def _websocket(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        client, sessions = _client(scope), self.sessions
        refused = sessions.refusal(client) if sessions is not None else None
        if refused is not None:
            await receive()  # (the connect)
            if "websocket.http.response" in (scope.get("extensions") or {}):
                data = json.dumps(refused).encode()
                await send({"type": "websocket.http.response.start", "status": 429,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(data)).encode())]})
                await send({"type": "websocket.http.response.body", "body": data})
            else:  # (a server that cannot answer a handshake with a response: the reason)
                await send({"type": "websocket.close", "code": 1013,
                            "reason": f"429: {refused['error']}"[:120]})
            return
        if sessions is not None:
            sessions.connected(client)

        async def checked() -> dict[str, Any]:
            """Messages that are JSON objects reach the app; anything else is answered
            with an error and the session goes on."""
            while True:
                message = await receive()
                if message.get("type") != "websocket.receive":
                    return message
                raw = message.get("text")
                if raw is None:
                    try:
                        raw = bytes(message.get("bytes") or b"").decode()
                    except UnicodeDecodeError:
                        raw = ""
                try:
                    shape_ok = isinstance(json.loads(raw), dict)
                except ValueError:
                    shape_ok = False
                if shape_ok:
                    return {"type": "websocket.receive", "text": raw}
                await send({"type": "websocket.send", "text": json.dumps({
                    "type": "error", "data": {"code": "INVALID_JSON", "message":
                                              "expected a JSON object with a `type`"}})})

        try:
            await self.app(scope, checked, send)
        finally:
            if sessions is not None:
                sessions.connected(client, -1)


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


@contextlib.asynccontextmanager
async def app_handlers(app: Any) -> AsyncIterator[None]:
    """The app's own start-up handlers, then (on leaving) its shutdown handlers: what a
    lifespan that replaces them runs (OpenEnv's idle-session reaper is one)."""
    try:
        for handler in app.router.on_startup:
            await _call(handler)
        yield
    finally:
        for handler in app.router.on_shutdown:
            await _call(handler)


async def _call(handler: Any) -> None:
    """Run one start-up or shutdown handler, sync or async."""
    out = handler()
    if asyncio.iscoroutine(out):
        await out


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """This code runs on ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
