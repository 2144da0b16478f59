"""What Codex (0.169) sends the model when it resumes a rollout (formats/codex.md §4-5).

Codex refuses a rollout whose first non-blank line is not a `session_meta` record with a
string `timestamp`, a UUID `id` and string `timestamp`, `cwd`, `originator` and
`cli_version` in its payload, and `base_instructions` null, absent or `{text: string}`:
then it loads nothing (`LoadRefused`). Otherwise the history it sends is:

- a developer message of base instructions (`session_meta.payload.base_instructions.text`,
  else Codex's own, `DEFAULT_INSTRUCTIONS_BYTES`);
- the `response_item` payloads Codex reads as items, in file order (a message needs a
  string role and a content list of text and image parts, a call or an output a string
  `call_id`; an item of a type Codex does not know is sent as `other`, a
  `ghost_snapshot` is read and never sent);
- a `compacted` record with a string `message` replaces the history before it with its
  `replacement_history`, or, where that is null or absent, with the user messages so
  far and a user message of its summary. Codex passes the record by where the history
  is some other value or holds anything that is no item, or where a
  `replacement_history_metadata` is not a list as long as the history. Where a
  `thread_rolled_back` of one turn or more is anywhere in the file, Codex takes no
  replacement history at all (it replays the lines; a compaction without one still
  adds its summary);
- `thread_rolled_back {num_turns}` cuts the history before its last user message, that
  many times;
- outputs are then paired in order: one with no call before it is dropped, a call with
  no output gets an `"aborted"` one right after it.

Codex parses each line on its own, JSON's whitespace (space, tab, CR) around it allowed:
a line that does not parse, or has no string `timestamp`, is skipped. The view's reader
recovers records from lines Codex cannot parse: both records of a glued line (two
records on one row), a record after a BOM, NUL bytes or a damaged prefix, one before NUL
bytes, one broken over two lines. Such a record is known by the bytes around it on its
line (anything but whitespace) or a line break inside it, and is left out as Codex
leaves its line out. What may still differ on damaged lines: a line that holds no
record of the view is taken as one Codex skips (a line Codex parsed and sessionfix did
not would be missed), and invalid UTF-8 inside a record the reader recovered is not
looked for (Codex may fail on it).

Sizes are the stored JSON of each item (a replacement history's items as they lie in the
`compacted` record; Codex re-serialises items, dropping fields it does not know); the
summary message of a compaction without a history is measured as Codex builds it from
the stored `message`, an `"aborted"` output as Codex makes it, the base instructions as
their stored text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, NamedTuple

import msgspec
from msgspec import Raw, Struct

from sessionfix.formats.codex.decode import CALL_TYPES, HEADER_TYPE, IMAGE_PART, OUTPUT_TYPES
from sessionfix.model.loaded import MADE_BY_LOADER, Loaded, LoadRefused, Sent
from sessionfix.model.view import Flag, Kind, SessionView
from sessionfix.read.reader import LineReport, RecordSource

DEFAULT_INSTRUCTIONS_BYTES: Final = 17_119
"""The size counted for the base instructions of a rollout whose `session_meta` has
none: the UTF-8 bytes of the text Codex 0.169 sends then for a model it has no prompt
of its own for (the prompt is model-dependent; those of its own models are of the same
order)."""
ANSWERS: Final = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "function_call_output",
    "tool_search_call": "tool_search_output",
}
"""The output type that answers each call type."""
UNSENT_ITEMS: Final = frozenset({"ghost_snapshot"})
"""Items Codex reads back and never sends to the model."""
CONTENT_TYPES: Final = frozenset({"input_text", "output_text", "input_image"})
"""The message content parts Codex reads (a message with any other is skipped)."""
NO_SUMMARY: Final = b'"(no summary available)"'
"""What Codex's summary message says for a compaction with an empty `message`."""
ROLLBACK_TYPE: Final = "thread_rolled_back"

_SENT_OF_ROLE: Final = {
    "user": Sent.USER,
    "assistant": Sent.ASSISTANT,
    "developer": Sent.SYSTEM,
    "system": Sent.SYSTEM,
}
_SENT_OF_TYPE: Final = {
    "reasoning": Sent.REASONING,
    "compaction": Sent.SUMMARY,
    "compaction_summary": Sent.SUMMARY,
    **dict.fromkeys(CALL_TYPES, Sent.TOOL_CALL),
    **dict.fromkeys(OUTPUT_TYPES, Sent.TOOL_RESULT),
}
_SUMMARY_HEAD: Final = b'{"type":"message","role":"user","content":[{"type":"input_text","text":'
_SUMMARY_TAIL: Final = b"}]}"
_SPACE: Final = b" \t\r"
"""JSON's whitespace within a line."""
_BLANK: Final = b" \t\r\n"
_CHUNK: Final = 4096
_UUID: Final = re.compile(
    r"(?:urn:uuid:)?(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})"
    r"|\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}",
    re.IGNORECASE,
)
_NO_RAW: Final = Raw(b"")
_DATA_URL: Final = b'"data:'


