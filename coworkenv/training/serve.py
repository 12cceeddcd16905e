"""Serve a checkpoint you trained (or any causal LM) as an OpenAI-compatible chat endpoint.

``coworkenv serve --model CKPT`` loads the model with transformers, renders requests with the
same chat template training used (TRL's Qwen3 template: ChatML tokens, tools in the system
turn, calls as ``<tool_call>`` JSON) and parses replies with TRL's ``parse_response``, the
parser GRPO uses. So the model evaluated speaks exactly the format it was trained on, and the
agents, runner and graders talk to it over HTTP like to any other server. ``/v1/models``
reports the checkpoint's path and a hash of its weights: what was evaluated is on record.

Concurrent requests are batched: one generation thread takes every greedy request waiting
(up to ``max_batch``), left-pads them and generates them together, so an evaluation run with
``--concurrency 128`` on a GPU costs about one request's time per turn, not 128. A request that
samples (``temperature`` > 0) with a ``seed`` runs alone, so its seed means what it says. The
model runs on the GPU when one is there (``device="auto"``). It is an evaluation server for
small models, not a throughput server (use vLLM for that).

Prefixes: an episode's next request repeats its last one (the same system turn, tools and
conversation) and adds a reply and a tool result. With ``prefix_cache_mb`` the model keeps the
key/value caches of recent conversations and computes only the tokens a request adds to the
longest prefix it shares with one of them; requests are then generated one at a time. On a CPU,
where computing the prompt is most of a call's time, a call takes 1.6 to 2.5 times less than in
batches (``bench/serve.py``); on a GPU, batches are faster. ``coworkenv serve`` turns it on for the CPU.

Memory: a batch costs memory in proportion to its padded size (rows x the longest prompt and
its new tokens). ``max_batch_tokens`` caps that size: the waiting requests are sorted by length
and cut into batches under the cap (similar lengths together, so less padding too). A batch
that runs out of memory anyway (a GPU shared with training) is served again in halves, and the
cap is lowered to half of that batch's size, so the server goes on instead of failing every
request in the batch.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import queue
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..http_server import EdgeLimits
from .errors import ServerFailedError


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


def padded_size(sizes: list[tuple[int, int]]) -> int:
    """The tokens a batch of requests of ``sizes`` (prompt tokens, new tokens) holds, padded:
    rows x (longest prompt + most new tokens)."""
    if not sizes:
        return 0
    return len(sizes) * (max(p for p, _ in sizes) + max(n for _, n in sizes))


def plan_batches(sizes: list[tuple[int, int]], max_rows: int,
                 max_tokens: int | None) -> list[list[int]]:
    """Batches for requests of ``sizes`` (prompt tokens, new tokens), as lists of their
    indices: longest prompt first, each batch at most ``max_rows`` rows and, padded (rows x
    (longest prompt + most new tokens)), at most ``max_tokens`` tokens (``None``: no cap). A
    request bigger than the cap alone is a batch of its own."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i][0])
    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < max_rows and (
                max_tokens is None
                or padded_size([sizes[j] for j in (*out[-1], i)]) <= max_tokens):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def default_prefix_cache_mb(device: str) -> float:
    """``coworkenv serve``'s prefix cache when none is asked for: 2,048 MB on the CPU (where
    it pays), none on a GPU (where batches do)."""
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return 2048.0 if device == "cpu" else 0.0


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed (CUDA's out of memory, or the CPU
    allocator's), the kind of error a smaller batch avoids."""
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc))


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


