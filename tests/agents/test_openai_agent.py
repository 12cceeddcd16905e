"""The OpenAI-compatible agent against a scripted OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from coworkenv.agents import Endpoint, OpenAIAgent, agent_view
from coworkenv.agents.chat import request_messages
from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer, tool
from coworkenv.sim import builtin_tasks
from coworkenv.store import Reader

from ..sim.conftest import run_sync


def task(tid: str = "triage-laptop"):  # type: ignore[no-untyped-def]
    return next(t for t in builtin_tasks() if t.id == tid)


def agent_with(url: str, **kw: object):  # type: ignore[no-untyped-def]
    ep = Endpoint(url, "scripted", **kw)  # type: ignore[arg-type]
    return ep, (lambda t: OpenAIAgent(ep))


SOLVE_LAPTOP = [
    tool("tickets_search", status="open"),
    tool("tickets_assign", ticket_id="T1", assignee="sam"),
    tool("tickets_update", ticket_id="T1", priority="high"),
    tool("tickets_comment", ticket_id="T1", text="Kai, a loaner laptop is on its way."),
    tool("finish", summary="triaged"),
]


def events(db: Path, episode: str) -> list:  # type: ignore[type-arg]
    with Reader(db) as r:
        return list(r.events(episode))


def test_a_model_solves_a_task_and_every_call_is_recorded(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(list(SOLVE_LAPTOP)) as srv:
        _, make = agent_with(srv.base_url)
        (res,) = run_sync([task()], tmp_path / "a.db", agent=make)
        assert res.status == "completed" and res.completion == 1.0 and res.passed
        evs = events(tmp_path / "a.db", res.episode_id)
        calls = [e.payload for e in evs if e.kind == "agent.model_call"]
        assert len(calls) == len(srv.requests) == 5
        # the recorded requests are exactly what the server received
        for rec, convo, sent in zip(calls, request_messages(calls), srv.requests, strict=True):
            assert convo == sent["messages"]
            assert rec["response"]["choices"][0]["message"]
            assert rec["usage"]["total_tokens"] == 110
        first = srv.requests[0]
        assert first["tool_choice"] == "auto"
        names = {t["function"]["name"] for t in first["tools"]}
        assert {"tickets_assign", "send_message", "finish"} <= names
        # the agent never sees hidden facts or checks
        assert "told-kai" not in str(srv.requests) and "printer-untouched" not in str(srv.requests)
        # replay rebuilds the conversation the model had
        view = agent_view(evs)
        assert view[:-1] == srv.requests[-1]["messages"]
        assert view[-1]["tool_calls"][0]["function"]["name"] == "finish"


@pytest.mark.parametrize(("bad", "error"), [
    (Reply(tool_calls=[("tickets_assign", '{"ticket_id": "T1", assignee: sam')],
           finish_reason="tool_calls"), "invalid_json"),
    (tool("tickets_teleport", ticket_id="T1"), "unknown_tool"),
    (Reply(content="", tool_calls=[]), "empty_reply"),
    (Reply(content="Let me think about this at great length " * 20, finish_reason="length"),
     "too_long"),
    (tool("send_message", to="nobody", text="hi"), "invalid_arguments"),
    (tool("tickets_comment", ticket_id="T1", text="loaner \ud800 on its way"),
     "invalid_characters"),
    (Reply(content="done \x00\x07 really"), "invalid_characters"),
])
def test_malformed_output_goes_back_to_the_model(tmp_path: Path, bad: Reply, error: str) -> None:
    with ScriptedOpenAIServer([SOLVE_LAPTOP[0], bad, *SOLVE_LAPTOP[1:]]) as srv:
        _, make = agent_with(srv.base_url)
        (res,) = run_sync([task()], tmp_path / "m.db", agent=make)
        assert res.status == "completed" and res.completion == 1.0
        evs = events(tmp_path / "m.db", res.episode_id)
        errors = [e.payload["error"] for e in evs if e.kind == "agent.error"]
        assert errors == [error]
        # the model was told: its next request carries the error
        told = str(srv.requests[2]["messages"][-2:])
        assert "error" in told


@pytest.mark.parametrize("raw", [
    b'{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"caf\xe9 \xff"},"finish_reason":"stop"}]}',
    b"<html><body>502 Bad Gateway</body></html>",
    b"",
])
def test_unreadable_replies_are_recorded_and_retried(tmp_path: Path, raw: bytes) -> None:
    """An HTTP 200 whose body is not JSON or not UTF-8 is an agent.error, kept escaped in the
    log, and the call is retried; the episode goes on."""
    with ScriptedOpenAIServer([SOLVE_LAPTOP[0], Reply(raw=raw), *SOLVE_LAPTOP[1:]]) as srv:
        _, make = agent_with(srv.base_url, backoff=0.01)
        (res,) = run_sync([task()], tmp_path / "u.db", agent=make)
        assert res.status == "completed" and res.completion == 1.0, res.failure
        evs = events(tmp_path / "u.db", res.episode_id)
        errs = [e.payload for e in evs if e.kind == "agent.error"]
        assert [e["error"] for e in errs] == ["invalid_response"]
        assert "not UTF-8" in errs[0]["detail"] or "not JSON" in errs[0]["detail"]


def test_a_large_reply_is_stored_once_in_the_call_records(tmp_path: Path) -> None:
    """A 200 KB reply used to be stored in its response and again in the next request's new
    messages; the next record now names it, and the conversation is rebuilt exactly."""
    big = "word " * 40_000
    with ScriptedOpenAIServer([SOLVE_LAPTOP[0], Reply(content=big), *SOLVE_LAPTOP[1:]]) as srv:
        _, make = agent_with(srv.base_url)
        (res,) = run_sync([task()], tmp_path / "b.db", agent=make)
        evs = events(tmp_path / "b.db", res.episode_id)
        calls = [e.payload for e in evs if e.kind == "agent.model_call"]
        assert [c == s["messages"] for c, s in zip(request_messages(calls), srv.requests,
                                                   strict=True)] == [True] * len(calls)
        stored = sum(str(c).count(big) for c in calls)
        assert stored == 1, stored
        assert agent_view(evs)[:-1] == srv.requests[-1]["messages"]


def test_tool_calls_sharing_one_id_each_get_their_result(tmp_path: Path) -> None:
    """30 calls with one id: each gets an id of its own and its own result, and every result
    comes before the next assistant turn (what strict servers require)."""
    reads = Reply(tool_calls=[("tickets_search", '{"status": "open"}')] * 30,
                  finish_reason="tool_calls", call_id="call_0")
    with ScriptedOpenAIServer([reads, *SOLVE_LAPTOP[1:]]) as srv:
        _, make = agent_with(srv.base_url)
        (res,) = run_sync([task()], tmp_path / "d.db", agent=make)
        assert res.status == "completed" and res.completion == 1.0
        convo = srv.requests[1]["messages"]
        turn = next(i for i, m in enumerate(convo) if m.get("tool_calls"))
        ids = [tc["id"] for tc in convo[turn]["tool_calls"]]
        assert len(set(ids)) == 30
        answers = [m["tool_call_id"] for m in convo[turn + 1:turn + 31]]
        assert sorted(answers) == sorted(ids) and len(convo) == turn + 31
        for later in srv.requests[1:]:  # every assistant turn's calls answered before the next
            pending: set[str] = set()
            for m in later["messages"]:
                if m["role"] == "assistant":
                    assert not pending, pending
                    pending = {tc["id"] for tc in m.get("tool_calls") or []}
                elif m["role"] == "tool":
                    pending.discard(m["tool_call_id"])
        evs = events(tmp_path / "d.db", res.episode_id)
        assert [e.payload["error"] for e in evs if e.kind == "agent.error"] == [
            "duplicate_call_ids"]


def test_unreadable_replies_that_never_stop_fail_the_agent_only(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default=Reply(raw=b"oops")) as srv:
        _, make = agent_with(srv.base_url, backoff=0.01, max_retries=2)
        (res,) = run_sync([task()], tmp_path / "n.db", agent=make)
    assert (res.status, res.failure_boundary) == ("failed", "agent")
    assert "3 unreadable replies" in (res.failure or "")


def test_wrong_argument_types_come_back_from_the_tool(tmp_path: Path) -> None:
    script = [tool("tickets_update", ticket_id="T1", priority=["high"]), *SOLVE_LAPTOP]
    with ScriptedOpenAIServer(script) as srv:
        _, make = agent_with(srv.base_url)
        (res,) = run_sync([task()], tmp_path / "w.db", agent=make)
        assert res.completion == 1.0
        tool_msg = srv.requests[1]["messages"][-1]
        assert tool_msg["role"] == "tool" and "invalid_arguments" in tool_msg["content"]
        assert res.grade.robustness_detail.failed_calls == 1  # type: ignore[union-attr]


def test_gives_up_after_too_many_malformed_replies(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([], default=Reply(content="", tool_calls=[])) as srv:
        _, make = agent_with(srv.base_url)
        (res,) = run_sync([task()], tmp_path / "g.db", agent=make)
        assert res.status == "completed" and res.termination == "agent_finished"
        assert len(srv.requests) == 5 and res.completion < 1.0


def test_retries_server_errors_and_timeouts(tmp_path: Path) -> None:
    script = [Reply(status=500), Reply(status=503), SOLVE_LAPTOP[0],
              Reply(stall_s=1.5), *SOLVE_LAPTOP[1:]]
    with ScriptedOpenAIServer(script) as srv:
        ep, make = agent_with(srv.base_url, timeout=0.5, backoff=0.01)
        (res,) = run_sync([task()], tmp_path / "r.db", agent=make)
        assert res.status == "completed" and res.completion == 1.0
        assert ep.retries == 3


def test_concurrency_limit_per_endpoint(tmp_path: Path) -> None:
    stall = [Reply(stall_s=0.15, tool_calls=[("finish", "{}")], finish_reason="tool_calls")]
    with ScriptedOpenAIServer(stall * 12) as srv:
        _, make = agent_with(srv.base_url, max_concurrency=2)
        results = run_sync([task()], tmp_path / "c.db", agent=make, trials=12, concurrency=12)
        assert all(r.status == "completed" for r in results)
        assert srv.max_active == 2


def test_a_dead_endpoint_fails_the_episode_not_the_run(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    _, make = agent_with(f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.01, timeout=2)
    results = run_sync([task(), task("share-onboarding")], tmp_path / "d.db", agent=make)
    assert len(results) == 2
    for r in results:
        assert r.status == "failed" and r.failure_boundary == "agent"
        assert f"model endpoint http://127.0.0.1:{port}/v1 failed 2 times" in (r.failure or "")
    with Reader(tmp_path / "d.db") as rd:
        assert {e.status for e in rd.episodes()} == {"failed"}


def test_the_scripted_server_streams_what_it_would_answer_whole() -> None:
    """``stream: true`` (as agent harnesses ask) gets server-sent chunks that the openai
    client puts back together into the same message: content, tool calls, usage."""
    import openai

    script = [Reply(content="hello there"), tool("tickets_assign", ticket_id="T1", assignee="sam")]
    with ScriptedOpenAIServer(script) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x")
        texts, calls, usage, finish = [], {}, None, []
        for _ in script:
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True,
                stream_options={"include_usage": True})
            for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    texts.append(choice.delta.content or "")
                    finish.append(choice.finish_reason)
                    for c in choice.delta.tool_calls or []:
                        got = calls.setdefault(c.index, {"name": "", "arguments": ""})
                        got["name"] += (c.function.name or "") if c.function else ""
                        got["arguments"] += (c.function.arguments or "") if c.function else ""
    assert "".join(texts) == "hello there"
    assert calls == {0: {"name": "tickets_assign",
                         "arguments": '{"ticket_id": "T1", "assignee": "sam"}'}}
    assert [f for f in finish if f] == ["stop", "tool_calls"]
    assert usage is not None and usage.total_tokens == 110


def test_a_request_is_sent_as_its_json_the_functions_made_once() -> None:
    """The bytes sent are the request's JSON; a functions list seen before is not serialized
    again (its text is kept by identity), and another list, even an equal one, is its own."""
    import json as _json

    from coworkenv.agents import agent_tools
    from coworkenv.agents import openai_agent as oa

    tools = agent_tools(["email_send", "docs_read"])
    req = {"model": "m", "messages": [{"role": "user", "content": "caf\u00e9 \u2603"}],
           "tools": tools, "temperature": 0.0}
    assert _json.loads(oa.request_body(req)) == req
    kept = oa._FUNCTIONS[id(tools)]
    assert kept[0] is tools
    oa.request_body({**req, "messages": []})
    assert oa._FUNCTIONS[id(tools)] is kept  # (the same list: the same text, not made again)
    other = agent_tools(["email_send"])
    assert _json.loads(oa.request_body({**req, "tools": other}))["tools"] == other
    assert oa._FUNCTIONS[id(other)][0] is other


def test_an_answer_that_does_not_validate_is_read_as_the_client_would() -> None:
    """A server's liberties (a finish reason of its own) are read leniently, as openai's client
    reads them; what is not a JSON object is a ValueError (the agent's unreadable reply)."""
    from coworkenv.agents.openai_agent import completion_of

    ok = (b'{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
          b'"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}')
    assert completion_of(ok).choices[0].message.content == "hi"
    odd = ok.replace(b'"stop"', b'"eos_token"')
    c = completion_of(odd)
    assert c.choices[0].message.content == "hi" and c.choices[0].finish_reason == "eos_token"
    for bad, said in ((b"[1]", "a JSON list, not an object"), (b"", "Expecting value"),
                      (b"<html>502</html>", "Expecting value")):
        with pytest.raises(ValueError, match=said):
            completion_of(bad)
