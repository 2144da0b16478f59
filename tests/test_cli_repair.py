"""`sessionfix repair` through typer's CliRunner and `main(argv)`: exit codes, streams,
the diff report, the written files and the backups."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sessionfix import Settings
from sessionfix.cli import app, main

from .conftest import FIXTURES

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
CLEAN = FIXTURES / "SF008-trap-clean-file" / "input.jsonl"
CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
GLUED = FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl"
MISSING_RESULT = FIXTURES / "SF402-missing-result-in-context" / "input.jsonl"
LONG_AGO = 1_700_000_000


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


def _at_rest(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    os.utime(target, (LONG_AGO, LONG_AGO))
    return target


def test_diff_of_a_file_with_problems_prints_a_diff_and_exits_one(tmp_path: Path) -> None:
    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    before = session.read_bytes()
    result = run("repair", "--diff", session)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"--- a/{session}\n+++ b/{session}\n@@ -")
    removed = [line for line in result.stdout.splitlines() if line.startswith("-{")]
    assert len(removed) == 3  # two clones, and the child re-linked past them
    assert "Would fix 2 problems in 1 file." in result.stderr
    assert session.read_bytes() == before


def test_diff_shows_an_inserted_record_after_its_unchanged_anchor(tmp_path: Path) -> None:
    session = _at_rest(MISSING_RESULT, tmp_path / "s.jsonl")
    anchor = session.read_bytes().split(b"\n")[3].decode()
    result = run("repair", "--diff", "--unsafe-fixes", "--diff-full-lines", session)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    at = lines.index(" " + anchor)
    assert lines[at + 1].startswith('+{"type":"message"')
    assert '"role":"toolResult"' in lines[at + 1]
    assert [line[0] for line in lines[at + 1 : at + 4]] == ["+", "-", "+"]
    assert lines[2] == "@@ -1,6 +1,7 @@"


def test_diff_of_a_clean_file_prints_nothing_and_exits_zero(tmp_path: Path) -> None:
    session = _at_rest(CLEAN, tmp_path / "s.jsonl")
    result = run("repair", "--diff", session)
    assert result.exit_code == 0
    assert result.stdout == ""


def test_diff_shortens_long_lines_for_a_terminal_unless_asked(tmp_path: Path) -> None:
    """On a terminal, lines over 4 KiB are cut (unless --diff-full-lines) and escaped;
    into a pipe or a file the diff holds the exact lines, so that `patch` can apply it."""
    from sessionfix.repair.preview import preview_repair
    from sessionfix.report.diff import write_diff

    lines = CLONES.read_bytes().split(b"\n")
    padded = lines[1].replace(b'"timestamp":"', b'"pad":"' + b"x" * 6000 + b'","timestamp":"', 1)
    session = tmp_path / "s.jsonl"
    session.write_bytes(b"\n".join([lines[0], padded, *lines[2:]]))
    os.utime(session, (LONG_AGO, LONG_AGO))
    preview = preview_repair(session, Settings(quiescence=0.0))
    try:
        shown = {}
        for full in (False, True):
            out = io.BytesIO()
            write_diff(preview, out, "s.jsonl", context=5, full_lines=full)
            shown[full] = out.getvalue().decode()
    finally:
        preview.close()
    assert "… (+" in shown[False]
    assert "x" * 6000 not in shown[False]
    assert "x" * 6000 in shown[True]
    piped = run("repair", "--diff", "--diff-context", "5", session)
    assert "x" * 6000 in piped.stdout
    assert "… (+" not in piped.stdout


def test_diff_as_json_lists_the_planned_edits(tmp_path: Path) -> None:
    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    result = run("repair", "--diff", "--output-format", "json", session)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [d["code"] for d in data] == ["SF201", "SF201"]
    assert all(d["fix"]["edits"][0]["op"] == "delete" for d in data)


def test_in_place_keeps_a_byte_identical_backup(tmp_path: Path) -> None:
    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    os.chmod(session, 0o640)
    before = session.read_bytes()
    result = run("repair", "--in-place", session)
    assert result.exit_code == 0, result.stderr
    backups = sorted(tmp_path.glob("s.jsonl.sessionfix-bak-*"))
    assert len(backups) == 1
    assert backups[0].read_bytes() == before
    assert session.read_bytes() == (CLONES.parent / "repaired.jsonl").read_bytes()
    assert (session.stat().st_mode & 0o777) == 0o640
    assert "Found 2 problems (2 fixed, 0 remaining)." in result.stdout
    assert "Repaired 1 file: 2 entries dropped" in result.stderr
    assert "backup:" in result.stderr
    assert not list(tmp_path.glob(".*sessionfix-tmp*"))


def test_in_place_refuses_a_file_that_changed_recently(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    shutil.copyfile(CLONES, session)
    before = session.read_bytes()
    result = run("repair", "--in-place", session)
    assert result.exit_code == 2
    assert "within the quiescence window" in result.stderr
    assert session.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    assert run("repair", "--in-place", "--quiescence", "0", session).exit_code == 0


def test_in_place_refuses_a_live_openclaw_lock(tmp_path: Path) -> None:
    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    lock = tmp_path / "s.jsonl.lock"
    holder = os.getppid()
    lock.write_text(json.dumps({"pid": holder, "createdAt": "2099-01-01T00:00:00.000Z"}))
    result = run("repair", "--in-place", session)
    assert result.exit_code == 2
    assert f"locked by pid {holder}" in result.stderr
    assert session.read_bytes() == CLONES.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl", "s.jsonl.lock"]


def test_output_file_gets_the_repair_and_remaining_problems_are_reported(
    tmp_path: Path,
) -> None:
    session = _at_rest(GLUED, tmp_path / "s.jsonl")
    out = tmp_path / "out.jsonl"
    result = run("repair", session, "-o", out)
    assert out.read_bytes() == (GLUED.parent / "repaired.jsonl").read_bytes()
    assert session.read_bytes() == GLUED.read_bytes()
    assert "fixed" in result.stdout
    assert result.exit_code in (0, 1)


def test_output_dash_writes_the_repair_to_stdout_and_reports_to_stderr(tmp_path: Path) -> None:
    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    result = run("repair", session, "-o", "-")
    assert result.exit_code == 0
    assert result.stdout.encode() == (CLONES.parent / "repaired.jsonl").read_bytes()
    assert "Found 2 problems (2 fixed, 0 remaining)." in result.stderr


def test_exit_non_zero_on_fix(tmp_path: Path) -> None:
    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    assert run("repair", session, "-o", tmp_path / "o.jsonl").exit_code == 0
    result = run("repair", session, "-o", tmp_path / "p.jsonl", "--exit-non-zero-on-fix")
    assert result.exit_code == 1


@pytest.mark.parametrize(
    "args",
    [
        ["repair", "IN"],
        ["repair", "IN", "--diff", "--in-place"],
        ["repair", "IN", "IN", "-o", "OUT"],
        ["repair", "IN", "-o", "IN"],
        ["repair", "IN", "--diff", "--exit-zero", "--exit-non-zero-on-fix"],
    ],
)
def test_usage_errors_exit_two_with_one_line(args: list[str], tmp_path: Path) -> None:
    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    argv = [
        str(session) if a == "IN" else str(tmp_path / "o.jsonl") if a == "OUT" else a for a in args
    ]
    result = run(*argv)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert session.read_bytes() == CLONES.read_bytes()


def test_missing_and_directory_inputs_exit_two(tmp_path: Path) -> None:
    assert main(["repair", str(tmp_path / "nope.jsonl"), "--diff"]) == 2
    assert main(["repair", str(tmp_path), "--in-place"]) == 2


def test_unsafe_fixes_apply_only_when_asked(tmp_path: Path) -> None:
    source = FIXTURES / "SF103-dangling-parent-on-path"
    session = _at_rest(source / "input.jsonl", tmp_path / "s.jsonl")
    safe = run("repair", session, "-o", tmp_path / "safe.jsonl")
    assert (tmp_path / "safe.jsonl").read_bytes() == session.read_bytes()
    assert safe.exit_code == 1
    unsafe = run("repair", session, "-o", tmp_path / "unsafe.jsonl", "--unsafe-fixes")
    expected = (source / "repaired-unsafe.jsonl").read_bytes()
    assert (tmp_path / "unsafe.jsonl").read_bytes() == expected
    assert unsafe.exit_code == 0


def test_output_to_dev_stdout_through_a_pipe(tmp_path: Path) -> None:
    """`-o /dev/stdout` names a pipe here: the repair streams into it."""
    import subprocess
    import sys

    session = _at_rest(CLONES, tmp_path / "s.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "sessionfix", "repair", "-q", "-o", "/dev/stdout", str(session)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (CLONES.parent / "repaired.jsonl").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


LEFT_UNSAFE = FIXTURES / "SF004-claude-nul-run-before-record" / "input.jsonl"
"""Repaired, it still has a finding whose (unsafe) fix has edits."""


@pytest.mark.parametrize("mode", ["--in-place", "-o"])
def test_the_json_report_of_a_repair_reads_the_edits_of_what_is_left(
    tmp_path: Path, mode: str
) -> None:
    """The remaining findings' edits are read from the written file after its temporary
    name is gone."""
    session = _at_rest(LEFT_UNSAFE, tmp_path / "s.jsonl")
    target = (
        ["--in-place", "--quiescence", "0"]
        if mode == "--in-place"
        else ["-o", tmp_path / "o.jsonl"]
    )
    result = run("repair", *target, "--output-format", "json", session)
    assert result.exit_code == 1, result.stderr
    left = json.loads(result.stdout)
    edits = [edit for d in left if d["fix"] is not None for edit in d["fix"]["edits"]]
    assert edits
    assert all(edit["op"] != "replace" or edit["content"] for edit in edits)
    assert not [n for n in os.listdir(tmp_path) if "sessionfix-tmp" in n]


PRETTY_ROLLOUT = FIXTURES / "SF008-codex-pretty-printed-rollout" / "input.jsonl"
COMPACT_ROLLOUT = FIXTURES / "SF008-codex-pretty-printed-rollout" / "repaired.jsonl"


@pytest.mark.parametrize(
    "flags",
    [["--format", "codex", "--unsafe-fixes"], ["--unsafe-fixes"], []],
    ids=["codex-unsafe", "unsafe", "safe"],
)
def test_a_pretty_printed_rollout_is_repaired_into_one_record_a_line(
    tmp_path: Path, flags: list[str]
) -> None:
    """A rollout pretty-printed as a repository committed it: the repair wrote an empty
    file and reported the bytes as saved; now every record comes back, one a line, and
    the figure saved is what the whitespace took."""
    session = _at_rest(PRETTY_ROLLOUT, tmp_path / "rollout.jsonl")
    out = tmp_path / "out.jsonl"
    result = run("repair", *flags, "-o", out, session)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == COMPACT_ROLLOUT.read_bytes()
    compact = COMPACT_ROLLOUT.read_bytes()
    assert len(compact.splitlines()) == 10
    saved = PRETTY_ROLLOUT.stat().st_size - len(compact)
    assert f"{saved} B saved" in result.stderr
