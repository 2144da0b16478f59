"""Many runs of the console command over a file large enough to be read by worker
processes: none may hang, print anything unexpected, or leave a process or a file
behind, also when SIGINT or SIGTERM lands in the middle of the parallel read.

Every run is a real `sessionfix` process (`python -m sessionfix`), with `-q`, so that a
clean run prints nothing on stderr; a time limit turns a hang into a failure. While the
test runs, it is the subreaper of everything the runs start (Linux), so that a worker a
run leaves behind, alive or a zombie, becomes its child and is caught.
"""

from __future__ import annotations

import ctypes
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from .bench_files import generators
from .robustness import children, digest

SIZE_MB: Final = 66
"""Over 64 MiB, and over the size from which a file is read by worker processes."""
LIMIT: Final = 90.0
"""Seconds one run may take before it counts as a hung one."""
INTERRUPTED: Final = "sessionfix: error: interrupted\n"
REPAIRED_BEFORE: Final = re.compile(
    r"sessionfix: warning: \S+: repaired (before|as) the run stopped.*\n"
)
LONG_AGO: Final = 1_700_000_000
"""An mtime outside any quiescence window."""
UUID: Final = re.compile(rb'"[0-9a-f]{8}(-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")')
PR_SET_CHILD_SUBREAPER: Final = 36

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="worker processes are counted through /proc"
)


@dataclass(frozen=True)
class Outcome:
    code: int
    err: str


@pytest.fixture(scope="module")
def big_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("big") / "session.jsonl"
    generators().generate(path, SIZE_MB)  # a realistic pi session with planted defects
    os.utime(path, (LONG_AGO, LONG_AGO))
    yield path
    # pytest keeps the last runs' temp dirs: do not leave the file behind in each.
    shutil.rmtree(path.parent, ignore_errors=True)


_KEPT: set[int] = set()
"""Children this process had when a test began: a real client's server, started once per
test run, is none of a run's leftovers."""


@pytest.fixture
def subreaper() -> Iterator[None]:
    """Make this process the one orphaned descendants of its children are given to."""
    _KEPT.update(children())
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    assert prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield
    finally:
        prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        _reap_leftovers()


def _reap_leftovers() -> list[int]:
    """Kill and reap any child of this process that a run left behind (a worker)."""
    leftovers = sorted(children() - _KEPT)
    for pid in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    return leftovers


