"""Forked worker processes that compute a fixed list of tasks and hand back results in order.

Not `multiprocessing.Pool`: its workers share a task queue guarded by a semaphore, and
a worker that a signal ends while it holds it leaves the others blocked for ever (and
each one that dies prints a traceback). Here the tasks are inherited through `fork`,
never sent: a worker that is free claims the next task no one has claimed, so that a
worker slowed down (by its tasks or by the machine) leaves more of them to the others,
and all finish together. A claim takes a POSIX record lock on a file they share, which
the kernel releases when its holder dies, so no worker can block another. Each worker
writes its results, pickled, to a pipe of its own; the parent, which sees who claimed
each task, reads them in task order. Workers ignore SIGINT (the terminal's Ctrl-C is the
parent's to handle), die on SIGTERM and SIGHUP, and write nothing to the terminal:
errors travel back through the pipe. The parent kills and reaps every worker when it
is done, whether it finished, failed or was interrupted; or, for tasks that must never
be cut short (rewriting a file in place), tells them to stop after the task each has
under way and keeps the results they still hand over.
"""

from __future__ import annotations

import gc
import mmap
import os
import select
import signal
import sys
import tempfile
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from typing import Final, Generic, TypeVar

from sessionfix.interrupts import HELD_SIGNALS, signals_deferred

T = TypeVar("T")
R = TypeVar("R")

_HEADER_BYTES: Final = 8
_INDEX_BYTES: Final = 8
_ENDED: Final = select.POLLHUP | select.POLLERR | select.POLLNVAL
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
    during a task raises `WorkerDied` at that task's turn.

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
        *,
        finish_started: bool = False,
    ) -> None:
        self._function = function
        self._tasks = tasks
        self._count = max(1, min(count, len(tasks)))
        self._claims: _Claims | None = None
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
                try:
                    self._claims = _Claims(len(self._tasks))
                except OSError as exc:
                    raise WorkerDied(f"cannot share tasks between processes ({exc})") from None
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
            pipe = self._pipes[self._claimer(index)]
            if self._finish_started:
                # Whole or not at all: what is left on the pipe is `_finish`'s.
                with signals_deferred():
                    message = _read_result(pipe, index)
                    self._taken = index + 1
            else:
                message = _read_result(pipe, index)
            outcome = pickle.loads(message)
            del message  # not held beside the outcome while the caller has it
            if isinstance(outcome, _Failure):
                raise outcome.error
            yield outcome

    def _claimer(self, index: int) -> int:
        """The worker that claimed task `index`, once one has. Every earlier task's
        result is taken, so the workers are between tasks and one claims it at once,
        unless every one of them is gone."""
        claims = self._claims
        assert claims is not None
        poller: select.poll | None = None
        live = len(self._pipes)
        while (worker := claims.by(index)) is None:
            if poller is None:
                poller = select.poll()
                for pipe in self._pipes:
                    poller.register(pipe, select.POLLIN)
                continue  # looked at again once the poll is set up, then waited for
            # No pipe holds a result meanwhile: the claimer's next one is this task's.
            for fd, event in poller.poll():
                if event & _ENDED:  # its worker is gone (its last result, if any, is read later)
                    poller.unregister(fd)
                    live -= 1
            if not live and claims.by(index) is None:
                raise WorkerDied("every worker process ended before taking the next task")
        return worker

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
            claims = self._claims
            assert claims is not None
            while not (stop is not None and _readable(stop)):
                index = claims.claim(worker)
                if index is None:
                    break
                try:
                    outcome: object = self._function(self._tasks[index])
                    data = pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
                except Exception as exc:
                    data = pickle.dumps(_transportable(exc), pickle.HIGHEST_PROTOCOL)
                    _write_message(writer, index, data)
                    break
                del outcome
                _write_message(writer, index, data)
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
            except BaseException:
                # Workers blocked handing over results no one will read end on a closed pipe.
                for fd in self._pipes:
                    os.close(fd)
                self._pipes = []
                raise
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
                if self._claims is not None:
                    self._claims.close()
                    self._claims = None
                self._pids = []
                self._pipes = []

    def _finish(self) -> None:
        """Tell the workers to stop after their task under way, and collect every result
        they hand over until their pipes end; note the tasks a worker that died had
        claimed and not handed over."""
        import pickle

        if self._stop_pipe is not None:
            with suppress(OSError):
                os.write(self._stop_pipe[1], b"x")
        claims = self._claims
        if claims is None:  # none was started
            return
        finished: list[tuple[int, R | BaseException]] = []
        handed: set[int] = set()
        for pipe in self._pipes:
            while True:
                try:
                    result = _next_result(pipe)
                except WorkerDied:
                    break
                if result is None:
                    break
                index, message = result
                handed.add(index)
                outcome = pickle.loads(message)
                if isinstance(outcome, _Failure):
                    outcome = outcome.error
                finished.append((index, outcome))
        # Every pipe ended, so every claim is final.
        for worker in range(len(self._pipes)):
            self.cut_short.extend(
                index for index in claims.of(worker, self._taken) if index not in handed
            )
        self.finished = sorted(finished, key=lambda pair: pair[0])
        self.cut_short.sort()


