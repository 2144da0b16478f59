"""What pi (and OpenClaw, which loads with pi's session manager) sends the model on resume.

pi's `buildSessionContext` walks the active path: after a compaction, its summary first,
then the messages from the entry it keeps from up to the compaction, then those after it;
messages, custom messages and branch summaries reach the model, other entries do not.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any, Final

import msgspec
from msgspec import Raw, Struct

from sessionfix import jsonutil
from sessionfix.model.loaded import Loaded, Sent
from sessionfix.model.view import Kind, Role, SessionView
from sessionfix.read.reader import RecordSource

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


_DECODER: Final = msgspec.json.Decoder(_Payload)


def loaded_messages(view: SessionView, source: RecordSource) -> Iterator[Loaded]:
    """The messages pi's loader builds from the view's active path and window, in order
    (none without a header: pi reads such a file as empty)."""
    if view.header is None:
        return
    path = view.active_path
    boundary = view.boundary_position
    if boundary is None:
        positions: Iterator[int] = iter(range(len(path)))
    else:
        yield _loaded(view, source, path[boundary], Sent.SUMMARY)
        positions = chain(range(view.window_start, boundary), range(boundary + 1, len(path)))
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


def _loaded(view: SessionView, source: RecordSource, index: int, sent: Sent) -> Loaded:
    data = source.read(*view.span(index))
    try:
        payload = _DECODER.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
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
