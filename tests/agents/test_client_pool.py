"""One client and one bound on calls in flight per model server and event loop, shared by
every endpoint of that server (against the scripted server, over real HTTP)."""

from __future__ import annotations

import asyncio
import copy
import gc
import time
import weakref
from typing import Any

import anyio

from coworkenv.agents import Endpoint
from coworkenv.agents.fake_openai import ScriptedOpenAIServer

ASK = {"messages": [{"role": "user", "content": "hi"}]}


async def ask(ep: Endpoint, times: int) -> None:
    async with anyio.create_task_group() as tg:
        for _ in range(times):
            tg.start_soon(ep.complete, {**ASK, "model": ep.model})


def test_endpoints_of_one_server_share_one_bound() -> None:
    with ScriptedOpenAIServer(latency_s=0.1) as srv:
        a = Endpoint(srv.base_url, "agent-model", max_concurrency=2)
        b = Endpoint(srv.base_url, "persona-model", max_concurrency=2, max_tokens=60)

        async def both() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, a, 3)
                tg.start_soon(ask, b, 3)
            assert await a.pool() is await b.pool()

        anyio.run(both)
        assert srv.served == 6 and srv.max_active == 2  # (each alone: 2 and 2, 4 at once)
        assert (a.calls, b.calls) == (3, 3)
        assert {r["model"] for r in srv.requests} == {"agent-model", "persona-model"}


def test_the_largest_bound_asked_wins_and_each_endpoint_keeps_its_own() -> None:
    with ScriptedOpenAIServer(latency_s=0.1) as srv:
        one = Endpoint(srv.base_url, "m", max_concurrency=1)
        three = Endpoint(srv.base_url, "m", max_concurrency=3)

        async def go() -> None:
            await ask(one, 3)
            assert srv.stats(reset=True)["max_active"] == 1
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, one, 4)
                tg.start_soon(ask, three, 4)
            assert (await one.pool()).bound.total_tokens == 3

        anyio.run(go)
        assert srv.max_active == 3


def test_each_event_loop_gets_its_own_client_and_lets_it_go() -> None:
    with ScriptedOpenAIServer(latency_s=0.02) as srv:
        ep = Endpoint(srv.base_url, "m", max_concurrency=2)
        seen: list[Any] = []

        async def once() -> weakref.ref[asyncio.AbstractEventLoop]:
            await ask(ep, 3)
            seen.append(await ep.pool())
            return weakref.ref(asyncio.get_running_loop())

        loops = [anyio.run(once) for _ in range(3)]
        assert ep.calls == 9 and srv.served == 9
        assert len({id(p) for p in seen}) == 3
        assert all(c.is_closed() for p in seen for c in p.clients)  # (closed as its loop shut down)
        seen.clear()
        gc.collect()
        assert all(loop() is None for loop in loops)  # (nothing keeps a loop alive)


def test_endpoints_of_different_servers_do_not_share() -> None:
    with ScriptedOpenAIServer(latency_s=0.2) as s1, ScriptedOpenAIServer(latency_s=0.2) as s2:
        a = Endpoint(s1.base_url, "m", max_concurrency=2)
        b = Endpoint(s2.base_url, "m", max_concurrency=2)

        async def both() -> float:
            assert await a.pool() is not await b.pool()
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, a, 2)
                tg.start_soon(ask, b, 2)
            return time.perf_counter() - t0

        took = anyio.run(both)
        assert s1.max_active == 2 and s2.max_active == 2
        assert took < 0.35  # (4 calls at once: one latency, not two)


def test_a_copied_endpoint_counts_its_own_calls_on_the_same_pool() -> None:
    with ScriptedOpenAIServer() as srv:
        ep = Endpoint(srv.base_url, "m", max_concurrency=2)

        async def go() -> None:
            await ask(ep, 1)
            twin = copy.deepcopy(ep)  # (as a forked episode copies its personas)
            await ask(twin, 2)
            assert await twin.pool() is await ep.pool()
            assert (ep.calls, twin.calls) == (1, 3)

        anyio.run(go)
