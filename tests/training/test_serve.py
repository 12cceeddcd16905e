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
        replies: list[Any] = [None] * (len(BODIES) + 1)

        def ask(i: int, body: dict[str, Any]) -> None:
            replies[i] = _post(srv.base_url, body)

        threads = [threading.Thread(target=ask, args=(i, b)) for i, b in enumerate(BODIES)]
        # a bad request among them fails alone, before it reaches a batch
        threads.append(threading.Thread(target=ask, args=(len(BODIES), {"messages": []})))
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
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
        replies: list[Any] = [None] * len(BODIES)
        threads = [threading.Thread(target=lambda i=i, b=b: replies.__setitem__(
            i, _post(srv.base_url, b))) for i, b in enumerate(BODIES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
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
        replies: list[Any] = [None, None]
        threads = [threading.Thread(target=lambda i=i: replies.__setitem__(
            i, _post(srv.base_url, body))) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    (s1, r1), (s2, r2) = replies
    assert s1 == s2 == 200
    assert r1["choices"][0]["message"] == r2["choices"][0]["message"]  # a seed means what it says


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
