"""``coworkenv view``: a local, read-only web viewer of runs and episodes.

Bound to 127.0.0.1 by default; every request reads the database through its own read-only
connection, so the viewer can run beside a live run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..store import NotFoundError, Reader
from . import api


def _int(q: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
    """A query parameter as an integer within [lo, hi] (a 400 otherwise, never a SQLite
    overflow that drops the connection)."""
    raw = q.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{name}: expected {lo}..{hi}, got {raw[:40]}")
    return value


def _flag(v: str | None) -> bool | None:
    if v in (None, "", "any"):
        return None
    return v in ("1", "true", "yes", "pass", "passed")


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, db: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
        self.db = Path(db)
        Reader(self.db).close()  # fail now, with a clear message, if it is not a store
        self.page = resources.files(__package__).joinpath("index.html").read_bytes()
        self.csp = _policy(self.page)
        super().__init__((host, port), _Handler)

    def serve_in_thread(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="coworkenv-view", daemon=True)
        t.start()
        return t


def _policy(page: bytes) -> str:
    """A Content-Security-Policy that runs the page's own script and nothing else: no other
    inline script, no event-handler attributes, no script from anywhere."""
    m = re.search(rb"<script>(.*?)</script>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(m.group(1) if m else b"").digest()).decode()
    return (f"default-src 'none'; script-src 'sha256-{digest}'; connect-src 'self'; "
            "style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", self.server.csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data: Any, status: int = 200) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode(), "application/json")

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
        if not parts or parts == ["index.html"]:
            self._send(200, self.server.page, "text/html; charset=utf-8")
            return
        if parts[0] != "api":
            self._json({"error": "not found"}, HTTPStatus.NOT_FOUND)
            return
        try:
            with Reader(self.server.db) as r:
                self._json(self._route(r, parts[1:], q))
        except (NotFoundError, KeyError) as exc:
            self._json({"error": str(exc)}, HTTPStatus.NOT_FOUND)
        except ValueError as exc:
            self._json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)

    def _route(self, r: Reader, parts: list[str], q: dict[str, str]) -> Any:
        routes: dict[tuple[str, int], Callable[[], Any]] = {
            ("runs", 1): lambda: api.runs(r),
            ("episodes", 1): lambda: api.episodes(
                r, run=q.get("run") or None, family=q.get("family") or None,
                capability=q.get("capability") or None, passed=_flag(q.get("passed")),
                safety_violation=_flag(q.get("safety_violation")),
                limit=_int(q, "limit", 50, 1, 500), offset=_int(q, "offset", 0, 0, 2**62)),
        }
        key = (parts[0], len(parts)) if parts else ("", 0)
        if key in routes:
            return routes[key]()
        if parts[0] == "episodes" and len(parts) >= 2:
            eid = parts[1]
            r.episode(eid)  # an unknown episode is a 404 on every route
            if len(parts) == 2:
                return api.timeline(r, eid)
            if parts[2] == "events" and len(parts) == 4:
                return api.event(r, eid, _int({"seq": parts[3]}, "seq", 0, 0, 2**62))
            if parts[2] == "state" and len(parts) == 3:
                return api.state_at(r, eid, _int(q, "at", 0, 0, 2**62))
            if parts[2] == "conversation" and len(parts) == 3:
                return api.conversation(r, eid)
        raise KeyError(f"no API route /{'/'.join(parts)}")
