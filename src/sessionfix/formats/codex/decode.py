"""Codex rollouts (spec: formats/codex.md) streamed into a `SessionView`.

Every line is `{timestamp, [ordinal,] type, payload}`. `response_item` payloads are what
the model sees: messages, reasoning, tool calls and their outputs, each a record of its
own and paired by `call_id` in file order. A `compacted` record may carry the whole
history it replaces (`replacement_history`): the newest one is where a resume starts.
Records are positional (no ids, no parent links); only the fields the rules need are
decoded, and unknown types are kept as they are.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType
from xxhash import xxh3_64_intdigest

from sessionfix import jsonutil
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.codex.edit import CodexEditor
from sessionfix.model.tracking import CallIdTracker
from sessionfix.model.view import (
    MISSING,
    MISSING_KEY,
    NO_ID_KEY,
    NO_ORDINAL,
    BoundaryFacts,
    Flag,
    HeaderFacts,
    Kind,
    Role,
    SessionView,
    ToolCall,
)
from sessionfix.read.reader import LineReport, RecordSource

FORMAT_NAME: Final = "codex"
CAPABILITIES: Final = frozenset(
    {
        Capability.LINES,
        Capability.HEADER,
        Capability.TOOL_CALLS,
        Capability.DISTINCT_CALL_IDS,
        Capability.TOOL_NAMES,
        Capability.ORDINALS,
        Capability.CARRIED_HISTORIES,
        Capability.SHORTENED_RESULTS,
    }
)
"""What a Codex rollout lets rules see."""
HEADER_TYPE: Final = "session_meta"
CALL_TYPES: Final = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
OUTPUT_TYPES: Final = frozenset(
    {"function_call_output", "custom_tool_call_output", "tool_search_output"}
)
IMAGE_PART: Final = "input_image"
ROLLBACK_EVENT: Final = "thread_rolled_back"
HEADERLESS: Final = "Codex refuses to read a rollout that does not start with its session_meta"


_NO_RAW: Final = Raw(b"")
_QUOTE: Final = ord('"')


class _Part(Struct, gc=False):
    """A content part of a carried history item: only images are looked at, as raw
    bytes (digested where they lie, never decoded into strings)."""

    type: Any = None
    image_url: Raw = _NO_RAW


class _Item(Struct, gc=False):
    """An item of a `replacement_history`."""

    type: Any = None
    call_id: Any = None
    content: list[_Part] | str | None = None
    output: list[_Part] | str | None = None


class _Payload(Struct, gc=False):
    type: Any = None
    role: Any = None
    name: Any = None
    call_id: Any = None
    id: Any = None
    cwd: Any = None
    replacement_history: list[_Item] | UnsetType | None = UNSET


class _Record(Struct, gc=False):
    type: Any = None
    ordinal: Any = UNSET
    payload: _Payload | None = None


class _CallId(Struct, gc=False):
    call_id: Any = None


class _CallIdRecord(Struct, gc=False):
    payload: _CallId | None = None


class _TypeNames(Struct, gc=False):
    type: Any = None


class _TypedRecord(Struct, gc=False):
    type: Any = None
    payload: _TypeNames | None = None


_RECORD_DECODER: Final = msgspec.json.Decoder(_Record)
_CALL_ID_DECODER: Final = msgspec.json.Decoder(_CallIdRecord)
_TYPE_DECODER: Final = msgspec.json.Decoder(_TypedRecord)


def _loose_parts(value: object) -> list[_Part] | str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    return [
        _Part(part.get("type"), Raw(_encode_loose(part.get("image_url"))))
        if isinstance(part, dict)
        else _Part()
        for part in value
    ]


def _encode_loose(value: object) -> bytes:
    try:
        return msgspec.json.encode(value)
    except (TypeError, ValueError):
        return b"null"


def _loose_record(value: dict[str, Any]) -> _Record:
    """A record the typed decoder refused (odd field types), with only what is usable."""
    body = value.get("payload")
    payload = None
    if isinstance(body, dict):
        history: list[_Item] | UnsetType | None = UNSET
        if "replacement_history" in body:
            raw = body["replacement_history"]
            history = (
                [
                    _Item(
                        item.get("type"),
                        item.get("call_id"),
                        _loose_parts(item.get("content")),
                        _loose_parts(item.get("output")),
                    )
                    if isinstance(item, dict)
                    else _Item()
                    for item in raw
                ]
                if isinstance(raw, list)
                else None
            )
        payload = _Payload(
            body.get("type"),
            body.get("role"),
            body.get("name"),
            body.get("call_id"),
            body.get("id"),
            body.get("cwd"),
            history,
        )
    return _Record(value.get("type"), value.get("ordinal", UNSET), payload)


def decode_record(data: bytes) -> _Record:
    """The fields of one record the rules use (ValueError when the bytes hold no object)."""
    try:
        return _RECORD_DECODER.decode(data)
    except (ValueError, RecursionError):
        value = jsonutil.loads(data)
        if not isinstance(value, dict):
            raise ValueError("not an object") from None
        return _loose_record(value)


def _valid_name(name: str) -> bool:
    """Whether the API can take a tool name: not empty, no NUL or other control byte
    (#24369; Codex's own names such as `container.exec` are otherwise sent as written)."""
    return bool(name) and name.isprintable()


def _images(items: list[_Item]) -> tuple[tuple[int, int], ...]:
    found = []
    for item in items:
        for parts in (item.content, item.output):
            if isinstance(parts, list):
                for part in parts:
                    url = part.image_url
                    if part.type == IMAGE_PART and len(url) > 1 and memoryview(url)[0] == _QUOTE:
                        found.append((xxh3_64_intdigest(url), len(url) - 2))
    return tuple(found)


class CodexContext(Struct, frozen=True):
    """What a reader of a later byte range knows: that it does not start the file."""

    later: bool = True


_OTHER, _USER, _ASSISTANT, _INSTRUCTION, _ITEM, _CALL, _OUTPUT, _COMPACTED, _META, _ROLLBACK = (
    range(10)
)
"""Per-record codes of a batch: what each record is, decided in one pass."""
_KIND_OF_CODE: Final = bytes(
    [
        Kind.OTHER,
        Kind.MESSAGE,
        Kind.MESSAGE,
        Kind.MESSAGE,
        Kind.MESSAGE,
        Kind.MESSAGE,
        Kind.MESSAGE,
        Kind.COMPACTION,
        Kind.METADATA,
        Kind.OTHER,
    ]
).ljust(256, b"\0")
_ROLE_OF_CODE: Final = bytes(
    [
        Role.NONE,
        Role.USER,
        Role.ASSISTANT,
        Role.OTHER,
        Role.OTHER,
        Role.ASSISTANT,
        Role.TOOL_RESULT,
        Role.NONE,
        Role.NONE,
        Role.NONE,
    ]
).ljust(256, b"\0")
_FLAGS_OF_CODE: Final = bytes(
    [0, Flag.CONTEXT, Flag.CONTEXT, Flag.CONTEXT, 0, 0, 0, Flag.CONTEXT, 0, Flag.ROLLBACK]
).ljust(256, b"\0")
_MESSAGE_CODES: Final = {"user": _USER, "assistant": _ASSISTANT}
_LINE_CODES: Final = {"turn_context": _OTHER, "compacted": _COMPACTED, HEADER_TYPE: _META}
_NEEDS_EVENTS: Final = frozenset(
    {_USER, _ASSISTANT, _INSTRUCTION, _CALL, _OUTPUT, _COMPACTED, _META}
)


def _code(record: _Record) -> int:
    payload = record.payload
    if payload is None:
        return _OTHER
    line_type = record.type
    if line_type == "response_item":
        item_type = payload.type
        if item_type == "message":
            return _MESSAGE_CODES.get(payload.role, _INSTRUCTION)
        if item_type in CALL_TYPES:
            return _CALL
        if item_type in OUTPUT_TYPES:
            return _OUTPUT
        return _ITEM
    if line_type == "event_msg":
        return _ROLLBACK if payload.type == ROLLBACK_EVENT else _OTHER
    return _LINE_CODES.get(line_type, _OTHER)


def _ORDINAL_OF(record: _Record) -> object:
    return record.ordinal


class CodexAdapter:
    """Streams a Codex rollout into its view, and its calls and outputs, in file order,
    into a tracker that pairs them by `call_id`."""

    def __init__(self, path: Path, context: object = None) -> None:
        self.path = path
        self._from_start = context is None
        self.view = SessionView(path=path, format=FORMAT_NAME, tree=False)
        self.view.headerless = HEADERLESS
        self.editor = CodexEditor()
        self.tracker = CallIdTracker(head=not self._from_start)

    decode = staticmethod(_RECORD_DECODER.decode)
    decode_lines = staticmethod(_RECORD_DECODER.decode_lines)

    @property
    def context(self) -> CodexContext:
        return CodexContext()

    @property
    def named(self) -> None:
        return None

    def ingest_batch(
        self,
        records: list[_Record],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
    ) -> None:
        """Index a block of decoded lines column by column; only calls, outputs,
        messages and compactions are then looked at one by one."""
        view = self.view
        base = len(view.kinds)
        count = len(records)
        codes = bytes(map(_code, records))
        view.rows.extend(range(first_row, first_row + count))
        view.offsets.extend(offsets)
        view.sizes.extend(sizes)
        view.kinds.extend(codes.translate(_KIND_OF_CODE))
        view.roles.extend(codes.translate(_ROLE_OF_CODE))
        view.flags.extend(codes.translate(_FLAGS_OF_CODE))
        view.id_keys.extend(array("q", [NO_ID_KEY]) * count)
        view.parent_keys.extend(array("q", [MISSING_KEY]) * count)
        self._ordinals(base, list(map(_ORDINAL_OF, records)))
        for position, code in enumerate(codes):
            if code in _NEEDS_EVENTS:
                self._events(base + position, code, records[position])

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        self.ingest(_loose_record(value), data, row, column, offset, len(data))

    def ingest(
        self, record: _Record, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        index = len(self.view.kinds)
        self.ingest_batch([record], row, [offset], [size], lambda _: data)
        if column != 1:
            self.view.columns[index] = column

    def _events(self, index: int, code: int, record: _Record) -> None:
        """What a record tells the tracker and the view beyond its kind."""
        view = self.view
        tracker = self.tracker
        payload = record.payload
        assert payload is not None
        if code in (_CALL, _OUTPUT):
            call_id = payload.call_id
            if type(call_id) is not str or not call_id:
                if code == _OUTPUT:
                    tracker.result(index, None, 0)
                return
            view.id_keys[index] = hash(call_id)
            if code == _OUTPUT:
                tracker.result(index, call_id, 0)
                return
            name = payload.name
            if type(name) is str and not _valid_name(name):
                view.invalid_calls[index] = (name,)
            shown = name if type(name) is str else str(payload.type)
            tracker.assistant(index, (ToolCall(call_id, shown),), False, None)
        elif code == _COMPACTED:
            history = payload.replacement_history
            carried = history if isinstance(history, list) else None
            view.boundaries[index] = BoundaryFacts(
                None,
                carries_history=carried is not None,
                images=() if carried is None else _images(carried),
            )
            tracker.boundary(index)
            if carried is not None:
                tracker.carry(index, *_carried_ids(carried))
        elif code == _META:
            if index == 0 and self._from_start:
                cwd = payload.cwd if type(payload.cwd) is str else None
                view.header = HeaderFacts(view.rows[index], payload.id, None, cwd)
                view.kinds[index] = Kind.HEADER
        else:
            tracker.context(index)

    def _ordinals(self, base: int, ordinals: list[object]) -> None:
        numbered = self.view.ordinals
        if numbered is None:
            if ordinals.count(UNSET) == len(ordinals):
                return
            numbered = self.view.ordinals = array("q", [NO_ORDINAL]) * base
        numbered.extend(
            ordinal if type(ordinal) is int and ordinal >= 0 else NO_ORDINAL for ordinal in ordinals
        )

    def replay(self, index: int, data: bytes) -> None:
        """Never needed: a rollout's path is its file order, read once."""

    def finish(self, lines: LineReport) -> None:
        view = self.view
        ordinals = view.ordinals
        if ordinals is not None and len(ordinals) < len(view.kinds):
            ordinals.extend(array("q", [NO_ORDINAL]) * (len(view.kinds) - len(ordinals)))
        source = RecordSource(self.path)
        view.read_ids = partial(_read_call_id, source, view)
        view.type_name = partial(_read_type_name, source, view)
        view.prompted = partial(_read_prompted, source, view)
        view.finish()


def _carried_ids(history: Iterable[_Item]) -> tuple[list[str], list[str]]:
    calls: list[str] = []
    results: list[str] = []
    for item in history:
        call_id = item.call_id
        if type(call_id) is not str:
            continue
        if item.type in CALL_TYPES:
            calls.append(call_id)
        elif item.type in OUTPUT_TYPES:
            results.append(call_id)
    return calls, results


def _read_call_id(source: RecordSource, view: SessionView, index: int) -> tuple[str | None, object]:
    """A call's or an output's `call_id`: what a Codex diagnostic names its record by."""
    data = source.read(*view.span(index))
    try:
        found = _CALL_ID_DECODER.decode(data)
        call_id = found.payload.call_id if found.payload is not None else None
    except (ValueError, RecursionError):
        return None, MISSING
    return (call_id if type(call_id) is str and call_id else None), MISSING


CONTEXTUAL_PREFIXES: Final = (
    "<environment_context",
    "<user_instructions>",
    "# agents.md instructions",
    "<skill>",
    "<skills_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<context_update>",
    "<hook_prompt",
)
"""How the text of a user message Codex writes itself begins (its environment, the
AGENTS.md instructions, a notice that a turn was aborted …), lower-cased: Codex counts
no user turn at such a message (its "contextual user messages")."""


class _UserContent(Struct, gc=False):
    content: Any = None


class _UserRecord(Struct, gc=False):
    payload: _UserContent | None = None


_USER_DECODER: Final = msgspec.json.Decoder(_UserRecord)


def _read_prompted(source: RecordSource, view: SessionView, index: int) -> bool:
    """Whether a user message is a person's prompt, not one Codex writes itself."""
    try:
        payload = _USER_DECODER.decode(source.read(*view.span(index))).payload
    except (ValueError, RecursionError):
        return True
    parts = payload.content if payload is not None else None
    return not isinstance(parts, list) or not any(
        isinstance(part, dict)
        and isinstance(text := part.get("text"), str)
        and text.lstrip().lower().startswith(CONTEXTUAL_PREFIXES)
        for part in parts
    )


def _read_type_name(source: RecordSource, view: SessionView, index: int) -> str | None:
    """`function_call_output`, `compacted`, `event_msg thread_rolled_back`: the line type,
    with the payload's own type where it has one. A compaction is named without reading
    it back: it is the largest record of a rollout (tens of MiB, most of it images), and
    only a `compacted` line is indexed as one."""
    if view.kinds[index] == Kind.COMPACTION:
        return "compacted"
    try:
        found = _TYPE_DECODER.decode(source.read(*view.span(index)))
    except (ValueError, RecursionError):
        return None
    line_type = found.type if type(found.type) is str else None
    inner = found.payload.type if found.payload is not None else None
    if line_type == "response_item" and type(inner) is str:
        return inner
    if line_type is not None and type(inner) is str:
        return f"{line_type} {inner}"
    return line_type
