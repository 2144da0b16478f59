"""pi and OpenClaw session JSONL (spec: formats/pi-openclaw.md).

A header line (`type: "session"`), then one entry per line. v1 files are a linear
list without ids whose compactions keep history from a position
(`firstKeptEntryIndex`); v2/v3 entries form a tree through `id` / `parentId`.
OpenClaw writes the same format and adds `leaf` / `reset` rows and `__openclaw`
fields. This module decodes only the fields the rules need, with a typed partial
decode, and records them in the format-neutral `SessionView`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field

from sessionfix import jsonutil
from sessionfix.formats import Format, is_openclaw_location
from sessionfix.paths import normalize
from sessionfix.reader import LineReport
from sessionfix.view import (
    MISSING,
    BoundaryFacts,
    CallFacts,
    FileAction,
    Flag,
    HeaderFacts,
    Kind,
    Reference,
    RefKind,
    ResultFacts,
    Role,
    SessionView,
    ToolCall,
    UserFacts,
)

_NO_RAW: Final = Raw(b"")


class _Block(Struct, gc=False):
    type: Any = None
    id: Any = None
    name: Any = None
    arguments: Raw = _NO_RAW
    partialJson: Raw = _NO_RAW


class _Message(Struct, gc=False):
    role: Any = None
    content: str | list[_Block] | None = None
    stopReason: Any = None
    toolCallId: Any = None
    toolName: Any = None
    isError: Any = None
    openclaw: Raw = field(default=_NO_RAW, name="__openclaw")


class _Record(Struct, gc=False):
    type: Any = None
    id: Any | UnsetType = UNSET
    parentId: Any | UnsetType = UNSET
    message: _Message | None = None
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
_ARGUMENTS_DECODER: Final = msgspec.json.Decoder(_PathArguments)

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
ROLES: Final[dict[str, Role]] = {
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "toolResult": Role.TOOL_RESULT,
    "bashExecution": Role.BASH,
    "custom": Role.CUSTOM,
    "hookMessage": Role.CUSTOM,
}
_CONTEXT_ROLES: Final = frozenset({Role.USER, Role.ASSISTANT, Role.BASH, Role.CUSTOM})
_FILE_TOOLS: Final[dict[str, FileAction]] = {
    "read": FileAction.READ,
    "write": FileAction.FULL_WRITE,
}
_INCOMPLETE_STOPS: Final = frozenset({"error", "aborted"})
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


def _loose_message(value: dict[str, Any]) -> _Message:
    message = _Message(
        role=value.get("role"),
        stopReason=value.get("stopReason"),
        toolCallId=value.get("toolCallId"),
        toolName=value.get("toolName"),
        isError=value.get("isError"),
    )
    if "__openclaw" in value:
        message.openclaw = Raw(b"{}")
    content = value.get("content")
    if isinstance(content, str):
        message.content = content
    elif isinstance(content, list):
        blocks = []
        for item in content:
            if not isinstance(item, dict):
                blocks.append(_Block(type=None))
                continue
            block = _Block(type=item.get("type"), id=item.get("id"), name=item.get("name"))
            if "arguments" in item:
                try:
                    block.arguments = Raw(jsonutil.canonical(item["arguments"]))
                except ValueError:
                    block.arguments = Raw(b"null")
            if "partialJson" in item:
                block.partialJson = Raw(b'""')
            blocks.append(block)
        message.content = blocks
    return message


class PiAdapter:
    """Streams a pi / OpenClaw file into a `SessionView`."""

    def __init__(self, path: Path, *, forced_openclaw: bool = False) -> None:
        self.path = path
        self.view = SessionView(path=path, format=Format.PI.value)
        self.editor = PiEditor()
        self.openclaw_reasons: list[str] = []
        if forced_openclaw:
            self.openclaw_reasons.append("--format openclaw")
        elif is_openclaw_location(path):
            self.openclaw_reasons.append("lives in an OpenClaw sessions directory")
        self._cwd: str | None = None
        self._tree_decided = False

    # ---- streaming entry points --------------------------------------------------

    def add_fast(self, raw: bytes, row: int, offset: int, size: int) -> None:
        record = _RECORD_DECODER.decode(raw)
        self._ingest(record, raw, row, 1, offset, size)

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        self._ingest(_loose_record(value), data, row, column, offset, len(data))

    def finish(self, lines: LineReport) -> None:
        if self.openclaw_reasons:
            self.view.format = Format.OPENCLAW.value
        self.view.finish()

    # ---- decoding ----------------------------------------------------------------

    def _ingest(
        self, record: _Record, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        view = self.view
        record_type = record.type
        kind = (
            ENTRY_KINDS.get(record_type, Kind.OTHER) if isinstance(record_type, str) else Kind.OTHER
        )
        if kind is Kind.HEADER and len(view) == 0:
            self._read_header(record, row)
            view.add(row, column, offset, size, Kind.HEADER)
            return
        if not self._tree_decided:
            self._tree_decided = True
            if view.header is None:
                view.tree = record.id is not UNSET or record.parentId is not UNSET
        role = Role.NONE
        flags = 0
        detail: object = None
        references: tuple[Reference, ...] = ()
        if record.openclaw is not _NO_RAW:
            self._note_openclaw("carries __openclaw fields")
        if kind is Kind.MESSAGE:
            message = record.message
            if message is not None:
                role = (
                    ROLES.get(message.role, Role.OTHER)
                    if isinstance(message.role, str)
                    else Role.OTHER
                )
                if message.openclaw is not _NO_RAW:
                    self._note_openclaw("carries __openclaw fields")
                detail = self._message_facts(role, message, data)
            if role in _CONTEXT_ROLES:
                flags |= Flag.CONTEXT | Flag.CUT_POINT
        elif kind is Kind.COMPACTION or kind is Kind.RESET:
            if kind is Kind.RESET:
                self._note_openclaw("has reset entries")
            detail, references = self._boundary_facts(kind, record, data)
        elif kind is Kind.BRANCH_SUMMARY:
            flags |= Flag.CUT_POINT
            if isinstance(record.summary, str) and record.summary:
                flags |= Flag.CONTEXT
            if isinstance(record.fromId, str) and record.fromId != "root":
                references = (Reference("fromId", record.fromId),)
        elif kind is Kind.CUSTOM_MESSAGE:
            flags |= Flag.CONTEXT | Flag.CUT_POINT
        elif kind is Kind.LABEL:
            if isinstance(record.targetId, str):
                references = (Reference("targetId", record.targetId),)
        elif kind is Kind.LEAF:
            self._note_openclaw("has leaf entries")
            refs = []
            if isinstance(record.targetId, str):
                refs.append(Reference("targetId", record.targetId))
            if isinstance(record.appendParentId, str):
                refs.append(Reference("appendParentId", record.appendParentId))
            references = tuple(refs)
        entry_id = record.id if isinstance(record.id, str) and record.id else None
        if view.tree and kind is not Kind.HEADER:
            if entry_id is None:
                flags |= Flag.BAD_ID
            if record.parentId is UNSET:
                flags |= Flag.NO_PARENT_KEY
        parent = record.parentId
        if parent is UNSET:
            parent_id: str | None = MISSING
        elif parent is None or isinstance(parent, str):
            parent_id = parent
        else:
            parent_id = "\x00" + repr(parent)
        view.add(
            row, column, offset, size, kind, role, flags, entry_id, parent_id, detail, references
        )

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
        if reason not in self.openclaw_reasons:
            self.openclaw_reasons.append(reason)

    def _message_facts(self, role: Role, message: _Message, data: bytes) -> object:
        if role is Role.ASSISTANT:
            return self._assistant_facts(message)
        if role is Role.TOOL_RESULT:
            content = message.content
            text_only = isinstance(content, str) or (
                isinstance(content, list) and all(block.type == "text" for block in content)
            )
            return ResultFacts(
                call_id=message.toolCallId if isinstance(message.toolCallId, str) else None,
                tool_name=message.toolName if isinstance(message.toolName, str) else None,
                succeeded=message.isError is False,
                errored=message.isError is True,
                text_only=text_only,
            )
        if role is Role.USER:
            try:
                whole = jsonutil.loads(data)
                return UserFacts(identity=jsonutil.identity_hash(whole.get("message")))
            except ValueError:
                return None
        return None

    def _assistant_facts(self, message: _Message) -> CallFacts | None:
        content = message.content
        if not isinstance(content, list):
            return None
        calls: list[ToolCall] = []
        leaked: list[int] = []
        for index, block in enumerate(content):
            if block.type != "toolCall":
                continue
            if block.partialJson is not _NO_RAW:
                leaked.append(index)
            call_id = block.id if isinstance(block.id, str) else ""
            name = block.name if isinstance(block.name, str) else ""
            action = _FILE_TOOLS.get(name, FileAction.NONE)
            if action is FileAction.NONE:
                calls.append(ToolCall(call_id, name))
                continue
            path = self._path_argument(block.arguments)
            calls.append(
                ToolCall(
                    call_id,
                    name,
                    action if path is not None else FileAction.NONE,
                    path,
                    normalize(path, self._cwd) if path is not None else None,
                )
            )
        if not calls and not leaked:
            return None
        stop = message.stopReason if isinstance(message.stopReason, str) else None
        return CallFacts(
            calls=tuple(calls),
            incomplete=stop in _INCOMPLETE_STOPS,
            stop_reason=stop,
            leaked_partial_json=tuple(leaked),
        )

    @staticmethod
    def _path_argument(arguments: Raw) -> str | None:
        if arguments is _NO_RAW:
            return None
        try:
            path = _ARGUMENTS_DECODER.decode(arguments).path
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return None
        return path if isinstance(path, str) and path else None

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
        if kind is Kind.COMPACTION:
            try:
                whole = jsonutil.loads(data)
                payload = {
                    key: whole[key] for key in ("summary", "details", "fromHook") if key in whole
                }
                identity = jsonutil.identity_hash(payload)
            except ValueError:
                identity = None
        facts = BoundaryFacts(
            first_kept=kept,
            first_kept_index=index
            if isinstance(index, int) and not isinstance(index, bool)
            else None,
            tokens_before=record.tokensBefore,
            identity=identity,
        )
        references: tuple[Reference, ...] = ()
        if isinstance(kept, str) and kept != MISSING:
            references = (Reference("firstKeptEntryId", kept, RefKind.FORWARD),)
        return facts, references


class PiEditor:
    """Record changes in pi's field names; every transform keeps the key order."""

    def set_parent(self, parent_id: str) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            record["parentId"] = parent_id
            return record

        return transform

    def set_first_kept(self, entry_id: str | None, index: int | None) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            if index is not None and "firstKeptEntryIndex" in record:
                record["firstKeptEntryIndex"] = index
            else:
                record["firstKeptEntryId"] = entry_id
            return record

        return transform

    def replace_result_text(self, text: str) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            record["message"]["content"] = [{"type": "text", "text": text}]
            return record

        return transform

    def drop_leaked_partial_json(self, blocks: tuple[int, ...]) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            content = record["message"]["content"]
            for index in blocks:
                content[index].pop("partialJson", None)
            return record

        return transform

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]:
        record: dict[str, Any] = {"type": "message"}
        if entry_id is not None:
            record["id"] = entry_id
            record["parentId"] = parent_id
        if "timestamp" in assistant:
            record["timestamp"] = assistant["timestamp"]
        message: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call.id,
            "toolName": call.name or "unknown",
            "content": [{"type": "text", "text": text}],
            "isError": True,
        }
        assistant_message = assistant.get("message")
        if isinstance(assistant_message, dict) and "timestamp" in assistant_message:
            message["timestamp"] = assistant_message["timestamp"]
        record["message"] = message
        return record
