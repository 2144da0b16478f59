"""The byte-level reader: line splitting and the classification of damaged lines."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sessionfix import jsonutil, read_session
from sessionfix.errors import InputError
from sessionfix.read.reader import (
    RECOVERY_BUDGET,
    LineIssue,
    NulPlacement,
    RecordSource,
    classify_line,
)

HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
)
ENTRY = (
    b'{"type":"message","id":"e1","parentId":null,"timestamp":"t",'
    b'"message":{"role":"user","content":"hi","timestamp":1}}'
)


def issues(body: bytes) -> list[LineIssue]:
    return [issue for issue, _ in classify_line(body).findings]


def test_a_clean_record_has_no_findings() -> None:
    outcome = classify_line(ENTRY)
    assert outcome.findings == []
    assert [(r.start, r.end) for r in outcome.records] == [(0, len(ENTRY))]


def test_glued_records_keep_their_exact_byte_spans() -> None:
    body = ENTRY + b"  " + HEADER
    outcome = classify_line(body)
    assert issues(body) == [LineIssue.GLUED]
    assert [body[r.start : r.end] for r in outcome.records] == [ENTRY, HEADER]


def test_glued_record_followed_by_a_torn_tail() -> None:
    body = ENTRY + b'{"type":"mess'
    outcome = classify_line(body)
    assert issues(body) == [LineIssue.GLUED]
    assert outcome.damaged == (len(ENTRY), len(body))
    assert outcome.damaged_truncated


def test_multibyte_text_before_a_glue_point_maps_to_byte_offsets() -> None:
    first = '{"a":"é€😀"}'.encode()
    outcome = classify_line(first + ENTRY)
    assert [(r.start, r.end) for r in outcome.records] == [
        (0, len(first)),
        (len(first), len(first) + len(ENTRY)),
    ]


@pytest.mark.parametrize(
    ("body", "placement", "span"),
    [
        (b"\x00\x00\x00", NulPlacement.ONLY, None),
        (b"\x00\x00" + ENTRY, NulPlacement.LEADING, (2, 2 + len(ENTRY))),
        (ENTRY + b"\x00", NulPlacement.TRAILING, (0, len(ENTRY))),
        (b"\x00" + ENTRY + b"\x00", NulPlacement.AROUND, (1, 1 + len(ENTRY))),
    ],
)
def test_nul_runs_that_can_be_stripped(
    body: bytes, placement: NulPlacement, span: tuple[int, int] | None
) -> None:
    outcome = classify_line(body)
    nul = [extra for issue, extra in outcome.findings if issue is LineIssue.NUL]
    assert nul[0]["nul"] is placement
    assert nul[0].get("span") == span


def test_nul_bytes_inside_a_record_are_damage() -> None:
    outcome = classify_line(ENTRY[:10] + b"\x00" + ENTRY[10:])
    assert outcome.damaged is not None
    assert "NUL" in outcome.damaged_reason


def test_bom_blank_undefined_and_non_objects() -> None:
    assert issues(b"\xef\xbb\xbf" + ENTRY) == [LineIssue.BOM]
    assert issues(b"   \t") == [LineIssue.BLANK]
    assert issues(b"") == [LineIssue.BLANK]
    assert issues(b" undefined ") == [LineIssue.UNDEFINED]
    assert classify_line(b"[1,2]").damaged_reason == "a JSON array, not an object"


def test_a_complete_record_after_a_damaged_prefix_is_found() -> None:
    body = b'{"type":"mess' + ENTRY
    outcome = classify_line(body)
    assert outcome.recoverable == (len(b'{"type":"mess'), len(body))


def test_lines_split_on_newline_only(tmp_path: Path) -> None:
    """U+2028/U+2029 written raw inside strings never end a line."""
    text = (
        '{"type":"message","id":"e2","parentId":"e1","timestamp":"t",'
        '"message":{"role":"user","content":"a\u2028b\u2029c","timestamp":2}}'
    )
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n" + ENTRY + b"\n" + text.encode() + b"\n")
    scanned = read_session(path)
    assert len(scanned.view) == 3
    assert list(scanned.view.rows) == [1, 2, 3]
    assert scanned.lines.findings == []


def test_crlf_rows_and_missing_final_newline_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\r\n" + ENTRY)
    lines = read_session(path).lines
    assert list(lines.crlf_rows) == [1]
    assert not lines.final_newline
    assert lines.last_row == 2


def test_a_directory_is_refused_with_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        read_session(tmp_path)


def test_a_fifo_is_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_session(fifo)


@pytest.mark.parametrize(
    "body",
    [
        # A long torn record full of nested objects: every `{"` parses to the end and fails.
        b'{"type":"message","message":{"content":[' + b",".join([b'{"type":"t"}'] * 3000),
        # Nesting deeper than the recursive parsers go, broken at its end.
        b'{"a":' * 3000 + b"1" + b"}" * 2999 + b"]",
    ],
    ids=["torn-nested", "deep-and-broken"],
)
def test_recovering_a_record_from_damage_parses_a_bounded_amount(
    body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[int] = []
    real_loads = jsonutil.loads

    def counting_loads(data: bytes) -> object:
        parsed.append(len(data))
        return real_loads(data)

    monkeypatch.setattr(jsonutil, "loads", counting_loads)
    outcome = classify_line(body)
    assert outcome.damaged is not None
    assert outcome.recoverable is None
    assert sum(parsed) <= (RECOVERY_BUDGET + 2) * len(body)


def test_a_record_nested_past_every_recursive_parser_is_a_record() -> None:
    """`JSON.parse` reads any depth, so a deep record is one record, not damage."""
    body = b'{"a":' * 3000 + b'"x"' + b"}" * 3000
    outcome = classify_line(body)
    assert outcome.findings == []
    assert outcome.damaged is None
    assert [(r.start, r.end) for r in outcome.records] == [(0, len(body))]


def test_a_deep_line_names_where_it_breaks() -> None:
    """Not orjson's depth limit: the place where the deep line stops being JSON."""
    body = b'{"a":' * 3000 + b"1" + b"}" * 2000 + b"]" + b"}" * 999
    outcome = classify_line(body)
    assert outcome.damaged == (0, len(body))
    assert outcome.damaged_reason == f"expecting ',' or '}}' at column {len(body) - 999}"


