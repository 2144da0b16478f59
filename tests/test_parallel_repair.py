"""Many files repaired in place by worker processes: the same report, exit code, written
files and backups as one process gives; and, however the run ends (an interrupt, a
worker killed), every file holds its original or its whole repair with its backup, no
temp file is left, and every file changed is named in what the run prints."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import zstandard
from typer.testing import CliRunner

from sessionfix import Settings
from sessionfix.cli import app
from sessionfix.engine import MIN_SHARED_FILES, shared_files
from sessionfix.repair import runs
from sessionfix.safety import writing

from .conftest import FIXTURES
from .test_parallel_stress import (
    _reap_leftovers,
    _workers_of,
    subreaper,  # noqa: F401  (a fixture)
)
from .test_workers import no_worker_left  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="worker processes are forked"
)

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
SOURCES: Final = sorted(FIXTURES.glob("*/input.jsonl"))
LONG_AGO: Final = 1_700_000_000
BACKUP_STAMP: Final = re.compile(r"\.sessionfix-bak-\d{8}T\d{6}Z(-\d+)?")
"""The time in a backup's name (two runs take theirs in different seconds)."""
QUIET_RUN: Final = ("--quiescence", "0", "--no-progress", "--jobs", "2")
LIMIT: Final = 120.0
"""Seconds an interrupted run may take before it counts as hung."""


def _sessions(folder: Path) -> list[str]:
    """Every fixture input as a session at rest in `folder`, a symbolic link (refused,
    its findings still reported) and a compressed file that does not decompress (an
    error line); their names, in order."""
    folder.mkdir()
    for number, source in enumerate(SOURCES):
        shutil.copyfile(source, folder / f"{number:03d}-{source.parent.name}.jsonl")
    (folder / "100-linked.jsonl").symlink_to(f"000-{SOURCES[0].parent.name}.jsonl")
    (folder / "200-broken.jsonl.zst").write_bytes(b"not zstd at all")
    packed = zstandard.ZstdCompressor().compress(SOURCES[1].read_bytes())
    (folder / "201-packed.jsonl.zst").write_bytes(packed)
    for name in os.listdir(folder):
        os.utime(folder / name, (LONG_AGO, LONG_AGO), follow_symlinks=False)
    return sorted(os.listdir(folder))


def _listing(folder: Path) -> dict[str, bytes]:
    """Every file in `folder` by its name (backups without their time) and its bytes."""
    found: dict[str, bytes] = {}
    for name in sorted(os.listdir(folder)):
        path = folder / name
        found[BACKUP_STAMP.sub(".sessionfix-bak-", name)] = (
            b"-> " + os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        )
    return found


def _repair(
    folder: Path, names: list[str], monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str, str]:
    """`repair --in-place` of `names`, given relative to `folder`, so that two folders
    print the same; backups' times and the folder's own path left out."""
    monkeypatch.chdir(folder)
    outcome = CliRunner().invoke(
        app,
        ["repair", "--in-place", "--no-progress", "--quiescence", "0", *args, *names],
        env=ENV,
    )
    monkeypatch.chdir(folder.parent)

    def plain(text: str) -> str:
        return BACKUP_STAMP.sub(".sessionfix-bak-", text).replace(str(folder), "<folder>")

    return outcome.exit_code, plain(outcome.stdout), plain(outcome.stderr)


@pytest.mark.usefixtures("no_worker_left")
@pytest.mark.parametrize(
    ("output", "extra"),
    [("json", ()), ("full", ()), ("concise", ("--unsafe-fixes",)), ("json", ("--no-backup",))],
)
def test_files_repaired_by_two_workers_as_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, extra: tuple[str, ...]
) -> None:
    names = _sessions(tmp_path / "one")
    _sessions(tmp_path / "two")
    assert len(shared_files([tmp_path / "two" / n for n in names], Settings(jobs=2))) >= (
        MIN_SHARED_FILES
    )
    args = ("--output-format", output, *extra)
    one = _repair(tmp_path / "one", names, monkeypatch, "--jobs", "1", *args)
    two = _repair(tmp_path / "two", names, monkeypatch, "--jobs", "2", *args)
    assert one == two
    code, _, err = one
    assert code == 2
    assert "200-broken.jsonl.zst: " in err
    assert "100-linked.jsonl: is a symbolic link" in err
    assert "Repaired " in err
    assert _listing(tmp_path / "one") == _listing(tmp_path / "two")
    backups = [n for n in os.listdir(tmp_path / "two") if ".sessionfix-bak-" in n]
    assert bool(backups) == ("--no-backup" not in extra)


