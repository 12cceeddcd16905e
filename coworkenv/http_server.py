"""An ASGI app (Starlette) served by uvicorn on a socket bound at construction: a busy port
fails there, with the OS's error, and ``port=0`` knows its port before serving. Used by the
viewer (``coworkenv view``) and the model server (``coworkenv serve``); the MCP episode server
binds its socket the same way (:func:`bound_socket`)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


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
                 name: str = "coworkenv-http", grace_s: float | None = None) -> None:
        import uvicorn

        self.app, self.name = app, name
        self._socket = bound_socket(host, port)
        self.server_address: tuple[str, int] = self._socket.getsockname()[:2]
        self._server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", lifespan="off",
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
