"""An opencode session's rows as lines of text, one row each, for the rules to read.

A row becomes one JSON object: the row's `data` as stored, first (what an excerpt of the
line shows), then its table, its ids and its columns (`{"data":{…},"opencode":"part",
"id":…,"message_id":…,"session_id":…}`); messages come in opencode's load order, each
followed by its parts (spec formats/opencode.md §4.1). A `data` that is not one line of
JSON object text (pretty-printed, not UTF-8, not an object) is carried compacted (its
text as opencode reads it, less the space between tokens), or as the text opencode
reads when it is no object at all (`"stored"`): the rows are never written back from
this text unless a repair changed them. What is JSON is what `JSON.parse` reads
(`decode.parsed`); a line whose row holds what only it reads (a lone surrogate escape)
is read by `envelope_of_line`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, NamedTuple

import msgspec
import orjson
import xxhash

from sessionfix import jsonutil
from sessionfix.formats.opencode.database import MessageRow, PartRow, StoredMessage
from sessionfix.formats.opencode.decode import parsed

TABLE: Final = "opencode"
"""The field that names a line's table, and tells this format's lines apart."""
MESSAGE: Final = "message"
PART: Final = "part"
SESSION: Final = "session"
"""The first line: the session, and the folder its relative paths are relative to."""
MESSAGE_TIME: Final = "message_time"
"""On a part's line: its message's `time` as stored, which some fixes date a part by."""


class Envelope(msgspec.Struct, gc=False):
    """One line: a row, its table and ids, and its `data` as the line holds it."""

    opencode: str
    id: str
    session_id: str = ""
    message_id: str = ""
    time_created: int | float = 0
    data: msgspec.Raw = msgspec.Raw(b"null")
    stored: str | None = None
    """The row's text, when it is no JSON object (opencode cannot read the row)."""

    @property
    def raw(self) -> bytes:
        """The row's data as opencode reads it."""
        if self.stored is not None:
            return self.stored.encode("utf-8", "surrogatepass")
        return bytes(self.data)


ENVELOPE: Final = msgspec.json.Decoder(Envelope)
DATA: Final = "data"


def envelope_of_value(value: dict[str, Any], line: bytes) -> Envelope:
    """The row of a line that `JSON.parse` read as `value` and msgspec cannot (its row's
    data holds a lone surrogate escape): the line's own bytes of its data.
    `msgspec.ValidationError` if it is not one of this format's lines."""
    head = {name: field for name, field in value.items() if name != DATA}
    envelope = msgspec.convert(head, Envelope)
    data = jsonutil.member_bytes(line).get(DATA) if DATA in value else None
    return envelope if data is None else msgspec.structs.replace(envelope, data=msgspec.Raw(data))


def envelope_of_line(line: bytes) -> Envelope:
    """A line as its row (`msgspec.DecodeError`, `msgspec.ValidationError` if it is none)."""
    try:
        return ENVELOPE.decode(line)
    except msgspec.DecodeError as refused:
        try:
            value = jsonutil.loads(line)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise refused from None
        return envelope_of_value(value, line)


def is_envelope(value: dict[str, object]) -> bool:
    """Whether a decoded line is one of this format's rows."""
    return value.get(TABLE) in (MESSAGE, PART, SESSION) and isinstance(value.get("id"), str)


def _data_field(data: bytes) -> bytes:
    """`"data":…` as a line carries a row's data (see the module's docstring)."""
    if data[:1] == b"{" and b"\n" not in data and b"\r" not in data:
        try:
            if isinstance(orjson.loads(data), dict):
                return b'"data":' + data
        except orjson.JSONDecodeError:
            pass
    text = data.decode("utf-8", "replace")
    try:
        value = parsed(data)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return b'"data":' + jsonutil.compact(text.encode("utf-8"))
    return b'"stored":' + orjson.dumps(text)


def message_line(row: MessageRow) -> bytes:
    head = orjson.dumps(
        {
            TABLE: MESSAGE,
            "id": row.id,
            "session_id": row.session_id,
            "time_created": row.time_created,
        }
    )
    return b"{" + _data_field(row.data) + b"," + head[1:] + b"\n"