def test_invalid_utf8_outside_a_string_is_named_as_such() -> None:
    outcome = classify_line(b"\xff\xfe\x80")
    assert outcome.damaged_reason == "invalid UTF-8 at byte 1"


def test_invalid_utf8_inside_a_string_keeps_the_record() -> None:
    """As pi does: Node decodes the bytes to U+FFFD and JSON.parse accepts the line."""
    outcome = classify_line(b'{"type":"message","text":"\xff\xfe"}')
    assert outcome.damaged is None
    assert len(outcome.records) == 1


@pytest.mark.parametrize("refusal", [None, errno.ENOSYS, errno.EXDEV])
def test_a_source_copies_a_range_in_the_kernel_or_through_a_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int | None
) -> None:
    """Untouched bytes of a repair are copied by the kernel; where it refuses (an old
    kernel, another file system), through a buffer, with the same result."""
    data = bytes(range(256)) * 4099
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    if refusal is not None:

        def refuse(*args: object) -> int:
            raise OSError(refusal, os.strerror(refusal))

        monkeypatch.setattr(os, "copy_file_range", refuse)
    out = tmp_path / "out"
    with open(out, "wb") as target, RecordSource(path) as source:
        target.write(b"head:")
        target.flush()
        assert source.copy_to(target.fileno(), 1000, 900_000) == 899_000
        assert source.copy_to(target.fileno(), len(data) - 10, len(data) + 50) == 10
    assert out.read_bytes() == b"head:" + data[1000:900_000] + data[-10:]