def _workers_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def run(
    args: list[str], cwd: Path, *, interrupt: int | None = None, rng: random.Random | None = None
) -> Outcome:
    """One `sessionfix` process. With `interrupt`, the signal is sent as soon as it has
    started its workers (plus a random pause), to it alone or (like a terminal) to its
    whole process group. Asserts that no process of the run outlives it."""
    command = [sys.executable, "-m", "sessionfix", *args]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        if interrupt is not None:
            assert rng is not None
            deadline = time.monotonic() + LIMIT
            while process.poll() is None and not _workers_of(process.pid):
                assert time.monotonic() < deadline, f"{args}: no worker started"
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.25))
            if process.poll() is None:
                if rng.random() < 0.5:
                    os.kill(process.pid, interrupt)
                else:
                    os.killpg(process.pid, interrupt)
        try:
            _, err = process.communicate(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{args}: hung (no exit within {LIMIT:g}s)")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    leftovers = _reap_leftovers()
    assert not leftovers, f"{args}: {len(leftovers)} worker process(es) outlived the run"
    return Outcome(process.returncode, err.decode("utf-8", "replace"))


def assert_clean(outcome: Outcome, args: list[str]) -> None:
    """A run that was not interrupted: exit 0 or 1 and, with -q, nothing on stderr."""
    assert outcome.code in (0, 1), f"{args}: exit {outcome.code}\n{outcome.err[-2000:]}"
    assert outcome.err == "", f"{args}: unexpected stderr\n{outcome.err[-2000:]}"


def assert_interrupted(outcome: Outcome, args: list[str]) -> None:
    """An interrupted run ends with the one line, exit 2, after naming a file it had
    repaired by then; or, when the signal came too late to matter, as a clean run."""
    if outcome.code == 2:
        err = REPAIRED_BEFORE.sub("", outcome.err)
        assert err == INTERRUPTED, f"{args}: stderr\n{outcome.err[-2000:]}"
    else:
        assert_clean(outcome, args)


def leftover_files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def exercise(source: Path, plan: list[str], tmp_path: Path, rng: random.Random) -> None:
    """The runs of `plan`, in order, over `source` (which no run changes)."""
    work = tmp_path / "work"
    work.mkdir()
    folder = tmp_path / "folder"
    folder.mkdir()
    for copy in range(3):
        os.link(source, folder / f"s{copy}.jsonl")
    out = work / "out.jsonl"
    reference = run(["repair", "-q", "--jobs", "1", "-o", str(out), str(source)], work)
    assert_clean(reference, ["repair", "--jobs", "1"])
    repaired = digest(out)
    original = digest(source)
    out.unlink()

    for number, kind in enumerate(plan):
        jobs = ["--jobs", "2"] if number % 4 else []
        target = source
        if kind.endswith("in-place"):
            target = work / "session.jsonl"
            shutil.copyfile(source, target)
            os.utime(target, (LONG_AGO, LONG_AGO))
        if kind.endswith("scan"):
            args = ["scan", "-q", *jobs, str(target)]
        elif kind == "check":
            args = ["check", "-q", *jobs, str(target)]
        elif kind == "scan-folder":
            args = ["scan", "-q", "--jobs", "2", str(folder)]
        elif kind.endswith("repair-o"):
            args = ["repair", "-q", *jobs, "-o", str(out), str(target)]
        else:
            args = ["repair", "-q", *jobs, "--in-place", "--quiescence", "0", str(target)]
        label = [kind, *args[:-1]]

        interrupt = rng.choice([signal.SIGINT, signal.SIGTERM])
        if kind.startswith("interrupt"):
            assert_interrupted(run(args, work, interrupt=interrupt, rng=rng), label)
        else:
            assert_clean(run(args, work), label)

        if kind.endswith("repair-o") and out.exists():
            assert digest(out) == repaired, f"{label}: the repair differs"
            out.unlink()
        if kind.endswith("in-place"):
            backups = [name for name in os.listdir(work) if ".sessionfix-bak-" in name]
            now = digest(target)
            assert now in (original, repaired), f"{label}: neither kept nor repaired"
            if now == original and repaired != original:
                assert kind.startswith("interrupt"), f"{label}: not repaired"
            assert len(backups) == (now != original), f"{label}: backups {backups}"
            for name in backups:
                assert digest(work / name) == original, f"{label}: the backup is not the original"
                (work / name).unlink()
            target.unlink()
        assert leftover_files(work) == [], f"{label}: files left behind"
    assert digest(source) == original


def test_parallel_runs_over_a_pi_session(
    big_session: Path, tmp_path: Path, subreaper: None
) -> None:
    """50 runs over a 66 MiB pi session read by two workers: scans and checks of the file
    and of a folder holding it three times, repairs to a file and in place, and runs
    interrupted by SIGINT or SIGTERM during the read."""
    plan = (
        ["scan"] * 10
        + ["check"] * 8
        + ["scan-folder"] * 3
        + ["repair-o"] * 10
        + ["in-place"] * 4
        + ["interrupt-scan"] * 6
        + ["interrupt-repair-o"] * 6
        + ["interrupt-in-place"] * 3
    )
    rng = random.Random(20260724)
    rng.shuffle(plan)
    exercise(big_session, plan, tmp_path, rng)


@pytest.fixture(scope="module")
def big_claude_session(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real Claude Code session repeated past 64 MiB, each copy with uuids of its own."""
    sample = (corpus / "claude" / "entireio-cli" / "44-785715c3f5-2.full.jsonl").read_bytes()
    path = tmp_path_factory.mktemp("claude") / "session.jsonl"
    with open(path, "wb") as handle:
        for copy in range(-(-(SIZE_MB << 20) // len(sample))):
            handle.write(UUID.sub(b'"%08x\\1' % copy, sample))
    os.utime(path, (LONG_AGO, LONG_AGO))
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


def test_parallel_runs_over_a_claude_session(
    big_claude_session: Path, tmp_path: Path, subreaper: None
) -> None:
    """The same over a Claude Code session (records indexed without ids)."""
    plan = ["scan", "check", "repair-o", "repair-o", "in-place", "interrupt-scan"] * 2
    plan += ["interrupt-repair-o", "interrupt-in-place"]
    rng = random.Random(20260725)
    rng.shuffle(plan)
    exercise(big_claude_session, plan, tmp_path, rng)


def test_many_small_files_with_jobs(big_session: Path, tmp_path: Path, subreaper: None) -> None:
    """`scan DIR --jobs 2` over 200 sessions of 2 MiB: the files are spread over two
    workers, each of which reads its files alone (no worker starts workers of its own);
    the scan does not hang and leaves none behind, also when interrupted."""
    with open(big_session, "rb") as handle:
        head = handle.read(2 << 20)
    small = tmp_path / "small.jsonl"
    small.write_bytes(head[: head.rfind(b"\n") + 1])
    folder = tmp_path / "sessions"
    folder.mkdir()
    for number in range(200):
        os.link(small, folder / f"s{number}.jsonl")
    args = ["scan", "-q", "--jobs", "2", str(folder)]
    process = subprocess.Popen(
        [sys.executable, "-m", "sessionfix", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    workers: set[int] = set()
    nested = False
    deadline = time.monotonic() + LIMIT
    while process.poll() is None:
        now = _workers_of(process.pid)
        workers.update(now)
        nested = nested or any(_workers_of(worker) for worker in now)
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"{args}: hung (no exit within {LIMIT:g}s)")
        time.sleep(0.005)
    assert process.stderr is not None
    assert_clean(Outcome(process.returncode, process.stderr.read().decode()), args)
    assert 1 <= len(workers) <= 2, f"{len(workers)} workers for --jobs 2"
    assert not nested, "a worker started workers to read a 2 MiB file"
    assert _reap_leftovers() == []
    rng = random.Random(7)
    for interrupt in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
        assert_interrupted(run(args, tmp_path, interrupt=interrupt, rng=rng), args)
