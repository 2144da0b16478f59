"""Claude Code transcripts (spec: formats/claude-code.md) streamed into a `SessionView`.

Conversation entries (`user`, `assistant`, `system`, `attachment`) link by `uuid` /
`parentUuid`; `progress` rows sit in the tree but children link through them;
metadata rows (titles, modes, `last-prompt`, snapshots) have no uuid and stay outside
it. One API message is several records sharing `message.id`. Only the fields the
rules need are decoded.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from functools import partial
from itertools import chain, compress, repeat
from operator import attrgetter, eq, is_, not_
from pathlib import Path
from typing import Any, Final, cast

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from sessionfix import jsonutil
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.claude.chain import ClaudeChain
from sessionfix.formats.claude.edit import ClaudeEditor
from sessionfix.formats.claude.files import MainTranscript, main_transcript_of, session_id_of
from sessionfix.formats.claude.listing import ProjectListing
from sessionfix.formats.claude.queued import is_prompt
from sessionfix.formats.common import (
    ParsingDecoder,
    ids_reader,
    signature_fault,
    text_exceeds,
    writes_anthropic_signatures,
)
from sessionfix.formats.content import (
    ANTHROPIC_MEDIA_LIMITS,
    BLANK_TEXT,
    EMPTY_TEXT,
    inline_media,
    is_blank,
)
from sessionfix.media import base64_text, digest
from sessionfix.model.tracking import PathTracker
from sessionfix.model.view import (
    MISSING,
    MISSING_KEY,
    NO_ID_KEY,
    NO_MODEL,
    NULL_KEY,
    BadSignature,
    Bit,
    BlankText,
    BoundaryFacts,
    BrokenThinking,
    FileAction,
    Flag,
    InlineMedia,
    Kind,
    MediaKind,
    PreservedSegment,
    Reference,
    RefKind,
    RefRole,
    Role,
    SessionView,
    ToolCall,
    key_of,
)
from sessionfix.read.reader import LineReport, RecordSource

FORMAT_NAME: Final = "claude"
CAPABILITIES: Final = frozenset(
    {
        Capability.LINES,
        Capability.ENTRIES,
        Capability.TREE,
        Capability.TOOL_CALLS,
        Capability.FILE_ACTIONS,
        Capability.TURNS,
        Capability.REPLAYED_IDS,
        Capability.STATE_METADATA,
        Capability.SESSION_STAMPS,
        Capability.PRESERVED_SEGMENTS,
        Capability.TOOL_NAMES,
        Capability.RESULT_REPAIRS,
        Capability.DISTINCT_CALL_IDS,
        Capability.SESSION_LISTING,
        Capability.INLINE_MEDIA,
        Capability.BLANK_TEXT,
        Capability.THINKING_SIGNATURES,
        Capability.SHORTENED_RESULTS,
    }
)
"""What a Claude Code transcript lets rules see."""
CONVERSATION_TYPES: Final = frozenset({"user", "assistant", "system", "attachment"})
METADATA_TYPES: Final = frozenset(
    {
        "summary",
        "last-prompt",
        "ai-title",
        "custom-title",
        "agent-name",
        "agent-color",
        "agent-setting",
        "mode",
        "permission-mode",
        "queue-operation",
        "file-history-snapshot",
        "file-history-delta",
        "attribution-snapshot",
        "content-replacement",
        "pr-link",
        "tag",
        "task-summary",
        "worktree-state",
        "cost-state",
        "bridge-session",
        "speculation-accept",
        "marble-origami-commit",
        "marble-origami-snapshot",
    }
)
STATE_TYPES: Final = frozenset(
    {
        "mode",
        "permission-mode",
        "last-prompt",
        "ai-title",
        "custom-title",
        "agent-name",
        "agent-color",
        "agent-setting",
        "tag",
    }
)
"""Metadata re-appended after turns and on every resume; readers take the last copy."""
SHARED_UUID_TYPES: Final = frozenset({"saved_hook_context"})
"""Records outside the chain that legitimately share one uuid."""
TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,128}")
"""The tool names the Anthropic API accepts; any other name fails every request."""
FILE_TOOLS: Final = {"Read": FileAction.READ, "Write": FileAction.FULL_WRITE}
"""Only these tools read or fully replace a file (rules.md §5.1: never guess)."""
BOUNDARY_SUBTYPE: Final = "compact_boundary"
_NO_RAW: Final = Raw(b"")


class _Source(Struct, gc=False):
    """Where an image or document block's data is: inline base64 is looked at."""

    type: Any = None
    media_type: Any = None
    data: Raw = _NO_RAW


