"""Holding back the signals that end a run while a change must not be cut in two (a
file swap and its bookkeeping, a store's commit and the backup it keeps)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Final

HELD_SIGNALS: Final = frozenset(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM")
    if hasattr(signal, name)
)
"""The signals that end a run: the command turns SIGTERM and SIGHUP into interrupts, and
raises on SIGALRM an interrupt that came while a module loaded (`sessionfix.entry`)."""


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold the signals that end a run back (where the platform can) until the block is
    done, so that an interrupt cannot land between a change and the bookkeeping of it;
    one that arrived meanwhile is raised when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not on Windows
        yield
        return
    # Python runs handlers in the main thread only; elsewhere the mask is all there is to hold.
    handlers = _python_handled() if threading.current_thread() is threading.main_thread() else {}
    arrived: list[int] = []
    holding = [True]

    def hold(number: int, frame: FrameType | None) -> None:
        if holding[0]:
            arrived.append(number)
        else:  # the block is over: a late arrival goes where it would have gone
            _deliver(number, handlers[number], frame)

    for number in handlers:
        signal.signal(number, hold)
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        # The mask first, in one call: no handler may raise between the block's end and it.
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        holding[0] = False
        for number, handler in handlers.items():
            if signal.getsignal(number) is hold:
                signal.signal(number, handler)
        for number in dict.fromkeys(arrived):
            signal.raise_signal(number)


Handler = Callable[[int, FrameType | None], Any] | int


def _python_handled() -> dict[int, Handler]:
    """The held signals whose handler Python would run, with that handler: the mask holds a
    signal back from this thread only, and another thread that takes it (the process has
    several in a library's host or a test runner) has Python run the handler here at once."""
    handlers: dict[int, Handler] = {}
    for number in HELD_SIGNALS:
        handler = signal.getsignal(number)
        if handler is not None and handler is not signal.SIG_IGN:
            handlers[number] = handler
    return handlers


def _deliver(number: int, handler: Handler, frame: FrameType | None) -> None:
    """What `handler` does with signal `number` (the default action: raised again with it)."""
    if callable(handler):
        handler(number, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(number, signal.SIG_DFL)
        signal.raise_signal(number)
