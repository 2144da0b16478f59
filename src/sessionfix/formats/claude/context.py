"""What Claude Code's reader returns when it resumes a session (formats/claude-code.md §7).

The chain from the leaf back to the root (a compaction boundary has no parent, so the
chain starts at the last one), with the parallel calls and results the reader
re-attaches: its `user`, `assistant` and `system` records, less those marked `isMeta`,
`isSidechain` or with a `teamName`, one per uuid (a replayed copy replaces the first in
its place). `progress` and `attachment` records are walked through and not returned.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from sessionfix import jsonutil
from sessionfix.model.loaded import Loaded, Sent
from sessionfix.model.view import Kind, Role, SessionView, key_of
from sessionfix.read.reader import LineIssue, LineReport, RecordSource

_RETURNED_KINDS: Final = frozenset({Kind.MESSAGE, Kind.COMPACTION})
_NO_RAW: Final = Raw(b"")


class _Returned(Struct, gc=False):
    type: object = None
    isMeta: object = None
    isSidechain: object = None
    teamName: object = None
    isCompactSummary: object = None
    content: Raw | UnsetType = UNSET
    message: Raw = _NO_RAW


class _Role(Struct, gc=False):
    content: Raw = _NO_RAW


_DECODER: Final = msgspec.json.Decoder(_Returned)
_CONTENT: Final = msgspec.json.Decoder(_Role)


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The records Claude Code's reader returns from the view's chain, in order."""
    kinds = view.kinds
    returned: set[int] = set()
    for index in _chain(view, lines):
        if kinds[index] not in _RETURNED_KINDS:
            continue
        key = view.id_keys[index]
        if key in returned:
            continue  # a replayed copy: the reader keeps one record per uuid
        returned.add(key)
        data = source.read(*view.span(index))
        try:
            record = _DECODER.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            continue
        if record.type not in ("user", "assistant", "system") or _truthy(
            record.isMeta, record.isSidechain, record.teamName
        ):
            continue
        yield _loaded(index, record, data, view.role(index) is Role.TOOL_RESULT)


def _chain(view: SessionView, lines: LineReport) -> Sequence[int]:
    """The view's path from where the reader's walk back from the leaf stops: at a record
    it cannot read (one of a glued line's: `JSON.parse` fails the line), or at the tail of
    a preserved segment whose head was never written (the reader re-parents that tail,
    a child of the anchor, below itself)."""
    path = view.active_path
    unreadable, tails = _unreadable(view, lines), _self_parented_tails(view)
    for position in range(len(path) - 1, -1, -1):
        index = path[position]
        if index in unreadable:
            return path[position + 1 :]
        if index in tails:
            return path[position:]
    return path


_LOST_ISSUES: Final = frozenset(
    {LineIssue.GLUED, LineIssue.TORN, LineIssue.UNDEFINED, LineIssue.SPREAD}
)
"""Line damage that loses the line's records (the reader reads past a run of NUL bytes
before a record, as the fixtures of NUL runs show)."""


def _unreadable(view: SessionView, lines: LineReport) -> set[int]:
    """Records the reader does not find: those on a line it rejects (glued, torn,
    garbage), unless the same uuid is written again on a line it reads."""
    rows = {
        finding.row
        for finding in lines.findings
        if finding.issue in _LOST_ISSUES
        or (finding.issue is LineIssue.UNPARSABLE and finding.json_kind is None)
    }
    if not rows:
        return set()
    lost = {index for index, row in enumerate(view.rows) if row in rows}
    keys = {view.id_keys[index] for index in lost}
    written_again = {
        key for index, key in enumerate(view.id_keys) if key in keys and index not in lost
    }
    return {index for index in lost if view.id_keys[index] not in written_again}


def _self_parented_tails(view: SessionView) -> set[int]:
    tails: set[int] = set()
    for facts in view.boundaries.values():
        segment = facts.preserved
        if segment is None or segment.listed or not isinstance(segment.anchor, str):
            continue
        if not isinstance(segment.tail, str) or not isinstance(segment.head, str):
            continue
        if view.resolve(segment.head) is not None:
            continue
        tail = view.resolve(segment.tail)
        if tail is not None and view.parent_keys[tail] == key_of(segment.anchor):
            tails.add(tail)
    return tails


def _truthy(*values: object) -> bool:
    """JavaScript's truth of each field the reader tests (`!m.isMeta` …)."""
    return any(value not in (None, False, 0, "") for value in values)


def _loaded(index: int, record: _Returned, data: bytes, answers: bool) -> Loaded:
    if record.type == "system":
        raw = bytes(record.content) if record.content is not UNSET else data
        return Loaded(index, Sent.SYSTEM, len(raw))
    raw = bytes(record.message) or data
    sent = Sent.ASSISTANT if record.type == "assistant" else Sent.USER
    if record.isCompactSummary is True:
        sent = Sent.SUMMARY
    elif answers:
        sent = Sent.TOOL_RESULT
    if b'"image"' not in raw:
        return Loaded(index, sent, len(raw))
    try:
        images, image_bytes = _images(_CONTENT.decode(raw).content)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError, ValueError):
        images = image_bytes = 0
    return Loaded(index, sent, len(raw), images, image_bytes)


def _images(content: Raw) -> tuple[int, int]:
    """Inline base64 images in the content, inside tool results too."""
    if not content:
        return 0, 0
    found: list[str] = []
    _collect(jsonutil.loads(bytes(content)), found)
    return len(found), sum(map(len, found))


def _collect(content: Any, found: list[str]) -> None:
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "image":
            image = block.get("source")
            if isinstance(image, dict) and isinstance(image.get("data"), str):
                found.append(image["data"])
        elif block.get("type") == "tool_result":
            _collect(block.get("content"), found)
