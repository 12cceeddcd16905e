"""Playing a task's reference solution through any agent seat.

The agent's side of an episode can be reached many ways: a :class:`~coworkenv.runtime.Session`
in process, MCP tool calls, an OpenEnv client, a remote worker. :func:`play_reference` plays a
task's reference solution through whichever, given one coroutine ``act(name, arguments) ->
(text, done)`` that performs one action and returns what the agent sees and whether the
episode ended: tool calls (with earlier results filled in where the reference names them),
``send_message``, ``wait`` (repeated until what the reference waits for has arrived) and
``finish``. It is how a serving edge is smoke-tested end to end (the oracle's score, through
the real seat), and what the chaos and broker-restart benchmarks drive good episodes with::

    played = await play_reference(task, act)
    assert played.done
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..sim.task import FinishStep, MessageStep, Task, ToolStep, WaitStep, resolve_refs

Act = Callable[[str, dict[str, Any]], Awaitable[tuple[str, bool]]]
"""One action of the agent's seat: its name and arguments in, (what the agent sees, whether
the episode ended) out."""


@dataclass
class Played:
    said: list[str] = field(default_factory=list)
    """What each action of the reference was answered, in order."""
    done: bool = False
    """Whether the episode had ended after the last action."""


async def play_reference(task: Task, act: Act, *, max_waits: int = 10) -> Played:
    """Play ``task``'s reference solution through ``act`` (see the module's docstring); a
    wait step is repeated up to ``max_waits`` times until the message it waits for (or any
    event, for a timed wait) arrives or the episode ends."""
    results: dict[str, Any] = {}
    played = Played()
    for st in task.reference:
        if isinstance(st, ToolStep):
            text, played.done = await act(st.tool, resolve_refs(st.args, results))
            if st.id:
                results[st.id] = json.loads(text.split("\n")[0])["result"]
        elif isinstance(st, MessageStep):
            text, played.done = await act("send_message", {"to": st.to, "text": st.text})
        elif isinstance(st, FinishStep):
            text, played.done = await act("finish", {"summary": st.summary})
        else:
            for _ in range(max_waits):
                text, played.done = await act("wait", {})
                if played.done or not (isinstance(st, WaitStep) and st.message_from) \
                        or f"from {st.message_from}" in text:
                    break
        played.said.append(text)
    return played
