"""An interrupt at any moment of a run's start ends it with one line and exit 2: never a
traceback, never a crash. The interrupt is sent as each module starts loading, which is
where start-up spends its time, from the moment sessionfix has taken over SIGINT (before
that, Python's own start-up handles it): every load of a `check`, and the loads that
`context` and `repair` add during their run (lazy imports, msgspec building decoders)."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

SESSION = Path(__file__).resolve().parent.parent / "examples" / "sessions" / "torn-and-glued.jsonl"

COMMANDS = {
    "check": ["check", str(SESSION)],
    "context": ["context", str(SESSION)],
    "repair": ["repair", "--quiescence", "0", "-o", "repaired.jsonl", str(SESSION)],
}

INTERRUPT_AT_LOAD = """
import os, runpy, signal, sys

target = int(sys.argv.pop(1))
loads = 0
main = os.getpid()


def interrupt_at_the_target_load(event, args):
    global loads
    if event != "import" or os.getpid() != main:
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        return
    loads += 1
    if target == 0:
        os.write(3, args[0].encode() + b"\\n")
    elif loads == target:
        os.kill(os.getpid(), signal.SIGINT)


sys.addaudithook(interrupt_at_the_target_load)
sys.argv[0] = "sessionfix"
runpy.run_module("sessionfix", run_name="__main__", alter_sys=True)
"""
"""`python -m sessionfix ARGS`, interrupted as the `target`th module starts loading in
the main process (workers are its to stop) once sessionfix handles SIGINT; with `target`
0, the name of each such module to fd 3."""

INTERRUPTED = "sessionfix: error: interrupted\n"

IN_FLIGHT = 4


def _start(target: int, command: str, cwd: Path, **options: Any) -> subprocess.Popen[bytes]:
    cwd.mkdir(parents=True)
    return subprocess.Popen(
        [sys.executable, "-c", INTERRUPT_AT_LOAD, str(target), *COMMANDS[command]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        **options,
    )


@cache
def _loads(command: str, cwd: Path) -> tuple[str, ...]:
    """The modules a run of `command` loads, in order, once sessionfix handles SIGINT."""
    read, write = os.pipe()
    process = _start(0, command, cwd / command, pass_fds=(3,), preexec_fn=lambda: os.dup2(write, 3))
    os.close(write)
    with os.fdopen(read, "rb") as names:
        loads = tuple(names.read().decode().split())
    process.communicate(timeout=120)
    return loads


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("counted")


@pytest.mark.parametrize("command", COMMANDS)
def test_an_interrupt_at_any_module_load_ends_the_run_in_one_line(
    command: str, counted: Path, tmp_path: Path
) -> None:
    loads = _loads(command, counted)
    assert len(loads) > 100, "sessionfix never took over SIGINT"
    started_alike = set(_loads("check", counted)) if command != "check" else set()
    targets = [place for place, name in enumerate(loads, 1) if name not in started_alike]
    assert targets
    outcomes: dict[int, tuple[int, str]] = {}
    running: list[tuple[int, subprocess.Popen[bytes]]] = []

    def collect(target: int, process: subprocess.Popen[bytes]) -> None:
        _, stderr = process.communicate(timeout=120)
        outcomes[target] = (process.returncode, stderr.decode(errors="replace"))

    for target in targets:
        if len(running) == IN_FLIGHT:
            collect(*running.pop(0))
        running.append((target, _start(target, command, tmp_path / str(target))))
    for target, process in running:
        collect(target, process)
    wrong = {
        f"{loads[target - 1]} ({target})": (code, stderr)
        for target, (code, stderr) in outcomes.items()
        if code != 2 or "Traceback" in stderr or not stderr.endswith(INTERRUPTED)
    }
    assert wrong == {}
    left = {path.name for path in tmp_path.glob("*/*")}
    assert left <= {"repaired.jsonl"}, "an interrupted run left files behind"


def test_a_record_source_freed_open_runs_no_python(tmp_path: Path) -> None:
    """A source freed with its file open is closed by C alone: a signal handler runs only
    in Python code, and an interrupt raised in a finalizer is discarded (the unclosed-file
    warning once formatted a Path's repr there, and a run so interrupted went on)."""
    import gc
    import warnings

    from sessionfix.read.reader import RecordSource

    session = tmp_path / "session.jsonl"
    session.write_bytes(b"{}\n")
    source = RecordSource(session)
    assert source.read(0, 2) == b"{}"
    called: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call":
            called.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.setprofile(profile)
        try:
            del source
        finally:
            sys.setprofile(None)
        gc.collect()
    assert called == []


DISCARDED_BY_A_FINALIZER = """
import os, signal

import sessionfix.cli
from sessionfix import entry


def main():
    def pending():
        try:
            yield
        finally:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs here, inside the generator's close
                pass

    suspended = pending()
    next(suspended)
    del suspended  # closed as it is freed: Python discards what its close raises
    return 0


sessionfix.cli.main = main
entry.run()
"""


def test_an_interrupt_a_finalizer_discards_still_ends_the_run_interrupted() -> None:
    """A finalizer (a generator closed as it is freed) that an interrupt lands in
    discards the KeyboardInterrupt; the run went on and ended as if none had come."""
    process = subprocess.run(
        [sys.executable, "-c", DISCARDED_BY_A_FINALIZER],
        capture_output=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert (process.returncode, process.stderr.decode()) == (2, INTERRUPTED)


def test_an_interrupt_another_thread_takes_waits_for_the_held_block() -> None:
    """A signal taken by another thread of the process (a library's host, a test runner's
    channel) has Python run its handler in the main thread at once: inside a held block it
    must still wait until the block ends, then be raised."""
    import select
    import signal
    import threading

    from sessionfix.interrupts import signals_deferred

    ready, done = threading.Event(), threading.Event()
    other = threading.Thread(target=lambda: (ready.set(), done.wait(10)), daemon=True)
    other.start()
    ready.wait(10)
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_wake = signal.set_wakeup_fd(wake)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    steps: list[str] = []

    def held_block() -> None:
        with signals_deferred():
            assert other.ident is not None
            signal.pthread_kill(other.ident, signal.SIGINT)
            # The wake-up byte is written when the other thread has taken the signal.
            assert select.select([woken], [], [], 10)[0]
            steps.extend(str(step) for step in range(1_000))
            steps.append("end")

    try:
        with pytest.raises(KeyboardInterrupt):
            held_block()
    finally:
        done.set()
        signal.set_wakeup_fd(previous_wake)
        signal.signal(signal.SIGINT, previous)
        os.close(woken)
        os.close(wake)
    assert steps[-1] == "end"
    assert signal.getsignal(signal.SIGINT) is previous
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask, "the signals stay held"