@functools.cache
def _cache_argument() -> str:
    """``generate``'s name for a cache to continue: ``cache`` since transformers 5.x renamed
    it (the old name warns), ``past_key_values`` before."""
    from transformers.generation import utils

    return "cache" if "cache" in getattr(utils, "ALL_CACHE_NAMES", ()) else "past_key_values"


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixCache:
    """Key/value caches of recent conversations, each with the tokens it holds, least recently
    used first, at most ``max_mb`` megabytes together (``mb_per_token`` each token).

    :meth:`take` gives the cache that shares the longest prefix with a prompt, cut to that
    prefix (at most all but the prompt's last token, which the model must compute to answer):
    the conversation's own entry when the prompt continues it (taken out: generation extends it
    in place), else a copy (the entry stays for its own conversation). :meth:`put` keeps a cache
    after generation and drops the least recently used ones over the budget."""

    def __init__(self, max_mb: float, mb_per_token: float) -> None:
        if max_mb <= 0:
            raise ValueError(f"max_mb must be positive, not {max_mb}")
        self.max_mb = max_mb
        self.mb_per_token = mb_per_token
        self._entries: OrderedDict[int, tuple[list[int], Any]] = OrderedDict()
        self._next = 0
        self.reused = 0
        """Prompt tokens taken from a cache instead of computed."""
        self.computed = 0
        """Prompt tokens computed (no cache held them)."""

    @property
    def tokens(self) -> int:
        return sum(len(t) for t, _ in self._entries.values())

    def take(self, prompt: list[int]) -> tuple[Any | None, int]:
        """``(cache, n)``: a cache holding the first ``n`` tokens of ``prompt``, or ``(None,
        0)`` when no entry shares a token with it."""
        best, n = None, 0
        for key, (tokens, _) in self._entries.items():
            shared = common_prefix(tokens, prompt)
            if shared > n:
                best, n = key, shared
        n = min(n, len(prompt) - 1)
        self.reused += max(n, 0)
        self.computed += len(prompt) - max(n, 0)
        if best is None or n < 1:
            return None, 0
        tokens, cache = self._entries[best]
        if n == len(tokens):
            del self._entries[best]
        else:
            self._entries.move_to_end(best)
            cache = copy.deepcopy(cache)
            cache.crop(n - len(tokens))
        return cache, n

    def put(self, tokens: list[int], cache: Any) -> None:
        """Keep ``cache`` (holding ``tokens``), the most recently used; drop the least recently
        used ones over the budget (this one too, alone over it)."""
        self._entries[self._next] = (tokens, cache)
        self._next += 1
        while self._entries and self.tokens * self.mb_per_token > self.max_mb:
            self._entries.popitem(last=False)


