"""A scripted OpenAI-compatible server: exact control of what a "model" answers.

It speaks enough of ``POST /v1/chat/completions`` for the ``openai`` client, over real HTTP on
127.0.0.1 (whole completions, or server-sent chunks when the request streams), and answers
from a script: each item is a completion message (content and/or tool calls), an HTTP error,
or a stall (to provoke client timeouts); or, with ``responder``, from a function of the
request (a scripted policy that reads what it is sent: for long runs whose requests cannot be
listed in advance). Every request it receives is kept (``keep`` of them: the newest), so tests
can check exactly what the agent sent; ``count_tokens`` makes the usage it reports the
request's and reply's sizes (4 characters a token) instead of fixed figures. It ships in the
package as a test double, like the memory bus.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[tuple[str, str]] | list[tuple[str, str, str]] = field(default_factory=list)
    """(name, raw arguments text) pairs, or (name, raw arguments, call id) triples; the text
    may be invalid JSON on purpose."""
    finish_reason: str = "stop"
    status: int = 200
    stall_s: float = 0.0
    raw: bytes | None = None
    """Send exactly these bytes as the body of an HTTP 200 (a broken server: not JSON,
    not UTF-8)."""
    call_id: str | None = None
    """Give every tool call this id (a server that repeats ids)."""


def tool(name: str, **args: Any) -> Reply:
    return Reply(tool_calls=[(name, json.dumps(args))], finish_reason="tool_calls")


class ScriptedOpenAIServer:
    """``with ScriptedOpenAIServer([Reply(...), ...]) as srv: srv.base_url``"""

    def __init__(self, script: list[Reply] | None = None, *, default: Reply | None = None,
                 max_concurrency_seen: bool = True,
                 responder: Callable[[dict[str, Any]], Reply] | None = None,
                 count_tokens: bool = False, keep: int | None = None,
                 latency_s: float = 0.0, port: int = 0) -> None:
        self.script: deque[Reply] = deque(script or [])
        self.default = default or tool("finish", summary="done")
        self.responder = responder
        self.count_tokens = count_tokens
        self.requests: list[dict[str, Any]] = []
        self.keep = keep
        self.latency_s = latency_s
        self.served = 0
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", port), self._handler())
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.keep is not None and len(self.requests) >= 2 * self.keep:
                # (the newest ``keep``; trimmed in halves)
                del self.requests[:len(self.requests) - self.keep]
            self.served += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            try:
                return self.responder(request)
            except Exception as exc:  # (a broken policy is the test's: a 500 names it)
                return Reply(content=f"responder failed: {type(exc).__name__}: {exc}",
                             status=500)
        return self.default

    def stats(self, reset: bool = False) -> dict[str, int]:
        """Requests served, held now, and at most at once (since the last reset)."""
        with self._lock:
            out = {"served": self.served, "active": self.active, "max_active": self.max_active}
            if reset:
                self.max_active = self.active
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # (keep-alive: one connection, many requests)
            disable_nagle_algorithm = True  # (its headers and body are two writes: with
            # Nagle's algorithm the body waits for the client's delayed ACK, 40 ms a call)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/_scripted/stats":
                    self.send_error(404)
                    return
                data = json.dumps(outer.stats(reset="reset" in self.path)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                arrived = time.perf_counter()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reply = outer._next(body)
                try:
                    wait = outer.latency_s - (time.perf_counter() - arrived) + reply.stall_s
                    if wait > 0:
                        time.sleep(wait)
                    if reply.raw is not None:
                        data = reply.raw
                        self.send_response(200)
                    elif reply.status != 200:
                        data = json.dumps({"error": {"message": f"scripted {reply.status}",
                                                     "type": "server_error"}}).encode()
                        self.send_response(reply.status)
                    elif body.get("stream"):
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.send_header("Cache-Control", "no-cache")
                        self.end_headers()
                        for chunk in _chunks(body, reply):
                            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                        self.wfile.write(b"data: [DONE]\n\n")
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    else:
                        data = json.dumps(_completion(body, reply, outer.count_tokens)).encode()
                        self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout we provoked)
                finally:
                    with outer._lock:
                        outer.active -= 1

        return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    """(Connections waiting to be accepted: socketserver's 5 drops a burst of hundreds.)"""


def main(argv: list[str] | None = None) -> None:
    """Serve one answer (``finish``, call id ``call_0``) to every request until stdin closes
    or the process is stopped; prints the base URL once listening."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    a = ap.parse_args(argv)
    finish = Reply(tool_calls=[("finish", '{"summary": "done"}')], finish_reason="tool_calls",
                   call_id="call_0")  # (a fixed id: no digest of each request to make)
    with ScriptedOpenAIServer(default=finish, latency_s=a.latency, port=a.port,
                              keep=0) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()


CREATED = 1767225600
"""The ``created`` stamp of every completion (2026-01-01): a scripted server's answers are a
function of the request alone, so a run against it can be repeated exactly."""


def _completion(request: dict[str, Any], r: Reply, count: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": r.content}
    if r.tool_calls:
        # call ids from the request's digest: unique within a conversation (each request of
        # it is longer than the last), the same for the same request
        tag = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:9] \
            if r.call_id is None and any(len(call) < 3 for call in r.tool_calls) else ""
        message["tool_calls"] = [
            {"id": call[2] if len(call) > 2 else r.call_id if r.call_id is not None else
             f"call_{i}_{tag}", "type": "function",
             "function": {"name": call[0], "arguments": call[1]}}
            for i, call in enumerate(r.tool_calls)]
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": CREATED,
            "model": request.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": r.finish_reason}],
            "usage": _usage(request, message) if count else
            {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


def _usage(request: dict[str, Any], message: dict[str, Any]) -> dict[str, int]:
    """Tokens as sizes: 4 characters a token of the messages and functions sent, and of
    the reply."""
    prompt = len(json.dumps([request.get("messages"), request.get("tools")])) // 4 + 1
    completion = len(json.dumps([message.get("content"), message.get("tool_calls")])) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _chunks(request: dict[str, Any], r: Reply) -> list[dict[str, Any]]:
    """The completion as a stream (``stream: true``): the role and content, each tool call
    (name, then its arguments), the finish reason, and the usage when asked for."""
    whole = _completion(request, r)
    message = whole["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": whole["id"], "object": "chat.completion.chunk",
                "created": whole["created"], "model": whole["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": message["content"] or ""})]
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {
            "arguments": call["function"]["arguments"]}}]}))
    out.append(chunk({}, r.finish_reason))
    if (request.get("stream_options") or {}).get("include_usage"):
        out.append({**chunk({}), "choices": [], "usage": whole["usage"]})
    return out


if __name__ == "__main__":
    main()
