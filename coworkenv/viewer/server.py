"""``coworkenv view``: a local, read-only web viewer of runs and episodes (Starlette, served by
uvicorn).

Bound to 127.0.0.1 by default; every request reads the database through its own read-only
connection, so the viewer can run beside a live run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from http import HTTPStatus
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..http_server import AppServer, EdgeLimits, guard
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


class ViewerServer(AppServer):
    """The viewer's Starlette app served by uvicorn (see :class:`AppServer`)."""

    def __init__(self, db: Path | Sequence[Path], host: str = "127.0.0.1",
                 port: int = 8765) -> None:
        self.db = db
        loopback = ("127.0.0.1", "localhost", "::1")
        # (DNS rebinding: a page elsewhere that points its own name at 127.0.0.1 sends that
        # name as Host; only the names this server is reached by are answered)
        allowed = None if host in ("0.0.0.0", "::", "") else tuple({*loopback, host.lower()})
        super().__init__(guard(viewer_app(db), lambda: None,  # (fails now if not a store)
                               EdgeLimits(max_body_bytes=64 << 10, request_timeout_s=60.0,
                                          allowed_hosts=allowed)),
                         host, port, name="coworkenv-view")


def viewer_app(db: Path | Sequence[Path]) -> Any:
    """The viewer as a Starlette app: the page, and the read-only JSON API under /api (every
    request reads through its own read-only connection, in a worker thread). ``db`` may be
    several shards (or a folder of them), read together."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    source: Path | list[Path] = Path(db) if isinstance(db, (str, Path)) else list(db)
    Reader(source).close()
    page = resources.files(__package__).joinpath("index.html").read_bytes()
    headers = {"Cache-Control": "no-store", "Content-Security-Policy": _policy(page),
               "X-Content-Type-Options": "nosniff"}

    def send(status: int, body: bytes, ctype: str) -> Response:
        return Response(body, status_code=status, media_type=ctype, headers=headers)

    def as_json(data: Any, status: int = 200) -> Response:
        return send(status, json.dumps(data, ensure_ascii=False).encode(), "application/json")

    def endpoint(request: Request) -> Response:
        raw = request.scope.get("raw_path") or request.url.path.encode()
        parts = [unquote(p) for p in raw.decode("latin-1").split("?")[0].strip("/").split("/")
                 if p]  # (split before decoding: an id may hold an encoded slash)
        if not parts or parts == ["index.html"]:
            return send(200, page, "text/html; charset=utf-8")
        if parts[0] != "api":
            return as_json({"error": "not found"}, HTTPStatus.NOT_FOUND)
        q = dict(request.query_params)
        try:
            with Reader(source) as r:
                return as_json(_route(r, parts[1:], q))
        except (NotFoundError, KeyError) as exc:  # (the store named by its file name only)
            return as_json({"error": _bare(str(exc).strip("'\""), source)},
                           HTTPStatus.NOT_FOUND)
        except ValueError as exc:
            return as_json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET"])])


def _bare(message: str, source: Path | list[Path]) -> str:
    """``message`` with the store's paths cut to their file names (a 404 tells a browser
    nothing of the host's folders)."""
    for f in [source] if isinstance(source, Path) else source:
        for form in (str(f.absolute()), str(f)):
            message = message.replace(form, f.name)
    return message


def _policy(page: bytes) -> str:
    """A Content-Security-Policy that runs the page's own script and nothing else: no other
    inline script, no event-handler attributes, no script from anywhere."""
    m = re.search(rb"<script>(.*?)</script>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(m.group(1) if m else b"").digest()).decode()
    return (f"default-src 'none'; script-src 'sha256-{digest}'; connect-src 'self'; "
            "style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")


def _route(r: Reader, parts: list[str], q: dict[str, str]) -> Any:
    routes: dict[tuple[str, int], Callable[[], Any]] = {
        ("runs", 1): lambda: api.runs(r),
        ("episodes", 1): lambda: api.episodes(
            r, run=q.get("run") or None, family=q.get("family") or None,
            capability=q.get("capability") or None, passed=_flag(q.get("passed")),
            safety_violation=_flag(q.get("safety_violation")),
            arrivals=bool(_flag(q.get("arrivals"))),
            limit=_int(q, "limit", 50, 1, 500), offset=_int(q, "offset", 0, 0, 2**62)),
    }
    key = (parts[0], len(parts)) if parts else ("", 0)
    if key in routes:
        return routes[key]()
    if parts[0] == "simulations" and len(parts) == 2:
        return api.simulation(r, parts[1])
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