@dataclass(frozen=True)
class Request:
    """One chat completion asked of a :class:`ChatModel` (OpenAI's fields)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None

    @property
    def batchable(self) -> bool:
        """Greedy requests give the same tokens in a batch as alone; a seeded sample does not."""
        return self.temperature <= 0 or self.seed is None

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Request:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("`messages` must be a non-empty list")
        seed = body.get("seed")
        return cls(messages, body.get("tools") or None, int(body.get("max_tokens") or 256),
                   float(body.get("temperature") or 0.0), None if seed is None else int(seed))


@dataclass
class ChatModel:
    """A causal LM behind the chat template and tool-call parser training uses."""

    model: str
    """Folder or hub id of a checkpoint, or a .gguf file (converted once, see prepare_model)."""
    name: str = ""
    device: str = "auto"
    """``auto`` (the GPU when torch sees one, else the CPU), ``cpu``, ``cuda``, ``cuda:1``..."""
    prefix_cache_mb: float = 0.0
    """Megabytes of key/value caches kept for requests that continue a conversation (0: none;
    see :class:`PrefixCache`). A model whose attention is not all full attention (sliding
    windows, recurrent layers) keeps none: cut to a prefix, their caches would be wrong."""
    path: str = field(init=False)
    sha: str = field(init=False)
    lm: Any = field(init=False, repr=False)
    tok: Any = field(init=False, repr=False)
    calls: int = 0
    batches: int = 0
    largest_batch: int = 0
    """The most padded tokens (rows x (prompt + new tokens)) one ``generate`` has held."""
    prefixes: PrefixCache | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from .sft import prepare_model

        if self.prefix_cache_mb < 0:
            raise ValueError(f"prefix_cache_mb must be 0 (none) or more, not {self.prefix_cache_mb}")
        if self.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.path = prepare_model(self.model)
        self.name = self.name or Path(self.path).name
        self.sha = weights_hash(self.path)
        self.tok = chat_tokenizer(self.path)
        self.lm = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32)
        self.lm.to(self.device)
        self.lm.eval()
        if self.prefix_cache_mb and self._croppable():
            self.prefixes = PrefixCache(self.prefix_cache_mb, self._mb_per_token())

    def _croppable(self) -> bool:
        """Whether every layer's cache is full attention's (a prefix of it is the prefix's)."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        layers = DynamicCache(config=self.lm.config).layers
        return bool(layers) and all(type(x) is DynamicLayer for x in layers)

    def _mb_per_token(self) -> float:
        """Megabytes one token's keys and values take (every layer, the weights' dtype)."""
        c = self.lm.config.get_text_config(decoder=True)
        heads = c.num_attention_heads
        dim = getattr(c, "head_dim", None) or c.hidden_size // heads
        kv = getattr(c, "num_key_value_heads", None) or heads
        size = next(self.lm.parameters()).element_size()
        return float(2 * c.num_hidden_layers * kv * dim * size) / 2**20

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 *, max_tokens: int = 256, temperature: float = 0.0,
                 seed: int | None = None) -> dict[str, Any]:
        """One chat completion: ``{"message", "finish_reason", "usage"}`` in OpenAI's shape."""
        return self.complete_many([Request(messages, tools, max_tokens, temperature, seed)])[0]

    def prompt(self, r: Request) -> list[int]:
        """The request's prompt tokens (the template's own errors surface here, per request)."""
        return list(self.tok.apply_chat_template(
            _for_template(r.messages), tools=r.tools or None, add_generation_prompt=True,
            tokenize=True, return_dict=True)["input_ids"])

    def complete_many(self, requests: list[Request],
                      prompts: list[list[int]] | None = None) -> list[dict[str, Any]]:
        """Several completions generated together (left-padded, one ``generate`` call); each
        stops at its own ``max_tokens`` or end of turn. Greedy rows are the tokens each would
        get alone; sampled rows (one temperature per batch) share one random stream, seeded by the
        first seed given. One request, with the prefix cache: only the tokens no cached
        conversation holds are computed, and the cache, extended by the prompt and the reply, is
        kept for the next turn."""
        import torch

        prompts = prompts if prompts is not None else [self.prompt(r) for r in requests]
        width = max(len(p) for p in prompts)
        pad = self.tok.pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts],
                            device=self.device)
        temperatures = {max(r.temperature, 0.0) for r in requests}
        if len(temperatures) > 1:
            raise ValueError(f"one batch, one temperature: {sorted(temperatures)}")
        seeds = [r.seed for r in requests if r.seed is not None]
        if seeds:
            torch.manual_seed(seeds[0])
        temperature = temperatures.pop()
        sample = temperature > 0
        cache = None
        if self.prefixes is not None and len(requests) == 1:
            from transformers import DynamicCache

            cache, _ = self.prefixes.take(prompts[0])
            if cache is None:
                cache = DynamicCache(config=self.lm.config)
        with torch.no_grad():
            out = self.lm.generate(
                ids, attention_mask=mask, max_new_tokens=max(r.max_tokens for r in requests),
                do_sample=sample, temperature=temperature if sample else None, top_p=None,
                top_k=None, pad_token_id=pad, eos_token_id=self.tok.eos_token_id,
                **({_cache_argument(): cache} if cache is not None else {}))
        if cache is not None and self.prefixes is not None:
            self.prefixes.put(out[0, :cache.get_seq_length()].tolist(), cache)
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(prompts) * int(out.shape[1]))
        return [self._reply(r, p, out[i, width:].tolist()) for i, (r, p)
                in enumerate(zip(requests, prompts, strict=True))]

    def prefix_stats(self) -> dict[str, Any]:
        """The prefix cache's budget and what it saved: prompt tokens reused, and computed."""
        c = self.prefixes
        return {"prefix_cache_mb": c.max_mb if c else 0,
                "prefix_tokens_reused": c.reused if c else 0,
                "prefix_tokens_computed": c.computed if c else 0}

    def memory(self) -> dict[str, float]:
        """Megabytes: the weights, and the most the process has held (on a GPU, torch's peak
        allocation there; on CPU, the process's peak resident memory). With ``largest_batch``,
        what a padded token costs."""
        import resource

        import torch

        weights = sum(p.numel() * p.element_size() for p in self.lm.parameters())
        if self.device.startswith("cuda"):
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {"weights_mb": round(weights / 2**20, 1), "peak_mb": round(peak / 2**20, 1)}

    def _reply(self, r: Request, prompt_ids: list[int], generated: list[int]) -> dict[str, Any]:
        from trl.chat_template_utils import parse_response

        eos = self.tok.eos_token_id
        new = generated[:r.max_tokens]
        if eos in new:  # (a finished row is padded after its end of turn)
            new = new[:new.index(eos) + 1]
        self.calls += 1
        parsed = parse_response(self.tok, new, prefix=prompt_ids, tools=r.tools or None)
        message: dict[str, Any] = {"role": "assistant", "content": parsed.get("content") or ""}
        calls = parsed.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{self.calls}_{i}", "type": "function",
                 "function": {"name": str(tc["function"].get("name", "")),
                              "arguments": json.dumps(tc["function"].get("arguments") or {},
                                                      ensure_ascii=False)}}
                for i, tc in enumerate(calls)]
        ended = bool(new) and new[-1] == eos
        finish = "tool_calls" if calls else ("stop" if ended else "length")
        return {"message": message, "finish_reason": finish,
                "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(new),
                          "total_tokens": len(prompt_ids) + len(new)}}


