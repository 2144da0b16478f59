"""Many files checked by worker processes: the same reports, output and exit code as one
process gives, in the same order, with unreadable files reported as such."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard
from typer.testing import CliRunner

from sessionfix import Diagnostic, Settings, engine
from sessionfix.cli import app
from sessionfix.containers import HeldSession
from sessionfix.engine import MIN_SHARED_FILES, check_paths, check_run, select_files, shared_files

from .conftest import FIXTURES, ROOT
from .test_workers import no_worker_left  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="worker processes are forked"
)

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
SOURCES = [
    *sorted(FIXTURES.glob("*/input.jsonl")),
    *sorted((ROOT / "examples" / "sessions").glob("*.jsonl")),
]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of sessions of every kind the fixtures have (damaged, foreign, of every
    format), one compressed, plus a file that cannot be read and a folder named like a
    session."""
    root = tmp_path_factory.mktemp("many")
    for number, source in enumerate(SOURCES):
        folder = root / f"{number % 7}"
        folder.mkdir(exist_ok=True)
        name = source.parent.name if source.name == "input.jsonl" else source.stem
        shutil.copyfile(source, folder / f"{number:03d}-{name}.jsonl")
    packed = root / "0" / "packed.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(SOURCES[0].read_bytes()))
    (root / "1" / "broken.jsonl.zst").write_bytes(b"not zstd at all")
    (root / "2" / "folder.jsonl").mkdir()
    return root


def _scan(root: Path, *args: str) -> tuple[int, str, str]:
    outcome = CliRunner().invoke(app, ["scan", "--no-progress", *args, str(root)], env=ENV)
    note = outcome.stderr.rsplit(" in ", 1)[0]  # the elapsed time differs
    return outcome.exit_code, outcome.stdout, note


@pytest.mark.parametrize("output", ["json", "full", "sarif", "concise"])
def test_a_folder_scanned_by_two_workers_reads_as_by_one(sessions: Path, output: str) -> None:
    one = _scan(sessions, "--jobs", "1", "--output-format", output)
    two = _scan(sessions, "--jobs", "2", "--output-format", output)
    assert one == two
    assert one[0] == 2  # the broken compressed file


def test_the_workers_check_the_small_files_and_report_each_in_order(sessions: Path) -> None:
    selection = select_files([sessions], walk=True, sniff=True)
    two = Settings(jobs=2, quiescence=0.0)
    assert len(shared_files(selection.files, two)) == len(selection.files)
    apart = list(check_paths(selection.files, two))
    together = list(check_paths(selection.files, Settings(jobs=1, quiescence=0.0)))
    assert [r.path for r in apart] == selection.files
    assert [(r.filename, r.format, r.error, r.size) for r in apart] == [
        (r.filename, r.format, r.error, r.size) for r in together
    ]
    assert [_plain(r.diagnostics) for r in apart] == [_plain(r.diagnostics) for r in together]
    edits = [
        [(e.op, e.row, e.content, e.byte_range) for e in d.fix.edits]
        for r in apart
        for d in r.diagnostics
        if d.fix is not None
    ]
    assert edits == [
        [(e.op, e.row, e.content, e.byte_range) for e in d.fix.edits]
        for r in together
        for d in r.diagnostics
        if d.fix is not None
    ]
    assert any(r.error for r in apart)


def _plain(diagnostics: list[Diagnostic]) -> list[tuple[Diagnostic, object]]:
    """Each diagnostic without its fix, and the fix's kind and message."""
    return [
        (
            msgspec.structs.replace(d, fix=None),
            None if d.fix is None else (d.fix.applicability, d.fix.message),
        )
        for d in diagnostics
    ]


def test_without_edits_the_fixes_keep_their_kind(sessions: Path) -> None:
    selection = select_files([sessions], walk=True, sniff=True)
    run = check_run(selection, Settings(jobs=2, quiescence=0.0), edits=False)
    fixes = [d.fix for d in run.diagnostics if d.fix is not None]
    assert fixes
    assert all(fix.edits == () for fix in fixes)


@pytest.mark.parametrize("jobs", [1, 2])
def test_without_excerpts_the_findings_are_the_same_less_their_excerpts(
    sessions: Path, jobs: int
) -> None:
    selection = select_files([sessions], walk=True, sniff=True)
    settings = Settings(jobs=jobs, quiescence=0.0)
    shown = check_run(selection, settings).diagnostics
    unread = check_run(selection, settings, excerpts=False).diagnostics
    assert any(d.excerpt for d in shown)
    assert all(d.excerpt is None for d in unread)
    assert _plain([msgspec.structs.replace(d, excerpt=None) for d in shown]) == _plain(unread)


def test_few_files_or_one_job_stay_in_this_process(sessions: Path) -> None:
    files = select_files([sessions], walk=True, sniff=True).files
    assert shared_files(files[: MIN_SHARED_FILES - 1], Settings(jobs=2)) == {}
    assert shared_files(files, Settings(jobs=1)) == {}
    assert shared_files([*files, files[0]], Settings(jobs=2)) == {}


def test_a_large_file_is_read_here_in_parallel(tmp_path: Path) -> None:
    """A file large enough for a parallel read of its own is not given to a worker."""
    files = [tmp_path / f"{n}.jsonl" for n in range(MIN_SHARED_FILES + 1)]
    for path in files:
        shutil.copyfile(SOURCES[0], path)
    with open(files[0], "r+b") as handle:
        os.truncate(handle.fileno(), 64 << 20)
    shared = shared_files(files, Settings(jobs=2))
    assert files[0] not in shared
    assert len(shared) == MIN_SHARED_FILES


def _first_of(sessions: Path) -> str:
    return sorted(p.name for p in (sessions / "0").glob("*.jsonl"))[0]


@pytest.mark.usefixtures("no_worker_left")
def test_an_internal_error_in_one_file_ends_the_run_as_in_one_process(
    sessions: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine.check_held
    name = _first_of(sessions)

    def failing(held: HeldSession, *args: Any, **kwargs: Any) -> Any:
        if held.container.name == name:
            raise ValueError(f"cannot check {held.container.name}")
        return real(held, *args, **kwargs)

    monkeypatch.setattr(engine, "check_held", failing)
    one = _scan(sessions, "--jobs", "1")
    two = _scan(sessions, "--jobs", "2")
    assert one == two
    assert one[0] == 2
    assert f"internal error: ValueError: cannot check {name}" in one[2]


@pytest.mark.usefixtures("no_worker_left")
def test_a_worker_that_dies_ends_the_run(sessions: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = engine.check_held
    name = _first_of(sessions)

    def dying(held: HeldSession, *args: Any, **kwargs: Any) -> Any:
        if held.container.name == name:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(held, *args, **kwargs)

    monkeypatch.setattr(engine, "check_held", dying)
    code, _, note = _scan(sessions, "--jobs", "2")
    assert code == 2
    assert "internal error: WorkerDied" in note


def test_rules_a_format_cannot_run_are_said_once_as_in_one_process(sessions: Path) -> None:
    selected = ("--select", "SF201,SF301,SF401,SF501,SF601")
    one = _scan(sessions, "--jobs", "1", *selected)
    assert _scan(sessions, "--jobs", "2", *selected) == one
    assert "does not apply to claude sessions" in one[2]
