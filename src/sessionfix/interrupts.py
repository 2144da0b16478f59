"""Holding back the signals that end a run while a change must not be cut in two (a
file swap and its bookkeeping, a store's commit and the backup it keeps)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

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
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
