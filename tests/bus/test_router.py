"""The router's cache: after any sequence of subscriptions added and removed, every topic's
cached match is what the trie gives without the cache (the cache forgets only the episode a
subscription can affect, so this is what could go wrong)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv.bus._router import Router, Subscription

LEVEL = st.sampled_from(["lab", "a", "r1", "r2", "e1", "e2", "agent", "tools"])
TOPIC = st.lists(LEVEL, min_size=1, max_size=6).map("/".join)
FILTER = st.lists(st.one_of(LEVEL, st.just("+")), min_size=1, max_size=6).flatmap(
    lambda parts: st.sampled_from(["/".join(parts), "/".join([*parts, "#"]),
                                   f"$share/g/{'/'.join(parts)}"]))


async def _noop(sub: Subscription) -> None:
    pass


@settings(max_examples=300, deadline=None)
@given(depth=st.integers(1, 4),
       ops=st.lists(st.tuples(st.sampled_from(["add", "remove", "match"]), FILTER, TOPIC),
                    max_size=40))
def test_cached_matches_are_the_tries_after_any_changes(
        depth: int, ops: list[tuple[str, str, str]]) -> None:
    router = Router(depth=depth)
    live: list[Subscription] = []
    seen: set[str] = set()
    try:
        for op, f, topic in ops:
            if op == "add":
                sub = Subscription(f, 4, _noop)
                router.add(sub)
                live.append(sub)
            elif op == "remove" and live:
                router.remove(live[0])
                _close(live.pop(0))
            seen.add(topic)
            for t in seen:  # (every topic asked so far, so stale entries would be read back)
                assert sorted(map(id, router.match(t))) == sorted(map(id, router._match(t))), t
    finally:
        for sub in live:
            _close(sub)


def _close(sub: Subscription) -> None:
    sub._send.close()
    sub._recv.close()
