"""pi and OpenClaw session JSONL (spec: formats/pi-openclaw.md).

A header line (`type: "session"`), then one entry per line. v1 files are a linear
list without ids whose compactions keep history from a position
(`firstKeptEntryIndex`); v2/v3 entries form a tree through `id` / `parentId`.
OpenClaw writes the same format and adds `leaf` / `reset` rows and `__openclaw`
fields. This module decodes only the fields the rules need, with a typed partial
decode, and records them in the format-neutral `SessionView`.
"""

from __future__ import annotations

import fnmatch
import re
from array import array
from bisect import bisect_right
from collections.abc import Callable
from functools import partial
from itertools import accumulate, chain, compress, repeat
from operator import add, attrgetter, countOf, eq, is_, is_not, mod, mul, sub
from pathlib import Path
from typing import Any, Final

import msgspec
import xxhash
from msgspec import UNSET, Raw, Struct, UnsetType, field

from sessionfix import jsonutil
from sessionfix.formats import Format
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.common import (
    SHORTEST_SIGNATURE,
    ParsingDecoder,
    ids_reader,
    signature_fault,
    text_exceeds,
    writes_anthropic_signatures,
)
from sessionfix.formats.content import (
    ANTHROPIC_MEDIA_LIMITS,
    EMPTY_TEXT,
    inline_media,
    is_blank,
)
from sessionfix.formats.pi.edit import ROOT_NAME, PiEditor
from sessionfix.formats.pi.location import is_checkpoint_name, is_openclaw_location
from sessionfix.model.tracking import CleanBlock, PathTracker
from sessionfix.model.view import (
    MISSING,
    MISSING_KEY,
    NO_ID_KEY,
    NO_MODEL,
    BadSignature,
    Bit,
    BlankText,
    BoundaryFacts,
    BrokenThinking,
    FileAction,
    Flag,
    HeaderFacts,
    Kind,
    MediaKind,
    Reference,
    RefKind,
    RefRole,
    Role,
    SessionView,
    SignatureFault,
    ToolCall,
    key_of,
)
from sessionfix.read.reader import LineReport, RecordSource
from sessionfix.units import iso_seconds

_NO_RAW: Final = Raw(b"")


class _CallBlock(Struct, gc=False):
    """A content block of an assistant message: only tool calls and thinking blocks are
    looked at."""

    type: Any = None
    id: Any = None
    name: Any = None
    arguments: Raw = _NO_RAW
    partialJson: Raw = _NO_RAW
    thinkingSignature: Any | UnsetType = UNSET
    redacted: Any = None


class _ContentBlock(Struct, gc=False):
    """A content block of a user message or a tool result: the raw text of text blocks
    and the data of images are looked at."""

    type: Any = None
    text: Raw = _NO_RAW
    data: Raw = _NO_RAW
    mimeType: Any = None


class _Message(Struct, gc=False, tag_field="role"):
    """A message, decoded by its role (the tag) into only the fields the rules need.

    A role not listed below makes the typed decode fail, and the record goes through
    the general path (`_loose_record`), where it becomes an `_UnknownMessage`.
    """

    openclaw: Raw = field(default=_NO_RAW, name="__openclaw")


class _UserMessage(_Message, gc=False, tag="user"):
    timestamp: Any = None
    content: str | list[Raw] | None = None
    """Its blocks as JSON (`_ContentBlock`), read only where one is noteworthy."""


class _AssistantMessage(_Message, gc=False, tag="assistant"):
    content: str | list[_CallBlock] | None = None
    stopReason: Any = None
    api: Any = None
    provider: Any = None
    model: Any = None


class _ToolResultMessage(_Message, gc=False, tag="toolResult"):
    toolCallId: Any = None
    toolName: Any = None
    isError: Any = None
    content: str | list[Raw] | None = None
    """Its blocks as JSON (`_ContentBlock`), read only where one is noteworthy."""


class _BashMessage(_Message, gc=False, tag="bashExecution"):
    pass


class _CustomMessage(_Message, gc=False, tag="custom"):
    pass


class _HookMessage(_Message, gc=False, tag="hookMessage"):
    pass


class _UnknownMessage(_Message, gc=False, tag="\x00unknown"):
    """Any other role, or none (built by `_loose_message` only)."""


class _SettingEntry(_Message, gc=False, tag="\x00setting"):
    """Stands in a run for a model or thinking-level change: an entry with no message
    and no conversation event, indexed with the messages around it."""


_SETTING_ENTRY: Final = _SettingEntry()


_AnyMessage = (
    _UserMessage
    | _AssistantMessage
    | _ToolResultMessage
    | _BashMessage
    | _CustomMessage
    | _HookMessage
    | _UnknownMessage
)


class _Record(Struct, gc=False):
    type: Any = None
    id: Any | UnsetType = UNSET
    parentId: Any | UnsetType = UNSET
    message: _AnyMessage | None = None
    summary: Any = None
    firstKeptEntryId: Any | UnsetType = UNSET
    firstKeptEntryIndex: Any = None
    tokensBefore: Any = None
    targetId: Any | UnsetType = UNSET
    appendParentId: Any | UnsetType = UNSET
    fromId: Any | UnsetType = UNSET
    version: Any | UnsetType = UNSET
    cwd: Any = None
    openclaw: Raw = field(default=_NO_RAW, name="__openclaw")


class _PathArguments(Struct, gc=False):
    path: Any = None


_RECORD_DECODER: Final = msgspec.json.Decoder(_Record)
_ARGUMENTS_DECODER: Final = ParsingDecoder(_PathArguments)

ENTRY_KINDS: Final[dict[str, Kind]] = {
    "session": Kind.HEADER,
    "message": Kind.MESSAGE,
    "compaction": Kind.COMPACTION,
    "reset": Kind.RESET,
    "branch_summary": Kind.BRANCH_SUMMARY,
    "custom_message": Kind.CUSTOM_MESSAGE,
    "label": Kind.LABEL,
    "session_info": Kind.SESSION_INFO,
    "leaf": Kind.LEAF,
    "model_change": Kind.SETTING,
    "thinking_level_change": Kind.SETTING,
    "custom": Kind.CUSTOM,
}
_SETTING_TYPES: Final = frozenset(
    name for name, kind in ENTRY_KINDS.items() if kind is Kind.SETTING
)
"""Entry types indexed column-wise with the messages around them (no events)."""
_FILE_TOOLS: Final[dict[str, FileAction]] = {
    "read": FileAction.READ,
    "write": FileAction.FULL_WRITE,
}
_INCOMPLETE_STOPS: Final = frozenset({"error", "aborted"})
_LARGE_RECORD: Final = 1 << 20
"""Records from this size on keep their id and parentId in the view: reading a huge
record back to name it in a diagnostic would hold all of it in memory again."""
VALID_VERSIONS: Final = (1, 2, 3)


