"""JSON fix edits are minimal and exact: an edit that changes a few bytes of a line says
which bytes, not the whole line again, and applying the described edits to the input
gives the bytes `repair` writes."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionfix import Settings, check_file
from sessionfix.diagnostics import RewriteRecord
from sessionfix.repair.apply import repair_to
from sessionfix.report.render import OutputFormat, write_report
from sessionfix.rules.base import changed_bytes
from sessionfix.scan.scanner import read_session

from .conftest import FIXTURES
from .diffs import split_lines
from .test_fixtures import CASES, _settings, repair_case, run_case


def apply_edits(data: bytes, edits: list[dict[str, Any]]) -> bytes:
    """Apply JSON fix edits to the input bytes, as the JSON output documents them: byte
    ranges of a line (its terminator included) deleted or replaced, an `append` after
    the line's bytes."""
    lines = split_lines(data)
    by_row: dict[int, list[dict[str, Any]]] = {}
    for edit in edits:
        by_row.setdefault(edit["row"], []).append(edit)
        if edit["op"] == "delete":  # a run of lines, through `end_row`
            for row in range(edit["row"] + 1, edit.get("end_row", edit["row"]) + 1):
                by_row.setdefault(row, []).append(edit)
    out: list[bytes] = []
    for row, line in enumerate(lines, 1):
        row_edits = by_row.pop(row, [])
        if any(edit["op"] == "delete" for edit in row_edits):
            continue
        ranges: list[tuple[int, int, bytes]] = []
        appended = b""
        for edit in row_edits:
            op = edit["op"]
            if op in ("delete_bytes", "replace_bytes"):
                text = edit.get("content", "").encode()
                assert (op == "replace_bytes") == bool(text), edit
                ranges.append((edit["byte_column"] - 1, edit["end_byte_column"] - 1, text))
            elif op == "append":
                appended += edit["content"].encode()
            else:
                raise AssertionError(f"an edit the test cannot apply: {edit}")
        ranges.sort()
        for (_, end, _), (start, _, _) in itertools.pairwise(ranges):
            assert end <= start, f"overlapping edits on line {row}: {ranges}"
        for start, end, text in reversed(ranges):
            assert 0 <= start <= end <= len(line)
            line = line[:start] + text + line[end:]
        out.append(line + appended)
    assert not by_row, f"edits for lines the input does not have: {sorted(by_row)}"
    return b"".join(out)


def applied_edits(diagnostics: list[dict[str, Any]], *, unsafe: bool) -> list[dict[str, Any]]:
    return [
        edit
        for d in diagnostics
        if d["fix"] is not None and (unsafe or d["fix"]["applicability"] == "safe")
        for edit in d["fix"]["edits"]
    ]


LINE_RULES = ("SF001", "SF002", "SF003", "SF004", "SF005", "SF006", "SF007", "SF008", "SF009")
"""Rules whose fixes change bytes of a line, drop a line or join two."""
LINE_CASES = [
    case for case in CASES if case.name.startswith(LINE_RULES) and "-trap-" not in case.name
]
ALONE: Final = {"SF008-glued-record-then-garbage-mid-file"}
"""Cases where two fixes change one line: each fix's edits describe it applied alone (the
split puts the damaged tail on a line of its own; dropping the tail drops that too)."""


def _record_fixes(case: Path) -> bool:
    """Whether the case's golden findings hold a fix that is not a line fix: record
    decisions are resolved again once the lines are repaired (a recovered record is a
    parent again), so the repair runs passes, not independent edits."""
    golden = json.loads((case / "diagnostics.json").read_text())
    return any(d["fix"] is not None and d["code"] not in LINE_RULES for d in golden)


COMPOSED: Final = [
    pytest.param(case, unsafe, id=f"{'unsafe' if unsafe else 'safe'}-{case.name}")
    for case in LINE_CASES
    for unsafe in (False, True)
    if not unsafe or (case.name not in ALONE and not _record_fixes(case))
]
"""(case, unsafe) where the described edits, applied together, are the repair."""


@pytest.mark.parametrize("case", LINE_CASES, ids=[case.name for case in LINE_CASES])
def test_line_edits_name_only_the_bytes_they_change(case: Path, tmp_path: Path) -> None:
    for d in run_case(case, tmp_path):
        if d["code"] in LINE_RULES and d["fix"] is not None:
            for edit in d["fix"]["edits"]:
                assert edit["op"] in ("delete", "delete_bytes", "replace_bytes", "append"), edit
                assert len(edit.get("content", "")) <= 1, f"{d['code']} repeats bytes: {edit}"


@pytest.mark.parametrize(("case", "unsafe"), COMPOSED)
def test_described_edits_give_the_repaired_file(case: Path, tmp_path: Path, unsafe: bool) -> None:
    diagnostics = run_case(case, tmp_path / "check")
    original = (case / "input.jsonl").read_bytes()
    repaired = repair_case(case, tmp_path / "repair", unsafe=unsafe)
    assert apply_edits(original, applied_edits(diagnostics, unsafe=unsafe)) == repaired