class _Line(Struct, gc=False):
    timestamp: object = None
    type: object = None
    payload: Raw = _NO_RAW


class _Part(Struct, gc=False):
    type: object = None
    image_url: Raw = _NO_RAW


class _Item(Struct, gc=False):
    type: object = None
    role: object = None
    call_id: object = None
    content: Raw = _NO_RAW
    output: Raw = _NO_RAW


class _Compacted(Struct, gc=False):
    message: Raw = _NO_RAW
    replacement_history: Raw = _NO_RAW
    replacement_history_metadata: Raw = _NO_RAW


class _Event(Struct, gc=False):
    type: object = None
    num_turns: object = None


class _Instructions(Struct, gc=False):
    text: Raw = _NO_RAW


class _Meta(Struct, gc=False):
    id: object = None
    timestamp: object = None
    cwd: object = None
    originator: object = None
    cli_version: object = None
    base_instructions: Raw = _NO_RAW


_LINE: Final = msgspec.json.Decoder(_Line)
_ITEM: Final = msgspec.json.Decoder(_Item)
_PARTS: Final = msgspec.json.Decoder(list[_Part])
_COMPACTED: Final = msgspec.json.Decoder(_Compacted)
_EVENT: Final = msgspec.json.Decoder(_Event)
_INSTRUCTIONS: Final = msgspec.json.Decoder(_Instructions)
_META: Final = msgspec.json.Decoder(_Meta)
_RAWS: Final = msgspec.json.Decoder(list[Raw])
_FAILED: Final = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


class _Entry(NamedTuple):
    """One item of the history being rebuilt."""

    loaded: Loaded
    user: bool
    """A user message (where a rollback cuts, what a compaction without history keeps)."""
    call: tuple[str, str] | None = None
    """A call's (the output type that answers it, its `call_id`)."""
    output: tuple[str, str] | None = None
    """An output's (type, `call_id`)."""


_UNSENT: Final = _Entry(Loaded(MADE_BY_LOADER, Sent.OTHER, 0), False)
"""What `_entry` gives for an item Codex reads and does not send."""


REFUSED: Final = "Codex refuses the rollout: its first line is no session_meta record it reads"


def loaded_messages(
    view: SessionView, source: RecordSource, report: LineReport
) -> Iterator[Loaded]:
    """The items Codex sends as the rollout's history on resume, in order; `LoadRefused`
    where it refuses the rollout. (Lines Codex skips are told by the bytes around each
    record, `_Lines`, which `report` does not say: a record it recovered from a line.)"""
    if not len(view) or view.header is None:
        raise LoadRefused(REFUSED)
    lines = _Lines(view, source)
    base = _base(view, lines)
    if base is None:
        raise LoadRefused(REFUSED)
    turns = _rollbacks(view, lines)
    replays = any(turns.values())
    history: list[_Entry] = []
    start = 1
    if not replays:
        for index in sorted(_carriers(view), reverse=True):
            carried = _compaction(index, lines)
            if isinstance(carried, list):
                history, start = carried, index + 1
                break
    kinds, flags = view.kinds, view.flags
    for index in range(start, len(kinds)):
        kind = kinds[index]
        if kind == Kind.MESSAGE:
            entry = _response_item(index, lines)
            if entry is not None:
                history.append(entry)
        elif kind == Kind.COMPACTION:
            facts = view.boundaries.get(index)
            if facts is not None and facts.carries_history:
                continue  # passed by: a rollback replays, or it is no base Codex takes
            summary = _compaction(index, lines)
            if isinstance(summary, _Entry):
                history = [entry for entry in history if entry.user]
                history.append(summary)
        elif flags[index] & Flag.ROLLBACK:
            history = _rolled_back(history, turns.get(index, 0))
    yield base
    yield from _paired(history)