class _Block(Struct, gc=False):
    """A content block: tool calls and tool results, thinking, inline media and the raw
    text of text blocks are looked at, nothing else."""

    type: Any = None
    id: Any = None
    name: Any = None
    input: Raw = _NO_RAW
    tool_use_id: Any = None
    is_error: Any = None
    text: Raw = _NO_RAW
    source: _Source | None = None
    content: Raw = _NO_RAW
    """A tool result's content (its blocks are read only when it may hold media)."""
    signature: Any | UnsetType = UNSET


class _Inner(Struct, gc=False):
    """A block of a tool result's content: only inline media is looked at."""

    type: Any = None
    source: _Source | None = None


class _Message(Struct, gc=False):
    id: Any = None
    role: Any = None
    model: Any = None
    content: str | list[_Block] | None = None


class _Record(Struct, gc=False):
    type: Any = None
    subtype: Any = None
    uuid: Any = None
    parentUuid: Any | UnsetType = UNSET
    logicalParentUuid: Any | UnsetType = UNSET
    isSidechain: Any = None
    sessionId: Any = None
    cwd: Any = None
    message: _Message | None = None
    toolUseResult: Raw = _NO_RAW
    leafUuid: Any = None
    isCompactSummary: Any = None
    compactMetadata: Raw = _NO_RAW
    sourceToolAssistantUUID: Any = None


class _Segment(Struct, gc=False):
    headUuid: Any = MISSING
    anchorUuid: Any = MISSING
    tailUuid: Any = MISSING


class _Listed(Struct, gc=False):
    anchorUuid: Any = MISSING
    uuids: Any = None
    allUuids: Any = None


class _CompactMetadata(Struct, gc=False):
    preservedSegment: _Segment | None = None
    preservedMessages: _Listed | None = None


class _Sidecar(Struct, gc=False):
    type: Any = None


class _FileInput(Struct, gc=False):
    file_path: Any = None


_RECORD_DECODER: Final = msgspec.json.Decoder(_Record)
_METADATA_DECODER: Final = ParsingDecoder(_CompactMetadata)
_SIDECAR_DECODER: Final = ParsingDecoder(_Sidecar)
_INPUT_DECODER: Final = ParsingDecoder(_FileInput)
_SUCCESS_TYPES: Final = frozenset({"text", "create", "update"})
"""`toolUseResult.type` of a read that returned text and of a write that replaced a file."""


def _loose_record(value: dict[str, Any]) -> _Record:
    """A record the typed decoder refused (odd field types), with only what is usable."""
    body = value.get("message")
    message = None
    if isinstance(body, dict):
        content = body.get("content")
        blocks: str | list[_Block] | None = None
        if isinstance(content, str):
            blocks = content
        elif isinstance(content, list):
            blocks = [_loose_block(item) for item in content]
        message = _Message(body.get("id"), body.get("role"), body.get("model"), blocks)
    sidecar = value.get("toolUseResult", UNSET)
    return _Record(
        type=value.get("type"),
        subtype=value.get("subtype"),
        uuid=value.get("uuid"),
        parentUuid=value.get("parentUuid", UNSET),
        isSidechain=value.get("isSidechain"),
        sessionId=value.get("sessionId"),
        cwd=value.get("cwd"),
        message=message,
        toolUseResult=_NO_RAW if sidecar is UNSET else Raw(_encode_loose(sidecar)),
        leafUuid=value.get("leafUuid"),
        isCompactSummary=value.get("isCompactSummary"),
        sourceToolAssistantUUID=value.get("sourceToolAssistantUUID"),
        logicalParentUuid=value.get("logicalParentUuid", UNSET),
        compactMetadata=Raw(_encode_loose(value["compactMetadata"]))
        if "compactMetadata" in value
        else _NO_RAW,
    )


def _encode_loose(value: object) -> bytes:
    """A parsed value's JSON as `JSON.stringify` writes it (lone surrogates escaped)."""
    return jsonutil.stringify_bytes(value)


def _loose_block(item: object) -> _Block:
    if not isinstance(item, dict):
        return _Block()
    arguments = item.get("input", UNSET)
    text = item.get("text", UNSET)
    content = item.get("content")
    return _Block(
        type=item.get("type"),
        id=item.get("id"),
        name=item.get("name"),
        input=_NO_RAW if arguments is UNSET else Raw(_encode_loose(arguments)),
        tool_use_id=item.get("tool_use_id"),
        is_error=item.get("is_error"),
        text=_NO_RAW if text is UNSET else Raw(_encode_loose(text)),
        source=_loose_source(item.get("source")),
        content=Raw(_encode_loose(content)) if isinstance(content, list) else _NO_RAW,
        signature=item.get("signature", UNSET),
    )


