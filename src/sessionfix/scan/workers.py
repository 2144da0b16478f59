"""Forked worker processes that compute a fixed list of tasks and hand back results in order.

Not `multiprocessing.Pool`: its workers share a task queue guarded by a lock, and a
worker that a signal ends while it holds that lock leaves the others blocked for ever
(and each one that dies prints a traceback). Here each worker computes its own share
of the tasks in order (every n-th, or the least loaded by weight; inherited through
`fork`, never sent) and writes each result, pickled, to a pipe of its own; the parent
reads them in task order. Nothing is shared, so no
worker can block another. Workers ignore SIGINT (the terminal's Ctrl-C is the
parent's to handle), die on SIGTERM and SIGHUP, and write nothing to the terminal:
errors travel back through the pipe. The parent kills and reaps every worker when it
is done, whether it finished, failed or was interrupted; or, for tasks that must never
be cut short (rewriting a file in place), tells them to stop after the task each has
under way and keeps the results they still hand over.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from typing import Final, Generic, TypeVar

from sessionfix.safety.writing import HELD_SIGNALS, signals_deferred

T = TypeVar("T")
R = TypeVar("R")

_HEADER_BYTES: Final = 8
_PIPE_BYTES: Final = 1 << 20
"""Pipe capacity asked for (Linux), so that a worker can hand over a result and go on
with its next task before the parent gets to it."""


class WorkerDied(Exception):
    """A worker could not start, or ended without handing over a result (killed, or out
    of memory)."""


class _Failure:
    """An exception raised by a task, as it travels back to the parent."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class OrderedWorkers(Generic[T, R]):
    """`function(task)` for every task, computed by `count` forked workers, yielded in
    task order by iterating. Use as a context manager: leaving it kills and reaps the
    workers, whatever happened.

    A task's exception is raised again in the parent, at its turn; a worker that dies
    raises `WorkerDied`.

    `finish_started`: leaving never kills a worker in the middle of a task. The workers
    are told to stop after the task each has under way (a byte on a pipe they look at
    between tasks); the parent waits for them, with signals held, and keeps what they
    hand over meanwhile in `finished`. Such workers also ignore SIGTERM and SIGHUP: the
    parent, which turns them into interrupts, stops them. Take each result with signals
    held (`signals_deferred`) until it is recorded: an interrupt between its arrival and
    its bookkeeping would lose it (the wait is at most the task under way, which leaving
    waits for anyway).
    """

    def __init__(
        self,
        function: Callable[[T], R],
        tasks: Sequence[T],
        count: int,
        weights: Sequence[int] | None = None,
        *,
        finish_started: bool = False,
    ) -> None:
        self._function = function
        self._tasks = tasks
        self._count = max(1, min(count, len(tasks)))
        self._owners = _owners(len(tasks), self._count, weights)
        self._pids: list[int] = []
        self._pipes: list[int] = []
        self._finish_started = finish_started
        self._stop_pipe: tuple[int, int] | None = None
        self._taken = 0
        """Results taken by iterating: those of tasks 0 to `_taken - 1`."""
        self.finished: list[tuple[int, R | BaseException]] = []
        """With `finish_started`, once left: (task, result or its error) of every task
        whose result came after the iteration stopped, in task order."""
        self.cut_short: list[int] = []
        """With `finish_started`, once left: the task a worker that died had under way
        (it may have been done in part)."""

    def __enter__(self) -> OrderedWorkers[T, R]:
        try:
            # Held, so that no interrupt comes between a fork and the bookkeeping of
            # its pid; one that came meanwhile is raised on leaving, and stops them all.
            with signals_deferred():
                if self._finish_started:
                    self._stop_pipe = os.pipe()
                # The parent's objects move out of the collector's reach while forking, so
                # that no collection in a worker writes to (and so copies) their pages.
                gc.freeze()
                try:
                    for worker in range(self._count):
                        self._start(worker)
                finally:
                    gc.unfreeze()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def __iter__(self) -> Iterator[R]:
        import pickle

        for index in range(len(self._tasks)):
            pipe = self._pipes[self._owners[index]]
            if self._finish_started:
                # Whole or not at all: what is left on the pipe is `_finish`'s.
                with signals_deferred():
                    message = _read_message(pipe)
                    self._taken = index + 1
            else:
                message = _read_message(pipe)
            outcome = pickle.loads(message)
            if isinstance(outcome, _Failure):
                raise outcome.error
            yield outcome

    def _start(self, worker: int) -> None:
        try:
            reader, writer = os.pipe()
        except OSError as exc:
            raise WorkerDied(f"cannot start a worker process ({exc})") from None
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(reader)
            os.close(writer)
            raise WorkerDied(f"cannot start a worker process ({exc})") from None
        if pid == 0:
            self._work(worker, reader, writer)
        self._pids.append(pid)
        self._pipes.append(reader)
        os.close(writer)

    def _work(self, worker: int, reader: int, writer: int) -> None:
        """The worker's whole life: it never returns into the caller's stack."""
        import pickle

        status = 1
        try:
            _become_worker(keep_going=self._finish_started)
            for fd in (*self._pipes, reader):
                os.close(fd)
            stop = None
            if self._stop_pipe is not None:
                stop, told = self._stop_pipe
                os.close(told)
            with suppress(OSError):
                _fcntl_pipe_size(writer)
            for index in (i for i, owner in enumerate(self._owners) if owner == worker):
                if stop is not None and _readable(stop):
                    break
                try:
                    outcome: object = self._function(self._tasks[index])
                    data = pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
                except Exception as exc:
                    data = pickle.dumps(_transportable(exc), pickle.HIGHEST_PROTOCOL)
                    _write_message(writer, data)
                    break
                del outcome
                _write_message(writer, data)
                del data
            status = 0
        finally:
            os._exit(status)

    def _stop(self) -> None:
        """Kill every worker still running, or let it finish its task (`finish_started`),
        and reap them all (signals held meanwhile, so that a second interrupt cannot
        leave one behind or cut a task short)."""
        with signals_deferred():
            try:
                if self._finish_started:
                    self._finish()
                else:
                    for pid in self._pids:
                        with suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
            finally:
                for pid in self._pids:
                    with suppress(ChildProcessError):
                        os.waitpid(pid, 0)
                for fd in self._pipes:
                    os.close(fd)
                if self._stop_pipe is not None:
                    for fd in self._stop_pipe:
                        os.close(fd)
                    self._stop_pipe = None
                self._pids = []
                self._pipes = []

    def _finish(self) -> None:
        """Tell the workers to stop after their task under way, and collect every result
        they hand over until their pipes end; note the task of a worker that died."""
        import pickle

        if self._stop_pipe is not None:
            with suppress(OSError):
                os.write(self._stop_pipe[1], b"x")
        finished: list[tuple[int, R | BaseException]] = []
        for worker, pipe in enumerate(self._pipes):
            left = [
                index
                for index in range(self._taken, len(self._tasks))
                if self._owners[index] == worker
            ]
            for index in left:
                try:
                    message = _next_message(pipe)
                except WorkerDied:
                    self.cut_short.append(index)
                    break
                if message is None:
                    if not _ended_well(self._pids[worker]):
                        self.cut_short.append(index)
                    break
                outcome = pickle.loads(message)
                if isinstance(outcome, _Failure):
                    finished.append((index, outcome.error))
                    break
                finished.append((index, outcome))
        self.finished = sorted(finished, key=lambda pair: pair[0])
        self.cut_short.sort()


