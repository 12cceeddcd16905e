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