class _Claims:
    """Which worker claimed which task: the next task to claim, and each task's claimant,
    in a mapping of an unnamed file the forked workers share. A claim holds the file's
    POSIX record lock, which the kernel releases if its holder dies."""

    _CLAIMANT_BYTES: Final = 2

    def __init__(self, count: int) -> None:
        self.count = count
        try:
            fd = os.memfd_create("sessionfix-claims", getattr(os, "MFD_CLOEXEC", 0))
        except (AttributeError, OSError):
            with tempfile.TemporaryFile() as unnamed:
                fd = os.dup(unnamed.fileno())
        self._fd = fd
        try:
            size = _INDEX_BYTES + self._CLAIMANT_BYTES * count
            os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise

    def claim(self, worker: int) -> int | None:
        """Claim the next task for `worker`; None when every task is claimed."""
        import fcntl

        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            index = int.from_bytes(self._map[:_INDEX_BYTES], "little")
            if index >= self.count:
                return None
            self._map[self._claimant_at(index)] = (worker + 1).to_bytes(
                self._CLAIMANT_BYTES, "little"
            )
            self._map[:_INDEX_BYTES] = (index + 1).to_bytes(_INDEX_BYTES, "little")
            return index
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def _claimant_at(self, index: int) -> slice:
        """Where task `index`'s claimant (its worker plus one, 0 for none) is kept."""
        at = _INDEX_BYTES + self._CLAIMANT_BYTES * index
        return slice(at, at + self._CLAIMANT_BYTES)

    def _claimed(self) -> int:
        """How many tasks are claimed: a claimant written at or past it is of a worker
        that died before its claim was complete. Read without the lock, until two reads
        agree (a worker may be writing it)."""
        counter = self._map[:_INDEX_BYTES]
        while (again := self._map[:_INDEX_BYTES]) != counter:
            counter = again
        return int.from_bytes(counter, "little")

    def by(self, index: int) -> int | None:
        """The worker that claimed task `index`, None while no worker has."""
        if index >= self._claimed():
            return None
        claimant = int.from_bytes(self._map[self._claimant_at(index)], "little")
        return claimant - 1 if claimant else None

    def of(self, worker: int, start: int) -> list[int]:
        """The tasks from `start` on that `worker` claimed."""
        claimants = array("H", self._map[_INDEX_BYTES:])
        if sys.byteorder != "little":
            claimants.byteswap()
        claimed = min(self._claimed(), self.count)
        return [index for index in range(start, claimed) if claimants[index] == worker + 1]

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


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


def _write_message(fd: int, index: int, data: bytes) -> None:
    """Hand over task `index`'s result."""
    header = index.to_bytes(_INDEX_BYTES, "little") + len(data).to_bytes(_HEADER_BYTES, "little")
    _write_all(fd, memoryview(header))
    _write_all(fd, memoryview(data))


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]


def _read_result(fd: int, index: int) -> bytearray:
    """Task `index`'s result, the next on `fd`."""
    result = _next_result(fd)
    if result is None:
        raise WorkerDied("a worker process ended before handing over its result")
    got, message = result
    assert got == index, f"task {got}'s result came where task {index}'s was due"
    return message


def _next_result(fd: int) -> tuple[int, bytearray] | None:
    """The next (task, result) on `fd`; None when the pipe ends before it starts."""
    header = _read_exactly(fd, _INDEX_BYTES + _HEADER_BYTES)
    if header is None:
        return None
    body = _read_exactly(fd, int.from_bytes(header[_INDEX_BYTES:], "little"))
    if body is None:
        raise WorkerDied("a worker process ended while handing over its result")
    return int.from_bytes(header[:_INDEX_BYTES], "little"), body


def _readable(fd: int) -> bool:
    """Whether reading `fd` would not block (data, or the writer gone)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


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
