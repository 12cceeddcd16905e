"""Sessions for synchronous callers: :class:`ThreadedSessions` runs a
:class:`~coworkenv.runtime.Sessions` host on its own event loop in a background thread, and
callers on any thread (a trainer's tool loop, an HTTP server's workers) wait on it."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from ..sim.task import Task
from .session import Session, Sessions


class ThreadedSessions:
    """A background thread with its own event loop holding ``sessions`` open (one store
    writer, one bus, one run record). :meth:`call` runs a coroutine there and waits for it."""

    def __init__(self, sessions: Sessions, *, step_timeout_s: float = 900.0) -> None:
        self.sessions = sessions
        self.step_timeout_s = step_timeout_s
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="coworkenv-sessions",
                                        daemon=True)
        self._thread.start()
        self._ready: Future[None] = Future()
        self._closing: asyncio.Event | None = None
        self._main = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        self._ready.result(120)

    async def _serve(self) -> None:
        """Holds the sessions open for the host's lifetime (their task group lives here)."""
        self._closing = asyncio.Event()
        try:
            async with self.sessions:
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def call(self, coro: Any, timeout: float | None = None) -> Any:
        """Run ``coro`` on the sessions' loop; wait for its result (from another thread)."""
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout or self.step_timeout_s)

    async def acall(self, coro: Any) -> Any:
        """Run ``coro`` on the sessions' loop; await it from another event loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def start(self, task: Task | str, seed: int | None = None) -> Session:
        """A new session, reset to ``task``; returns once its agent is first asked to act."""
        async def begin() -> Session:
            session = self.sessions.session()
            await session.reset(task, seed=seed)
            return session

        started: Session = self.call(begin())
        return started

    def close(self) -> None:
        """End every session (graded and recorded), finish the run, flush the store."""
        if self.loop.is_closed():
            return
        try:
            assert self._closing is not None
            self.loop.call_soon_threadsafe(self._closing.set)
            self._main.result(120)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self.loop.close()
