"""What pi (and OpenClaw, which loads with pi's session manager) sends the model on resume.

pi's `buildSessionContext` walks the active path: after a compaction, its summary first,
then the messages from the entry it keeps from up to the compaction, then those after it;
messages, custom messages and branch summaries reach the model, other entries do not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, Final

from msgspec import Raw, Struct

from sessionfix import jsonutil
from sessionfix.formats.common import ParsingDecoder
from sessionfix.model.loaded import Loaded, LoadRefused, Sent
from sessionfix.model.view import ROOT, Kind, Role, SessionView
from sessionfix.read.reader import LineIssue, LineReport, RecordSource

_SENT_KINDS: Final = frozenset({Kind.MESSAGE, Kind.CUSTOM_MESSAGE, Kind.BRANCH_SUMMARY})
_SENT_OF_ROLE: Final = {
    Role.USER: Sent.USER,
    Role.ASSISTANT: Sent.ASSISTANT,
    Role.TOOL_RESULT: Sent.TOOL_RESULT,
    Role.BASH: Sent.TOOL_RESULT,
}
_NO_RAW: Final = Raw(b"")


class _Payload(Struct, gc=False):
    """The fields that carry what the model reads, kept as their raw JSON."""

    message: Raw = _NO_RAW
    content: Raw = _NO_RAW
    summary: Raw = _NO_RAW


_DECODER: Final = ParsingDecoder(_Payload)


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The messages pi's loader builds, in order: none without a header (pi reads such a
    file as empty); `LoadRefused` where pi throws (a `null` line) or hangs (a parent
    cycle on the path it walks)."""
    if view.header is None:
        return
    if any(finding.json_kind == "null" for finding in lines.findings):
        raise LoadRefused("pi throws on the line that is JSON `null`")
    lost = _lost_rows(view, lines)
    if view.rows[0] in lost:  # the header is on a line pi does not read: no header
        return
    path: Sequence[int]
    if lost:
        path, boundary, window = _path_without(view, lost)
    else:
        if view.cycle_on_path:
            raise LoadRefused("pi hangs on the parent cycle on its active path")
        path, boundary, window = view.active_path, view.boundary_position, view.window_start
    if boundary is None:
        positions: Iterator[int] = iter(range(len(path)))
    else:
        yield _loaded(view, source, path[boundary], Sent.SUMMARY)
        positions = chain(range(window, boundary), range(boundary + 1, len(path)))
    kinds = view.kinds
    for position in positions:
        index = path[position]
        kind = kinds[index]
        if kind == Kind.MESSAGE:
            yield _loaded(view, source, index, _SENT_OF_ROLE.get(view.role(index), Sent.OTHER))
        elif kind == Kind.CUSTOM_MESSAGE:
            yield _loaded(view, source, index, Sent.OTHER)
        elif kind == Kind.BRANCH_SUMMARY:
            yield _loaded(view, source, index, Sent.SUMMARY)


_LOST_ISSUES: Final = frozenset(
    {LineIssue.GLUED, LineIssue.TORN, LineIssue.UNDEFINED, LineIssue.NUL, LineIssue.SPREAD}
)


def _lost_rows(view: SessionView, lines: LineReport) -> set[int]:
    """The lines `JSON.parse` rejects, whose records pi never sees: damaged ones, and a
    byte-order mark anywhere but on the file's first line (pi trims the file's text)."""
    first = view.rows[0] if len(view) else 1
    return {
        finding.row
        for finding in lines.findings
        if finding.issue in _LOST_ISSUES
        or (finding.issue is LineIssue.BOM and finding.row > first)
        or (finding.issue is LineIssue.UNPARSABLE and finding.json_kind is None)
    }


def _path_without(view: SessionView, lost: set[int]) -> tuple[list[int], int | None, int]:
    """pi's path, last compaction position and window start over the records it reads:
    a v1 file migrates them in file order (a compaction's kept index counts them); a tree
    file walks back from its last entry to a parent it does not have."""
    rows, kinds = view.rows, view.kinds
    kept = [index for index in range(len(view)) if rows[index] not in lost]
    entries = [index for index in kept if kinds[index] != Kind.HEADER]
    if not view.tree:
        path = entries
    else:
        leaves = [index for index in entries if kinds[index] != Kind.LEAF]
        path = []
        seen: set[int] = set()
        current = leaves[-1] if leaves else ROOT
        while current >= 0 and rows[current] not in lost:
            if current in seen:
                raise LoadRefused("pi hangs on the parent cycle on its active path")
            seen.add(current)
            path.append(current)
            current = view.parents[current]
        path.reverse()
    for boundary in range(len(path) - 1, -1, -1):
        index = path[boundary]
        if kinds[index] not in (Kind.COMPACTION, Kind.RESET):
            continue
        target = _kept_from(view, index, kept)
        position = path.index(target) if target in path else -1
        return path, boundary, position if 0 <= position < boundary else boundary
    return path, None, 0


def _kept_from(view: SessionView, boundary: int, kept: list[int]) -> int | None:
    if view.tree:
        return view.first_kept_target(boundary)
    facts = view.boundary(boundary)
    target = None if facts is None else facts.first_kept_index
    return kept[target] if target is not None and 0 <= target < len(kept) else None


def _loaded(view: SessionView, source: RecordSource, index: int, sent: Sent) -> Loaded:
    data = source.read(*view.span(index))
    try:
        payload = _DECODER.decode(data)
    except (ValueError, RecursionError):
        return Loaded(index, sent, len(data))
    raw = bytes(payload.message or payload.content or payload.summary) or data
    if b'"image"' not in raw:
        return Loaded(index, sent, len(raw))
    images, image_bytes = _images(jsonutil.loads(raw))
    return Loaded(index, sent, len(raw), images, image_bytes)


def _images(value: Any) -> tuple[int, int]:
    """Inline images in a message or its content: `{"type": "image", "data": base64}`."""
    content = value.get("content") if isinstance(value, dict) else value
    if not isinstance(content, list):
        return 0, 0
    found = [
        block["data"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "image"
        if isinstance(block.get("data"), str)
    ]
    return len(found), sum(map(len, found))