@pytest.mark.usefixtures("no_worker_left")
def test_a_killed_worker_ends_the_run_and_leaves_the_rest_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker SIGKILLed as it starts a file: exit 2, that file named, no worker left;
    every file is its original, or its repair with its backup and named."""
    names = _sessions(tmp_path / "s")
    before = _listing(tmp_path / "s")
    victim = names[20]
    real = runs.repair_in_place

    def killed(path: Path, *args: Any, **kwargs: Any) -> Any:
        if Path(path).name == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runs, "repair_in_place", killed)
    code, out, err = _repair(tmp_path / "s", names, monkeypatch, "--jobs", "2", "-q")
    assert code == 2
    assert f"sessionfix: error: {victim}: the worker process repairing it died" in err
    after = _listing(tmp_path / "s")
    assert after[victim] == before[victim]
    _assert_each_kept_or_repaired(tmp_path / "s", before, after, out + err)
    assert len([n for n in names if n.endswith(".jsonl") and after[n] != before[n]]) < len(
        [n for n in names if n.endswith(".jsonl")]
    )


def _assert_each_kept_or_repaired(
    folder: Path,
    before: dict[str, bytes],
    after: dict[str, bytes],
    printed: str,
    repaired: dict[str, bytes] | None = None,
) -> None:
    """Each session is its original, or (named in `printed`) its repair (`repaired`'s
    when given) with one backup holding the original; nothing else is in `folder`."""
    backups = {n for n in after if ".sessionfix-bak-" in n}
    sessions = set(after) - backups
    for name, original in before.items():
        if after[name] == original:
            continue
        assert name in printed, f"{name} changed but is not named"
        if repaired is not None:
            assert after[name] == repaired[name], f"{name}: neither kept nor repaired"
        kept = [n for n in backups if n.startswith(name + ".sessionfix-bak-")]
        assert len(kept) == 1, f"{name}: backups {kept}"
        assert after[kept[0]] == original, f"{name}: the backup is not the original"
        backups.discard(kept[0])
    assert backups == set(), "backups of unchanged files"
    assert sessions == set(before), "files left behind"
    assert not [n for n in os.listdir(folder) if "sessionfix-tmp" in n]


def _started(process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + LIMIT
    while process.poll() is None and not _workers_of(process.pid):
        assert time.monotonic() < deadline, "no worker started"
        time.sleep(0.002)


@pytest.mark.parametrize(("interrupt", "seed"), [("SIGINT", 1), ("SIGINT", 2), ("SIGTERM", 3)])
@pytest.mark.usefixtures("subreaper")
def test_an_interrupted_run_leaves_each_file_whole_and_names_the_changed(
    tmp_path: Path, interrupt: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal goes to the whole process group, as a terminal's Ctrl-C does, at
    moments from the workers' start to the end of the run: the run ends with the one
    error line and exit 2 (or, too late to matter, as a whole run), every session is its
    original or the same repair a run of one process writes, with its backup, and each
    changed one is named."""
    names = _sessions(tmp_path / "reference")
    _repair(tmp_path / "reference", names, monkeypatch, "--jobs", "1")
    repaired = _listing(tmp_path / "reference")
    rng = random.Random(seed)
    for attempt in range(3):
        folder = tmp_path / f"run{attempt}"
        _sessions(folder)
        before = _listing(folder)
        process = subprocess.Popen(
            [sys.executable, "-m", "sessionfix", "repair", "--in-place", *QUIET_RUN, *names],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _started(process)
            time.sleep(rng.uniform(0, 0.3) * attempt)
            if process.poll() is None:
                os.killpg(process.pid, getattr(signal, interrupt))
            out, err = process.communicate(timeout=LIMIT)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        assert _reap_leftovers() == [], "a worker outlived the run"
        printed = out.decode() + err.decode()
        after = _listing(folder)
        if process.returncode == 2 and err.decode().endswith("sessionfix: error: interrupted\n"):
            _assert_each_kept_or_repaired(folder, before, after, printed, repaired)
        else:
            assert process.returncode == 2, printed  # the broken file
            assert _listing(folder).keys() == repaired.keys()
            assert all(after[n] == repaired[n] for n in names if n.endswith(".jsonl"))


def test_an_interrupt_right_after_a_swap_here_still_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one process, an interrupt that lands as a file takes its repair (no result
    made yet): the files repaired before it and that one are all named."""
    names = [n for n in _sessions(tmp_path / "s") if n.endswith(".jsonl")][:4]
    before = _listing(tmp_path / "s")
    real = writing.replace_file
    swaps: list[Path] = []

    def interrupted(original: Any, *args: Any, **kwargs: Any) -> Any:
        backup = real(original, *args, **kwargs)
        swaps.append(original.path)
        if len(swaps) == 2:
            raise KeyboardInterrupt
        return backup

    monkeypatch.setattr(writing, "replace_file", interrupted)
    code, out, err = _repair(tmp_path / "s", names, monkeypatch, "--jobs", "1", "-q")
    assert code == 2
    assert err.endswith("sessionfix: error: interrupted\n")
    assert f"{swaps[1].name}: repaired as the run stopped" in err
    after = _listing(tmp_path / "s")
    _assert_each_kept_or_repaired(tmp_path / "s", before, after, out + err)
    assert sum(after[n] != before[n] for n in names) == 2


def test_the_library_raises_what_stopped_an_in_place_run_unless_asked_to_keep_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`repair_paths` raises an interrupt as any call does; `keep_stopped` hands back the
    run with it, the files finished before it included, for a report first."""
    folder = tmp_path / "s"
    names = [n for n in _sessions(folder) if n.endswith(".jsonl")][:3]
    real = runs.repair_in_place
    calls: list[Path] = []

    def interrupted(path: Path, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runs, "repair_in_place", interrupted)
    settings = Settings(quiescence=0.0, jobs=1)
    with pytest.raises(KeyboardInterrupt):
        runs.repair_paths([folder / n for n in names], settings, in_place=True)
    calls.clear()
    run = runs.repair_paths([folder / n for n in names], settings, in_place=True, keep_stopped=True)
    assert isinstance(run.stopped, KeyboardInterrupt)
    assert [r.path for r in run.results] == [folder / names[0]]


@pytest.fixture
def long_lived_child() -> Iterator[subprocess.Popen[bytes]]:
    """A child of the test process started before the test (as a real client's server is,
    once per test run)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()


def test_a_process_started_before_the_test_is_no_run_s_leftover(
    long_lived_child: subprocess.Popen[bytes], request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("subreaper")
    assert _reap_leftovers() == []
    assert long_lived_child.poll() is None