def _settle(done: Future[dict[str, Any]], reply: dict[str, Any] | None = None, *,
             error: BaseException | None = None) -> None:
    """Give a request its reply or error, unless its client is gone: a request cancelled
    (answered 504, or its connection closed) must not stop the generation thread."""
    with contextlib.suppress(InvalidStateError):
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(reply)  # type: ignore[arg-type]


class ChatServer:
    """``POST /v1/chat/completions`` and ``GET /v1/models`` for one :class:`ChatModel`, a
    Starlette app on uvicorn (:class:`~coworkenv.http_server.AppServer`).

    Requests are queued from the event loop (tokenized in a worker thread); one generation
    thread serves them in batches of up to ``max_batch`` (``max_batch=1``, or a model with a
    prefix cache: one at a time), each
    gathered until no request came for ``gather_s`` seconds, and of at most
    ``max_batch_tokens`` padded tokens (:func:`plan_batches`; ``None``: no cap). A batch that
    runs out of memory is served again in halves, and the cap becomes half its padded size.
    Stopped (SIGTERM, Ctrl-C), it waits ``grace_s`` seconds at most for the requests in flight:
    a queue of long generations (a client that died with hundreds waiting) does not keep it
    running for minutes.

    The routes sit behind :func:`~coworkenv.http_server.guard` (``limits``: request bodies
    bounded, each request answered within ``request_timeout_s`` or 504). Should the
    generation thread die, every waiting request and every later one is answered 503 with
    the reason, ``/health`` says 503, and :meth:`failure` tells the command to exit 1."""

    def __init__(self, model: ChatModel, host: str = "127.0.0.1", port: int = 0, *,
                 max_batch: int = 64, max_batch_tokens: int | None = None,
                 gather_s: float = 0.01, grace_s: float = 5.0,
                 limits: EdgeLimits | None = None) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        if max_batch_tokens is not None and max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be at least 1 (or None: no cap), "
                             f"not {max_batch_tokens}")
        from ..http_server import AppServer, guard

        self.model = model
        self.limits = limits or EdgeLimits(max_body_bytes=16 << 20, request_timeout_s=600.0)
        self._died: BaseException | None = None
        self._in_hand: list[tuple[Request, list[int], Future[dict[str, Any]]]] = []
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens
        """The padded size a batch may have; lowered when a batch runs out of memory."""
        self.memory_splits = 0
        """Batches that ran out of memory and were served again in halves."""
        self.gather_s = gather_s
        """A batch is closed once no new request came for this long (or it is full)."""
        self._queue: queue.Queue[tuple[Request, list[int], Future[dict[str, Any]]] | None] = (
            queue.Queue())
        self._server = AppServer(guard(self.app(), self.failure, self.limits), host, port,
                                 name="coworkenv-serve", grace_s=grace_s)
        self._generator = threading.Thread(target=self._generate, name="coworkenv-generate",
                                           daemon=True)
        self._generator.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def __enter__(self) -> ChatServer:
        self._serving = self._server.serve_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._serving.join(timeout=60)
        self._server.server_close()
        self._queue.put(None)
        self._generator.join(timeout=60)

    def models(self) -> dict[str, Any]:
        m = self.model
        return {"object": "list", "data": [{"id": m.name, "object": "model", "owned_by": "coworkenv",
                                            "checkpoint": m.path, "weights_sha256": m.sha,
                                            "device": m.device, "max_batch": self.max_batch,
                                            "max_batch_tokens": self.max_batch_tokens,
                                            "memory_splits": self.memory_splits,
                                            "batches": m.batches,
                                            "largest_batch_tokens": m.largest_batch,
                                            **m.prefix_stats(), **m.memory()}]}

    def failure(self) -> BaseException | None:
        """Why the server can no longer answer (its generation thread died), or None."""
        return self._died

    def submit(self, body: dict[str, Any]) -> Future[dict[str, Any]]:
        """Queue one chat request for the generation thread (a bad request fails here, alone,
        before batching)."""
        if self._died is not None:
            raise ServerFailedError(f"the generation thread stopped: {self._died}")
        request = Request.from_body(body)
        prompt = self.model.prompt(request)
        done: Future[dict[str, Any]] = Future()
        self._queue.put((request, prompt, done))
        if self._died is not None and not done.done():  # (died while this was queued)
            _settle(done, error=ServerFailedError(f"the generation thread stopped: "
                                                 f"{self._died}"))
        return done

    def completion(self, reply: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"chatcmpl-{self.model.calls}", "object": "chat.completion",
                "created": int(time.time()), "model": self.model.name,
                "choices": [{"index": 0, "message": reply["message"],
                             "finish_reason": reply["finish_reason"]}],
                "usage": reply["usage"]}

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.completion(self.submit(body).result())

    def app(self) -> Any:
        """The HTTP routes, as a Starlette app."""
        import asyncio

        import anyio.to_thread
        from starlette.applications import Starlette
        from starlette.requests import Request as HTTPRequest
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        def error(status: int, kind: str, message: str) -> JSONResponse:
            return JSONResponse({"error": {"message": message, "type": kind}},
                                status_code=status)

        async def models(request: HTTPRequest) -> JSONResponse:
            return JSONResponse(self.models())

        async def chat(request: HTTPRequest) -> JSONResponse:
            try:
                body = json.loads(await request.body())
                done = await anyio.to_thread.run_sync(self.submit, body)
            except ServerFailedError as exc:
                return error(503, "server_error", str(exc))
            except (ValueError, TypeError, KeyError) as exc:
                return error(400, "invalid_request_error", f"{type(exc).__name__}: {exc}")
            except Exception as exc:  # (e.g. the tokenizer failed: said as JSON, like the rest)
                return error(500, "server_error", f"{type(exc).__name__}: {exc}")
            try:
                reply = await asyncio.wrap_future(done)
            except ServerFailedError as exc:
                return error(503, "server_error", str(exc))
            except Exception as exc:  # (the batch failed: every request in it says why)
                return error(500, "server_error", f"{type(exc).__name__}: {exc}")
            return JSONResponse(self.completion(reply))

        async def not_found(request: HTTPRequest) -> JSONResponse:
            return error(404, "not_found", f"no route {request.url.path}")

        return Starlette(routes=[
            *(Route(p, models, methods=["GET"]) for p in ("/v1/models", "/models", "/health")),
            *(Route(p, chat, methods=["POST"])
              for p in ("/v1/chat/completions", "/chat/completions")),
            Route("/{path:path}", not_found, methods=["GET", "POST"])])

    def _generate(self) -> None:
        """The generation thread; should it die, it fails what waits and says why."""
        try:
            self._generate_all()
        except BaseException as exc:
            self._died = exc
            print(f"coworkenv serve: the generation thread stopped: {type(exc).__name__}: "
                  f"{exc}", file=sys.stderr, flush=True)
            failed = ServerFailedError(f"the generation thread stopped: {exc}")
            for _, _, done in self._in_hand:
                if not done.done():
                    _settle(done, error=failed)
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    return
                if item is not None and not item[2].done():
                    _settle(item[2], error=failed)

    def _generate_all(self) -> None:
        """Take what is waiting, serve it in batches, repeat."""
        while True:
            first = self._queue.get()
            if first is None:
                return
            waiting = [first]
            while len(waiting) < self.max_batch:
                try:  # (episodes answered by one batch ask again within a few ms: wait for them)
                    more = self._queue.get(timeout=self.gather_s)
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)
                    break
                waiting.append(more)
            self._in_hand = waiting
            # greedy requests together, samples of one temperature together, seeded samples alone
            groups: dict[Any, list[tuple[Request, list[int], Future[dict[str, Any]]]]] = {}
            for i, w in enumerate(waiting):
                key = max(w[0].temperature, 0.0) if w[0].batchable else ("alone", i)
                groups.setdefault(key, []).append(w)
            rows = 1 if self.model.prefixes is not None else self.max_batch
            for group in groups.values():
                self._serve_all(group, rows)

    def _serve_all(self, waiting: list[tuple[Request, list[int], Future[dict[str, Any]]]],
                   max_rows: int) -> None:
        """Serve ``waiting`` in batches planned under the token cap, planned again after each
        batch (a batch out of memory lowers the cap for the rest)."""
        while waiting:
            sizes = [(len(p), r.max_tokens) for r, p, _ in waiting]
            first = plan_batches(sizes, max_rows, self.max_batch_tokens)[0]
            self._serve([waiting[i] for i in first])
            taken = set(first)
            waiting = [w for i, w in enumerate(waiting) if i not in taken]

    def _serve(self, batch: list[tuple[Request, list[int], Future[dict[str, Any]]]]) -> None:
        try:
            replies = self.model.complete_many([r for r, _, _ in batch], [p for _, p, _ in batch])
        except Exception as exc:
            if not (len(batch) > 1 and out_of_memory(exc)):
                for _, _, done in batch:  # (every waiter gets the error; the server goes on)
                    _settle(done, error=exc)
                return
        else:
            for (_, _, done), reply in zip(batch, replies, strict=True):
                _settle(done, reply)
            return
        # out of memory: split only now, outside the handler, whose traceback holds the
        # failed batch's tensors (retried inside it, the halves ran out of memory too)
        self._split(batch)

    def _split(self, batch: list[tuple[Request, list[int], Future[dict[str, Any]]]]) -> None:
        """A batch ran out of memory: free what it held, lower the cap to half its padded
        size, and serve it again under the new cap (in halves at least)."""
        import sys

        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        size = padded_size([(len(p), r.max_tokens) for r, p, _ in batch])
        cap = max(1, size // 2)
        self.max_batch_tokens = min(cap, self.max_batch_tokens or cap)
        self.memory_splits += 1
        print(f"coworkenv serve: a batch of {len(batch)} requests ({size} padded tokens) ran out "
              f"of memory; serving it again in smaller batches, at most {self.max_batch_tokens} "
              "padded tokens a batch from now on (--max-batch-tokens sets it from the start)",
              file=sys.stderr, flush=True)
        self._serve_all(batch, max(1, len(batch) // 2))