def _loose_record(value: dict[str, Any]) -> _Record:
    """Build the partial view of a record from an already parsed object of any shape."""
    record = _Record(type=value.get("type"))
    for name in (
        "id",
        "parentId",
        "firstKeptEntryId",
        "targetId",
        "appendParentId",
        "fromId",
        "version",
    ):
        if name in value:
            setattr(record, name, value[name])
    record.summary = value.get("summary")
    record.firstKeptEntryIndex = value.get("firstKeptEntryIndex")
    record.tokensBefore = value.get("tokensBefore")
    record.cwd = value.get("cwd")
    if "__openclaw" in value:
        record.openclaw = Raw(b"{}")
    message = value.get("message")
    if isinstance(message, dict):
        record.message = _loose_message(message)
    return record


_MESSAGE_CLASSES: Final[dict[str, type[_Message]]] = {
    "user": _UserMessage,
    "assistant": _AssistantMessage,
    "toolResult": _ToolResultMessage,
    "bashExecution": _BashMessage,
    "custom": _CustomMessage,
    "hookMessage": _HookMessage,
}


def _loose_message(value: dict[str, Any]) -> _AnyMessage:
    role = value.get("role")
    cls = _MESSAGE_CLASSES.get(role) if type(role) is str else None
    message: _AnyMessage
    if cls is _UserMessage:
        message = _UserMessage(
            timestamp=value.get("timestamp"), content=_loose_blocks(value.get("content"))
        )
    elif cls is _AssistantMessage:
        message = _AssistantMessage(
            content=_loose_content(value.get("content")),
            stopReason=value.get("stopReason"),
            api=value.get("api"),
            provider=value.get("provider"),
            model=value.get("model"),
        )
    elif cls is _ToolResultMessage:
        message = _ToolResultMessage(
            toolCallId=value.get("toolCallId"),
            toolName=value.get("toolName"),
            isError=value.get("isError"),
            content=_loose_blocks(value.get("content")),
        )
    elif cls is None:
        message = _UnknownMessage()
    else:
        message = cls()  # type: ignore[assignment]
    if "__openclaw" in value:
        message.openclaw = Raw(b"{}")
    return message


def _loose_content(content: object) -> str | list[_CallBlock] | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    blocks = []
    for item in content:
        if not isinstance(item, dict):
            blocks.append(_CallBlock())
            continue
        block = _CallBlock(type=item.get("type"), id=item.get("id"), name=item.get("name"))
        if "arguments" in item:
            block.arguments = _loose_arguments(item["arguments"])
        if "partialJson" in item:
            block.partialJson = Raw(b'""')
        if "thinkingSignature" in item:
            block.thinkingSignature = item["thinkingSignature"]
        block.redacted = item.get("redacted")
        blocks.append(block)
    return blocks


def _loose_blocks(content: object) -> str | list[Raw] | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    return [Raw(jsonutil.stringify_bytes(item)) for item in content]


def _loose_arguments(arguments: object) -> Raw:
    """The part of a call's parsed arguments the rules read (the path), as JSON: the
    rest may be nested deeper than a serialiser recurses."""
    path = arguments.get("path") if isinstance(arguments, dict) else None
    return Raw(jsonutil.stringify_bytes({"path": path if isinstance(path, str) else None}))


_TYPE_OF: Final = attrgetter("type")
_ID_OF: Final = attrgetter("id")
_PARENT_OF: Final = attrgetter("parentId")
_MESSAGE_OF: Final = attrgetter("message")
_OPENCLAW_OF: Final = attrgetter("openclaw")
_CONTENT_OF: Final = attrgetter("content")
_STOP_OF: Final = attrgetter("stopReason")
_PARTIAL_OF: Final = attrgetter("partialJson")
_NAME_OF: Final = attrgetter("name")
_CALL_ID_OF: Final = attrgetter("toolCallId")
_IS_ERROR_OF: Final = attrgetter("isError")
_ARGUMENTS_OF: Final = attrgetter("arguments")
_PATH_OF: Final = attrgetter("path")
_TIMESTAMP_OF: Final = attrgetter("timestamp")
_LIST_TYPE: Final = frozenset({list})
_STR_TYPE: Final = frozenset({str})
_STR_SET: Final = {str}
_PARENT_TYPES: Final = frozenset({str, type(None)})
_CODE_OF_CLASS: Final[dict[type, str]] = {
    _UserMessage: "u",
    _AssistantMessage: "a",
    _ToolResultMessage: "r",
    _BashMessage: "b",
    _CustomMessage: "c",
    _HookMessage: "h",
    _UnknownMessage: "x",
    _SettingEntry: "s",
}
"""One character per message class: the `CleanBlock.codes` alphabet (b, c, h: other
messages that reach the model; s: a setting entry, no message)."""
_CONTEXT_CLASSES: Final = frozenset({_BashMessage, _CustomMessage, _HookMessage})
_K_HEADER = int(Kind.HEADER)
_K_MESSAGE = int(Kind.MESSAGE)
_K_COMPACTION = int(Kind.COMPACTION)
_K_RESET = int(Kind.RESET)
_K_BRANCH_SUMMARY = int(Kind.BRANCH_SUMMARY)
_K_CUSTOM_MESSAGE = int(Kind.CUSTOM_MESSAGE)
_K_LABEL = int(Kind.LABEL)
_K_LEAF = int(Kind.LEAF)
_K_OTHER = int(Kind.OTHER)
_R_USER = int(Role.USER)
_R_ASSISTANT = int(Role.ASSISTANT)
_R_TOOL_RESULT = int(Role.TOOL_RESULT)
_R_OTHER = int(Role.OTHER)
_R_NONE = int(Role.NONE)
_F_CONTEXT_CUT = Flag.CONTEXT | Flag.CUT_POINT
_ROLE_OF_CODE: Final = bytes.maketrans(
    b"uarbchxs",
    bytes((Role.USER, Role.ASSISTANT, Role.TOOL_RESULT, Role.BASH))
    + bytes((Role.CUSTOM, Role.CUSTOM, Role.OTHER, Role.NONE)),
)
_FLAGS_OF_CODE: Final = bytes.maketrans(
    b"uarbchxs", bytes([_F_CONTEXT_CUT, _F_CONTEXT_CUT, 0, *[_F_CONTEXT_CUT] * 3, 0, 0])
)
_KIND_OF_CODE: Final = bytes.maketrans(b"uarbchxs", bytes([Kind.MESSAGE] * 7 + [Kind.SETTING]))
_F_CUT = Flag.CUT_POINT
_F_CONTEXT = Flag.CONTEXT
_F_BAD_ID = Flag.BAD_ID
_F_NO_PARENT_KEY = Flag.NO_PARENT_KEY
_KIND_OF: Final[dict[str, int]] = {name: int(kind) for name, kind in ENTRY_KINDS.items()}


