"""The forked worker set: results in order, errors and deaths reported, signals kept
from workers, nothing printed by them, and no worker left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionfix.errors import InputError
from sessionfix.scan import workers as workers_module
from sessionfix.scan.workers import OrderedWorkers, WorkerDied

from .robustness import children

SOURCE = Path(__file__).resolve().parent.parent / "src"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="worker processes are counted through /proc"
)


@pytest.fixture
def no_worker_left() -> Iterator[None]:
    before = children()
    yield
    assert children() <= before, "a worker process outlived its worker set"


def square(value: int) -> int:
    return value * value


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_results_come_in_task_order(count: int, no_worker_left: None) -> None:
    tasks = list(range(23))
    with OrderedWorkers(square, tasks, count) as results:
        assert list(results) == [value * value for value in tasks]


def test_large_results_travel_whole(no_worker_left: None) -> None:
    """Results larger than a pipe holds, from several workers at once."""
    tasks = [(index, 3 << 20) for index in range(5)]
    with OrderedWorkers(lambda task: bytes([task[0]]) * task[1], tasks, 2) as results:
        for index, result in enumerate(results):
            assert result == bytes([index]) * (3 << 20)


def failing(value: int) -> int:
    if value == 5:
        raise InputError(f"task {value} failed")
    return value


def test_a_task_error_is_raised_at_its_turn(no_worker_left: None) -> None:
    seen: list[int] = []
    with (
        pytest.raises(InputError, match="task 5 failed"),
        OrderedWorkers(failing, list(range(9)), 2) as results,
    ):
        seen.extend(results)
    assert seen == [0, 1, 2, 3, 4]


class Unpicklable(Exception):
    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("cannot pickle")


def raising_unpicklable(value: int) -> int:
    raise Unpicklable("odd")


def test_an_error_that_cannot_travel_is_described(no_worker_left: None) -> None:
    with (
        pytest.raises(RuntimeError, match="Unpicklable: odd"),
        OrderedWorkers(raising_unpicklable, [1, 2], 2) as results,
    ):
        list(results)


def dying(value: int) -> int:
    if value == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def test_a_dead_worker_is_reported_not_waited_for(no_worker_left: None) -> None:
    with pytest.raises(WorkerDied), OrderedWorkers(dying, list(range(8)), 2) as results:
        list(results)


def chatty(value: int) -> int:
    print("to stdout", value)
    print("to stderr", value, file=sys.stderr)
    os.write(2, b"raw to stderr\n")
    return value


def test_workers_never_write_to_the_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    with OrderedWorkers(chatty, [1, 2, 3], 2) as results:
        assert list(results) == [1, 2, 3]
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def dispositions(value: int) -> tuple[object, ...]:
    return (
        signal.getsignal(signal.SIGINT),
        signal.getsignal(signal.SIGTERM),
        signal.getsignal(signal.SIGHUP),
        signal.pthread_sigmask(signal.SIG_BLOCK, []),
    )


def test_workers_ignore_sigint_and_die_of_sigterm(no_worker_left: None) -> None:
    """The parent's handlers (as `sessionfix.cli.run` installs them) are not inherited:
    a worker must never turn SIGTERM into an exception it could raise holding a lock."""
    previous = {
        number: signal.signal(number, signal.default_int_handler)
        for number in (signal.SIGTERM, signal.SIGHUP)
    }
    try:
        with OrderedWorkers(dispositions, [0, 1], 2) as results:
            for found in results:
                assert found[:3] == (signal.SIG_IGN, signal.SIG_DFL, signal.SIG_DFL)
                assert not {signal.SIGINT, signal.SIGTERM, signal.SIGHUP} & set(found[3])
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def sleepy(value: int) -> int:
    time.sleep(60)
    return value


def test_an_interrupted_parent_kills_and_reaps_its_workers(no_worker_left: None) -> None:
    """KeyboardInterrupt (what SIGINT and, in the command, SIGTERM raise) while the
    parent waits: every worker is gone before the exception leaves the block."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt), OrderedWorkers(sleepy, [1, 2, 3], 3) as results:
            list(results)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 10


def test_stopping_early_kills_the_rest(no_worker_left: None) -> None:
    with OrderedWorkers(square, list(range(50)), 2) as results:
        for value in results:
            if value > 10:
                break


def reads_inherited(task: tuple[int, int]) -> bytes:
    fd, offset = task
    return os.pread(fd, 4, offset)


def test_tasks_are_inherited_not_sent(tmp_path: Path, no_worker_left: None) -> None:
    """A task may hold what cannot be pickled or sent, such as an open descriptor."""
    path = tmp_path / "data"
    path.write_bytes(b"0123456789abcdef")
    fd = os.open(path, os.O_RDONLY)
    try:
        with OrderedWorkers(reads_inherited, [(fd, 0), (fd, 4), (fd, 8)], 2) as results:
            assert list(results) == [b"0123", b"4567", b"89ab"]
    finally:
        os.close(fd)


def _pid_of(value: int) -> int:
    return os.getpid()


def waits_for_the_others(task: tuple[Path, int, int]) -> int:
    """Task 0 waits until every other task is done (a minute at most); the others mark
    themselves done."""
    folder, value, count = task
    if value:
        (folder / f"done-{value}").touch()
    deadline = time.monotonic() + 60
    while not value and len(list(folder.glob("done-*"))) < count - 1:
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return os.getpid()