def _owners(count: int, workers: int, weights: Sequence[int] | None) -> list[int]:
    """The worker of each task: in turn, or, given the tasks' weights (their sizes), the
    least loaded so far, so that workers finish together; each takes its tasks in order."""
    if weights is None:
        return [index % workers for index in range(count)]
    loads = [0] * workers
    owners: list[int] = []
    for weight in weights:
        owner = loads.index(min(loads))
        owners.append(owner)
        loads[owner] += max(weight, 1)
    return owners


def _become_worker(*, keep_going: bool) -> None:
    """Signal dispositions and output of a freshly forked worker (forked with the
    signals held, so that none can reach it before this). `keep_going`: it ignores
    SIGTERM and SIGHUP too, and is stopped by its parent alone."""
    for number in HELD_SIGNALS:
        ignored = keep_going or number == signal.SIGINT
        signal.signal(number, signal.SIG_IGN if ignored else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    # Fresh objects: the inherited ones may hold a lock some other thread of the parent
    # had taken when it forked.
    sys.stdin = sys.stdout = sys.stderr = open(devnull, "w", closefd=False)  # noqa: SIM115


def _fcntl_pipe_size(fd: int) -> None:
    import fcntl

    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setter is not None:
        fcntl.fcntl(fd, setter, _PIPE_BYTES)


def _transportable(error: Exception) -> _Failure:
    """The error itself if it pickles, else a RuntimeError that says what it was."""
    import pickle

    try:
        pickle.loads(pickle.dumps(error, pickle.HIGHEST_PROTOCOL))
    except Exception:
        return _Failure(RuntimeError(f"{type(error).__name__}: {error}"))
    return _Failure(error)


def _write_message(fd: int, data: bytes) -> None:
    _write_all(fd, memoryview(len(data).to_bytes(_HEADER_BYTES, "little")))
    _write_all(fd, memoryview(data))


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]


def _read_message(fd: int) -> bytearray:
    message = _next_message(fd)
    if message is None:
        raise WorkerDied("a worker process ended before handing over its result")
    return message


def _next_message(fd: int) -> bytearray | None:
    """The next message on `fd`; None when the pipe ends before it starts."""
    header = _read_exactly(fd, _HEADER_BYTES)
    if header is None:
        return None
    body = _read_exactly(fd, int.from_bytes(header, "little"))
    if body is None:
        raise WorkerDied("a worker process ended while handing over its result")
    return body


def _readable(fd: int) -> bool:
    """Whether reading `fd` would not block (data, or the writer gone)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _ended_well(pid: int) -> bool:
    """Reap a worker whose pipe ended; whether it exited of its own accord."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return True
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _read_exactly(fd: int, size: int) -> bytearray | None:
    """`size` bytes from `fd`; None when the pipe ends before the first of them."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    done = 0
    while done < size:
        got = os.readv(fd, [view[done:]])
        if not got:
            if done == 0:
                return None
            raise WorkerDied("a worker process ended while handing over its result")
        done += got
    return buffer