class PiContext(Struct, frozen=True):
    """What a reader of a later part of the file must know from its beginning."""

    tree: bool
    cwd: str | None


class PiAdapter:
    """Streams a pi / OpenClaw file (or a byte range of it) into a `SessionView`.

    This is the per-line hot path of a scan: it appends the record's routing fields
    to the view's columns and feeds conversation events (tool calls, results, user
    messages, boundaries) to the tracker; nothing else is kept per record.
    """

    def __init__(
        self,
        path: Path,
        *,
        forced_openclaw: bool = False,
        context: PiContext | None = None,
        tracker: PathTracker | None = None,
        named_as: Path | None = None,
    ) -> None:
        self.path = path
        self._location = named_as or path
        """Where the file is taken to lie (OpenClaw keeps its sessions in known folders)."""
        self.view = view = SessionView(path=path, format=PI.value)
        self.editor = PiEditor()
        self.tracker = tracker if tracker is not None else PathTracker(head=context is not None)
        if forced_openclaw:
            view.notes.append("--format openclaw")
        elif is_openclaw_location(self._location):
            view.notes.append("lives in an OpenClaw sessions directory")
        self._cwd: str | None = None
        self._tree_decided = False
        self._from_start = context is None
        """Reading from the first byte of the file (not a later byte range of it)."""
        if context is not None:
            view.tree = context.tree
            self._cwd = context.cwd
            self._tree_decided = True
        self._names: dict[str, str] = {}
        self._models: dict[tuple[str | None, ...], tuple[int, bool]] = {}
        """(api, provider, model) → the model's key, and whether its thinking carries
        Anthropic's signatures."""
        self._rows = view.rows.append
        self._offsets = view.offsets.append
        self._sizes = view.sizes.append
        self._kinds = view.kinds.append
        self._roles = view.roles.append
        self._flags = view.flags.append
        self._id_keys = view.id_keys.append
        self._parent_keys = view.parent_keys.append

    @property
    def context(self) -> PiContext:
        return PiContext(tree=self.view.tree, cwd=self._cwd)

    @property
    def named(self) -> bool:
        """Whether the file lies where OpenClaw keeps its sessions."""
        return is_openclaw_location(self._location)

    # ---- streaming entry points --------------------------------------------------

    decode = staticmethod(_RECORD_DECODER.decode)
    decode_lines = staticmethod(_RECORD_DECODER.decode_lines)

    def ingest_batch(
        self,
        records: list[_Record],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
    ) -> None:
        """Index a block of decoded lines column by column (the common case of a scan).

        Runs of plain message entries, with the setting changes among them, take
        C-level passes for the routing fields; only conversation events are fed one by
        one. Anything unusual goes record by record through `ingest`.
        """
        types = list(map(_TYPE_OF, records))
        count = len(records)
        if types.count("message") == count:
            self._ingest_run(records, types, first_row, offsets, sizes, line, 0)
            return
        odd = [
            position
            for position, kind in enumerate(types)
            if kind != "message" and kind not in _SETTING_TYPES
        ]
        if len(odd) > 16:
            self._ingest_each(records, first_row, offsets, sizes, line, 0)
            return
        start = 0
        for position in [*odd, count]:
            if position > start:
                self._ingest_run(
                    records[start:position],
                    types[start:position],
                    first_row + start,
                    offsets[start:position],
                    sizes[start:position],
                    line,
                    start,
                )
            if position < count:
                self.ingest(
                    records[position],
                    line(position),
                    first_row + position,
                    1,
                    offsets[position],
                    sizes[position],
                )
            start = position + 1

    def _ingest_each(
        self,
        records: list[_Record],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
        first: int,
    ) -> None:
        """`ingest` each record; `line(first + k)` is the k-th record's line."""
        for number, (record, offset, size) in enumerate(zip(records, offsets, sizes, strict=True)):
            self.ingest(record, line(first + number), first_row + number, 1, offset, size)

    def _ingest_run(
        self,
        records: list[_Record],
        types: list[Any],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
        first: int,
    ) -> None:
        """A run of message and setting records: column passes when every record is
        plain."""
        count = len(records)
        view = self.view
        messages = list(map(_MESSAGE_OF, records))
        if types.count("message") != count:
            for position, kind in enumerate(types):
                if kind != "message":
                    messages[position] = _SETTING_ENTRY
        ids = list(map(_ID_OF, records))
        parents = list(map(_PARENT_OF, records))
        classes = list(map(type, messages))
        if not (
            self._tree_decided
            and type(None) not in set(classes)
            and countOf(map(_OPENCLAW_OF, records), _NO_RAW) == count
            and countOf(map(_OPENCLAW_OF, messages), _NO_RAW) == count
            and self._plain_links(ids, parents)
        ):
            self._ingest_each(records, first_row, offsets, sizes, line, first)
            return
        base = len(view.kinds)
        codes = "".join(map(_CODE_OF_CLASS.__getitem__, classes))
        encoded = codes.encode("ascii")
        view.rows.extend(range(first_row, first_row + count))
        view.offsets.extend(offsets)
        view.sizes.extend(sizes)
        view.kinds.extend(encoded.translate(_KIND_OF_CODE))
        view.roles.extend(encoded.translate(_ROLE_OF_CODE))
        view.flags.extend(encoded.translate(_FLAGS_OF_CODE))
        if view.tree:
            id_keys = array("q", map(hash, ids))
            view.id_keys.extend(id_keys)
            if parents[1:] == ids[:-1]:  # a chain: each parent key is the previous id key
                view.parent_keys.append(hash(parents[0]))  # hash(None) is NULL_KEY
                view.parent_keys.extend(id_keys[:-1])
            else:
                view.parent_keys.extend(map(hash, parents))
        else:
            view.id_keys.extend(repeat(NO_ID_KEY, count))
            view.parent_keys.extend(repeat(MISSING_KEY, count))
        self._note_thinking(base, messages, classes)
        if not self._clean_block(base, messages, classes, codes):
            self._clean_turns(base, messages, classes, codes)
        held = list(compress(range(count), map(_HOLDERS.__contains__, classes)))
        if _may_hold_images(list(map(_CONTENT_OF, map(messages.__getitem__, held)))):
            for position in held:
                _note_blocks(view, base + position, messages[position])

    def _clean_turns(
        self,
        base: int,
        messages: list[_AnyMessage | _SettingEntry],
        classes: list[type],
        codes: str,
    ) -> None:
        """A block that is not clean as a whole, turn by turn: a user message closes every
        group, so each stretch from one to the next is a block of its own, and only the
        stretches that are not clean go entry by entry."""
        cuts = [position for position, code in enumerate(codes) if code == "u"]
        if not cuts or cuts == [0]:
            self._message_events(base, messages)
            return
        starts = [0, *cuts] if cuts[0] else cuts
        for start, stop in zip(starts, [*starts[1:], len(codes)], strict=True):
            turn = messages[start:stop]
            if not self._clean_block(base + start, turn, classes[start:stop], codes[start:stop]):
                self._message_events(base + start, turn)

    def _clean_block(
        self,
        base: int,
        messages: list[_AnyMessage | _SettingEntry],
        classes: list[type],
        codes: str,
    ) -> bool:
        """Hand a block to `PathTracker.clean_block`, with its calls gathered column-wise."""
        count = len(messages)
        assistant_positions = list(
            compress(range(count), map(is_, classes, repeat(_AssistantMessage)))
        )
        assistants: list[_AssistantMessage] = list(
            map(messages.__getitem__, assistant_positions)  # type: ignore[arg-type]
        )
        contents = list(map(_CONTENT_OF, assistants))
        stops = list(map(_STOP_OF, assistants))
        if not set(map(type, contents)) <= _LIST_TYPE:
            return False
        blocks = list(chain.from_iterable(contents))
        is_call = list(map(eq, map(_TYPE_OF, blocks), repeat("toolCall")))
        calls = list(compress(blocks, is_call))
        if countOf(map(_PARTIAL_OF, calls), _NO_RAW) != len(calls):
            return False
        call_ids = list(map(_ID_OF, calls))
        if not set(map(type, call_ids)) <= _STR_TYPE:
            return False
        # Calls made by the end of each assistant's content, and so per assistant.
        made = list(accumulate(is_call, initial=0))
        made_by = list(map(made.__getitem__, accumulate(map(len, contents))))
        call_counts = list(map(sub, made_by, [0, *made_by[:-1]]))
        if not _INCOMPLETE_STOPS.isdisjoint(compress(stops, call_counts)):
            return False  # calls of an aborted turn: the tracker marks their group
        names = list(map(_NAME_OF, calls))
        read_calls, read_paths = _file_calls(calls, names, "read")
        write_calls, write_paths = _file_calls(calls, names, "write")
        write_owners = [assistant_positions[bisect_right(made_by, n)] for n in write_calls]
        result_positions = list(
            compress(range(count), map(is_, classes, repeat(_ToolResultMessage)))
        )
        results: list[_ToolResultMessage] = list(
            map(messages.__getitem__, result_positions)  # type: ignore[arg-type]
        )
        user_positions = list(compress(range(count), map(is_, classes, repeat(_UserMessage))))
        users = list(
            zip(
                user_positions,
                map(_TIMESTAMP_OF, map(messages.__getitem__, user_positions)),
                strict=True,
            )
        )
        last_blocks = contents[-1] if contents else []
        block = CleanBlock(
            base=base,
            codes=codes,
            assistant_positions=assistant_positions,
            call_counts=call_counts,
            call_ids=call_ids,
            result_ids=list(map(_CALL_ID_OF, results)),
            result_positions=result_positions,
            read_calls=read_calls,
            read_paths=read_paths,
            write_calls=write_calls,
            write_paths=write_paths,
            write_owners=write_owners,
            path_base=self._cwd,
            users=users,
            last_stop=stops[-1] if stops else None,
            result_bits=lambda numbers: _results_bits(list(map(results.__getitem__, numbers))),
            last_calls=lambda: tuple(
                self._call(block) for block in last_blocks if block.type == "toolCall"
            ),
        )
        return self.tracker.clean_block(block)

    def _note_thinking(
        self, base: int, messages: list[_AnyMessage | _SettingEntry], classes: list[type]
    ) -> None:
        """The signed thinking of a run's assistant messages: column passes when they are
        all of one model and every signature is whole (the common case), else message by
        message."""
        positions = list(
            compress(range(len(classes)), map(is_, classes, repeat(_AssistantMessage)))
        )
        assistants: list[_AssistantMessage] = list(
            map(messages.__getitem__, positions)  # type: ignore[arg-type]
        )
        contents = list(map(_CONTENT_OF, assistants))
        if not set(map(type, contents)) <= _LIST_TYPE:
            self._thinking_each(base, positions, assistants)
            return
        blocks = list(chain.from_iterable(contents))
        is_thinking = list(map(eq, map(_TYPE_OF, blocks), repeat("thinking")))
        if True not in is_thinking:
            return
        try:
            models = set(map(_MODEL_FIELDS_OF, assistants))
        except TypeError:  # a field holding an array or an object
            models = set()
        thinking = list(compress(blocks, is_thinking))
        signatures = list(map(_SIGNATURE_OF, thinking))
        if len(models) != 1 or any(map(_REDACTED_OF, thinking)):
            self._thinking_each(base, positions, assistants)
            return
        key, checked = self._model(*models.pop())
        if not _all_whole(signatures, checked):
            self._thinking_each(base, positions, assistants)
            return
        made = list(accumulate(is_thinking, initial=0))
        made_by = list(map(made.__getitem__, accumulate(map(len, contents))))
        holders = compress(positions, map(sub, made_by, [0, *made_by[:-1]]))
        records = self.view.signed_thinking.get(key)
        if records is None:
            records = self.view.signed_thinking[key] = array("q")
        records.extend(map(add, holders, repeat(base)))

    def _thinking_each(
        self, base: int, positions: list[int], assistants: list[_AssistantMessage]
    ) -> None:
        for position, message in zip(positions, assistants, strict=True):
            content = message.content
            if type(content) is list and "thinking" in map(_TYPE_OF, content):
                self._thinking(base + position, message, content)

    def _model(self, api: object, provider: object, model: object) -> tuple[int, bool]:
        """A model's key, and whether its thinking carries Anthropic's signatures."""
        named = (
            api if type(api) is str else None,
            provider if type(provider) is str else None,
            model if type(model) is str else None,
        )
        known = self._models.get(named)
        if known is None:
            name = model_name(provider, model)
            known = self._models[named] = (
                NO_MODEL if name is None else key_of(name),
                named[0] in _ANTHROPIC_APIS and writes_anthropic_signatures(model),
            )
        return known

    def _thinking(self, index: int, message: _AssistantMessage, content: list[_CallBlock]) -> None:
        """Note an assistant message's thinking whose signature pi and OpenClaw send: a
        redacted block's (its opaque data), and a Claude model's on Anthropic's API. They
        send a thinking block without a signature as plain text."""
        key, checked = self._model(message.api, message.provider, message.model)
        signed = False
        bad: list[BadSignature] | None = None
        for position, block in enumerate(content):
            if block.type != "thinking":
                continue
            signature = block.thinkingSignature
            if block.redacted is True:
                fault = signature_fault(signature)
                if fault is SignatureFault.MALFORMED:
                    fault = None
            elif type(signature) is not str or not signature.strip():
                continue
            elif checked and signature != _SIGNATURE_SENTINEL:
                fault = signature_fault(signature)
            else:
                fault = None
            if fault is None:
                signed = True
                continue
            if bad is None:
                bad = []
            length = len(signature) if type(signature) is str else 0
            bad.append(BadSignature(position, fault, length))
        view = self.view
        if bad is not None:
            view.broken_thinking[index] = BrokenThinking(key, len(content), tuple(bad))
        elif not signed:
            return
        records = view.signed_thinking.get(key)
        if records is None:
            records = view.signed_thinking[key] = array("q")
        records.append(index)

    def _message_events(self, base: int, messages: list[_AnyMessage | _SettingEntry]) -> None:
        for index, message in enumerate(messages, base):
            if not isinstance(message, _SettingEntry):
                self._message(index, message, replaying=False)

    def _call(self, block: _CallBlock) -> ToolCall:
        """The format-neutral tool call of a `toolCall` content block."""
        name = block.name if type(block.name) is str else ""
        call_id = block.id if type(block.id) is str else ""
        action = _FILE_TOOLS.get(name)
        path = _path_argument(block.arguments) if action is not None else None
        if action is None or path is None:
            return ToolCall(call_id, name)
        return ToolCall(call_id, name, action, path, self._cwd)

    def _plain_links(self, ids: list[Any], parents: list[Any]) -> bool:
        """Every id a non-empty string and every parent a string or null (tree files),
        or no ids and parents at all (v1 files)."""
        if self.view.tree:
            return (
                set(map(type, ids)) == {str}
                and "" not in ids
                and set(map(type, parents)) <= _PARENT_TYPES
            )
        return ids.count(UNSET) == len(ids) and parents.count(UNSET) == len(parents)

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        """Index a record the reader's slow path parsed (its ids kept: reading them back
        would parse it again)."""
        index = len(self.view.kinds)
        self.ingest(_loose_record(value), data, row, column, offset, len(data))
        self.view.remember_ids(index, value.get("id"), value.get("parentId", MISSING))

    def replay(self, index: int, data: bytes) -> None:
        """Feed the tracker one record again (path order), without touching the view."""
        try:
            record = _RECORD_DECODER.decode(data)
        except (ValueError, RecursionError):
            try:
                value = jsonutil.loads(data)
            except ValueError:
                return
            if not isinstance(value, dict):
                return
            record = _loose_record(value)
        record_type = record.type
        kind = _KIND_OF.get(record_type, _K_OTHER) if type(record_type) is str else _K_OTHER
        if kind == _K_MESSAGE:
            self._message(index, record.message, replaying=True)
        elif kind != _K_OTHER and kind != _K_HEADER:
            self._other_entry(index, kind, record, data, replaying=True)

    def finish(self, lines: LineReport) -> None:
        view = self.view
        if view.notes:
            view.format = OPENCLAW.value
            _openclaw_sends(view.blank_texts)
        view.media_limits = ANTHROPIC_MEDIA_LIMITS
        source = RecordSource(self.path)
        view.read_ids = partial(_read_ids, source, view)
        view.result_text_exceeds = partial(_result_text_exceeds, source, view)
        view.copied_bytes = partial(_read_copied_bytes, source, view)
        view.model_of = partial(_read_model, source, view)
        view.foreign_thinking_as_text = True
        view.unsigns_kept_before_boundary = view.format == OPENCLAW.value
        view.finish()

    # ---- decoding ----------------------------------------------------------------

    def ingest(
        self, record: _Record, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        """Index one decoded record and feed its conversation events (the hot path)."""
        view = self.view
        index = len(view.kinds)
        if record.type == "message":
            kind = _K_MESSAGE
            message = record.message
            role, flags = self._message(index, message, replaying=False)
            if type(message) is _AssistantMessage:
                content = message.content
                if type(content) is list and "thinking" in map(_TYPE_OF, content):
                    self._thinking(index, message, content)
            elif type(message) in _HOLDERS and _may_hold_images([message.content]):  # type: ignore[union-attr]
                _note_blocks(view, index, message)  # type: ignore[arg-type]
        else:
            role = 0
            kind, flags = self._not_message(index, record, data, row)
        if not self._tree_decided:
            self._tree_decided = True
            view.tree = record.id is not UNSET or record.parentId is not UNSET
        if record.openclaw is not _NO_RAW:
            self._note_openclaw("carries __openclaw fields")
        entry_id = record.id
        if (
            type(entry_id) is not str
            or not entry_id
            or (kind == _K_HEADER and index == 0 and self._from_start)
        ):
            entry_id = None
        parent = record.parentId
        if view.tree and kind != _K_HEADER:
            if entry_id is None:
                flags |= _F_BAD_ID
            if parent is UNSET:
                flags |= _F_NO_PARENT_KEY
        if parent is UNSET:
            parent_key = MISSING_KEY
        elif parent is None or type(parent) is str:
            parent_key = hash(parent)
        else:
            parent_key = hash(("parentId", repr(parent)))
        if column != 1:
            view.columns[index] = column
        if size >= _LARGE_RECORD:
            view.remember_ids(index, record.id, MISSING if parent is UNSET else parent)
        self._rows(row)
        self._offsets(offset)
        self._sizes(size)
        self._kinds(kind)
        self._roles(role)
        self._flags(flags)
        self._id_keys(NO_ID_KEY if entry_id is None else hash(entry_id))
        self._parent_keys(parent_key)

    def _message(
        self, index: int, message: _AnyMessage | None, *, replaying: bool
    ) -> tuple[int, int]:
        """Feed the tracker a message's events; returns its role and flags."""
        if message is None:
            return _R_NONE, 0
        if message.openclaw is not _NO_RAW and not replaying:
            self._note_openclaw("carries __openclaw fields")
        if type(message) is _ToolResultMessage:
            call_id = message.toolCallId
            bits = _result_bits(message)
            self.tracker.result(index, call_id if type(call_id) is str else None, bits)
            return _R_TOOL_RESULT, 0
        if type(message) is _AssistantMessage:
            self._assistant(index, message, replaying)
            return _R_ASSISTANT, _F_CONTEXT_CUT
        if type(message) is _UserMessage:
            self.tracker.user(index, message.timestamp)
            return _R_USER, _F_CONTEXT_CUT
        if type(message) in _CONTEXT_CLASSES:
            self.tracker.context(index)
            return _ROLE_OF_CODE[ord(_CODE_OF_CLASS[type(message)])], _F_CONTEXT_CUT
        return _R_OTHER, 0

    def _not_message(self, index: int, record: _Record, data: bytes, row: int) -> tuple[int, int]:
        """Kind and flags of any record that is not a message (rare)."""
        record_type = record.type
        kind = _KIND_OF.get(record_type, _K_OTHER) if type(record_type) is str else _K_OTHER
        if kind == _K_HEADER:
            if index == 0 and not self._tree_decided:
                self._read_header(record, row)
            return kind, 0
        if kind == _K_OTHER:
            return kind, 0
        return kind, self._other_entry(index, kind, record, data, replaying=False)

    def _assistant(self, index: int, message: _AssistantMessage, replaying: bool) -> None:
        content = message.content
        stop = message.stopReason if type(message.stopReason) is str else None
        calls: list[ToolCall] = []
        if type(content) is list:
            leaked: list[int] | None = None
            for position, block in enumerate(content):
                if block.type != "toolCall":
                    continue
                if block.partialJson is not _NO_RAW:
                    if leaked is None:
                        leaked = []
                    leaked.append(position)
                calls.append(self._call(block))
            if leaked and not replaying:
                self.view.leaked[index] = tuple(leaked)
        self.tracker.assistant(index, tuple(calls), stop in _INCOMPLETE_STOPS, stop)

    def _other_entry(
        self, index: int, kind: int, record: _Record, data: bytes, replaying: bool
    ) -> int:
        """Facts, events and flags of entries other than messages (rare)."""
        view = self.view
        references: tuple[Reference, ...] = ()
        flags = 0
        if kind in (_K_COMPACTION, _K_RESET):
            self.tracker.boundary(index)
            if replaying:
                return 0
            if kind == _K_RESET:
                self._note_openclaw("has reset entries")
            facts, references = self._boundary_facts(Kind(kind), record, data)
            view.boundaries[index] = facts
        elif kind == _K_BRANCH_SUMMARY:
            flags = _F_CUT
            if isinstance(record.summary, str) and record.summary:
                flags |= _F_CONTEXT
                self.tracker.context(index)
            if isinstance(record.fromId, str) and record.fromId != ROOT_NAME:
                references = (Reference("fromId", record.fromId, role=RefRole.FROM),)
        elif kind == _K_CUSTOM_MESSAGE:
            flags = _F_CONTEXT_CUT
            self.tracker.context(index)
        elif kind == _K_LABEL:
            if isinstance(record.targetId, str):
                references = (Reference("targetId", record.targetId, role=RefRole.LABEL),)
        elif kind == _K_LEAF:
            self._note_openclaw("has leaf entries")
            refs = []
            if isinstance(record.targetId, str):
                refs.append(Reference("targetId", record.targetId, role=RefRole.LEAF))
            if isinstance(record.appendParentId, str):
                refs.append(
                    Reference("appendParentId", record.appendParentId, role=RefRole.APPEND_PARENT)
                )
            references = tuple(refs)
        if references and not replaying:
            view.references[index] = references
        return flags

    def _read_header(self, record: _Record, row: int) -> None:
        version = None if record.version is UNSET else record.version
        cwd = record.cwd if isinstance(record.cwd, str) else None
        self._cwd = cwd
        self.view.header = HeaderFacts(row=row, id=record.id, version=version, cwd=cwd)
        # pi migrates by `version ?? 1`: anything below 2 is the positional v1 layout.
        effective = version if isinstance(version, int | float) else 1
        self.view.tree = effective >= 2
        self._tree_decided = True

    def _note_openclaw(self, reason: str) -> None:
        if reason not in self.view.notes:
            self.view.notes.append(reason)

    def _boundary_facts(
        self, kind: Kind, record: _Record, data: bytes
    ) -> tuple[BoundaryFacts, tuple[Reference, ...]]:
        first_kept = record.firstKeptEntryId
        if first_kept is UNSET:
            kept: str | None = MISSING
        elif isinstance(first_kept, str) or first_kept is None:
            kept = first_kept
        else:
            kept = "\x00" + repr(first_kept)
        index = record.firstKeptEntryIndex
        identity = None
        written_ms = None
        if kind is Kind.COMPACTION:
            payload = _copied_bytes(data)
            identity = None if payload is None else xxhash.xxh3_128_digest(payload)
            written_ms = _written_ms(data)
        facts = BoundaryFacts(
            hollow_summary=_hollow_summary(record.summary) if kind is Kind.COMPACTION else None,
            first_kept=kept,
            first_kept_index=index
            if isinstance(index, int) and not isinstance(index, bool)
            else None,
            tokens_before=record.tokensBefore,
            identity=identity,
            written_ms=written_ms,
        )
        references: tuple[Reference, ...] = ()
        if isinstance(kept, str) and kept != MISSING:
            references = (Reference("firstKeptEntryId", kept, RefKind.FORWARD, RefRole.FIRST_KEPT),)
        return facts, references


_HOLDERS: Final = frozenset({_UserMessage, _ToolResultMessage})
"""Messages whose content may hold images."""
_IMAGE_BLOCK: Final = re.compile(rb'\{\s*"type"\s*:\s*"image"')
"""How an image block starts as pi writes it (`type` first): a block written otherwise
is not looked at."""
_CONTENT_BLOCK: Final = ParsingDecoder(_ContentBlock)


def _may_hold_images(contents: list[Any]) -> bool:
    """Whether any of these message contents may hold an image block (column-wise, a
    pass over their blocks: the records are then looked at one by one)."""
    lists = compress(contents, map(is_, map(type, contents), repeat(list)))
    return any(map(_IMAGE_BLOCK.match, chain.from_iterable(lists)))


def _note_blocks(view: SessionView, index: int, message: _UserMessage | _ToolResultMessage) -> None:
    """Put a message's inline images into the view, and the blank text blocks beside
    them that pi sends. pi's Anthropic provider leaves blank text out of user and
    assistant messages, but sends a tool result that holds an image block by block,
    blank ones too."""
    if type(message.content) is not list:
        return
    blocks = [_content_block(raw) for raw in message.content]
    found = []
    for block in blocks:
        if block.type == "image" and block.data is not _NO_RAW:
            media = inline_media(MediaKind.IMAGE, block.mimeType, block.data)
            if media is not None:
                found.append(media)
    if not found:
        return
    view.media[index] = tuple(found)
    if type(message) is not _ToolResultMessage:
        return
    blank = [
        position
        for position, block in enumerate(blocks)
        if block.type == "text" and is_blank(block.text)
    ]
    if blank:
        empty = tuple(bytes(blocks[position].text) == EMPTY_TEXT for position in blank)
        view.blank_texts[index] = BlankText(tuple(blank), len(blocks) - len(blank), empty)


def _content_block(raw: Raw) -> _ContentBlock:
    try:
        return _CONTENT_BLOCK.decode(raw)
    except (ValueError, RecursionError):
        return _ContentBlock()


def _openclaw_sends(blank_texts: dict[int, BlankText]) -> None:
    """OpenClaw leaves an empty text block out of a tool result with an image (it sends
    one of whitespace)."""
    for index, blank in list(blank_texts.items()):
        at = tuple(p for p, empty in zip(blank.at, blank.empty, strict=True) if not empty)
        if not at:
            del blank_texts[index]
        elif len(at) < len(blank.at):
            kept = blank.kept + len(blank.at) - len(at)
            blank_texts[index] = BlankText(at, kept, (False,) * len(at))


_FALLBACK_SUMMARIES: Final = (
    (
        "## Decisions\nNo prior history.\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\n"
        "None.\n\n## Pending user asks\nNone.\n\n## Exact identifiers\nNone captured.",
        'OpenClaw\'s fallback skeleton ("No prior history.")',
    ),
    (
        "Summary unavailable due to context limits. Older messages were truncated.",
        'OpenClaw\'s fallback text ("Summary unavailable")',
    ),
)
"""What OpenClaw's compaction writes in place of a summary: the skeleton of its five
sections when it had nothing to summarise (`buildStructuredFallbackSummary`, #120663),
and, before it, a line when the summariser could not run (#6772)."""
_BOOKKEEPING: Final = ("## Tool Failures", "<read-files>", "<modified-files>")
"""What may follow a fallback: the failed tools and the files read and written."""


def _hollow_summary(summary: object) -> str | None:
    """What a compaction's summary is when it holds no history: empty, or a fallback
    OpenClaw writes (with only its bookkeeping after it); None for a real summary."""
    if type(summary) is not str or not summary.strip():
        return "empty"
    text = summary.strip()
    for fallback, name in _FALLBACK_SUMMARIES:
        if text.startswith(fallback):
            rest = text[len(fallback) :].lstrip()
            if not rest or rest.startswith(_BOOKKEEPING):
                return name
    return None


class _Copied(Struct, gc=False):
    """The members a copy of a record repeats byte for byte: a message entry's message;
    a compaction's summary payload (without ids, timestamps or tokensAfter, as PR
    #89387 compares them)."""

    type: Any = None
    message: Raw = _NO_RAW
    summary: Raw = _NO_RAW
    details: Raw = _NO_RAW
    fromHook: Raw = _NO_RAW
    tokensBefore: Raw = _NO_RAW


_COPIED_DECODER: Final = msgspec.json.Decoder(_Copied)
_PAYLOAD_NAMES: Final = ("summary", "details", "fromHook", "tokensBefore")
_COPIED_NAMES: Final = ("message", *_PAYLOAD_NAMES)
_COPIED_OF: Final = attrgetter(*_COPIED_NAMES)


class _Stamped(Struct, gc=False):
    """An entry's own `timestamp`: when the writer appended it (a copy gets a new one)."""

    timestamp: Any = None


_STAMPED_DECODER: Final = msgspec.json.Decoder(_Stamped)


def _written_ms(data: bytes) -> int | None:
    """When an entry was appended, in milliseconds since the epoch; None when its
    `timestamp` is not an ISO time (or the record decodes only loosely)."""
    try:
        stamp = _STAMPED_DECODER.decode(data).timestamp
    except (ValueError, RecursionError):
        try:
            stamp = jsonutil.loads(jsonutil.member_bytes(data).get("timestamp", b"null"))
        except ValueError:
            return None
    seconds = iso_seconds(stamp)
    return None if seconds is None else round(seconds * 1000)


def _copied_bytes(data: bytes) -> bytes | None:
    """The exact bytes of what a copy of this record repeats (`_Copied`), the last of
    repeated keys as `JSON.parse` keeps it; None when there is nothing to compare."""
    try:
        record = _COPIED_DECODER.decode(data)
        kind = record.type
        members = {name: bytes(raw) for name, raw in _members(record) if raw is not _NO_RAW}
    except (ValueError, RecursionError):
        # Beyond the typed decoder (invalid UTF-8, a lone surrogate escape, nesting past
        # its depth): the same slices, found by the byte scanner.
        try:
            members = jsonutil.member_bytes(data)
            kind = jsonutil.loads(members.get("type", b"null"))
        except ValueError:
            return None
    if kind == "compaction":
        payload = {name: Raw(members[name]) for name in _PAYLOAD_NAMES if name in members}
        return msgspec.json.encode(payload)
    return members.get("message")


def _members(record: _Copied) -> zip[tuple[str, Raw]]:
    return zip(_COPIED_NAMES, _COPIED_OF(record), strict=True)


def _read_copied_bytes(source: RecordSource, view: SessionView, index: int) -> bytes | None:
    return _copied_bytes(source.read(*view.span(index)))


_ANTHROPIC_APIS: Final = frozenset({"anthropic-messages", "bedrock-converse-stream"})
"""The APIs whose thinking signatures pi and OpenClaw send back as they are stored."""
_SIGNATURE_SENTINEL: Final = "reasoning_content"
"""What OpenClaw stores in place of a signature for thinking a provider sent as
`reasoning_content` on Anthropic's API (not a signature)."""


_MODEL_FIELDS_OF: Final = attrgetter("api", "provider", "model")
_SIGNATURE_OF: Final = attrgetter("thinkingSignature")
_REDACTED_OF: Final = attrgetter("redacted")
_IS_ASCII: Final = str.isascii


def _all_whole(signatures: list[Any], checked: bool) -> bool:
    """Every signature a non-blank string, and (`checked`) as whole as Anthropic's look
    (`signature_fault`), tested column-wise."""
    if set(map(type, signatures)) != _STR_SET:
        return False
    if not checked:
        return all(map(str.strip, signatures))
    lengths = list(map(len, signatures))
    return (
        min(lengths) >= SHORTEST_SIGNATURE
        and not any(map(mod, lengths, repeat(4)))
        and all(map(_IS_ASCII, signatures))
        and _SIGNATURE_SENTINEL not in signatures
    )


def model_name(provider: object, model: object) -> str | None:
    """A model as pi tells models apart: `provider/model` (None without a model)."""
    if type(model) is not str or not model:
        return None
    return f"{provider}/{model}" if type(provider) is str and provider else model


class _ModelMessage(Struct, gc=False):
    role: Any = None
    provider: Any = None
    model: Any = None


class _ModelRecord(Struct, gc=False):
    """What names a model: an assistant message's `provider` and `model`, or a model
    change's `provider` and `modelId`."""

    type: Any = None
    provider: Any = None
    modelId: Any = None
    message: _ModelMessage | None = None


_MODEL_DECODER: Final = ParsingDecoder(_ModelRecord)


def _read_model(source: RecordSource, view: SessionView, index: int) -> str | None:
    """The model an assistant message was written by or a model change sets."""
    try:
        record = _MODEL_DECODER.decode(source.read(*view.span(index)))
    except (ValueError, RecursionError):
        return None
    if record.type == "model_change":
        return model_name(record.provider, record.modelId)
    message = record.message
    if record.type == "message" and message is not None and message.role == "assistant":
        return model_name(message.provider, message.model)
    return None


def _path_argument(arguments: Raw) -> str | None:
    if arguments is _NO_RAW:
        return None
    try:
        path = _ARGUMENTS_DECODER.decode(arguments).path
    except (ValueError, RecursionError):
        return None
    return path if type(path) is str and path else None


def _result_bits(message: _ToolResultMessage) -> int:
    """`Bit` flags of a tool result."""
    is_error = message.isError
    return Bit.SUCCEEDED if is_error is False else Bit.ERRORED if is_error is True else 0


def _results_bits(results: list[_ToolResultMessage]) -> list[int]:
    """`_result_bits` of several results, column-wise."""
    errors = list(map(_IS_ERROR_OF, results))
    succeeded = map(mul, map(is_, errors, repeat(False)), repeat(Bit.SUCCEEDED))
    errored = map(mul, map(is_, errors, repeat(True)), repeat(Bit.ERRORED))
    return list(map(add, succeeded, errored))


def _file_calls(
    calls: list[_CallBlock], names: list[Any], tool: str
) -> tuple[list[int], list[str]]:
    """Numbers and path arguments of the calls of one file tool that name a usable path."""
    numbers = list(compress(range(len(names)), map(eq, names, repeat(tool))))
    if not numbers:
        return numbers, []
    arguments = list(map(_ARGUMENTS_OF, map(calls.__getitem__, numbers)))
    try:
        paths = list(map(_PATH_OF, map(_ARGUMENTS_DECODER.decode, arguments)))
        if set(map(type, paths)) <= _STR_TYPE and "" not in paths:
            return numbers, paths
    except (ValueError, RecursionError):
        pass
    checked = list(map(_path_argument, arguments))
    kept = list(map(is_not, checked, repeat(None)))
    return list(compress(numbers, kept)), [path for path in checked if path is not None]


class _TextPart(Struct, gc=False):
    type: Any = None
    text: Any = None


class _ResultContent(Struct, gc=False):
    content: str | list[_TextPart] | None = None


class _ResultRecord(Struct, gc=False):
    id: Any = None
    parentId: Any | UnsetType = UNSET
    message: _ResultContent | None = None


_RESULT_DECODER: Final = msgspec.json.Decoder(_ResultRecord)


def _read_result_text(source: RecordSource, view: SessionView, index: int) -> str | None:
    """The text of a tool result whose content is only text (a string or text blocks)."""
    data = source.read(*view.span(index))
    try:
        record = _RESULT_DECODER.decode(data)
        parent = MISSING if record.parentId is UNSET else record.parentId
        view.remember_ids(index, record.id, parent)
        content: object = None if record.message is None else record.message.content
    except (ValueError, RecursionError):
        try:
            value = jsonutil.loads(data)
        except ValueError:
            return None
        body = value.get("message") if isinstance(value, dict) else None
        content = body.get("content") if isinstance(body, dict) else None
        if isinstance(content, list):
            content = [
                _TextPart(item.get("type"), item.get("text")) if isinstance(item, dict) else None
                for item in content
            ]
    if type(content) is str:
        return content
    if type(content) is not list:
        return None
    parts = []
    for part in content:
        if type(part) is not _TextPart or part.type != "text":
            return None
        if type(part.text) is str:
            parts.append(part.text)
    return "".join(parts)


def _result_text_exceeds(
    source: RecordSource, view: SessionView, index: int, limit: int, prefix: str
) -> bool:
    """Whether a tool result's content is text only, and its text does not start with
    `prefix` and is longer than `limit` UTF-8 bytes."""
    return text_exceeds(_read_result_text(source, view, index), limit, prefix)


_read_ids: Final = ids_reader("id", "parentId")


CAPABILITIES: Final = frozenset(
    {
        Capability.LINES,
        Capability.HEADER,
        Capability.HEADER_REBUILD,
        Capability.RESULT_REPAIRS,
        Capability.ENTRIES,
        Capability.TOOL_CALLS,
        Capability.BOUNDARIES,
        Capability.FILE_ACTIONS,
        Capability.STREAMING_STATE,
        Capability.THINKING_SIGNATURES,
        Capability.SUMMARIES,
        Capability.FIRST_LINE_BOM_TRIMMED,
        Capability.VALUES_AS_ENTRIES,
        Capability.INLINE_MEDIA,
        Capability.BLANK_TEXT,
        Capability.SHORTENED_RESULTS,
    }
)
"""What every pi session provides (v1 links its entries by position)."""
TREE_CAPABILITIES: Final = CAPABILITIES | {
    Capability.TREE,
    Capability.UNIQUE_IDS,
    Capability.ENTRY_LINKS,
    Capability.RETRY_COPIES,
    Capability.BRANCHES,
    Capability.LAST_ENTRY_LEAF,
}
"""What a v2/v3 pi session provides: entries linked by id."""

HEADER_START: Final = b'{"type":"session"'
"""How a session header line starts as pi writes it."""


# ---- what the package provides (formats.FormatPackage) ---------------------------------

PI: Final = Format("pi")
OPENCLAW: Final = Format("openclaw")
"""pi's format as OpenClaw writes and reads it (told apart from pi's by the reader)."""
FORMATS: Final = (PI, OPENCLAW)
"""`detect` names the first; the reader tells OpenClaw's files apart."""
ENTRY_TYPES: Final = frozenset(ENTRY_KINDS) - {"session"}
_SIBLING_NAMES: Final = (
    "*.trajectory.jsonl",
    "*.corrupt-*.jsonl",
    "*.jsonl.lock",
    "*.jsonl.reset.*",
    "*.jsonl.deleted.*",
    "*.bak-*",
    "*.repair-*.tmp",
    "*.jsonl.imported-*",
)
"""What OpenClaw and pi leave beside a transcript: trajectories, quarantined copies,
locks, reset and deleted copies, their own backups and temporary files (and checkpoints,
`is_checkpoint_name`)."""
_SIBLING: Final = re.compile("|".join(fnmatch.translate(pattern) for pattern in _SIBLING_NAMES))


def detect(first_record: dict[str, Any]) -> Format | None:
    """A session header; or, in a file that lost it, an entry of pi's types with pi's
    id, parent or message fields."""
    record_type = first_record.get("type")
    if record_type == "session":
        return PI
    if record_type in ENTRY_TYPES and (
        "parentId" in first_record or "message" in first_record or "id" in first_record
    ):
        return PI
    return None


def has_record_shape(value: dict[str, Any]) -> bool:
    return isinstance(value.get("type"), str)


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> PiAdapter:
    return PiAdapter(
        path,
        forced_openclaw=fmt is OPENCLAW,
        context=context if isinstance(context, PiContext) else None,
        named_as=named_as,
    )


def capabilities(fmt: Format, tree: bool) -> frozenset[Capability]:
    return TREE_CAPABILITIES if tree else CAPABILITIES


def is_sibling(path: Path) -> bool:
    return _SIBLING.match(path.name) is not None or is_checkpoint_name(path.name)
