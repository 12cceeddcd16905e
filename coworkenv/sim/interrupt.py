"""Stopping a run early without losing what it finished.

An :class:`Interrupt` is handed to the runner. Once it is requested (by :meth:`~Interrupt.
request`, or by the first of its ``signals``), no episode starts; the running ones are
cancelled, and the runner records them as aborted; every episode that finished is committed
and stays recorded, so ``--resume`` runs only what is left. The runner then raises
:class:`~coworkenv.sim.errors.RunInterrupted`. A further signal calls ``on_second`` (the
command line exits at once there, losing at most the store's last uncommitted batch), also
once the run has returned and the event loop is shutting down.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import anyio.abc

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals the command line stops a run on."""


class Interrupt:
    """A request to stop a run early; see the module's docstring.

    :meth:`request` and the hooks run on the event loop's thread."""

    def __init__(self, signals: tuple[signal.Signals, ...] = (), *,
                 on_second: Callable[[int], None] | None = None,
                 repeat_after: float = 0.25) -> None:
        self.signals = signals
        self.on_second = on_second
        self.repeat_after = repeat_after
        """A signal this soon after the first is the same request delivered twice (a
        supervisor that signals the process and its group), not a second one."""
        self._at = 0.0
        self._listening = False
        self.requested = False
        self.signum: int | None = None
        """The signal that requested the stop (None: asked by :meth:`request` alone)."""
        self._scopes: set[anyio.CancelScope] = set()
        self._hooks: list[Callable[[int | None], None]] = []
        self._before_second: list[Callable[[int], None]] = []

    def request(self, signum: int | None = None) -> None:
        """Stop: no episode starts from now on; running ones are cancelled."""
        if self.requested:
            return
        self.requested, self.signum, self._at = True, signum, time.monotonic()
        for scope in list(self._scopes):
            scope.cancel()
        for hook in self._hooks:
            hook(signum)

    def on_request(self, hook: Callable[[int | None], None]) -> None:
        """Call ``hook(signum)`` when the stop is requested (at once if it already was)."""
        self._hooks.append(hook)
        if self.requested:
            hook(self.signum)

    def before_second(self, hook: Callable[[int], None]) -> None:
        """Call ``hook(signum)`` on a second signal, before ``on_second`` (which may exit)."""
        self._before_second.append(hook)

    @contextmanager
    def cancels(self) -> Iterator[anyio.CancelScope]:
        """A scope for one episode, cancelled when the stop is requested."""
        with anyio.CancelScope() as scope:
            if self.requested:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield scope
            finally:
                self._scopes.discard(scope)

    @asynccontextmanager
    async def listening(self) -> AsyncIterator[None]:
        """While the block runs, the first of ``signals`` requests the stop and any further
        one calls ``on_second`` (without ``signals``, the block just runs). Nested blocks
        listen once, for as long as the outermost: a caller that does more after the run
        (closing the store, say) keeps its signals covered by listening around all of it."""
        if not self.signals or self._listening:
            yield
            return
        self._listening = True
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._listen, name="coworkenv-interrupt-signals")  # (installed)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._listening = False
            if self.requested and self.on_second is not None:
                self._keep_listening_for_a_second()

    def _keep_listening_for_a_second(self) -> None:
        """After the block, while the event loop shuts down and until the process exits, a
        further signal is still a second one (``on_second``), not Python's default
        KeyboardInterrupt in the middle of the loop's cleanup. Main thread only."""
        if threading.current_thread() is not threading.main_thread():
            return
        on_second = self.on_second
        assert on_second is not None

        def second(signum: int, frame: object) -> None:
            if time.monotonic() - self._at < self.repeat_after:
                return  # (the first, delivered twice)
            for hook in self._before_second:
                hook(signum)
            on_second(signum)

        for s in self.signals:
            signal.signal(s, second)

    async def _listen(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*self.signals) as received:
            task_status.started()
            async for signum in received:
                if not self.requested:
                    self.request(signum)
                elif time.monotonic() - self._at >= self.repeat_after:
                    for hook in self._before_second:
                        hook(signum)
                    if self.on_second is not None:
                        self.on_second(signum)
