"""A report is written from the diagnostics alone: the session is not opened again."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from sessionfix import check_file
from sessionfix.cli import app
from sessionfix.escapes import escape, escape_surrogates
from sessionfix.report.render import OutputFormat, write_report
from sessionfix.rules.base import Counted

from .conftest import FIXTURES

GLUED = FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl"


def test_the_excerpt_travels_with_the_diagnostic(tmp_path: Path) -> None:
    session = tmp_path / "glued.jsonl"
    shutil.copy(GLUED, session)
    diagnostics = check_file(session)
    assert diagnostics
    assert all(d.excerpt for d in diagnostics if d.span is not None)
    before = io.BytesIO()
    write_report(diagnostics, before, OutputFormat.FULL)
    session.unlink()
    after = io.BytesIO()
    write_report(diagnostics, after, OutputFormat.FULL)
    assert after.getvalue() == before.getvalue()
    assert b" | " in after.getvalue()


def test_an_excerpt_is_bounded_and_on_one_line(tmp_path: Path) -> None:
    session = tmp_path / "long.jsonl"
    session.write_bytes(b'{"type":"message","text":"' + b"x\\n" * 1000 + b'"\n\n')
    for diagnostic in check_file(session):
        if diagnostic.excerpt is not None:
            assert "\n" not in diagnostic.excerpt
            assert len(diagnostic.excerpt) <= 161


def test_the_final_newline_fix_is_one_appended_byte(tmp_path: Path) -> None:
    """SF009's JSON edit appends "\\n" to the last line instead of carrying the whole
    record again; applied to the input it gives a file ending in a newline."""
    import json

    source = FIXTURES / "SF009-no-final-newline" / "input.jsonl"
    session = tmp_path / "session.jsonl"
    shutil.copy(source, session)
    diagnostics = [d for d in check_file(session) if d.code == "SF009"]
    assert len(diagnostics) == 1
    out = io.BytesIO()
    write_report(diagnostics, out, OutputFormat.JSON)
    [edit] = json.loads(out.getvalue())[0]["fix"]["edits"]
    original = session.read_bytes()
    assert not original.endswith(b"\n")
    assert edit == {"op": "append", "row": original.count(b"\n") + 1, "content": "\n"}


@pytest.mark.parametrize(
    ("what", "one", "two"),
    [
        (Counted.STALE_READS_PRUNED, "1 stale read pruned", "2 stale reads pruned"),
        (Counted.GLUED_LINES_SPLIT, "1 glued line split", "2 glued lines split"),
        (
            Counted.HISTORIES_DROPPED,
            "1 superseded replacement history dropped",
            "2 superseded replacement histories dropped",
        ),
    ],
)
def test_the_repair_summary_counts_in_english(what: Counted, one: str, two: str) -> None:
    assert (what.phrase(1), what.phrase(2)) == (one, two)


# ---- file names that are not UTF-8 ---------------------------------------------------------

UNDECODABLE: Final = os.fsdecode(b"bad\xff.jsonl")
"""A session's name holding a byte that is not UTF-8, as Python holds it (surrogateescape)."""
SHOWN: Final = "bad\\xff.jsonl"
"""The name as every report shows it: the byte escaped."""
CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"


@pytest.fixture
def undecodable_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory, holding a session named with a byte that is not UTF-8
    beside one named in UTF-8, each with findings."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(GLUED, tmp_path / UNDECODABLE)
    shutil.copy(CLONES, tmp_path / "good.jsonl")
    return tmp_path


def _cli(*args: str) -> Any:
    runner = CliRunner()
    return runner.invoke(app, list(args), env={"NO_COLOR": "1", "COLUMNS": "120"}, color=False)


def _named(output_format: str, stdout: str) -> list[str]:
    """The file names of the findings in a report."""
    if output_format == "json":
        return [d["filename"] for d in json.loads(stdout)]
    if output_format == "json-lines":
        return [json.loads(line)["filename"] for line in stdout.splitlines()]
    if output_format == "sarif":
        results = json.loads(stdout)["runs"][0]["results"]
        return [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    if output_format == "github":
        return [re.findall(r",file=([^,]*),", line)[0] for line in stdout.splitlines()]
    return re.findall(r"^(\S+\.jsonl):\d+:\d+:", stdout, re.MULTILINE)


@pytest.mark.parametrize("output_format", [f.value for f in OutputFormat])
@pytest.mark.parametrize("command", ["scan", "check"])
def test_a_name_that_is_not_utf8_is_escaped_and_the_other_files_are_reported(
    undecodable_folder: Path, output_format: str, command: str
) -> None:
    given = ["."] if command == "scan" else [UNDECODABLE, "good.jsonl"]
    result = _cli(command, "--output-format", output_format, *given)
    assert result.exit_code == 1, result.stderr
    assert "internal error" not in result.stderr
    stdout = result.stdout_bytes.decode("utf-8")  # valid UTF-8, every format
    names = {name.removeprefix("./") for name in _named(output_format, stdout)}
    shown = "bad%FF.jsonl" if output_format == "sarif" else SHOWN
    assert names == {shown, "good.jsonl"}


@pytest.mark.parametrize("output_format", ["json", "text"])
@pytest.mark.parametrize("after_repair", [[], ["--after-repair"]])
def test_context_escapes_a_name_that_is_not_utf8(
    undecodable_folder: Path, output_format: str, after_repair: list[str]
) -> None:
    result = _cli(
        "context", "--output-format", output_format, *after_repair, UNDECODABLE, "good.jsonl"
    )
    assert result.exit_code == 0, result.stderr
    stdout = result.stdout_bytes.decode("utf-8")
    if output_format == "json":
        assert [c["filename"] for c in json.loads(stdout)] == [SHOWN, "good.jsonl"]
    else:
        assert stdout.startswith(f"{SHOWN}  (pi, ")
        assert "\ngood.jsonl  (pi, " in stdout


def test_a_diff_and_its_report_escape_a_name_that_is_not_utf8(undecodable_folder: Path) -> None:
    diff = _cli("repair", "--diff", UNDECODABLE)
    assert diff.stdout_bytes.decode("utf-8").startswith(f"--- a/{SHOWN}\n+++ b/{SHOWN}\n")
    report = _cli("repair", "--diff", "--output-format", "json", UNDECODABLE)
    assert {d["filename"] for d in json.loads(report.stdout_bytes)} == {SHOWN}


def test_escape_shows_bytes_that_are_not_utf8_and_lone_surrogates() -> None:
    assert escape(os.fsdecode(b"a\xff\n.jsonl")) == "a\\xff\\u000a.jsonl"
    assert escape_surrogates(os.fsdecode(b"a\xff\n\xed\xa0\x80")) == "a\\xff\n\\xed\\xa0\\x80"
    assert escape_surrogates("lone \ud800 and \udc9f") == "lone \\ud800 and \\x9f"