def _loose_source(source: object) -> _Source | None:
    if not isinstance(source, dict):
        return None
    data = source.get("data", UNSET)
    return _Source(
        source.get("type"),
        source.get("media_type"),
        _NO_RAW if data is UNSET else Raw(_encode_loose(data)),
    )


def decode_record(data: bytes) -> _Record:
    """The routing fields of one record (ValueError when the bytes hold no object)."""
    try:
        return _RECORD_DECODER.decode(data)
    except (ValueError, RecursionError):
        value = jsonutil.loads(data)
        if not isinstance(value, dict):
            raise ValueError("not an object") from None
        return _loose_record(value)


def _key(value: object) -> int:
    if value is None:
        return NULL_KEY
    if type(value) is str:
        return hash(value)
    return hash(("parentUuid", repr(value)))


class ClaudeContext(Struct, frozen=True):
    """Nothing about the start of a Claude file changes how later records read."""


class ClaudeAdapter:
    """Streams a Claude Code transcript into its view.

    The view never takes the linear fast path (metadata rows and tool results parented
    to their calls make Claude files DAGs), so conversation events are fed to the
    tracker only when the scanner walks the chain (`replay`).
    """

    def __init__(self, path: Path, named_as: Path | None = None) -> None:
        self.path = path
        name = (named_as or path).name
        self._session_id = session_id_of(name)
        """The session the file is named after (sub-agent and renamed files have none)."""
        main = main_transcript_of(named_as or path)
        self.view = SessionView(
            path=path,
            format=FORMAT_NAME,
            policy=ClaudeChain(),
            may_start_mid_session=True,
            main_file=None if main is None else MainTranscript(main),
            listing=None
            if self._session_id is None or main is not None
            else ProjectListing(path, named_as or path, self._session_id),
        )
        self.editor = ClaudeEditor()
        self.tracker = PathTracker()
        self._models: dict[str | None, tuple[int, bool]] = {}
        """model → its key, and whether its thinking carries Anthropic's signatures."""

    decode = staticmethod(_RECORD_DECODER.decode)
    decode_lines = staticmethod(_RECORD_DECODER.decode_lines)

    @property
    def context(self) -> ClaudeContext:
        return ClaudeContext()

    @property
    def named(self) -> str | None:
        """The session id a file name that is one gives (records stamped otherwise are
        another session's)."""
        return self._session_id

    def ingest_batch(
        self,
        records: list[_Record],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
    ) -> None:
        """Index a block of decoded lines, column by column where records are plain
        conversation records (the bulk of a transcript); the rest one by one."""
        plain = self._plain(records)
        start = 0
        count = len(records)
        for position in [*compress(range(count), map(not_, plain)), count]:
            if position > start:
                self._ingest_plain(
                    records[start:position],
                    first_row + start,
                    offsets[start:position],
                    sizes[start:position],
                )
            if position < count:
                record = records[position]
                self.ingest(
                    record, b"", first_row + position, 1, offsets[position], sizes[position]
                )
            start = position + 1

    def _plain(self, records: list[_Record]) -> list[bool]:
        """Per record: a user, assistant or progress record with a string uuid, a plain
        parent link and nothing else a rule looks at."""
        own = self._session_id
        return [
            record_type in _PLAIN_TYPES
            and type(uuid) is str
            and uuid != ""
            and (parent is None or type(parent) is str)
            and summary is not True
            and (source is None or source == parent)
            and (own is None or session is None or session == own)
            for record_type, uuid, parent, summary, source, session in zip(
                map(_TYPE_OF, records),
                map(_UUID_OF, records),
                map(_PARENT_OF, records),
                map(_SUMMARY_OF, records),
                map(_SOURCE_OF, records),
                map(_SESSION_OF, records),
                strict=True,
            )
        ]

    def _ingest_plain(
        self, records: list[_Record], first_row: int, offsets: list[int], sizes: list[int]
    ) -> None:
        view = self.view
        base = len(view.kinds)
        count = len(records)
        types = list(map(_TYPE_OF, records))
        messages = list(map(_MESSAGE_OF, records))
        contents = list(map(_CONTENT_OF_MESSAGE, messages))
        codes = bytes(map(_code, types, contents))
        view.rows.extend(range(first_row, first_row + count))
        view.offsets.extend(offsets)
        view.sizes.extend(sizes)
        view.kinds.extend(codes.translate(_KIND_OF_CODE))
        view.roles.extend(codes.translate(_ROLE_OF_CODE))
        view.flags.extend(codes.translate(_FLAGS_OF_CODE))
        sidechain = list(map(_SIDECHAIN_OF, records))
        if True in sidechain:
            flags = view.flags
            for position in compress(range(count), map(is_, sidechain, repeat(True))):
                flags[base + position] |= Flag.SIDECHAIN
        view.id_keys.extend(array("q", map(hash, map(_UUID_OF, records))))
        view.parent_keys.extend(array("q", map(hash, map(_PARENT_OF, records))))
        for position in compress(range(count), map(eq, codes, repeat(_CODE_ASSISTANT))):
            turn = messages[position].id
            if type(turn) is str:
                view.turns[base + position] = hash(turn)
            invalid = _invalid_tool_names(contents[position])
            if invalid:
                view.invalid_calls[base + position] = invalid
            content = contents[position]
            if type(content) is list and "thinking" in map(_TYPE_OF, content):
                self._thinking(base + position, messages[position], content)
        results = list(compress(contents, map(eq, codes, repeat(_CODE_RESULT))))
        if _may_hold_blocks_of_note(contents, results):
            for position, record in enumerate(records):
                if type(contents[position]) is list and record.type != "progress":
                    _note_content(view, base + position, record)

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        index = len(self.view.kinds)
        self.ingest(_loose_record(value), data, row, column, offset, len(data))
        self.view.remember_ids(index, value.get("uuid"), value.get("parentUuid", MISSING))

    def ingest(
        self, record: _Record, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        view = self.view
        index = len(view.kinds)
        record_type = record.type
        kind, role, flags = _classify(record)
        uuid = record.uuid
        id_key = hash(uuid) if type(uuid) is str and uuid and kind != Kind.METADATA else NO_ID_KEY
        session = record.sessionId
        if (
            self._session_id is not None
            and type(session) is str
            and session != self._session_id
            and kind != Kind.METADATA
        ):
            view.foreign_sessions[index] = session
        parent = record.parentUuid
        parent_key = MISSING_KEY if parent is UNSET else _key(parent)
        if kind == Kind.METADATA:
            if type(record.leafUuid) is str:
                if record_type == "last-prompt":
                    reference = Reference("leafUuid", record.leafUuid, role=RefRole.LEAF)
                    view.leaf_hints[index] = record.leafUuid
                else:
                    reference = Reference(
                        "leafUuid", record.leafUuid, RefKind.ANY_SESSION, RefRole.LEAF
                    )
                view.references[index] = (reference,)
            if record_type in STATE_TYPES:
                flags |= Flag.STATE
        elif kind == Kind.COMPACTION:
            facts = view.boundaries[index] = _boundary_facts(record)
            references = _boundary_references(facts)
            if references:
                view.references[index] = references
        if role == Role.ASSISTANT and record.message is not None:
            turn = record.message.id
            if type(turn) is str:
                view.turns[index] = hash(turn)
            invalid = _invalid_tool_names(record.message.content)
            if invalid:
                view.invalid_calls[index] = invalid
            content = record.message.content
            if type(content) is list and "thinking" in map(_TYPE_OF, content):
                self._thinking(index, record.message, content)
        if (
            role in _TURN_ROLES
            and record.message is not None
            and _may_hold_blocks_of_note(
                [record.message.content],
                [record.message.content] if role == Role.TOOL_RESULT else [],
            )
        ):
            _note_content(view, index, record)
        if record.isCompactSummary is True:
            flags |= Flag.SUMMARY
        if record.isSidechain is True:
            flags |= Flag.SIDECHAIN
        source = record.sourceToolAssistantUUID
        if type(source) is str and source and source != parent:
            view.adopters[index] = source
        view.add(row, column, offset, size, kind, role, flags, id_key, parent_key)

    def _thinking(self, index: int, message: _Message, content: list[_Block]) -> None:
        """Note an assistant record's signed thinking. Claude Code sends every thinking
        block as it is stored; a Claude model's signature is checked (another model's,
        on an API that speaks Anthropic's, has a shape of its own)."""
        model = message.model if type(message.model) is str else None
        known = self._models.get(model)
        if known is None:
            name = model_name(model)
            known = self._models[model] = (
                NO_MODEL if name is None else key_of(name),
                writes_anthropic_signatures(model),
            )
        key, checked = known
        signed = False
        bad: list[BadSignature] | None = None
        for position, block in enumerate(content):
            if block.type != "thinking":
                continue
            signature = block.signature
            if checked:
                fault = signature_fault(signature)
            elif type(signature) is str and signature.strip():
                fault = None
            else:
                continue
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

    def replay(self, index: int, data: bytes) -> None:
        """Feed the tracker one chain record's conversation events."""
        try:
            record = decode_record(data)
        except ValueError:
            return
        tracker = self.tracker
        kind, role, _ = _classify(record)
        if kind == Kind.COMPACTION:
            tracker.boundary(index)
            return
        if kind != Kind.MESSAGE or record.message is None:
            return
        content = record.message.content
        cwd = record.cwd if type(record.cwd) is str else None
        if role == Role.ASSISTANT:
            calls = _calls(content, cwd)
            turn = record.message.id if type(record.message.id) is str else None
            tracker.assistant(index, calls, False, None, turn)
        elif role == Role.TOOL_RESULT:
            assert isinstance(content, list)
            results = [block for block in content if block.type == "tool_result"]
            sidecar_ok = len(results) == 1 and _sidecar_succeeded(record.toolUseResult)
            for block in results:
                call_id = block.tool_use_id if type(block.tool_use_id) is str else None
                bits = Bit.ERRORED if block.is_error is True else Bit.SUCCEEDED if sidecar_ok else 0
                tracker.result(index, call_id, bits)
            if len(results) != len(content):
                tracker.user(index, None)
        elif role == Role.USER:
            tracker.user(index, None)

    def finish(self, lines: LineReport) -> None:
        view = self.view
        source = RecordSource(self.path)
        view.read_ids = partial(_read_ids, source, view)
        view.result_text_exceeds = partial(_result_text_exceeds, source, view)
        view.copied_bytes = partial(_read_copied_bytes, source, view)
        view.type_name = partial(_read_type_name, source, view)
        view.signed = partial(_read_signed, source, view)
        view.prompted = partial(is_prompt, source, view)
        view.media_limits = ANTHROPIC_MEDIA_LIMITS
        view.model_of = partial(_read_model, source, view)
        view.finish()


_TYPE_OF: Final = attrgetter("type")
_UUID_OF: Final = attrgetter("uuid")
_PARENT_OF: Final = attrgetter("parentUuid")
_SUMMARY_OF: Final = attrgetter("isCompactSummary")
_SESSION_OF: Final = attrgetter("sessionId")
_SIDECHAIN_OF: Final = attrgetter("isSidechain")
_SOURCE_OF: Final = attrgetter("sourceToolAssistantUUID")
_MESSAGE_OF: Final = attrgetter("message")
_PLAIN_TYPES: Final = frozenset({"user", "assistant", "progress"})
_STR_ONLY: Final = {str}
_PARENT_TYPES: Final = {str, type(None)}
_CODE_USER, _CODE_RESULT, _CODE_ASSISTANT, _CODE_PROGRESS = 0, 1, 2, 3
_KIND_OF_CODE: Final = bytes([Kind.MESSAGE, Kind.MESSAGE, Kind.MESSAGE, Kind.CONTROL]).ljust(
    256, b"\0"
)
_ROLE_OF_CODE: Final = bytes([Role.USER, Role.TOOL_RESULT, Role.ASSISTANT, Role.NONE]).ljust(
    256, b"\0"
)
_CONTEXT_CUT: Final = Flag.CONTEXT | Flag.CUT_POINT
_FLAGS_OF_CODE: Final = bytes([_CONTEXT_CUT, 0, _CONTEXT_CUT, 0]).ljust(256, b"\0")


def _CONTENT_OF_MESSAGE(message: _Message | None) -> object:
    return None if message is None else message.content


def _code(record_type: str, content: object) -> int:
    """The column code of a plain record (`_KIND_OF_CODE` and friends index it)."""
    if record_type == "assistant":
        return _CODE_ASSISTANT
    if record_type == "progress":
        return _CODE_PROGRESS
    if type(content) is list and any(
        type(block) is _Block and block.type == "tool_result" for block in content
    ):
        return _CODE_RESULT
    return _CODE_USER


def _boundary_facts(record: _Record) -> BoundaryFacts:
    logical = record.logicalParentUuid
    facts = BoundaryFacts(
        first_kept=MISSING, logical_parent=MISSING if logical is UNSET else logical
    )
    if record.compactMetadata is _NO_RAW:
        return facts
    try:
        metadata = _METADATA_DECODER.decode(record.compactMetadata)
    except (ValueError, RecursionError):
        return facts
    segment = metadata.preservedSegment
    if segment is None:
        return facts
    listed = metadata.preservedMessages
    ids: tuple[object, ...] | None = None
    listed_anchor: object = MISSING
    if listed is not None:
        listed_anchor = listed.anchorUuid
        ids = tuple(
            uuid
            for group in (listed.uuids, listed.allUuids)
            if type(group) is list
            for uuid in group
        )
    facts.preserved = PreservedSegment(
        segment.headUuid, segment.anchorUuid, segment.tailUuid, listed_anchor, ids
    )
    return facts


def _boundary_references(facts: BoundaryFacts) -> tuple[Reference, ...]:
    """What a compaction names besides its (null) parent, for remapping and checks."""
    named: list[tuple[object, RefRole]] = [(facts.logical_parent, RefRole.LOGICAL_PARENT)]
    segment = facts.preserved
    if segment is not None:
        named += [(segment.head, RefRole.SEGMENT_HEAD), (segment.tail, RefRole.SEGMENT_TAIL)]
        named += [(uuid, RefRole.SEGMENT_MEMBER) for uuid in segment.listed or ()]
    return tuple(
        Reference(role.value, target, RefKind.COMPACTION, role)
        for target, role in named
        if isinstance(target, str) and target and target != MISSING
    )


def _invalid_tool_names(content: object) -> tuple[str, ...]:
    if type(content) is not list:
        return ()
    return tuple(
        repr(block.name) if type(block.name) is not str else block.name
        for block in content
        if type(block) is _Block
        and block.type == "tool_use"
        and (type(block.name) is not str or TOOL_NAME.fullmatch(block.name) is None)
    )


SYNTHETIC_MODEL: Final = "<synthetic>"
"""The model Claude Code names on the assistant records it writes itself."""


def model_name(model: object) -> str | None:
    """The model an assistant record names (None for Claude Code's own records)."""
    return model if type(model) is str and model and model != SYNTHETIC_MODEL else None


class _ModelMessage(Struct, gc=False):
    role: Any = None
    model: Any = None


class _ModelRecord(Struct, gc=False):
    type: Any = None
    message: _ModelMessage | None = None


_MODEL_DECODER: Final = ParsingDecoder(_ModelRecord)


def _read_model(source: RecordSource, view: SessionView, index: int) -> str | None:
    """The model an assistant record was written by."""
    try:
        record = _MODEL_DECODER.decode(source.read(*view.span(index)))
    except (ValueError, RecursionError):
        return None
    message = record.message
    if record.type != "assistant" or message is None:
        return None
    return model_name(message.model)


def _classify(record: _Record) -> tuple[Kind, Role, int]:
    """Kind, role and flags of a record."""
    record_type = record.type
    if record_type == "assistant":
        return Kind.MESSAGE, Role.ASSISTANT, Flag.CONTEXT | Flag.CUT_POINT
    if record_type == "user":
        content = None if record.message is None else record.message.content
        if type(content) is list and any(
            type(block) is _Block and block.type == "tool_result" for block in content
        ):
            return Kind.MESSAGE, Role.TOOL_RESULT, 0
        return Kind.MESSAGE, Role.USER, Flag.CONTEXT | Flag.CUT_POINT
    if record_type == "system":
        if record.subtype == BOUNDARY_SUBTYPE:
            return Kind.COMPACTION, Role.NONE, 0
        return Kind.MESSAGE, Role.OTHER, 0
    if record_type == "attachment":
        return Kind.MESSAGE, Role.OTHER, 0
    if record_type == "progress":
        return Kind.CONTROL, Role.NONE, 0
    if record_type in SHARED_UUID_TYPES or (
        record.uuid is None and (record_type in METADATA_TYPES or record.parentUuid is UNSET)
    ):
        return Kind.METADATA, Role.NONE, 0
    return Kind.OTHER, Role.NONE, 0


def _calls(content: object, cwd: str | None) -> tuple[ToolCall, ...]:
    if type(content) is not list:
        return ()
    calls = []
    for block in content:
        if type(block) is not _Block or block.type != "tool_use":
            continue
        name = block.name if type(block.name) is str else ""
        call_id = block.id if type(block.id) is str else ""
        action = FILE_TOOLS.get(name)
        path = _file_path(block.input) if action is not None else None
        if action is None or path is None:
            calls.append(ToolCall(call_id, name))
        else:
            calls.append(ToolCall(call_id, name, action, path, cwd))
    return tuple(calls)


def _file_path(arguments: Raw) -> str | None:
    if arguments is _NO_RAW:
        return None
    try:
        path = _INPUT_DECODER.decode(arguments).file_path
    except (ValueError, RecursionError):
        return None
    return path if type(path) is str and path else None


def _sidecar_succeeded(sidecar: Raw) -> bool:
    """The result's `toolUseResult` says a read returned text or a write replaced a file."""
    if sidecar is _NO_RAW or bytes(memoryview(sidecar)[:1]) != b"{":
        return False
    try:
        kind = _SIDECAR_DECODER.decode(sidecar).type
    except (ValueError, RecursionError):
        return False
    return kind in _SUCCESS_TYPES


_MEDIA_KINDS: Final = {"image": MediaKind.IMAGE, "document": MediaKind.DOCUMENT}
_LIST: Final = re.compile(rb"\[")
_OBJECT: Final = re.compile(rb"\{")
_NESTED_MEDIA: Final = re.compile(rb'"type"\s*:\s*"(?:image|document)"')
"""What a tool result's content (a list of blocks) holds where it holds inline media."""
_MEDIA_SOURCE_OF: Final = attrgetter("source")
_TEXT_OF: Final = attrgetter("text")
_RESULT_CONTENT_OF: Final = attrgetter("content")
_TURN_ROLES: Final = frozenset({Role.USER, Role.TOOL_RESULT, Role.ASSISTANT})
_INNER_DECODER: Final = ParsingDecoder(list[_Inner])
_SIGNED_TYPES: Final = frozenset({"thinking", "redacted_thinking"})


class _FileData(Struct, gc=False):
    base64: Raw = _NO_RAW


class _SidecarFile(Struct, gc=False):
    file: _FileData | None = None


_SIDECAR_FILE_DECODER: Final = ParsingDecoder(_SidecarFile)


def _may_hold_blocks_of_note(contents: list[object], results: list[object]) -> bool:
    """Whether any of these message contents may hold inline media or a blank text block,
    those of tool result records (`results`, of the same) in their results too
    (column-wise, a pass over their blocks for each: the records are then looked at one
    by one)."""
    lists = cast(
        "list[list[_Block]]",
        list(compress(contents, map(is_, map(type, contents), repeat(list)))),
    )
    if not lists:
        return False
    if any(map(_MEDIA_SOURCE_OF, chain.from_iterable(lists))):
        return True
    if any(map(BLANK_TEXT.fullmatch, map(_TEXT_OF, chain.from_iterable(lists)))):
        return True
    answers = cast("list[list[_Block]]", results)
    listed = filter(_LIST.match, map(_RESULT_CONTENT_OF, chain.from_iterable(answers)))
    return any(map(_NESTED_MEDIA.search, listed))


def _note_content(view: SessionView, index: int, record: _Record) -> None:
    """Put a conversation record's inline media and blank text blocks into the view."""
    content = None if record.message is None else record.message.content
    if type(content) is not list:
        return
    found = _media_of(content)
    if found:
        copy = _sidecar_copy(record.toolUseResult)
        view.media[index] = tuple(
            msgspec.structs.replace(media, copies=1) if media.digest == copy else media
            for media in found
        )
    blank = [
        position
        for position, block in enumerate(content)
        if type(block) is _Block and block.type == "text" and is_blank(block.text)
    ]
    if blank:
        empty = tuple(bytes(content[position].text) == EMPTY_TEXT for position in blank)
        view.blank_texts[index] = BlankText(tuple(blank), len(content) - len(blank), empty)


def _media_of(content: list[_Block]) -> list[InlineMedia]:
    """Each inline image or document of a message's content, in tool results too."""
    found: list[InlineMedia] = []
    for block in content:
        if type(block) is not _Block:
            continue
        kind = _MEDIA_KINDS.get(block.type) if type(block.type) is str else None
        if kind is not None:
            _add_media(found, kind, block.source)
        elif (
            block.type == "tool_result"
            and _LIST.match(block.content)
            and _NESTED_MEDIA.search(block.content)
        ):
            try:
                parts = _INNER_DECODER.decode(block.content)
            except (ValueError, RecursionError):
                continue
            for part in parts:
                kind = _MEDIA_KINDS.get(part.type) if type(part.type) is str else None
                if kind is not None:
                    _add_media(found, kind, part.source)
    return found


def _add_media(found: list[InlineMedia], kind: MediaKind, source: _Source | None) -> None:
    if source is None or source.type != "base64" or source.data is _NO_RAW:
        return
    media = inline_media(kind, source.media_type, source.data)
    if media is not None:
        found.append(media)


def _sidecar_copy(sidecar: Raw) -> int | None:
    """The digest of the base64 text `toolUseResult.file.base64` holds, if it holds one."""
    if sidecar is _NO_RAW or not _OBJECT.match(sidecar):
        return None
    try:
        held = _SIDECAR_FILE_DECODER.decode(sidecar).file
    except (ValueError, RecursionError):
        return None
    copy = None if held is None or held.base64 is _NO_RAW else base64_text(held.base64)
    return None if copy is None else digest(copy)


def _read_signed(source: RecordSource, view: SessionView, index: int) -> bool:
    """Whether the API message the record belongs to (every record sharing its
    `message.id`) holds a thinking block."""
    turn = view.turns.get(index)
    records = [index] if turn is None else [i for i, key in view.turns.items() if key == turn]
    for member in records:
        try:
            record = decode_record(source.read(*view.span(member)))
        except ValueError:
            continue
        content = None if record.message is None else record.message.content
        if type(content) is list and any(
            type(block) is _Block and block.type in _SIGNED_TYPES for block in content
        ):
            return True
    return False


_read_ids: Final = ids_reader("uuid", "parentUuid")


class _TextPart(Struct, gc=False):
    type: Any = None
    text: Any = None


class _ResultBlock(Struct, gc=False):
    type: Any = None
    content: str | list[_TextPart] | None = None


class _ResultMessage(Struct, gc=False):
    content: str | list[_ResultBlock] | None = None


class _ResultRecord(Struct, gc=False):
    message: _ResultMessage | None = None
    toolUseResult: _Sidecar | str | None = None


_RESULT_DECODER: Final = ParsingDecoder(_ResultRecord)


def _result_text(data: bytes) -> str | None:
    """The text of a record's only `tool_result` block, when that holds only text."""
    try:
        record = _RESULT_DECODER.decode(data)
    except (ValueError, RecursionError):
        return None
    sidecar = record.toolUseResult
    if type(sidecar) is not _Sidecar or sidecar.type != "text":
        return None
    content = None if record.message is None else record.message.content
    if type(content) is not list:
        return None
    results = [block for block in content if block.type == "tool_result"]
    if len(results) != 1:
        return None
    inner = results[0].content
    if type(inner) is str:
        return inner
    if type(inner) is not list:
        return None
    parts = []
    for part in inner:
        if part.type != "text" or type(part.text) is not str:
            return None
        parts.append(part.text)
    return "".join(parts)


def _result_text_exceeds(
    source: RecordSource, view: SessionView, index: int, limit: int, prefix: str
) -> bool:
    return text_exceeds(_result_text(source.read(*view.span(index))), limit, prefix)


RESTAMPED: Final = frozenset(
    {"sessionId", "session_id", "cwd", "version", "gitBranch", "slug", "entrypoint"}
)
"""Envelope fields a resume or fork copy stamps anew (rules.md §4.3)."""


def copied_bytes(data: bytes) -> bytes | None:
    """The exact bytes a replay of this record repeats: every member but the restamped
    envelope fields, in order, each key as `JSON.stringify` writes it (a lone surrogate
    or a byte that is not UTF-8 in it too); None when the bytes hold no object."""
    try:
        members = jsonutil.member_bytes(data)
    except ValueError:
        return None
    kept = [
        jsonutil.stringify_bytes(name) + b":" + raw
        for name, raw in members.items()
        if name not in RESTAMPED
    ]
    return b"{" + b",".join(kept) + b"}"


def _read_type_name(source: RecordSource, view: SessionView, index: int) -> str | None:
    """`type`, or the `subtype` of a system record (e.g. `compact_boundary`)."""
    try:
        record = decode_record(source.read(*view.span(index)))
    except ValueError:
        return None
    if record.type == "system" and type(record.subtype) is str:
        return record.subtype
    return record.type if type(record.type) is str else None


def _read_copied_bytes(source: RecordSource, view: SessionView, index: int) -> bytes | None:
    return copied_bytes(source.read(*view.span(index)))
