"""JSON fix edits are minimal and exact: an edit that changes a few bytes of a line says
which bytes, not the whole line again, and applying the described edits to the input
gives the bytes `repair` writes."""

from __future__ import annotations

import base64
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
from sessionfix.engine import check_paths, run_rules
from sessionfix.read.compressed import session_name
from sessionfix.read.reader import RecordSource
from sessionfix.repair.plan import RepairPlan, described_fixes
from sessionfix.repair.targets import repair_to
from sessionfix.report.render import OutputFormat, diagnostic_json, write_report
from sessionfix.rules.base import changed_bytes
from sessionfix.scan.scanner import read_session

from .conftest import FIXTURES
from .diffs import split_lines
from .test_fixtures import CASES, _settings, place_case, repair_case, run_case


def apply_edits(data: bytes, edits: list[dict[str, Any]]) -> bytes:
    """Apply JSON fix edits to the input bytes, as the JSON output documents them: byte
    ranges of a line (its terminator included) deleted or replaced, an `append` after
    the line's bytes, a line replaced or deleted whole, new lines inserted after a line
    (before the first for row 0); a file beside the session moved aside changes none."""
    lines = split_lines(data)
    by_row: dict[int, list[dict[str, Any]]] = {}
    for edit in edits:
        if edit["op"] == "set_aside":
            continue
        by_row.setdefault(edit["row"], []).append(edit)
        if edit["op"] == "delete":  # a run of lines, through `end_row`
            for row in range(edit["row"] + 1, edit.get("end_row", edit["row"]) + 1):
                by_row.setdefault(row, []).append(edit)
    out: list[bytes] = [_content(edit) + b"\n" for edit in by_row.pop(0, [])]
    for row, line in enumerate(lines, 1):
        row_edits = by_row.pop(row, [])
        inserted = [_content(e) + b"\n" for e in row_edits if e["op"] == "insert_after"]
        whole = [e for e in row_edits if e["op"] in ("delete", "replace")]
        if whole:
            assert len(whole) == len(row_edits) - len(inserted), f"line {row}: {row_edits}"
            replaced = [_content(e) + line[len(line.rstrip(b"\r\n")) :] for e in whole]
            out.extend(replaced if whole[0]["op"] == "replace" else [])
            out.extend(inserted)
            continue
        ranges: list[tuple[int, int, bytes]] = []
        appended = b""
        for edit in row_edits:
            op = edit["op"]
            if op in ("delete_bytes", "replace_bytes"):
                text = _content(edit)
                assert op == "replace_bytes" or not text, edit
                ranges.append((edit["byte_column"] - 1, edit["end_byte_column"] - 1, text))
            elif op == "append":
                appended += _content(edit)
            elif op != "insert_after":
                raise AssertionError(f"an edit the test cannot apply: {edit}")
        ranges.sort()
        for (_, end, _), (start, _, _) in itertools.pairwise(ranges):
            assert end <= start, f"overlapping edits on line {row}: {ranges}"
        for start, end, text in reversed(ranges):
            assert 0 <= start <= end <= len(line)
            line = line[:start] + text + line[end:]
        out.append(line + appended)
        out.extend(inserted)
    assert not by_row, f"edits for lines the input does not have: {sorted(by_row)}"
    return b"".join(out)


def _content(edit: dict[str, Any]) -> bytes:
    if "content_base64" in edit:
        return base64.b64decode(edit["content_base64"])
    return str(edit.get("content", "")).encode()


def applied_edits(diagnostics: list[dict[str, Any]], *, unsafe: bool) -> list[dict[str, Any]]:
    return [
        edit
        for d in diagnostics
        if d["fix"] is not None and (unsafe or d["fix"]["applicability"] == "safe")
        for edit in d["fix"]["edits"]
    ]


LINE_RULES = ("SF001", "SF002", "SF003", "SF004", "SF005", "SF006", "SF007", "SF008", "SF009")
"""Rules whose fixes change bytes of a line, drop a line or join two."""
HEADER_RULE = "SF101"
"""Its fix writes a new session header."""
LINE_CASES = [
    case for case in CASES if case.name.startswith(LINE_RULES) and "-trap-" not in case.name
]


def _record_fixes(case: Path) -> bool:
    """Whether the case's golden findings hold a fix that is not a line fix: record
    decisions are resolved again once the lines are repaired (a recovered record is a
    parent again), so the repair runs passes, not independent edits."""
    golden = json.loads((case / "diagnostics.json").read_text())
    return any(d["fix"] is not None and d["code"] not in LINE_RULES for d in golden)