class _Lines:
    """Reads records back, and tells whether each is a line Codex parses on its own."""

    def __init__(self, view: SessionView, source: RecordSource) -> None:
        self.view = view
        self.source = source

    def read(self, index: int) -> _Line | None:
        """The record as Codex reads its line (None: Codex skips the line)."""
        data = self.source.read(*self.view.span(index))
        if b"\n" in data or not self.alone(index):
            return None
        try:
            line = _LINE.decode(data)
        except _FAILED:
            return None
        return line if type(line.timestamp) is str else None

    def alone(self, index: int) -> bool:
        """Whether only whitespace shares the record's line."""
        view = self.view
        rows = view.rows
        row = rows[index]
        if (index > 0 and rows[index - 1] == row) or (
            index + 1 < len(rows) and rows[index + 1] == row
        ):
            return False
        return self._head_clear(index) and self._tail_clear(index)

    def _head_clear(self, index: int) -> bool:
        view = self.view
        start = view.offsets[index]
        floor = 0 if index == 0 else view.offsets[index - 1] + view.sizes[index - 1]
        if start - floor == (0 if index == 0 else 1):
            return True
        while start > floor:
            at = max(floor, start - _CHUNK)
            chunk = self.source.read(at, start - at).rstrip(_SPACE)
            if chunk:
                return chunk.endswith(b"\n")
            start = at
        return index == 0

    def _tail_clear(self, index: int) -> bool:
        view = self.view
        end = view.offsets[index] + view.sizes[index]
        if index + 1 < len(view.offsets) and view.offsets[index + 1] - end == 1:
            return True
        while True:
            chunk = self.source.read(end, _CHUNK)
            if not chunk:
                return True
            rest = chunk.lstrip(_SPACE)
            if rest:
                return rest.startswith(b"\n")
            end += len(chunk)

    def blank_before(self, index: int) -> bool:
        """Whether only blank lines come before the record."""
        at, end = 0, self.view.offsets[index]
        while at < end:
            chunk = self.source.read(at, min(_CHUNK, end - at))
            if not chunk or chunk.strip(_BLANK):
                return not chunk
            at += len(chunk)
        return True


def _base(view: SessionView, lines: _Lines) -> Loaded | None:
    """The base instructions message, or None where Codex refuses the rollout."""
    line = lines.read(0) if lines.blank_before(0) else None
    if line is None or line.type != HEADER_TYPE:
        return None
    try:
        meta = _META.decode(line.payload)
    except _FAILED:
        return None
    if not (type(meta.id) is str and _UUID.fullmatch(meta.id)):
        return None
    if any(type(field) is not str for field in (meta.timestamp, meta.cwd, meta.originator)):
        return None
    if type(meta.cli_version) is not str:
        return None
    instructions = meta.base_instructions
    if not _present(instructions):
        return Loaded(0, Sent.SYSTEM, DEFAULT_INSTRUCTIONS_BYTES)
    try:
        text = _INSTRUCTIONS.decode(instructions).text
    except (*_FAILED, msgspec.ValidationError):
        return None
    if not _starts(text, b'"'):
        return None
    return Loaded(0, Sent.SYSTEM, len(text) - 2)


def _rollbacks(view: SessionView, lines: _Lines) -> dict[int, int]:
    """The turns each `thread_rolled_back` Codex reads takes back, by record."""
    found: dict[int, int] = {}
    for index in view.records_flagged(Flag.ROLLBACK):
        line = lines.read(index)
        if line is None or line.type != "event_msg":
            continue
        try:
            event = _EVENT.decode(line.payload)
        except _FAILED:
            continue
        if event.type == ROLLBACK_TYPE and type(event.num_turns) is int:
            found[index] = max(event.num_turns, 0)
    return found


def _carriers(view: SessionView) -> Iterator[int]:
    return (index for index, facts in view.boundaries.items() if facts.carries_history)


def _compaction(index: int, lines: _Lines) -> list[_Entry] | _Entry | None:
    """What a `compacted` record puts in place of the history: its replacement history's
    items, or (without one) its summary message; None where Codex passes it by."""
    line = lines.read(index)
    if line is None or line.type != "compacted":
        return None
    try:
        compacted = _COMPACTED.decode(line.payload)
    except _FAILED:
        return None
    message = compacted.message
    if len(message) < 2 or not _starts(message, b'"'):
        return None
    carried = _items(compacted.replacement_history)
    if carried is None and _present(compacted.replacement_history):
        return None
    metadata = compacted.replacement_history_metadata
    if _present(metadata):
        listed = _items(metadata)
        if carried is None or listed is None or len(listed) != len(carried):
            return None
    if carried is not None:
        entries = [_entry(index, item) for item in carried]
        if None in entries:
            return None  # an item Codex cannot read fails the whole record
        return [entry for entry in entries if entry is not None and entry is not _UNSENT]
    text = NO_SUMMARY if len(message) == 2 else message
    size = len(_SUMMARY_HEAD) + len(text) + len(_SUMMARY_TAIL)
    return _Entry(Loaded(index, Sent.SUMMARY, size), True)