def _json_diagnostics(session: Path, settings: Settings | None = None) -> list[dict[str, Any]]:
    out = io.BytesIO()
    write_report(check_file(session, settings), out, OutputFormat.JSON)
    data: list[dict[str, Any]] = json.loads(out.getvalue())
    return data


@pytest.mark.parametrize("ignore", [(), ("SF006",), ("SF005",), ("SF004",), ("SF004", "SF006")])
def test_a_line_with_a_mark_nuls_and_crlf_is_described_exactly(
    tmp_path: Path, ignore: tuple[str, ...]
) -> None:
    """A byte-order mark, NUL runs on both sides of a record and a CRLF on one line (of
    non-ASCII text, so bytes and characters differ): three disjoint byte ranges whose
    removal is what the repair writes, whichever of the rules is on."""
    header = (FIXTURES / "SF004-nul-run-after-record" / "input.jsonl").read_bytes()
    first, rest = header.split(b"\n", 1)
    record = rest.split(b"\n", 1)[0].replace(b'"hello"', '"héllo ✓"'.encode())
    damaged = b"\xef\xbb\xbf" + b"\x00" * 3 + record + b"\x00" * 2 + b"\r\n"
    session = tmp_path / "session.jsonl"
    session.write_bytes(first + b"\r\n" + damaged)
    settings = Settings(quiescence=0.0, ignore=ignore)
    diagnostics = _json_diagnostics(session, settings)
    codes = {d["code"] for d in diagnostics}
    assert {"SF004", "SF005", "SF006"} - set(ignore) <= codes
    edits = [
        edit
        for d in diagnostics
        if d["code"] in LINE_RULES and d["fix"] is not None
        for edit in d["fix"]["edits"]
    ]
    row_two = sorted((e["byte_column"], e["end_byte_column"]) for e in edits if e["row"] == 2)
    mark, lead, trail = (1, 4), (4, 7), (7 + len(record), 9 + len(record))
    cr = (9 + len(record), 10 + len(record))
    expected = {"SF005": [mark], "SF004": [lead, trail], "SF006": [cr]}
    assert row_two == sorted(
        span for code, spans in expected.items() if code not in ignore for span in spans
    )
    output = tmp_path / "out.jsonl"
    repair_to(session, output, settings)
    assert apply_edits(session.read_bytes(), edits) == output.read_bytes()


def _line_of(data: bytes, row: int) -> tuple[int, bytes]:
    """Where line `row` (1-based) starts, and its bytes with their terminator."""
    start = 0
    for _ in range(row - 1):
        start = data.index(b"\n", start) + 1
    end = data.find(b"\n", start)
    return start, data[start : len(data) if end < 0 else end + 1]


REWRITE_CASES = [
    case
    for case in CASES
    if any(
        edit["op"] in ("replace_bytes", "delete_bytes") and d["code"] not in LINE_RULES
        for d in json.loads((case / "diagnostics.json").read_text())
        if d["fix"] is not None
        for edit in d["fix"]["edits"]
    )
]


@pytest.mark.parametrize("case", REWRITE_CASES, ids=[case.name for case in REWRITE_CASES])
def test_a_record_rewrite_names_the_bytes_of_the_whole_rewritten_record(
    case: Path, tmp_path: Path
) -> None:
    """A rewritten record's edit, applied to its line, gives the line with the record
    re-serialised whole: the named bytes are exactly the ones that differ."""
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    target = tmp_path / spec.get("filename", "session.jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = (case / "input.jsonl").read_bytes()
    target.write_bytes(data)
    checked = 0
    settings = _settings(spec)
    view = read_session(target, settings.format).view
    for diagnostic in check_file(target, settings):
        for edit in diagnostic.fix.edits if diagnostic.fix else ():
            if not isinstance(edit, RewriteRecord):
                continue
            offset, size = view.span(edit.record)
            start, line = _line_of(data, edit.row)
            at = offset - start
            assert edit.produce is not None
            whole = line[:at] + edit.produce().encode() + line[at + size :]
            first, end = edit.byte_range or (0, 0)
            minimal = line[:first] + (edit.content or "").encode() + line[end:]
            assert minimal == whole
            assert end - first < size or size < 64
            checked += 1
    assert checked


@given(st.text(max_size=40), st.text(max_size=40))
def test_changed_bytes_apply_and_fall_between_characters(old_text: str, new_text: str) -> None:
    old, new = old_text.encode(), new_text.encode()
    first, end, text = changed_bytes(old, new)
    assert old[:first] + text.encode() + old[end:] == new
    old[:first].decode()
    old[end:].decode()


def test_changed_bytes_of_one_changed_accent() -> None:
    assert changed_bytes("café!".encode(), "cafè!".encode()) == (3, 5, "è")
