"""Sessions per client address: one address cannot hold all of a server's sessions. Over its
cap (`--sessions-per-client`) it is answered 429 with a JSON error naming the cap, how many it
holds and the flag that raises it, at once; another address still opens sessions; a session
closed frees its slot. Real servers (`serve-env`, `mcp --transport http`) over real sockets,
the second client bound to 127.0.0.2."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import free_port, wait_for_port

OTHER = "127.0.0.2"  # (Linux answers the whole of 127.0.0.0/8 on loopback)


def _loopback_alias() -> bool:
    import socket

    try:
        with socket.socket() as s:
            s.bind((OTHER, 0))
    except OSError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _loopback_alias(), reason=f"cannot bind {OTHER}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """``start(command, *options)``: a coworkenv server on a free port, stopped at the end."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> int:
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "coworkenv.cli", *args,
                                 "--db", str(tmp_path / "caps.db"), "--port", str(port)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        wait_for_port(proc, port)
        return port

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def client(source: str) -> Any:
    import httpx

    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=20)


def assert_refused(code: int, body: Any, cap: int, source: str) -> None:
    assert code == 429, body
    assert body["sessions_per_client"] == cap and body["held"] == cap, body
    assert body["client"] == source, body
    assert f"{cap} sessions are open from {source}" in body["error"], body
    assert f"--sessions-per-client {cap}" in body["error"], body
    assert "higher --sessions-per-client" in body["error"], body


def eventually(attempt: Callable[[], Any], timeout: float = 10.0) -> Any:
    """``attempt()`` once it stops raising (a slot is freed as the server sees the close)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return attempt()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# serve-env: WebSocket sessions and OpenEnv's HTTP sessions, counted together ------------------


def ws(port: int, source: str = "127.0.0.1") -> Any:
    """A WebSocket session (a context manager) from ``source``."""
    from websockets.sync.client import connect

    return connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10, close_timeout=5,
                   source_address=(source, 0))


def ws_refused(port: int, source: str = "127.0.0.1") -> tuple[int, Any]:
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus) as refused, ws(port, source):
        pass
    response = refused.value.response
    return response.status_code, json.loads(response.body)


def rpc(http: Any, port: int, method: str, **params: Any) -> tuple[int, Any]:
    r = http.post(f"http://127.0.0.1:{port}/mcp",
                  json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return r.status_code, r.json()


def test_serve_env_caps_sessions_per_address(server: Callable[..., int]) -> None:
    port = server("serve-env", "--run-id", "caps", "--max-sessions", "8",
                  "--sessions-per-client", "2")
    with client("127.0.0.1") as one, client(OTHER) as other, contextlib.ExitStack() as held:
        first, _ = held.enter_context(ws(port)), held.enter_context(ws(port))
        t0 = time.monotonic()
        assert_refused(*ws_refused(port), cap=2, source="127.0.0.1")
        assert_refused(*rpc(one, port, "openenv/session/create"), cap=2, source="127.0.0.1")
        assert time.monotonic() - t0 < 5  # (refused at once, not left to hang)

        # another address is not held back by the first
        held.enter_context(ws(port, OTHER))
        code, made = rpc(other, port, "openenv/session/create")
        assert code == 200 and made["result"]["session_id"], made
        assert_refused(*rpc(other, port, "openenv/session/create"), cap=2, source=OTHER)
        assert_refused(*ws_refused(port, OTHER), cap=2, source=OTHER)

        # closing a session frees its slot: a WebSocket, and an HTTP session
        first.close()
        held.enter_context(eventually(lambda: ws(port)))
        code, closed = rpc(other, port, "openenv/session/close",
                           session_id=made["result"]["session_id"])
        assert code == 200 and closed["result"]["closed"], closed
        code, again = rpc(other, port, "openenv/session/create")
        assert code == 200 and again["result"]["session_id"], again
        assert one.get(f"http://127.0.0.1:{port}/health").status_code == 200


def test_serve_env_default_cap_is_a_quarter(server: Callable[..., int]) -> None:
    port = server("serve-env", "--run-id", "caps-default", "--max-sessions", "4")
    with ws(port):
        assert_refused(*ws_refused(port), cap=1, source="127.0.0.1")
        with ws(port, OTHER):
            pass


# mcp --transport http: the SDK's streamable HTTP sessions -----------------------------------

HEADERS = {"accept": "application/json, text/event-stream"}


def initialize(http: Any, port: int) -> tuple[int, Any, str | None]:
    r = http.post(f"http://127.0.0.1:{port}/mcp", headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "caps", "version": "0"}}})
    body = r.json() if r.headers.get("content-type", "").startswith("application/json") \
        else r.text
    return r.status_code, body, r.headers.get("mcp-session-id")


def test_mcp_http_caps_sessions_per_address(server: Callable[..., int]) -> None:
    port = server("mcp", "--task", "share-onboarding", "--transport", "http",
                  "--run-id", "caps-mcp", "--max-sessions", "8", "--sessions-per-client", "2")
    with client("127.0.0.1") as one, client(OTHER) as other:
        opened = [initialize(one, port) for _ in range(2)]
        assert all(code == 200 and sid for code, _, sid in opened), opened
        code, body, sid = initialize(one, port)
        assert sid is None
        assert_refused(code, body, cap=2, source="127.0.0.1")

        code, _, sid = initialize(other, port)
        assert code == 200 and sid, code

        # the client's DELETE ends its session: the slot is free
        r = one.delete(f"http://127.0.0.1:{port}/mcp",
                       headers={**HEADERS, "mcp-session-id": str(opened[0][2])})
        assert r.status_code < 300, r.text
        code, _, sid = initialize(one, port)
        assert code == 200 and sid, code
        assert_refused(*initialize(one, port)[:2], cap=2, source="127.0.0.1")
