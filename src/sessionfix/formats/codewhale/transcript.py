"""A CodeWhale document as lines of text, for the rules to read.

The first line stands for the document: its id (the file's stem), schema version,
workspace, journal leaf, whether its `messages` array is the journal's projection, and
what CodeWhale refuses of it (`{"codewhale":"document",…}`). Then one line per journal
entry, as stored with the tag in front (`{"codewhale":"entry","id":…,"parent_id":…}`);
a document without a journal (before 0.9.5), or one whose walk is empty, has one line
per message of its `messages` array (`{"codewhale":"message","message":{…}}`). A
document CodeWhale cannot parse is its document line saying why, its bytes on one line
(line breaks made spaces, a byte-order mark kept in front), which the line rules read
as any damaged line, and an end line (so that they are never read as a last line cut
short, which a fix would drop).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import orjson

from sessionfix.formats.codewhale.document import (
    Document,
    Unreadable,
    parse,
    projected,
    root_to_leaf,
)

TAG: Final = "codewhale"
DOCUMENT: Final = "document"
ENTRY: Final = "entry"
MESSAGE: Final = "message"
END: Final = "end"
"""After the bytes of a document that does not parse."""


def is_line(value: dict[str, Any]) -> bool:
    """Whether a decoded line is one of this format's."""
    return value.get(TAG) in (DOCUMENT, ENTRY, MESSAGE, END)


def in_step(document: Document) -> bool:
    """Whether the document's `messages` array is what its journal loads (a stale one
    is ignored on load and rebranched on the next save)."""
    journal = document.journal
    if journal is None:
        return True
    path = root_to_leaf(document.entries, document.leaf_id)
    if not path:
        return True
    return document.messages == [projected(document.entries[at]) for at in path]


def _line(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value) + b"\n"


def document_line(session_id: str, document: Document | Unreadable) -> bytes:
    head: dict[str, Any] = {TAG: DOCUMENT, "id": session_id}
    if isinstance(document, Unreadable):
        head["unreadable"] = document.reason
        if document.problem is not None:  # no bytes to read as a damaged line
            head["problems"] = [document.problem]
        return _line(head)
    value = document.value
    metadata = value.get("metadata")
    workspace = metadata.get("workspace") if isinstance(metadata, dict) else None
    head["schema_version"] = value.get("schema_version", 1)
    head["workspace"] = workspace if isinstance(workspace, str) else None
    head["journal"] = document.journal is not None
    head["leaf_id"] = document.leaf_id
    head["messages"] = len(document.messages)
    head["in_step"] = in_step(document)
    head["problems"] = document.problems
    return _line(head)


def raw_line(data: bytes) -> bytes:
    """The bytes of a document that does not parse, on one line."""
    return data.replace(b"\r", b" ").replace(b"\n", b" ") + b"\n"


def lines(session_id: str, data: bytes, unread: str | None = None) -> Iterator[bytes]:
    """The transcript of the document whose bytes are `data`; `unread`: why CodeWhale
    never reads this copy (its document line says so, and nothing else of it is read)."""
    if unread is not None:
        yield _line({TAG: DOCUMENT, "id": session_id, "unread": unread})
        return
    document = parse(data)
    yield document_line(session_id, document)
    if isinstance(document, Unreadable):
        if document.problem is None:
            yield raw_line(data)
            yield _line({TAG: END})
        return
    if document.problems:
        return
    if document.journal is None:
        for message in document.messages:
            yield _line({TAG: MESSAGE, MESSAGE: message})
        return
    for entry in document.entries:
        yield b'{"codewhale":"entry",' + orjson.dumps(entry)[1:] + b"\n"
    if not root_to_leaf(document.entries, document.leaf_id):
        # What CodeWhale loads instead of an empty walk: the `messages` array.
        for message in document.messages:
            yield _line({TAG: MESSAGE, MESSAGE: message})


def without_tag(record: dict[str, Any]) -> dict[str, Any]:
    """An entry line's record as the journal holds the entry."""
    return {key: value for key, value in record.items() if key != TAG}
