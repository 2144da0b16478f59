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
is done, whether it finished, failed or was interrupted.
"""

from __future__ import annotations

import gc
import os
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


def can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(signal, "pthread_sigmask")


def default_workers(jobs: int | None) -> int:
    """Worker processes for `--jobs`: as asked, else one per core this process may run on
    (up to 8); one where processes cannot be forked."""
    if not can_fork():
        return 1
    if jobs is None:
        try:
            jobs = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            jobs = os.cpu_count() or 1
        jobs = min(jobs, 8)
    return max(1, jobs)


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
    """

    def __init__(
        self,
        function: Callable[[T], R],
        tasks: Sequence[T],
        count: int,
        weights: Sequence[int] | None = None,
    ) -> None:
        self._function = function
        self._tasks = tasks
        self._count = max(1, min(count, len(tasks)))
        self._owners = _owners(len(tasks), self._count, weights)
        self._pids: list[int] = []
        self._pipes: list[int] = []

    def __enter__(self) -> OrderedWorkers[T, R]:
        try:
            # Held, so that no interrupt comes between a fork and the bookkeeping of
            # its pid; one that came meanwhile is raised on leaving, and stops them all.
            with signals_deferred():
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
            outcome = pickle.loads(_read_message(self._pipes[self._owners[index]]))
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
            _become_worker()
            for fd in (*self._pipes, reader):
                os.close(fd)
            with suppress(OSError):
                _fcntl_pipe_size(writer)
            for index in (i for i, owner in enumerate(self._owners) if owner == worker):
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
        """Kill every worker still running and reap them all (signals held meanwhile, so
        that a second interrupt cannot leave one behind)."""
        with signals_deferred():
            for pid in self._pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for pid in self._pids:
                with suppress(ChildProcessError):
                    os.waitpid(pid, 0)
            for fd in self._pipes:
                os.close(fd)
            self._pids = []
            self._pipes = []


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


def _become_worker() -> None:
    """Signal dispositions and output of a freshly forked worker (forked with the
    signals held, so that none can reach it before this)."""
    for number in HELD_SIGNALS:
        signal.signal(number, signal.SIG_IGN if number == signal.SIGINT else signal.SIG_DFL)
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
    size = int.from_bytes(_read_exactly(fd, _HEADER_BYTES), "little")
    return _read_exactly(fd, size)


def _read_exactly(fd: int, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    done = 0
    while done < size:
        got = os.readv(fd, [view[done:]])
        if not got:
            raise WorkerDied("a worker process ended before handing over its result")
        done += got
    return buffer