def _shared_lines(case: Path, *, unsafe: bool) -> bool:
    """Whether two of the fixes applied change one line: each fix's edits are that fix
    applied alone, so together they do not make the repair (a split puts a damaged tail
    on a line of its own that dropping the tail drops too; a carriage return at the end
    of the file becomes the newline of either fix)."""
    golden = json.loads((case / "diagnostics.json").read_text())
    rows = [
        {edit["row"] for edit in d["fix"]["edits"]}
        for d in golden
        if d["fix"] is not None and (unsafe or d["fix"]["applicability"] == "safe")
    ]
    return any(a & b for a, b in itertools.combinations(rows, 2))


COMPOSED: Final = [
    pytest.param(case, unsafe, id=f"{'unsafe' if unsafe else 'safe'}-{case.name}")
    for case in LINE_CASES
    for unsafe in (False, True)
    if not _shared_lines(case, unsafe=unsafe) and (not unsafe or not _record_fixes(case))
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
        edit["op"] in ("replace_bytes", "delete_bytes")
        and edit["row"] == d["location"]["row"]
        and d["code"] not in (*LINE_RULES, HEADER_RULE)
        for d in json.loads((case / "diagnostics.json").read_text())
        if d["fix"] is not None
        for edit in d["fix"]["edits"]
    )
]
"""Cases with a record rewritten on the line of its finding (the lines a fix changes
besides are checked by `test_each_fix_s_edits_are_the_repair_of_that_fix_alone`). A
rebuilt header is no rewrite: where the whole record after its torn bytes stays, the
bytes of its line that change are named."""


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


FIX_CASES = [
    case
    for case in CASES
    if any(d["fix"] is not None for d in json.loads((case / "diagnostics.json").read_text()))
]


@pytest.mark.parametrize("case", FIX_CASES, ids=[case.name for case in FIX_CASES])
def test_each_fix_s_edits_are_the_repair_of_that_fix_alone(case: Path, tmp_path: Path) -> None:
    """Every fix `check --output-format json` lists, its edits applied alone to the input,
    gives what the repair writes for that fix alone: its own lines and every other line
    its decisions change (a child re-linked past a dropped record, a kept position moved)."""
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    _check_each_fix_alone(place_case(case, tmp_path), _settings(spec))


def _check_each_fix_alone(target: Path, settings: Settings) -> None:
    """Each fix's listed edits, applied alone to the file, give what the repair of that
    fix alone writes."""
    data = target.read_bytes()
    (report,) = check_paths([target], settings, describe=described_fixes)
    listed: dict[tuple[str, int, str], list[Any]] = {}
    for d in report.diagnostics:
        if d.fix is not None:
            listed.setdefault((d.code, d.row, d.message), []).append(
                diagnostic_json(d)["fix"]["edits"]
            )
    assert listed
    scanned = read_session(target, settings.format, named_as=session_name(target))
    found = run_rules(scanned, settings, str(target))
    with RecordSource(target) as source:
        for diagnostic in found:
            if diagnostic.fix is None:
                continue
            alone = b"".join(RepairPlan(scanned, [diagnostic], source).chunks())
            same = listed[(diagnostic.code, diagnostic.row, diagnostic.message)]
            edits = same.pop(0)
            assert apply_edits(data, edits) == alone, f"{diagnostic.code} on line {diagnostic.row}"
    assert not any(listed.values())


def _spread_over_lines(data: bytes, row: int) -> bytes:
    """`data` with the record on line `row` (1-based) pretty-printed over lines."""
    lines = data.split(b"\n")
    lines[row - 1] = json.dumps(json.loads(lines[row - 1]), indent=2).encode()
    return b"\n".join(lines)


@pytest.mark.parametrize(
    ("case", "change"),
    [
        # The join of a record spread over CRLF lines also ends it with LF, as the file's
        # lines end once it is joined: the edits left its CRLF.
        ("SF008-codex-pretty-printed-rollout", lambda data: data.replace(b"\n", b"\r\n")),
        # A record spread over lines that a fix rewrites is written on one line: the edit
        # named a byte range of the whole record as if of its first line (`{`).
        ("SF301-read-then-full-write", lambda data: _spread_over_lines(data, 4)),
        ("SF504-codex-superseded-replacement-history", lambda data: _spread_over_lines(data, 11)),
        # A record spread over lines that a fix drops goes with all its lines: the edit
        # deleted the first only.
        ("SF401-orphan-result", lambda data: _spread_over_lines(data, 6)),
    ],
)
def test_each_fix_s_edits_on_a_record_spread_over_lines_are_that_fix_alone(
    case: str, change: Any, tmp_path: Path
) -> None:
    target = tmp_path / "session.jsonl"
    target.write_bytes(change((FIXTURES / case / "input.jsonl").read_bytes()))
    _check_each_fix_alone(target, Settings(quiescence=0.0))
