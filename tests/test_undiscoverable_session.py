"""SF702 undiscoverable-session's fixes on disk: a stale or broken `sessions-index.json`
moved aside by an in-place repair only, with every byte of it kept; a buried title
copied to the end with every other line as it was. (What Claude Code's own session list
makes of the sessions is `test_claude_listing.py`; the reports are the `SF702-*`
fixtures.)"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sessionfix import Settings, check_file
from sessionfix.cli import app
from sessionfix.repair.targets import repair_in_place, repair_to, repair_to_stream
from sessionfix.safety.writing import set_aside

from .conftest import FIXTURES
from .test_fixtures import place_case

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
CODE: Final = "SF702"
INDEX: Final = "sessions-index.json"
LEFT_OUT: Final = FIXTURES / f"{CODE}-claude-session-left-out-of-the-index"
TRUNCATED: Final = FIXTURES / f"{CODE}-claude-truncated-index"
UNSAFE: Final = Settings(quiescence=0.0, unsafe_fixes=True)
SESSION: Final = "3f0c5d2e-8a41-4b7e-9c15-6d2e7f8a9b01"


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


def backups_of(index: Path) -> list[Path]:
    return sorted(index.parent.glob(f"{index.name}.sessionfix-bak-*"))


def session_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.glob("*.jsonl")}


def sf702(session: Path) -> list[str]:
    return [d.message for d in check_file(session, Settings(quiescence=0.0)) if d.code == CODE]


def test_an_unsafe_in_place_repair_moves_a_stale_index_aside(tmp_path: Path) -> None:
    session = place_case(LEFT_OUT, tmp_path / "project")
    index = session.parent / INDEX
    held = index.read_bytes()
    sessions = session_bytes(session.parent)
    safe = run("repair", "--in-place", "--quiescence", "0", session)
    assert safe.exit_code == 1
    assert index.read_bytes() == held
    result = run("repair", "--in-place", "--unsafe-fixes", "--quiescence", "0", session)
    assert result.exit_code == 0, result.stderr
    assert not index.exists()
    (backup,) = backups_of(index)
    assert backup.read_bytes() == held
    assert session_bytes(session.parent) == sessions
    assert result.stdout == "Found 1 problem (1 fixed, 0 remaining).\n"
    assert result.stderr == f"Moved aside: {index} (kept as {backup.name}).\n"
    assert sf702(session) == []


def test_one_run_over_every_session_of_the_folder_moves_the_index_once(tmp_path: Path) -> None:
    """Both sessions are left out of a truncated index; the first one's repair moves it,
    the second finds it gone."""
    first = place_case(TRUNCATED, tmp_path / "project")
    index = first.parent / INDEX
    held = index.read_bytes()
    second = first.parent / "7a9e1f3c-2b4d-4e6f-8a0c-1d3e5f7a9b02.jsonl"
    result = run("repair", "--in-place", "--unsafe-fixes", "--quiescence", "0", first, second)
    assert result.exit_code == 0, result.stderr
    (backup,) = backups_of(index)
    assert backup.read_bytes() == held
    assert not index.exists()


def test_a_repair_to_another_file_leaves_the_index_and_reports_it(tmp_path: Path) -> None:
    session = place_case(LEFT_OUT, tmp_path / "project")
    index = session.parent / INDEX
    held = index.read_bytes()
    result = repair_to(session, tmp_path / "copy.jsonl", UNSAFE)
    assert index.read_bytes() == held
    assert backups_of(index) == []
    assert [d.code for d in result.applied] == []
    assert [d.code for d in result.remaining] == [CODE]


def test_a_repair_to_a_stream_leaves_the_index_and_reports_it(tmp_path: Path) -> None:
    """The copy is checked as the session reads, beside the index: the index finding is
    the file's to remain, not a fix left for the written bytes (which would fail the
    repair as one that changes nothing)."""
    session = place_case(LEFT_OUT, tmp_path / "project")
    data = session.read_bytes()
    session.write_bytes(data.removesuffix(b"\n"))  # and a fix of its bytes (SF009)
    index = session.parent / INDEX
    held = index.read_bytes()
    stream = io.BytesIO()
    result = repair_to_stream(session, stream, UNSAFE)
    assert stream.getvalue() == data
    assert index.read_bytes() == held
    assert [d.code for d in result.applied] == ["SF009"]
    assert [d.code for d in result.remaining] == [CODE]


def test_the_index_moved_aside_by_another_run_is_no_error(tmp_path: Path) -> None:
    session = place_case(LEFT_OUT, tmp_path / "project")
    index = session.parent / INDEX
    moved = set_aside(index)
    assert moved is not None
    assert not index.exists()
    assert set_aside(index) is None
    result = repair_in_place(session, UNSAFE)
    assert not result.changed
    assert result.set_aside == []
    assert backups_of(index) == [moved]


FILL: Final = st.integers(min_value=0, max_value=140_000)
TITLE: Final = "release notes"


def _line(record: dict[str, object]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _message(number: int, role: str, text: str) -> bytes:
    uuid = f"3f0c5d2e-0000-4000-8000-{number:012d}"
    parent = None if number == 1 else f"3f0c5d2e-0000-4000-8000-{number - 1:012d}"
    content: object = text if role == "user" else [{"type": "text", "text": text}]
    return _line(
        {
            "parentUuid": parent,
            "type": role,
            "message": {"role": role, "content": content},
            "uuid": uuid,
            "sessionId": SESSION,
        }
    )


def titled_session(before: int, after: int, *, older: bool = False) -> tuple[bytes, bytes]:
    """A session renamed once (twice with `older`) between two answers of `before` and
    `after` bytes of text, and the line of its newest title."""
    title = _line({"type": "custom-title", "customTitle": TITLE, "sessionId": SESSION})
    head = _message(1, "user", "fix the tests")
    if older:
        head += _line({"type": "custom-title", "customTitle": "tests", "sessionId": SESSION})
    data = (
        head
        + _message(2, "assistant", "a" * before)
        + title
        + _message(3, "user", "go on")
        + _message(4, "assistant", "b" * after)
    )
    return data, title


def title_at_edge(*, head_end: int | None = None, tail_start: int | None = None) -> bytes:
    """A session whose title line ends (before its newline) at byte `head_end`, or
    starts `tail_start` bytes before the end of the file."""
    empty, title = titled_session(0, 0)
    start = empty.index(title)
    if head_end is not None:
        return titled_session(head_end - (start + len(title) - 1), 70_000)[0]
    assert tail_start is not None
    return titled_session(70_000, tail_start - (len(empty) - start))[0]


@settings(max_examples=25, deadline=None)
@given(before=FILL, after=FILL, older=st.booleans())
def test_the_title_fix_appends_a_copy_and_changes_no_other_line(
    tmp_path_factory: pytest.TempPathFactory, before: int, after: int, older: bool
) -> None:
    """Wherever the title lies, SF702 reports it exactly when it lies more than 64 KiB
    from both ends; its fix alone appends a copy of the line and leaves every line of
    the file as it was, and the result has no SF702."""
    folder = tmp_path_factory.mktemp("session")
    data, title = titled_session(before, after, older=older)
    session = folder / f"{SESSION}.jsonl"
    session.write_bytes(data)
    start = data.index(title)
    buried = start + len(title) - 1 > 65536 and start < len(data) - 65536
    assert bool(sf702(session)) == buried
    only = Settings(quiescence=0.0, unsafe_fixes=True, select=(CODE,))
    output = folder / "out.jsonl"
    result = repair_to(session, output, only)
    assert (output.read_bytes() if output.exists() else data) == (data + title if buried else data)
    assert result.remaining == []


def test_a_folder_named_like_the_index_is_no_index(tmp_path: Path) -> None:
    """On the folder's first session, which reports an index it cannot read."""
    session = place_case(TRUNCATED, tmp_path / "project")
    index = session.parent / INDEX
    index.unlink()
    index.mkdir()
    assert sf702(session) == []
    result = repair_in_place(session, UNSAFE)
    assert not result.changed
    assert index.is_dir()
