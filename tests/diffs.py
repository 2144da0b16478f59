"""Applying what `repair --diff` prints to the input, as `patch` would, and the edits of
the JSON plan, so that tests can compare both with the bytes `repair -o` writes."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import Any, Final

HUNK: Final = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
NO_NEWLINE: Final = b"\\ No newline at end of file"


def split_lines(data: bytes) -> list[bytes]:
    """Lines with their newline (the last may have none)."""
    lines = data.split(b"\n")
    last = lines.pop()
    out = [line + b"\n" for line in lines]
    if last:
        out.append(last)
    return out


def apply_diff(original: bytes, diff: bytes) -> bytes:
    """The result of applying a unified diff of one file to `original`; every context and
    removed line must match exactly (a failed hunk raises)."""
    if not diff:
        return original
    source = split_lines(original)
    lines = diff.split(b"\n")
    assert lines[0].startswith(b"--- a/"), lines[0]
    assert lines[1].startswith(b"+++ b/"), lines[1]
    result: list[bytes] = []
    position = 0
    k = 2
    while k < len(lines) and lines[k]:
        match = HUNK.fullmatch(lines[k])
        assert match is not None, lines[k]
        old_start = int(match[1])
        old_count = 1 if match[2] is None else int(match[2])
        first = old_start - 1 if old_count else old_start
        assert first >= position, "hunks out of order"
        result.extend(source[position:first])
        position = first
        k += 1
        removed = added = 0
        while k < len(lines) and lines[k][:1] in (b" ", b"-", b"+", b"\\"):
            body = lines[k]
            newline = not (k + 1 < len(lines) and lines[k + 1] == NO_NEWLINE)
            text = body[1:] + (b"\n" if newline else b"")
            kind = body[:1]
            if kind in (b" ", b"-"):
                assert source[position] == text, (position + 1, source[position], text)
                position += 1
                removed += kind == b"-"
            if kind in (b" ", b"+"):
                result.append(text)
                added += kind == b"+"
            k += 1 if newline else 2
        assert removed or added, "an empty hunk"
    result.extend(source[position:])
    return b"".join(result)


def apply_plan(original: bytes, plan: Sequence[dict[str, Any]]) -> bytes:
    """The result of the JSON plan's edits applied to `original`: each changed line is
    listed once, by one diagnostic, its exact bytes the content (or `content_base64`)
    followed by its `end`; an `append` puts its content after the unterminated last line."""
    by_row: dict[int, list[tuple[str, bytes]]] = {}
    for diagnostic in plan:
        rows: dict[int, list[tuple[str, bytes]]] = {}
        for edit in diagnostic["fix"]["edits"]:
            if "content_base64" in edit:
                line = base64.b64decode(edit["content_base64"])
                assert line.decode("utf-8", "replace") == edit["content"]
            else:
                line = edit.get("content", "").encode()
            rows.setdefault(edit["row"], []).append(
                (edit["op"], line + edit.get("end", "").encode())
            )
        for row, edits in rows.items():
            assert row not in by_row, f"row {row} is listed twice"
            by_row[row] = edits
    source = split_lines(original)
    for diagnostic in plan:
        for edit in diagnostic["fix"]["edits"]:
            if edit["op"] == "delete" and "end_row" in edit:
                # A run of lines deleted as one: each of the rows after the first goes too.
                for row in range(edit["row"] + 1, edit["end_row"] + 1):
                    assert row not in by_row, f"row {row} is listed twice"
                    by_row[row] = [("delete", b"")]
    result: list[bytes] = []
    for row in range(len(source) + 1):
        if row:
            line = source[row - 1]
            if row not in by_row:
                result.append(line)
                continue
        for op, written in by_row.get(row, []):
            assert op in ("replace", "insert_after", "append") or (op == "delete" and row), op
            if op == "append":
                assert row == len(source), "only the last line is appended to"
                assert not source[-1].endswith(b"\n"), "and only when it is unterminated"
                result.append(source[row - 1] + written)
            elif op != "delete":
                result.append(written)
    return b"".join(result)