def _starts(raw: Raw, prefix: bytes) -> bool:
    return memoryview(raw)[: len(prefix)] == prefix


def _present(raw: Raw) -> bool:
    """Whether a field is there and not null."""
    return len(raw) > 0 and not _starts(raw, b"null")


def _items(raw: Raw) -> list[Raw] | None:
    """The elements of a JSON array (None: no array)."""
    if not _starts(raw, b"["):
        return None
    try:
        return _RAWS.decode(raw)
    except _FAILED:
        return None


def _response_item(index: int, lines: _Lines) -> _Entry | None:
    """The item a `response_item` line sends (None: none)."""
    line = lines.read(index)
    if line is None or line.type != "response_item":
        return None
    entry = _entry(index, line.payload)
    return None if entry is _UNSENT else entry


def _entry(index: int, raw: Raw) -> _Entry | None:
    """An item as Codex sends it (None: one Codex cannot read; `_UNSENT`: one it reads
    and does not send)."""
    try:
        item = _ITEM.decode(raw)
    except _FAILED:
        return None
    kind = item.type
    if type(kind) is not str:
        return None
    if kind in UNSENT_ITEMS:
        return _UNSENT
    size = len(raw)
    if kind == "message":
        role = item.role
        if type(role) is not str:
            return None
        try:
            parts = _PARTS.decode(item.content)
        except _FAILED:
            return None
        if any(part.type not in CONTENT_TYPES for part in parts):
            return None
        images, image_bytes = _images(parts)
        sent = _SENT_OF_ROLE.get(role, Sent.OTHER)
        return _Entry(Loaded(index, sent, size, images, image_bytes), role == "user")
    sent = _SENT_OF_TYPE.get(kind, Sent.OTHER)
    call_id = item.call_id
    if kind in ANSWERS:
        if type(call_id) is not str:
            return None
        return _Entry(Loaded(index, sent, size), False, call=(ANSWERS[kind], call_id))
    if kind in OUTPUT_TYPES:
        if type(call_id) is not str:
            return None
        images, image_bytes = _output_images(item.output)
        return _Entry(Loaded(index, sent, size, images, image_bytes), False, output=(kind, call_id))
    return _Entry(Loaded(index, sent, size), False)


def _images(parts: list[_Part]) -> tuple[int, int]:
    """Inline images (`input_image` parts with a `data:` URL): how many, and their URLs'
    length."""
    images = image_bytes = 0
    for part in parts:
        url = part.image_url
        if part.type == IMAGE_PART and _starts(url, _DATA_URL):
            images += 1
            image_bytes += len(url) - 2
    return images, image_bytes


def _output_images(output: Raw) -> tuple[int, int]:
    """Inline images in an output given as content parts."""
    if not _starts(output, b"["):
        return 0, 0
    try:
        return _images(_PARTS.decode(output))
    except _FAILED:
        return 0, 0


def _rolled_back(history: list[_Entry], turns: int) -> list[_Entry]:
    """The history less its last `turns` turns, each cut before its user message."""
    for _ in range(turns):
        cut = next(
            (at for at in range(len(history) - 1, -1, -1) if history[at].user),
            None,
        )
        if cut is None:
            break
        history = history[:cut]
    return history


def _paired(history: list[_Entry]) -> Iterator[Loaded]:
    """The history with outputs that answer no call before them left out, and an
    `"aborted"` output made up after each call that has none."""
    answered = {entry.output for entry in history if entry.output is not None}
    called: set[tuple[str, str]] = set()
    for entry in history:
        if entry.output is not None and entry.output not in called:
            continue
        yield entry.loaded
        call = entry.call
        if call is not None:
            called.add(call)
            if call not in answered:
                answered.add(call)
                yield _aborted(*call)


def _aborted(kind: str, call_id: str) -> Loaded:
    """The output Codex makes up for a call that has none, measured as it sends it."""
    if kind == "tool_search_output":
        made: dict[str, object] = {
            "type": kind,
            "call_id": call_id,
            "status": "completed",
            "execution": "client",
            "tools": [],
        }
    else:
        made = {"type": kind, "call_id": call_id, "output": "aborted"}
    return Loaded(MADE_BY_LOADER, Sent.TOOL_RESULT, len(msgspec.json.encode(made)))
