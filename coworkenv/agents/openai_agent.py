"""The agent under training (or a model teacher), behind any OpenAI-compatible endpoint.

It keeps its conversation in the standard chat format (``tool_calls`` and ``tool`` messages),
calls the model after each thing it is told, and turns the reply into actions. Malformed
output is data, not a crash: invalid JSON arguments, unknown functions, empty replies and
cut-off replies each go back to the model as an error it can correct, and are recorded
(``agent.error``). Every model call is recorded (``agent.model_call``) with the messages it
added, the response, latency and token usage. Server errors and timeouts are retried with
backoff; every endpoint of one server in one event loop shares one pool of clients and one
bound on the calls in flight (:class:`ServerPool`); an endpoint that stays down fails the episode with a
clear reason, not the run.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
import openai
import pydantic
from anyio.lowlevel import RunVar, current_token
from openai.types.chat import ChatCompletion

from ..bus import Envelope
from ..sim.actor import Actor, ActorContext
from ..sim.errors import Boundary, EpisodeFailure
from ..workspace import REGISTRY
from .chat import (
    WAIT_RESULT,
    agent_tools,
    assistant_message,
    bounded_strings,
    opening,
    render_incoming,
    request_digest,
    wake_delay,
)


@functools.cache
def _http_lib() -> tuple[Any, Any, Any]:
    """The HTTP library openai uses (openai 3 ships httpx2, older releases httpx), its
    client factory with openai's defaults, and one TLS context for all its clients (each
    would load the CA bundle again: 20 ms)."""
    try:
        import httpx2 as http_lib  # type: ignore[import-not-found]

        factory: Any = getattr(openai, "DefaultAsyncHttpx2Client", None)
    except ImportError:  # pragma: no cover - openai < 3
        import httpx as http_lib  # type: ignore[import-not-found,no-redef]

        factory = getattr(openai, "DefaultAsyncHttpxClient", None)
    return http_lib, factory or http_lib.AsyncClient, http_lib.create_ssl_context()


def _http_client() -> Any:
    """openai's own async HTTP client, with keep-alive and no connection limit of its own:
    the pool's bound is the limit, and a connection is reused by the next call instead of a
    TCP connect per call (measured: 2.2 against 3.1 ms of client CPU a call)."""
    http_lib, factory, tls = _http_lib()
    return factory(limits=http_lib.Limits(max_connections=None, max_keepalive_connections=None),
                   verify=tls)


CALLS_PER_CLIENT = 16
"""Calls in flight a pool gives one HTTP client at most (it has as many clients as its bound
needs, taken in turn): httpx's connection pool looks at each of its connections for every
request (at 256 connections, 28% of a call's client CPU; 16 a client: 9%)."""


@dataclass
class ServerPool:
    """One model server as one event loop reaches it: one bound on the calls in flight and
    the HTTP clients that carry them (connections kept alive between calls), shared by every
    :class:`Endpoint` of that server (the same ``base_url`` and ``api_key``) in the loop,
    whatever their model, sampling or timeout. The bound is the largest ``max_concurrency``
    any of them asked for (it grows when an endpoint asking more makes its first call);
    each endpoint also keeps to its own ``max_concurrency``. Made at an endpoint's first
    call in a loop (:func:`server_pool`) and closed when the loop shuts down."""

    base_url: str
    api_key: str
    bound: anyio.CapacityLimiter
    clients: list[openai.AsyncOpenAI] = field(default_factory=list)
    closer: AsyncGenerator[None, None] | None = None
    turn: int = 0

    def client(self) -> openai.AsyncOpenAI:
        """The next client in turn (one per :data:`CALLS_PER_CLIENT` of the bound)."""
        while len(self.clients) * CALLS_PER_CLIENT < self.bound.total_tokens:
            # our own retry loop (Endpoint.complete) owns backoff and the dead-endpoint
            # decision
            self.clients.append(openai.AsyncOpenAI(base_url=self.base_url,
                                                   api_key=self.api_key, max_retries=0,
                                                   http_client=_http_client()))
        self.turn = (self.turn + 1) % len(self.clients)
        return self.clients[self.turn]


_POOLS: RunVar[dict[tuple[str, str], ServerPool]] = RunVar("coworkenv_model_pools")
"""The running loop's pools by server: a loop's own (an HTTP connection and a limiter belong
to the loop they were made in), and forgotten with it."""


async def _closed_at_shutdown(pools: dict[tuple[str, str], ServerPool],
                              key: tuple[str, str]) -> AsyncGenerator[None, None]:
    """Held open by the pool: the loop closes its async generators when it shuts down
    (``asyncio.run``, ``anyio.run``; trio likewise), after its tasks are cancelled, and this
    one then closes the pool's clients (their kept-alive connections) inside that loop."""
    try:
        yield
    finally:
        pool = pools.pop(key, None)
        if pool is not None:
            pool.closer = None  # (it holds the loop: an endpoint's lane must not)
            for client in pool.clients:
                await client.close()


async def server_pool(base_url: str, api_key: str, max_concurrency: int) -> ServerPool:
    """The running loop's pool for a server, made on first use; its bound raised to
    ``max_concurrency`` if that is more than it was."""
    pools = _POOLS.get(None)
    if pools is None:
        pools = {}
        _POOLS.set(pools)
    key = (base_url.rstrip("/"), api_key)
    pool = pools.get(key)
    if pool is None:
        pool = pools[key] = ServerPool(base_url, api_key, anyio.CapacityLimiter(max_concurrency))
        pool.closer = _closed_at_shutdown(pools, key)
        await pool.closer.asend(None)
    elif pool.bound.total_tokens < max_concurrency:
        pool.bound.total_tokens = max_concurrency
    return pool


@dataclass
class _Lane:
    """An endpoint's way to its server in one loop: the pool, and its own limit."""

    pool: ServerPool
    own: anyio.Semaphore


@dataclass
class Endpoint:
    """An OpenAI-compatible server and how to ask it (model, sampling, retries).

    The endpoints of one server (same ``base_url`` and ``api_key``) in one event loop share
    its clients and one bound on calls in flight (:class:`ServerPool`): all the seats,
    personas and simulations of a process running in one loop together never have more
    calls in flight to a server than the largest ``max_concurrency`` asked of it, and each
    endpoint never more than its own. An endpoint may be made outside a loop, and used in
    several loops one after another (each its own pool)."""

    base_url: str
    model: str
    api_key: str = "not-needed"
    timeout: float = 60.0
    max_retries: int = 4
    backoff: float = 0.5
    max_concurrency: int = 8
    temperature: float = 0.0
    max_tokens: int = 512
    max_arg_chars: int | None = None
    """A length the functions' string arguments are declared to have at most (``maxLength``
    in their schemas, where they name none): servers that constrain tool calls by their
    schema (llama-cpp-python) then stop there. Its chatml-function-calling handler writes a
    call's arguments without a token limit (measured: thousands of tokens, minutes a call,
    for the bundled small model); with 300 a call took 2 s. None: the schemas as they are."""
    calls: int = 0
    retries: int = 0
    _lanes: weakref.WeakKeyDictionary[object, _Lane] = field(
        default_factory=weakref.WeakKeyDictionary, init=False, repr=False, compare=False)
    """Its way to its server in each running loop (by loop)."""

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency: expected at least 1, got {self.max_concurrency}")

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles leave the lanes behind (a copy finds its own in a loop)."""
        return {k: v for k, v in self.__dict__.items() if k != "_lanes"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lanes=weakref.WeakKeyDictionary())

    async def pool(self) -> ServerPool:
        """This endpoint's server pool in the running loop."""
        return (await self._lane_here()).pool

    async def _lane_here(self) -> _Lane:
        token = current_token()
        loop = getattr(token, "native_token", token)  # (anyio < 4.8: the loop itself)
        lane = self._lanes.get(loop)
        if lane is None:
            pool = await server_pool(self.base_url, self.api_key, self.max_concurrency)
            lane = self._lanes[loop] = _Lane(pool, anyio.Semaphore(self.max_concurrency))
        return lane

    async def complete(self, request: dict[str, Any],
                       boundary: Boundary = "agent") -> tuple[Any, float]:
        """One chat completion with retries; returns (response, seconds). A failure is
        attributed to ``boundary``: the agent's, or a simulated person's whose model it is."""
        lane = await self._lane_here()
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.retries += 1
                await anyio.sleep(min(self.backoff * 2 ** (attempt - 1), 8.0))
            try:
                async with lane.own, lane.pool.bound:
                    t0 = time.perf_counter()
                    self.calls += 1
                    # (the request as it is, JSON already: ``chat.completions.create``
                    # would walk it against its typed parameters first, 3/4 of a call's
                    # client CPU for an agent's 36 KB request with its 64 functions)
                    body = {"content": request_body(request)} if _RAW_BODY else \
                        {"body": request}  # (openai before 2: it serializes the request)
                    raw = await lane.pool.client().post(
                        "/chat/completions", cast_to=bytes,
                        options={"timeout": self.timeout}, **body)
                    return completion_of(raw), time.perf_counter() - t0
            except (openai.APITimeoutError, openai.APIConnectionError,
                    openai.InternalServerError, openai.RateLimitError) as exc:
                last = exc
            except openai.APIStatusError as exc:
                raise EpisodeFailure(boundary, f"model endpoint {self.base_url} refused the "
                                     f"request: HTTP {exc.status_code}: {exc.message}") from None
        raise EpisodeFailure(boundary, f"model endpoint {self.base_url} failed "
                             f"{self.max_retries + 1}"
                             f" times: {type(last).__name__}: {last}")


_RAW_BODY = "content" in inspect.signature(openai.AsyncOpenAI.post).parameters
"""The client takes a request's bytes as they are (``post(content=...)``)."""


def completion_of(raw: bytes) -> ChatCompletion:
    """A server's answer as a ``ChatCompletion``: validated from its JSON as a recorded answer
    is when it is served again (pydantic's parser: a tenth of the client's own lenient
    construction), or, where it does not validate (a server's own liberties), constructed
    leniently as the client would. ValueError (JSONDecodeError, UnicodeDecodeError): not a
    JSON object, what callers record as an unreadable reply."""
    try:
        return ChatCompletion.model_validate_json(raw)
    except pydantic.ValidationError:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object") from None
        return ChatCompletion.construct(**data)


_FUNCTIONS: OrderedDict[int, tuple[list[Any], bytes]] = OrderedDict()
"""The functions lists sent lately, serialized (by identity; the list is kept with its bytes,
so its id is not reused while it is here)."""
_FUNCTIONS_KEPT = 64
_FUNCTIONS_LOCK = threading.Lock()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def request_body(request: dict[str, Any]) -> bytes:
    """A chat request as the JSON bytes sent. An agent sends the same list of functions
    (about 30 KB of schemas for all the tools) with every call and only its messages change,
    so a functions list is serialized once and its text reused while the same list object
    comes back (a list is never changed once it has been sent: agents make a new one)."""
    parts = []
    for key, value in request.items():
        if key == "tools" and isinstance(value, list):
            with _FUNCTIONS_LOCK:  # (loops in several threads: remote workers, sessions)
                kept = _FUNCTIONS.get(id(value))
                if kept is None or kept[0] is not value:
                    kept = _FUNCTIONS[id(value)] = (value, _dumps(value).encode())
                    if len(_FUNCTIONS) > _FUNCTIONS_KEPT:
                        _FUNCTIONS.popitem(last=False)
                else:
                    _FUNCTIONS.move_to_end(id(value))
            parts.append(b'"tools":' + kept[1])
        else:
            parts.append(f"{_dumps(key)}:{_dumps(value)}".encode())
    return b"{" + b",".join(parts) + b"}"


_CONTROL = frozenset(range(0x20)) - {0x09, 0x0A, 0x0D}


def bad_characters(*texts: str) -> str:
    """What a model may not send: lone surrogates and control characters (tab, newline and
    carriage return aside), described; empty when the texts are clean."""
    found: dict[str, int] = {}
    for text in texts:
        for i, ch in enumerate(text):
            code = ord(ch)
            if code in _CONTROL or 0xD800 <= code <= 0xDFFF:
                found.setdefault(f"U+{code:04X}", i)
    if not found:
        return ""
    kinds = ", ".join(f"{k} at {v}" for k, v in list(found.items())[:5])
    return f"invalid characters ({kinds})"


def strings_in(value: Any) -> list[str]:
    """Every string in a JSON-like value, dict keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in [str(k), *strings_in(v)]]
    if isinstance(value, list):
        return [x for v in value for x in strings_in(v)]
    return []


def _escaped(value: Any) -> Any:
    """A message with every string made safe to store and send (escapes kept visible)."""
    if isinstance(value, dict):
        return {k: _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, str) and bad_characters(value):
        return "".join(ch if not (ord(ch) in _CONTROL or 0xD800 <= ord(ch) <= 0xDFFF)
                       else f"\\u{ord(ch):04x}" for ch in value)
    return value


def _describe_bad_body(exc: Exception) -> str:
    """An unreadable reply, escaped so that it can be stored as text and read."""
    if isinstance(exc, UnicodeDecodeError):
        raw = exc.object if isinstance(exc.object, bytes) else bytes(exc.object)
        return f"not UTF-8 ({exc.reason} at byte {exc.start}): " + raw[:2000].decode(
            "utf-8", "backslashreplace")
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at {exc.pos}): {exc.doc[:2000]!r}"
    return f"{type(exc).__name__}: {str(exc)[:2000]!r}"


_FROM_RESPONSE = {"role": "assistant", "from_response": True}
"""In a call record, the previous response's assistant turn (stored once, in that response)."""


def _unique_call_ids(calls: list[Any]) -> int:
    """Give each tool call of one reply an id of its own (a server that repeats ids, or sends
    none, would have one result answer several calls, and the others arrive after the next
    turn, which strict servers refuse). Returns how many were renamed."""
    seen: set[str] = set()
    renamed = 0
    for i, tc in enumerate(calls):
        if not tc.id or tc.id in seen:
            tc.id = f"{tc.id or 'call'}-{i}"
            renamed += 1
        seen.add(tc.id)
    return renamed


@dataclass
class OpenAIAgent(Actor):
    endpoint: Endpoint
    max_errors: int = 4
    """Malformed replies in a row before the agent gives up (finishes)."""
    role: str = "agent"
    messages: list[dict[str, Any]] = field(default_factory=list)
    pending: set[str] = field(default_factory=set)
    sent: int = 0
    """How many messages earlier model calls already carried (for compact call records)."""
    model_seconds: float = 0.0
    replied: int = -1
    """Where the last response's assistant turn stands in ``messages``, as sent back (the
    call record then names it instead of storing a large reply twice)."""
    tools: list[dict[str, Any]] = field(default_factory=agent_tools)
    user: str = ""
    takes_re: bool = False
    """Its functions take ``re`` (the request an action is for), which goes to the kernel
    beside the action, not to the tool (a persistent seat's agent)."""
    _bounded: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = field(
        default=None, init=False, repr=False, compare=False)

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        if envelope.kind == "task":
            self.messages = opening(p)
            self.user = str(p.get("from"))
            if p.get("tools"):
                self.tools = agent_tools(list(p["tools"]))
        else:
            msg = render_incoming(envelope.kind, p)
            if msg is None:
                return
            self.messages.append(msg)
            if envelope.kind == "tool_result":
                self.pending.discard(str(p.get("call_id")))
        if not self.pending:
            await self._decide(ctx)

    def _request(self, seed: int) -> dict[str, Any]:
        # a fixed sampling seed per episode (its trial's): with greedy decoding by default,
        # two runs of one checkpoint differ only where the server is not deterministic, so a
        # comparison of two checkpoints is of their weights
        tools = self.tools
        if self.endpoint.max_arg_chars is not None:  # (made once per functions list: the
            # same list every call, so its JSON is made once too, see request_body)
            if self._bounded is None or self._bounded[0] is not self.tools:
                self._bounded = (self.tools, bounded_strings(self.tools,
                                                             self.endpoint.max_arg_chars))
            tools = self._bounded[1]
        return {"model": self.endpoint.model, "messages": self.messages, "tools": tools,
                "tool_choice": "auto", "temperature": self.endpoint.temperature,
                "max_tokens": self.endpoint.max_tokens, "seed": seed % 2**31}

    async def _call(self, ctx: ActorContext) -> Any:
        request = self._request(ctx.seed)
        digest = request_digest(request)
        for attempt in range(self.endpoint.max_retries + 1):
            try:
                resp, seconds = await ctx.complete(self.endpoint, request)
                break
            except (ValueError, openai.APIResponseValidationError) as exc:
                # an HTTP 200 whose body is not JSON, or not UTF-8: a broken reply is data
                self._error(ctx, "invalid_response", _describe_bad_body(exc))
                if attempt == self.endpoint.max_retries:
                    raise EpisodeFailure("agent", f"model endpoint {self.endpoint.base_url} "
                                         f"sent {attempt + 1} unreadable replies: "
                                         f"{_describe_bad_body(exc)[:300]}") from None
                await anyio.sleep(min(self.endpoint.backoff * 2 ** attempt, 8.0))
        self.model_seconds += seconds
        renamed = _unique_call_ids(resp.choices[0].message.tool_calls or []) \
            if resp.choices else 0
        if renamed:  # (recorded as the agent uses them; the error says so)
            self._error(ctx, "duplicate_call_ids", f"{renamed} tool call(s) renamed so that "
                        "each result answers its own call")
        ctx.record("agent.model_call", {
            "request": {"offset": self.sent, "new_messages": [
                {**_FROM_RESPONSE} if i == self.replied else msg
                for i, msg in enumerate(self.messages[self.sent:], self.sent)],
                        "model": request["model"], "temperature": request["temperature"],
                        "seed": request["seed"],
                        "max_tokens": request["max_tokens"], "tool_choice": "auto",
                        "tools": len(self.tools)},
            "response": resp.model_dump(mode="json", exclude_none=True),
            "latency_s": round(seconds, 4), "digest": digest,
            "usage": resp.usage.model_dump() if resp.usage else None, **self._noted()})
        self.sent = len(self.messages)
        self.replied = -1
        return resp

    def _noted(self) -> dict[str, Any]:
        """More of what a model call's record holds (a persistent agent's prompt size)."""
        return {}

    def _error(self, ctx: ActorContext, kind: str, detail: str) -> None:
        ctx.record("agent.error", {"error": kind, "detail": detail})

    async def _decide(self, ctx: ActorContext) -> None:
        for _ in range(self.max_errors + 1):
            resp = await self._call(ctx)
            if not resp.choices:
                self._error(ctx, "empty_reply", "the response had no choices")
                self.messages.append({"role": "user", "content": "[error] Your reply was empty. "
                                      "Call one of the functions."})
                continue
            choice = resp.choices[0]
            m = choice.message
            calls = m.tool_calls or []
            reply = assistant_message(m.model_dump(mode="json", exclude_none=True))
            bad = bad_characters(m.content or "", *(tc.function.arguments or ""
                                                    for tc in calls))
            if bad:  # lone surrogates or control characters: nothing is done with them
                self._error(ctx, "invalid_characters", f"{bad}: "
                            + json.dumps(reply, ensure_ascii=True)[:2000])
                self.messages.append(_escaped(reply))
                for tc in calls:
                    self.messages.append(self._tool_error(
                        tc.id, "invalid_characters", f"Your reply contained {bad}; nothing was "
                        "done. Send it again without them."))
                if not calls:
                    self.messages.append({"role": "user", "content": f"[error] Your reply "
                                          f"contained {bad}. Send it again without them."})
                continue
            if choice.finish_reason == "length":
                self._reply(reply)
                for tc in calls:
                    self.messages.append(self._tool_error(tc.id, "cut_off", "Your reply was cut "
                                                          "off (too long); nothing was done."))
                if not calls:
                    self.messages.append({"role": "user", "content": "[error] Your reply was cut "
                                          "off (too long). Be brief and call a function."})
                self._error(ctx, "too_long", f"finish_reason=length, {len(calls)} tool call(s)")
                continue
            if not calls:
                text = (m.content or "").strip()
                if not text:
                    self._reply(reply)
                    self.messages.append({"role": "user", "content": "[error] Your reply was "
                                          "empty. Call one of the functions."})
                    self._error(ctx, "empty_reply", "no content and no tool calls")
                    continue
                # plain text is a message to the person who gave the task
                self._reply(reply)
                ctx.say(self.user, text, as_text=True)
                return
            self._reply(reply)
            acted = False
            for tc in calls:
                acted |= self._act(tc, ctx)
            if acted or self.pending:
                return
        self._error(ctx, "gave_up", f"{self.max_errors + 1} malformed replies in a row")
        ctx.finish(f"gave up after {self.max_errors + 1} malformed replies")

    def _reply(self, reply: dict[str, Any]) -> None:
        """Send the model's own turn back (as the last response holds it)."""
        self.replied = len(self.messages)
        self.messages.append(reply)

    def _offered(self) -> set[str]:
        return {t["function"]["name"] for t in self.tools}

    def _tool_error(self, call_id: str, code: str, message: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(
            {"ok": False, "error": {"code": code, "message": message}})}

    def _act(self, tc: Any, ctx: ActorContext) -> bool:
        name, raw = tc.function.name, tc.function.arguments or "{}"
        try:
            args = json.loads(raw)
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            self.messages.append(self._tool_error(tc.id, "invalid_json", f"arguments are not a "
                                                  f"JSON object: {exc}"))
            self._error(ctx, "invalid_json", f"{name}: {raw[:200]}")
            return False
        re = args.pop("re", None) if self.takes_re else None
        extra: dict[str, Any] = {"re": str(re)} if re is not None else {}
        bad = bad_characters(*strings_in(args))
        if bad:  # e.g. a lone surrogate written as a JSON escape
            self.messages.append(self._tool_error(tc.id, "invalid_characters", f"arguments "
                                                  f"contain {bad}; nothing was done"))
            self._error(ctx, "invalid_characters", f"{name}: {bad}: {raw[:2000]}")
            return False
        if name == "finish":
            ctx.finish(str(args.get("summary", "")), call_id=tc.id, **extra)
            return True
        if name == "wait":  # no action: the model is called again when something arrives
            try:
                delay = wake_delay(args, ctx.now_dt)
            except ValueError as exc:
                self.messages.append(self._tool_error(tc.id, "invalid_arguments", f"wait: {exc}"))
                self._error(ctx, "invalid_arguments", f"wait: {exc}")
                return False
            shown = {k: args[k] for k in ("minutes", "until") if k in args}
            ctx.record("agent.wait", {"call_id": tc.id, **(shown if delay is not None else {})})
            if delay is not None:  # ... or at that time at the latest
                ctx.timer(delay, wake=True, id=tc.id,
                          at=(ctx.now_dt + timedelta(seconds=delay)).strftime("%a %H:%M"))
            self.messages.append({"role": "tool", "tool_call_id": tc.id, "content": WAIT_RESULT})
            return True
        if name == "send_message":
            to, text = args.get("to"), args.get("text")
            if not isinstance(to, str) or not isinstance(text, str) or ctx.actor_for(to) is None:
                self.messages.append(self._tool_error(
                    tc.id, "invalid_arguments", f"send_message needs `to` (a person id of the "
                    f"user or a coworker in this task) and `text`; got to={to!r}"))
                self._error(ctx, "invalid_arguments", f"send_message to={to!r}")
                return False
            ctx.say(to, text, call_id=tc.id, **extra)
            self.messages.append({"role": "tool", "tool_call_id": tc.id,
                                  "content": json.dumps({"ok": True, "sent": True})})
            return True
        if name not in REGISTRY or name not in self._offered():
            self.messages.append(self._tool_error(tc.id, "unknown_tool", f"there is no function "
                                                  f"{name!r}"))
            self._error(ctx, "unknown_tool", name)
            return False
        self.pending.add(tc.id)
        ctx.call_tool(name, args, call_id=tc.id, **extra)
        return True
