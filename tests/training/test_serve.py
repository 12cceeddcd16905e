"""`coworkenv serve`'s server batches concurrent requests, and a batch gives each request the
tokens it would get alone (greedy), with the real offline model on CPU."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GGUF = Path(os.environ.get("COWORKENV_TEST_GGUF",
                           ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))

pytestmark = [pytest.mark.slow, pytest.mark.model]

TOOLS = [{"type": "function", "function": {
    "name": "email_send", "description": "Send an email",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"},
                                                    "body": {"type": "string"}},
                   "required": ["to"]}}}]
BODIES: list[dict[str, Any]] = [
    {"messages": [{"role": "user", "content": "Email kate that the report is late."}],
     "tools": TOOLS, "max_tokens": 24},
    {"messages": [{"role": "system", "content": "You are a helpful coworker."},
                  {"role": "user", "content": "What is 2+2? Then tell me a story about a cat."}],
     "max_tokens": 12},
    {"messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS, "max_tokens": 16},
    {"messages": [{"role": "user", "content": "Book a meeting with priya on Monday at 10."}],
     "tools": TOOLS, "max_tokens": 20},
]


def _post(base: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _post_all(base: str, bodies: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Each body posted at once, from a thread of its own: the (status, reply) of each."""
    replies: list[Any] = [None] * len(bodies)
    threads = [threading.Thread(target=lambda i=i, b=b: replies.__setitem__(i, _post(base, b)))
               for i, b in enumerate(bodies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return replies


@pytest.fixture(scope="module")
def model() -> Any:
    if not GGUF.exists():
        pytest.fail(f"{GGUF}: the offline model is missing (scripts/test.sh fetches it)")
    from coworkenv.training.serve import ChatModel

    return ChatModel(str(GGUF), name="smollm2", device="cpu")


def test_concurrent_requests_are_batched_and_equal_to_alone(model: Any) -> None:
    from coworkenv.training.serve import ChatServer, Request

    alone = [model.complete_many([Request.from_body(b)])[0] for b in BODIES]
    batches_before = model.batches
    with ChatServer(model, max_batch=8) as srv:
        # a bad request among them fails alone, before it reaches a batch
        replies = _post_all(srv.base_url, [*BODIES, {"messages": []}])
        served = srv.models()["data"][0]
    assert served["device"] == "cpu" and served["max_batch"] == 8
    # what the server held, to size --max-batch-tokens: the largest batch, the peak memory
    assert served["batches"] == model.batches and served["largest_batch_tokens"] > 0
    assert 500 < served["weights_mb"] < 600 < served["peak_mb"], served  # (135M fp32 weights)
    status, error = replies[-1]
    assert status == 400 and "`messages` must be a non-empty list" in error["error"]["message"]
    for (status, reply), own, body in zip(replies, alone, BODIES, strict=False):
        assert status == 200, reply
        choice = reply["choices"][0]
        assert choice["message"] == own["message"], body  # the same tokens as alone
        assert choice["finish_reason"] == own["finish_reason"]
        assert reply["usage"] == own["usage"]
        assert reply["usage"]["completion_tokens"] <= body["max_tokens"]
    # the first request is generated while the others wait; they are then served together
    assert model.batches - batches_before < len(BODIES), model.batches - batches_before


def test_a_token_cap_cuts_batches_and_keeps_each_reply(model: Any) -> None:
    """With ``max_batch_tokens`` the waiting requests are served in batches of at most that many
    padded tokens (longest first), each still the tokens it would get alone."""
    from coworkenv.training.serve import ChatServer, Request

    requests = [Request.from_body(b) for b in BODIES]
    alone = [model.complete_many([r])[0] for r in requests]
    sizes = [(len(model.prompt(r)), r.max_tokens) for r in requests]
    cap = max(p + n for p, n in sizes) + 1  # (room for one row of any of them, not two)
    with ChatServer(model, max_batch=8, max_batch_tokens=cap, gather_s=0.5) as srv:
        before = model.batches
        replies = _post_all(srv.base_url, BODIES)
        served = srv.models()["data"][0]
    assert served["max_batch_tokens"] == cap and served["memory_splits"] == 0
    assert model.batches - before == len(BODIES)  # (the cap holds one row at a time)
    for (status, reply), own in zip(replies, alone, strict=True):
        assert status == 200, reply
        assert reply["choices"][0]["message"] == own["message"]
        assert reply["usage"] == own["usage"]


OUT_OF_MEMORY = r"""
import json, re, resource, sys
from coworkenv.training.serve import ChatModel, ChatServer, Request

def vm(key):
    return int(re.search(key + r":\s+(\d+)", open("/proc/self/status").read()).group(1)) << 10

model = ChatModel(sys.argv[1], device="cpu")
text = "Summarise this for the team: " + "the quarterly figures were late again, " * 60
bodies = [{"messages": [{"role": "user", "content": f"{text} (request {i})"}], "max_tokens": 6}
          for i in range(8)]
alone = [model.complete_many([Request.from_body(b)])[0] for b in bodies]
srv = ChatServer(model, max_batch=8, gather_s=0.5)
# from here on the process may map 180 MB more: a batch of 4 of these prompts (about 440
# tokens) needs less than 120, one of 8 more than 300 (measured on 2 cores, torch 2.13)
resource.setrlimit(resource.RLIMIT_AS, (vm("VmSize") + (180 << 20), resource.RLIM_INFINITY))
replies = [f.result(timeout=300) for f in [srv.submit(b) for b in bodies]]
print(json.dumps({"same": [r["message"] == a["message"] for r, a in zip(replies, alone)],
                  **{k: v for k, v in srv.models()["data"][0].items()
                     if k in ("memory_splits", "max_batch_tokens")}}))
"""


def test_a_batch_out_of_memory_is_served_again_in_halves() -> None:
    """A real allocation failure (the process given room for a batch of 4, then asked for 8
    at once): the server serves the batch again in smaller ones, lowers its token cap, and
    every request gets the reply it would get alone."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY, str(GGUF)], capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "1"})
    assert proc.returncode == 0, proc.stderr[-600:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["same"] == [True] * 8
    assert got["memory_splits"] >= 1 and got["max_batch_tokens"] is not None, got
    assert "ran out of memory; serving it again in smaller batches" in proc.stderr


def test_batches_are_planned_longest_first_under_the_caps() -> None:
    from coworkenv.training.serve import plan_batches

    sizes = [(100, 10), (400, 10), (120, 50), (390, 10), (90, 10)]
    # no token cap: only rows count; longest prompts first
    assert plan_batches(sizes, 2, None) == [[1, 3], [2, 0], [4]]
    # 2 rows of (400 + 10) fit 820; the third would pad to 3 x 410 = 1230
    assert plan_batches(sizes, 8, 820) == [[1, 3], [2, 0, 4]]
    # a request bigger than the cap is a batch of its own, never dropped
    assert plan_batches(sizes, 8, 300) == [[1], [3], [2], [0, 4]]
    assert plan_batches([], 4, 100) == []


def test_seeded_samples_run_alone_and_repeat(model: Any) -> None:
    from coworkenv.training.serve import ChatServer

    body = {**BODIES[1], "temperature": 0.9, "seed": 7}
    with ChatServer(model, max_batch=8) as srv:
        replies = _post_all(srv.base_url, [body, body])
    (s1, r1), (s2, r2) = replies
    assert s1 == s2 == 200
    assert r1["choices"][0]["message"] == r2["choices"][0]["message"]  # a seed means what it says


@pytest.fixture(scope="module")
def continuing(model: Any) -> Any:
    """The same checkpoint with a prefix cache (already converted: loads in a second)."""
    from coworkenv.training.serve import ChatModel

    return ChatModel(str(GGUF), name="smollm2", device="cpu", prefix_cache_mb=256)


def _turns(first: dict[str, Any], reply: dict[str, Any], turn: int) -> dict[str, Any]:
    """The next request of a conversation: the reply, then a tool's result (a user's line when
    the reply called no tool)."""
    msg = dict(reply["message"])
    nxt = [msg]
    if msg.get("tool_calls"):
        nxt += [{"role": "tool", "tool_call_id": c["id"], "content": json.dumps(
            {"ok": True, "result": {"sent": True, "turn": turn}})} for c in msg["tool_calls"]]
    else:
        nxt.append({"role": "user", "content": f"Thanks. Now email priya too (turn {turn})."})
    return {**first, "messages": [*first["messages"], *nxt]}


def test_a_continued_conversation_computes_only_what_it_adds(model: Any, continuing: Any) -> None:
    """With a prefix cache, each turn of a conversation computes only the tokens it adds to the
    last, and the replies are the ones the model gives without it; a second conversation in
    between (the same system turn and tools) leaves the first one's cache in place."""
    from coworkenv.training.serve import Request

    body = BODIES[0]
    other = {**BODIES[3], "max_tokens": 8}
    c = continuing.prefixes
    assert c is not None and c.mb_per_token == pytest.approx(30 * 3 * 64 * 2 * 4 / 2**20)
    sizes = []
    for turn in range(3):
        request = Request.from_body(body)
        plain = model.complete_many([request])[0]
        before = c.reused, c.computed
        cached = continuing.complete_many([request])[0]
        assert cached == plain, turn  # the same tokens, parsed the same way
        sizes.append((c.reused - before[0], c.computed - before[1], plain["usage"]["prompt_tokens"]))
        shared = continuing.complete_many([Request.from_body(other)])[0]
        assert shared == model.complete_many([Request.from_body(other)])[0]
        body = _turns(BODIES[0], plain, turn)
    (r0, c0, p0), (r1, c1, p1), (r2, c2, p2) = sizes
    assert (r0, c0) == (0, p0)  # nothing cached yet: the whole prompt is computed
    for reused, computed, prompt in ((r1, c1, p1), (r2, c2, p2)):
        assert reused + computed == prompt
        # the conversation's own cache (not the other one's, which shares only the system turn
        # and the tools): what is computed is the reply as the template writes it and the result
        assert reused >= p0 and computed < 80, sizes
    assert continuing.prefix_stats()["prefix_tokens_reused"] == c.reused > 0


def test_a_server_with_a_prefix_cache_serves_one_at_a_time(continuing: Any, model: Any) -> None:
    from coworkenv.training.serve import ChatServer, Request

    alone = [model.complete_many([Request.from_body(b)])[0] for b in BODIES]
    before = continuing.batches
    with ChatServer(continuing, max_batch=8) as srv:
        replies = _post_all(srv.base_url, BODIES)
        served = srv.models()["data"][0]
    assert continuing.batches - before == len(BODIES)
    assert served["prefix_cache_mb"] == 256 and served["prefix_tokens_computed"] > 0
    for (status, reply), own in zip(replies, alone, strict=True):
        assert status == 200 and reply["choices"][0]["message"] == own["message"]


def test_prefix_cache_keeps_the_recent_conversations_under_its_budget() -> None:
    """Real (tiny) caches: a continuation takes its own entry, a branch gets a copy cut to the
    shared prefix, and the least recently used entries go when the budget is exceeded."""
    import torch
    from transformers import DynamicCache

    from coworkenv.training.serve import PrefixCache

    def kv(tokens: list[int]) -> Any:
        cache = DynamicCache()
        t = torch.tensor(tokens, dtype=torch.float32).view(1, 1, -1, 1)
        cache.update(t, t.clone(), 0)
        return cache

    c = PrefixCache(max_mb=10, mb_per_token=1)
    assert c.take([1, 2, 3]) == (None, 0)
    c.put([1, 2, 3, 4], kv([1, 2, 3, 4]))
    c.put([1, 2, 9], kv([1, 2, 9]))
    branch, n = c.take([1, 2, 3, 7])  # shares 3 tokens with the first: a copy, cut to them
    assert n == 3 and branch.get_seq_length() == 3 and c.tokens == 7
    assert branch.layers[0].keys.flatten().tolist() == [1, 2, 3]
    own, n = c.take([1, 2, 9, 5, 6])  # continues the second: its own entry, taken out
    assert n == 3 and own.get_seq_length() == 3 and c.tokens == 4
    same, n = c.take([1, 2, 3, 4])  # the same prompt again: all but its last token
    assert n == 3 and same.get_seq_length() == 3 and c.tokens == 4
    c.put([5, 6, 7, 8, 9, 10], kv([5, 6, 7, 8, 9, 10]))  # 10 tokens: at the budget
    assert c.tokens == 10
    c.put([11], kv([11]))  # over: the least recently used (1, 2, 3, 4) goes
    assert c.tokens == 7 and c.take([1, 2, 3, 4])[0] is None
    assert c.reused == 9 and c.computed == 3 + 1 + 2 + 1 + 4
    with pytest.raises(ValueError, match="max_mb must be positive, not 0"):
        PrefixCache(0, 1)


def test_a_model_with_sliding_windows_keeps_no_prefix_cache(tmp_path: Path, model: Any) -> None:
    """Cut to a prefix, a sliding window's cache would be wrong: such a model keeps none."""
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    from coworkenv.training.serve import ChatModel

    config = MistralConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, sliding_window=16,
                           vocab_size=len(model.tok))
    MistralForCausalLM(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(model.path).save_pretrained(tmp_path)
    m = ChatModel(str(tmp_path), device="cpu", prefix_cache_mb=64)
    assert m.prefixes is None and m.prefix_stats()["prefix_cache_mb"] == 0
    with pytest.raises(ValueError, match=r"prefix_cache_mb must be 0 .* not -1"):
        ChatModel(str(tmp_path), device="cpu", prefix_cache_mb=-1)


def test_max_batch_must_be_positive(model: Any) -> None:
    from coworkenv.training.serve import ChatServer

    with pytest.raises(ValueError, match="max_batch must be at least 1, not 0"):
        ChatServer(model, max_batch=0)
    with pytest.raises(ValueError, match=r"max_batch_tokens must be at least 1 .* not 0"):
        ChatServer(model, max_batch_tokens=0)


def test_bad_requests_are_answered_with_what_is_wrong(model: Any) -> None:
    """A request that is not JSON, or not a chat request, gets a 400 that says why; an unknown
    path a 404; the models route names the checkpoint; the server goes on serving."""
    from coworkenv.training.serve import ChatServer

    with ChatServer(model, max_batch=2) as srv:
        req = urllib.request.Request(srv.base_url + "/chat/completions", data=b"{not json",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(req, timeout=60)
        assert bad.value.code == 400
        assert json.loads(bad.value.read())["error"]["type"] == "invalid_request_error"
        status, body = _post(srv.base_url, {"messages": "hello"})
        assert status == 400 and body["error"]["type"] == "invalid_request_error", body
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(srv.base_url + "/nothing", timeout=60)
        assert missing.value.code == 404
        with urllib.request.urlopen(srv.base_url + "/models", timeout=60) as r:
            assert json.loads(r.read())["data"][0]["id"] == "smollm2"
        status, body = _post(srv.base_url, BODIES[2])
        assert status == 200 and body["choices"][0]["message"]["role"] == "assistant"


def test_a_stopped_server_does_not_wait_for_a_long_queue() -> None:
    """SIGTERM with a queue of long generations (a client that died with many requests
    waiting): `coworkenv serve` stops within its grace, not after the queue."""
    import signal
    import subprocess
    import sys
    import time

    from ..conftest import free_port, wait_for_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "coworkenv.cli", "serve", "--model", str(GGUF),
                             "--port", str(port), "--device", "cpu", "--max-batch", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    base = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for_port(proc, port, timeout=300)  # (the socket listens once it serves)
        long = {**BODIES[1], "max_tokens": 400}  # (one at a time: minutes for the queue)
        for _ in range(6):
            threading.Thread(target=lambda: _quiet_post(base, long), daemon=True).start()
        time.sleep(2)  # the first is generating, the rest wait
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        assert time.monotonic() - stopped < 30
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _quiet_post(base: str, body: dict[str, Any]) -> None:
    import contextlib

    with contextlib.suppress(OSError):  # (cut when the server stops: what this test wants)
        _post(base, body)


def test_the_serve_benchmark_runs_both_modes_on_real_episodes() -> None:
    """bench/serve.py, small: benchmark episodes against a batching server and a prefix-caching
    one, side by side, as one JSON object."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "bench/serve.py"), "--model", str(GGUF),
                        "--episodes", "2", "--max-turns", "2", "--max-tokens", "16"],
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["episodes"] == 2 and len(out["tasks"]) == 2
    batched, prefix = out["batched"], out["prefix"]
    assert batched["model_calls"] > 0 and prefix["model_calls"] > 0
    assert prefix["batches"] == prefix["model_calls"]  # one at a time
    assert batched["prompt_tokens_computed"] is None and prefix["prompt_tokens_computed"] > 0
    assert 0 <= out["same_outcome"] <= 1 and out["speedup_per_call"] > 0
    assert "prefix 1/1" in r.stderr  # progress, as it goes


def test_the_model_server_bounds_requests_and_says_when_it_cannot_answer(model: Any) -> None:
    """Behind the same edge as every server: a body over the limit is 413, a request not
    answered in time 504 (and the server goes on: setting the cancelled request's reply
    killed its generation thread before); when the generation thread dies, /health and every
    request say so with 503 (they waited forever before)."""
    import time
    from concurrent.futures import Future

    from coworkenv.http_server import EdgeLimits
    from coworkenv.training.serve import ChatServer

    limits = EdgeLimits(max_body_bytes=64 << 10, request_timeout_s=1.0)
    with ChatServer(model, max_batch=1, limits=limits) as srv:
        base = srv.base_url
        status, body = _post(base, {**BODIES[2], "messages": [
            {"role": "user", "content": "x" * (70 << 10)}]})
        assert status == 413, body
        status, body = _post(base, {**BODIES[1], "max_tokens": 200})  # (seconds on a CPU)
        assert status == 504 and "1 s" in body["error"], body
        # the server goes on: the next request is served once the cancelled one's generation,
        # which no one gets, ends (asked in process: over HTTP, a loaded machine may need
        # more than the 1 s limit for it)
        reply = srv.chat({**BODIES[2], "max_tokens": 4})
        assert reply["choices"][0]["message"]["role"] == "assistant"
        assert srv.failure() is None
        with urllib.request.urlopen(base.removesuffix("/v1") + "/health", timeout=60) as r:
            assert r.status == 200
        srv._queue.put((object(), [], Future()))  # type: ignore[arg-type]  (not a request:
        deadline = time.monotonic() + 60  # the generation thread dies on it)
        while srv.failure() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(urllib.error.HTTPError) as health:
            urllib.request.urlopen(base.removesuffix("/v1") + "/health", timeout=60)
        assert health.value.code == 503
        assert "AttributeError" in json.loads(health.value.read())["error"]
        status, body = _post(base, BODIES[2])
        assert status == 503 and "generation thread stopped" in body["error"]["message"], body