def part_line(row: PartRow, message_time: dict[str, object] | None) -> bytes:
    head: dict[str, object] = {
        TABLE: PART,
        "id": row.id,
        "message_id": row.message_id,
        "session_id": row.session_id,
    }
    if message_time:
        head[MESSAGE_TIME] = message_time
    return b"{" + _data_field(row.data) + b"," + orjson.dumps(head)[1:] + b"\n"


def session_line(
    session_id: str, directory: str, *, events: int | None = None, unread: str | None = None
) -> bytes:
    """The first line: the session's folder, the bytes of its event log (when the
    database keeps one) and, for a session opencode no longer reads, why."""
    data: dict[str, object] = {"directory": directory}
    if events is not None:
        data["events"] = events
    if unread is not None:
        data["unread"] = unread
    return orjson.dumps({TABLE: SESSION, "id": session_id, "data": data}) + b"\n"


class _Time(msgspec.Struct, gc=False):
    created: int | float | None = None
    completed: int | float | None = None


class _Timed(msgspec.Struct, gc=False):
    time: _Time | None = None


_TIMED: Final = msgspec.json.Decoder(_Timed)


def _message_time(data: bytes, column: int | float) -> dict[str, object]:
    """A message's `time.created` (else its `time_created` column, which opencode keeps
    equal) and `time.completed`, where they are numbers."""
    try:
        time = _TIMED.decode(data).time
    except (msgspec.DecodeError, msgspec.ValidationError):
        try:
            time = msgspec.convert(parsed(data), _Timed).time
        except (ValueError, msgspec.ValidationError):
            time = None
    if time is None:
        time = _Time()
    found: dict[str, object] = {"created": column if time.created is None else time.created}
    if time.completed is not None:
        found["completed"] = time.completed
    return found


class Row(NamedTuple):
    """A line of the transcript: the row it holds, its table and its bytes."""

    key: str
    table: str
    line: bytes


def rows(
    head: bytes, session_id: str, messages: Iterator[StoredMessage], digest: xxhash.xxh3_64
) -> Iterator[Row]:
    """The lines of a session's rows, in load order, after its own line (`head`:
    `session_line`); `digest` takes in every row as stored (`write.session_digest`'s
    sum), to tell later whether the session changed."""
    yield Row(session_id, SESSION, head)
    for message in messages:
        row = message.row
        digest.update(
            b"m%s\0%s\0%s\0" % (row.id.encode(), repr(row.time_created).encode(), row.data)
        )
        yield Row(row.id, MESSAGE, message_line(row))
        message_time = _message_time(row.data, row.time_created) if message.parts else None
        for part in message.parts:
            digest.update(b"p%s\0%s\0" % (part.id.encode(), part.data))
            yield Row(part.id, PART, part_line(part, message_time))


def stored_messages(
    envelopes: Iterator[tuple[int, Envelope]],
) -> Iterator[tuple[list[int], StoredMessage]]:
    """The messages the lines hold, each with its parts, and the view index of each of
    their records (message first); parts before any message are left out."""
    current: tuple[list[int], MessageRow, list[PartRow]] | None = None
    for index, envelope in envelopes:
        if envelope.opencode == MESSAGE:
            if current is not None:
                yield current[0], StoredMessage(current[1], tuple(current[2]))
            current = (
                [index],
                MessageRow(envelope.id, envelope.session_id, envelope.time_created, envelope.raw),
                [],
            )
        elif current is not None and envelope.message_id == current[1].id:
            current[0].append(index)
            current[2].append(
                PartRow(envelope.id, envelope.message_id, envelope.session_id, envelope.raw)
            )
    if current is not None:
        yield current[0], StoredMessage(current[1], tuple(current[2]))


def load_order(
    messages: Iterable[tuple[list[int], StoredMessage]],
) -> list[tuple[list[int], StoredMessage]]:
    """Messages in opencode's load order, by `time_created` then id (spec §4.1): a
    repair may stamp a message with another time than its line's place says."""
    return sorted(messages, key=lambda found: (found[1].row.time_created, found[1].row.id))
