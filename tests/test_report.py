"""A report is written from the diagnostics alone: the session is not opened again."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from sessionfix import check_file
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