@pytest.mark.parametrize("count", [2, 3])
def test_a_free_worker_claims_the_next_task(
    tmp_path: Path, count: int, no_worker_left: None
) -> None:
    """A worker held up by one task leaves every other task to the rest (shared out in
    advance, task 0 would wait for tasks its own worker was to do), and the results
    still come in task order."""
    tasks = [(tmp_path, value, 12) for value in range(12)]
    with OrderedWorkers(waits_for_the_others, tasks, count) as workers:
        pids = list(workers)
    assert len(list(tmp_path.glob("done-*"))) == 11
    assert pids[0] not in pids[1:]
    with OrderedWorkers(square, list(range(40)), count) as workers:
        assert list(workers) == [n * n for n in range(40)]


def waits_for_release(task: tuple[Path, int]) -> int:
    """Marks the task started; task 1 then waits for a `release` file; marks it done."""
    folder, value = task
    (folder / f"started-{value}").touch()
    while value == 1 and not (folder / "release").exists():
        time.sleep(0.01)
    (folder / f"done-{value}").touch()
    return value * value


def test_finishing_workers_complete_the_task_under_way(
    tmp_path: Path, no_worker_left: None
) -> None:
    """Left early with `finish_started`, no worker is killed: the task under way ends,
    and every task a worker started is handed over, taken or in `finished`."""
    tasks = [(tmp_path, value) for value in range(12)]
    workers = OrderedWorkers(waits_for_release, tasks, 2, finish_started=True)
    with workers as results:
        for value in results:
            assert value == 0
            while not (tmp_path / "started-1").exists():
                time.sleep(0.01)
            (tmp_path / "release").touch()
            break
    reported = {0, *(index for index, _ in workers.finished)}
    assert [outcome for _, outcome in workers.finished] == [
        index * index for index, _ in workers.finished
    ]
    started = {int(p.name.split("-")[1]) for p in tmp_path.glob("started-*")}
    done = {int(p.name.split("-")[1]) for p in tmp_path.glob("done-*")}
    assert 1 in reported
    assert started == done == reported
    assert workers.cut_short == []


def test_a_finishing_worker_that_dies_names_its_task(no_worker_left: None) -> None:
    workers = OrderedWorkers(dying, list(range(8)), 2, finish_started=True)
    with pytest.raises(WorkerDied), workers as results:
        assert list(results) == []
    assert workers.cut_short == [3]
    assert all(index > 3 and value == index for index, value in workers.finished)


def graceful_dispositions(value: int) -> tuple[object, ...]:
    return tuple(signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM))


def test_finishing_workers_leave_sigterm_to_their_parent(no_worker_left: None) -> None:
    """The parent turns SIGTERM into an interrupt and stops them between tasks; one sent
    to the whole process group must not kill a worker in the middle of one."""
    with OrderedWorkers(graceful_dispositions, [0, 1], 2, finish_started=True) as results:
        assert list(results) == [(signal.SIG_IGN, signal.SIG_IGN)] * 2


def test_without_memfd_the_claims_live_in_an_unnamed_file(
    monkeypatch: pytest.MonkeyPatch, no_worker_left: None
) -> None:
    def unsupported(name: str, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "memfd_create", unsupported)
    with OrderedWorkers(square, list(range(9)), 2) as results:
        assert list(results) == [n * n for n in range(9)]


@pytest.mark.parametrize("finish_started", [False, True])
def test_workers_that_cannot_share_their_tasks_are_reported_as_such(
    monkeypatch: pytest.MonkeyPatch, finish_started: bool, no_worker_left: None
) -> None:
    def no_room(self: object, count: int) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(workers_module._Claims, "__init__", no_room)
    workers = OrderedWorkers(square, [1, 2], 2, finish_started=finish_started)
    with pytest.raises(WorkerDied, match="cannot share tasks"), workers:
        pass
    assert workers.finished == workers.cut_short == []


def test_a_claim_its_worker_did_not_complete_is_no_claim() -> None:
    """A worker dying between naming itself a task's claimant and moving the count of
    claims on leaves a claimant past that count: no one holds that task yet."""
    claims = workers_module._Claims(3)
    try:
        assert claims.claim(1) == 0
        at = workers_module._INDEX_BYTES + 2 * 1
        claims._map[at : at + 2] = (1 + 1).to_bytes(2, "little")  # claimant, count not moved
        assert claims.by(0) == 1
        assert claims.by(1) is None
        assert claims.of(1, 0) == [0]
        assert claims.claim(0) == 1
        assert claims.by(1) == 0
        assert claims.of(1, 0) == [0]
    finally:
        claims.close()


COLLECTING_FAILS = """
import os, sys, time
from sessionfix.scan.workers import OrderedWorkers

PARENT = os.getpid()


def rebuilt(value):
    if os.getpid() == PARENT and value == 1:
        raise ValueError("cannot be rebuilt here")
    return value


class FailsInParent:
    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return (rebuilt, (self.value,))


def task(value):
    # Larger than a pipe holds: its worker waits to hand it over.
    return [FailsInParent(value), b"x" * (2 << 20)]


try:
    with OrderedWorkers(task, list(range(6)), 2, finish_started=True) as results:
        next(iter(results))
        time.sleep(0.2)
except ValueError as exc:
    print(exc)
"""


def test_a_failure_while_collecting_the_last_results_does_not_hang(tmp_path: Path) -> None:
    """Workers blocked handing over results that will not be read (one cannot be
    unpickled here) are let go: their pipes close, and the parent does not wait on them
    for ever."""
    done = subprocess.run(
        [sys.executable, "-c", COLLECTING_FAILS],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(SOURCE)},
    )
    assert done.stdout == "cannot be rebuilt here\n"
