"""Serve a checkpoint you trained (or any causal LM) as an OpenAI-compatible chat endpoint.

``coworkenv serve --model CKPT`` loads the model with transformers, renders requests with the
same chat template training used (TRL's Qwen3 template: ChatML tokens, tools in the system
turn, calls as ``<tool_call>`` JSON) and parses replies with TRL's ``parse_response``, the
parser GRPO uses. So the model evaluated speaks exactly the format it was trained on, and the
agents, runner and graders talk to it over HTTP like to any other server. ``/v1/models``
reports the checkpoint's path and a hash of its weights: what was evaluated is on record.

Requests are served one at a time (a lock around generation); it is an evaluation server for
small models on CPU or one GPU, not a throughput server (use vLLM for that).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def weights_hash(path: str) -> str:
    """sha256 over a checkpoint folder's weight files (names and bytes), 16 hex digits."""
    p = Path(path)
    h = hashlib.sha256()
    files = sorted(x for x in p.glob("*") if x.suffix in (".safetensors", ".bin", ".gguf"))
    if not files:
        return "unknown"
    for f in files:
        h.update(f.name.encode())
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()[:16]


def chat_tokenizer(path: str) -> Any:
    """The tokenizer of a checkpoint with the chat template and response parser coworkenv
    trains with (TRL's Qwen3 template; ChatML tokens, so it fits SmolLM2 and Qwen alike)."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_instruct_2507_chat_template

    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = qwen3_instruct_2507_chat_template
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return add_response_schema(tok)


def _for_template(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI messages as the template wants them: content never None, arguments as dicts."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    with contextlib.suppress(ValueError):
                        fn["arguments"] = json.loads(fn["arguments"] or "{}")
                calls.append({**tc, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out


@dataclass
class ChatModel:
    """A causal LM behind the chat template and tool-call parser training uses."""

    model: str
    """Folder or hub id of a checkpoint, or a .gguf file (converted once, see prepare_model)."""
    name: str = ""
    path: str = field(init=False)
    sha: str = field(init=False)
    lm: Any = field(init=False, repr=False)
    tok: Any = field(init=False, repr=False)
    calls: int = 0

    def __post_init__(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from .sft import prepare_model

        self.path = prepare_model(self.model)
        self.name = self.name or Path(self.path).name
        self.sha = weights_hash(self.path)
        self.tok = chat_tokenizer(self.path)
        self.lm = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32)
        self.lm.eval()

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 *, max_tokens: int = 256, temperature: float = 0.0,
                 seed: int | None = None) -> dict[str, Any]:
        """One chat completion: ``{"message", "finish_reason", "usage"}`` in OpenAI's shape."""
        import torch
        from trl.chat_template_utils import parse_response

        prompt_ids = self.tok.apply_chat_template(
            _for_template(messages), tools=tools or None, add_generation_prompt=True,
            tokenize=True, return_dict=True)["input_ids"]
        if seed is not None:
            torch.manual_seed(seed)
        sample = temperature > 0
        with torch.no_grad():
            out = self.lm.generate(
                torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids),
                                                                      dtype=torch.long),
                max_new_tokens=max_tokens, do_sample=sample,
                temperature=temperature if sample else None, top_p=None, top_k=None,
                pad_token_id=self.tok.pad_token_id, eos_token_id=self.tok.eos_token_id)
        new = out[0, len(prompt_ids):].tolist()
        self.calls += 1
        parsed = parse_response(self.tok, new, prefix=prompt_ids, tools=tools or None)
        message: dict[str, Any] = {"role": "assistant", "content": parsed.get("content") or ""}
        calls = parsed.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{self.calls}_{i}", "type": "function",
                 "function": {"name": str(tc["function"].get("name", "")),
                              "arguments": json.dumps(tc["function"].get("arguments") or {},
                                                      ensure_ascii=False)}}
                for i, tc in enumerate(calls)]
        ended = bool(new) and new[-1] == self.tok.eos_token_id
        finish = "tool_calls" if calls else ("stop" if ended else "length")
        return {"message": message, "finish_reason": finish,
                "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(new),
                          "total_tokens": len(prompt_ids) + len(new)}}


class ChatServer:
    """``POST /v1/chat/completions`` and ``GET /v1/models`` over HTTP for one :class:`ChatModel`."""

    def __init__(self, model: ChatModel, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def __enter__(self) -> ChatServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def models(self) -> dict[str, Any]:
        m = self.model
        return {"object": "list", "data": [{"id": m.name, "object": "model", "owned_by": "coworkenv",
                                            "checkpoint": m.path, "weights_sha256": m.sha}]}

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("`messages` must be a non-empty list")
        with self._lock:
            r = self.model.complete(messages, body.get("tools"),
                                    max_tokens=int(body.get("max_tokens") or 256),
                                    temperature=float(body.get("temperature") or 0.0),
                                    seed=body.get("seed"))
        return {"id": f"chatcmpl-{self.model.calls}", "object": "chat.completion",
                "created": int(time.time()), "model": self.model.name,
                "choices": [{"index": 0, "message": r["message"],
                             "finish_reason": r["finish_reason"]}],
                "usage": r["usage"]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/v1/models", "/models", "/health"):
                    self._send(200, outer.models())
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}",
                                               "type": "not_found"}})

            def do_POST(self) -> None:
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}",
                                               "type": "not_found"}})
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                    self._send(200, outer.chat(body))
                except (ValueError, TypeError, KeyError) as exc:
                    self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}",
                                               "type": "invalid_request_error"}})
                except Exception as exc:
                    self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}",
                                               "type": "server_error"}})

        return Handler
