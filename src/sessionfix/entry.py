"""The console entry point, which loads before the rest of sessionfix so that an interrupt
is handled from the first moment. While the command line starts, nothing has been read or
written, and an interrupt ends the run with one line; once it runs, an interrupt unwinds
it (temporary files removed, locks released) as Ctrl-C does; one after the run leaves at
once.

It imports nothing beyond what the interpreter has already loaded at start-up.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's own module; `signal` loads enum
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType

INTERRUPTED = b"sessionfix: error: interrupted\n"
EXIT_INTERRUPTED = 2
"""What an interrupted run prints and exits with, at any moment (`engine.EXIT_ERROR`)."""

ENDING_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
"""SIGTERM and SIGHUP end a run as Ctrl-C does."""

RETRY_SECONDS = 0.005

_run_over = False
_deferred = False
_raised = False
"""An interrupt was raised into the run. A finalizer it lands in (a generator closed as
it is freed, a file closed by its C finalizer) discards it, and the run goes on as if
none had come; the run still ends interrupted."""


def _leave_at_once(signum: int, frame: FrameType | None) -> None:
    """Nothing is open (start-up, the end of a run): one line and an exit on the spot."""
    try:
        os.write(2, INTERRUPTED)
    finally:
        os._exit(EXIT_INTERRUPTED)


def interrupt(signum: int, frame: FrameType | None) -> None:
    """Raise KeyboardInterrupt where the run is, unless a module is loading: msgspec
    crashes the process (SIGSEGV) when an exception cuts through the Python it calls
    while building a decoder, which modules do as they load; the interrupt then comes a
    moment later, on SIGALRM, once the import is done."""
    global _deferred, _raised
    if _run_over:
        _leave_at_once(signum, frame)
    _deferred = _loading_a_module(frame)
    if _deferred:
        _signal.signal(_signal.SIGALRM, interrupt)
        _signal.setitimer(_signal.ITIMER_REAL, RETRY_SECONDS)
        return
    _raised = True
    raise KeyboardInterrupt


def end_of_run() -> bool:
    """From now on an interrupt leaves at once. True if one came while a module loaded
    and has not been raised yet."""
    global _run_over
    _signal.setitimer(_signal.ITIMER_REAL, 0)
    _run_over = True
    return _deferred


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """An interrupt a finalizer discards is no traceback: the run ends interrupted
    (`_raised`). Anything else is Python's to print."""
    if unraisable.exc_type is KeyboardInterrupt:
        return
    sys.__unraisablehook__(unraisable)


def _loading_a_module(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib."):
            return True
        frame = frame.f_back
    return False


def handle_signals(handler: object) -> None:
    """Send every signal that ends a run to `handler`."""
    for name in ENDING_SIGNALS:
        number = getattr(_signal, name, None)
        if number is not None:
            _signal.signal(number, handler)


_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 1 << 20


def _pin_mmap_threshold() -> None:
    """glibc's malloc raises its threshold for mapping a block of its own to the largest
    block freed so far; after the first large result is freed, growing index columns
    are copied around the heap, and freed blocks stay resident (a third more memory
    when a file is read in parallel). A fixed threshold keeps large blocks mapped."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)


def run() -> None:
    """`sessionfix`: the command line, interruptible from its first line. Exits without
    tearing down the interpreter's objects: after a scan of a large file, freeing them
    one by one takes a noticeable time."""
    handle_signals(_leave_at_once)
    from contextlib import suppress

    from sessionfix.cli import main, print_error
    from sessionfix.engine import EXIT_ERROR

    _pin_mmap_threshold()
    sys.unraisablehook = _unraisable
    handle_signals(interrupt)
    try:
        code = main()
        if end_of_run() or (_raised and code != EXIT_ERROR):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        end_of_run()
        print_error("interrupted")
        code = EXIT_ERROR
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        pass
    except (OSError, ValueError) as exc:
        if code != EXIT_ERROR:
            print_error(f"cannot write to standard output ({exc})")
            code = EXIT_ERROR
    if sys.stderr is not None:
        with suppress(OSError, ValueError):
            sys.stderr.flush()
    os._exit(code)
