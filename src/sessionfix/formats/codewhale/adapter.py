"""Reading a CodeWhale document's transcript (`transcript`) into the neutral model: the
document line is the header, each journal entry a record of the tree its `parent_id`
links make, whose leaf is the journal's `leaf_id` (none when it names no entry: the
path is then empty, as CodeWhale's walk is); a document without a journal is its
messages in order. Conversation events follow CodeWhale's grouping of tool calls
(spec §3 step 6): only a caller message ends a group.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec

from sessionfix.formats.codewhale.document import CALLER_ROLES
from sessionfix.formats.codewhale.edit import CodeWhaleEditor
from sessionfix.formats.codewhale.transcript import DOCUMENT, ENTRY, MESSAGE
from sessionfix.formats.common import TranscriptLines, ids_reader, text_exceeds
from sessionfix.model.tracking import PathTracker
from sessionfix.model.view import (
    NO_ID_KEY,
    NULL_KEY,
    Bit,
    FileAction,
    Flag,
    HeaderFacts,
    Kind,
    Reference,
    RefRole,
    Role,
    SessionView,
    ToolCall,
    key_of,
)
from sessionfix.read.reader import LineReport, RecordSource

FORMAT_NAME: Final = "codewhale"
LEAF_FIELD: Final = "leaf_id"
"""How the journal names the entry CodeWhale walks back from."""
READS: Final = frozenset({"read_file", "read"})
FULL_WRITES: Final = frozenset({"write_file", "write"})


class Block(msgspec.Struct, gc=False):
    type: str = ""
    id: Any = None
    name: Any = None
    input: Any = None
    tool_use_id: Any = None
    is_error: Any = None


class Message(msgspec.Struct, gc=False):
    role: Any = None
    content: Any = None


class Line(msgspec.Struct, gc=False):
    """A transcript line: the document's, an entry's or a message's."""

    codewhale: str
    id: Any = None
    parent_id: Any = None
    kind: Any = None
    message: Any = None
    schema_version: Any = None
    workspace: Any = None
    journal: bool = True
    leaf_id: Any = None
    problems: list[str] = msgspec.field(default_factory=list)
    unreadable: str | None = None
    unread: str | None = None


LINE: Final = msgspec.json.Decoder(Line)
_MESSAGE: Final = msgspec.json.Decoder(Message)


def message_of(line: Line) -> Message | None:
    """The message a line stands for (entries of the text kinds as CodeWhale projects them)."""
    if line.codewhale == MESSAGE or line.kind == "message":
        try:
            return msgspec.convert(line.message, Message)
        except msgspec.ValidationError:
            return None
    if line.kind in ("user", "assistant"):
        return Message(line.kind, [])
    if line.kind in ("compaction", "branch_summary", "system"):
        return Message("system", [])
    return None


def _blocks(message: Message) -> list[Block]:
    if not isinstance(message.content, list):
        return []
    found = []
    for block in message.content:
        try:
            found.append(msgspec.convert(block, Block))
        except msgspec.ValidationError:
            continue
    return found


def _path_argument(arguments: Any) -> str | None:
    if not isinstance(arguments, dict):
        return None
    path = arguments.get("path", arguments.get("file_path"))
    return path if isinstance(path, str) else None


def tool_call(block: Block, workspace: str | None) -> ToolCall:
    name = block.name if isinstance(block.name, str) else ""
    action = (
        FileAction.READ
        if name in READS
        else FileAction.FULL_WRITE
        if name in FULL_WRITES
        else FileAction.NONE
    )
    path = _path_argument(block.input) if action else None
    return ToolCall(str(block.id), name, action, path, workspace)


def role_of(message: Message) -> Role:
    if message.role in CALLER_ROLES:
        return Role.ASSISTANT
    if message.role == "user":
        blocks = _blocks(message)
        if blocks and all(block.type == "tool_result" for block in blocks):
            return Role.TOOL_RESULT
        return Role.USER
    return Role.OTHER


class _Leaf:
    """CodeWhale's leaf: the entry `journal.leaf_id` names (its later holder, when the id
    repeats); none when it names none. Its walk is the plain parent walk."""

    def __init__(self, leaf_id: str | None) -> None:
        self.leaf_id = leaf_id

    def relink(self, view: SessionView, parents: Any) -> None:
        """CodeWhale links entries by `parent_id` alone."""

    def leaf(self, view: SessionView) -> int | None:
        return view.resolve(self.leaf_id) if self.leaf_id is not None else None

    def complete_path(
        self, view: SessionView, path: list[int], unread: Collection[int] = ()
    ) -> list[int]:
        return path


class CodeWhaleAdapter(TranscriptLines[Line]):
    """Indexes a transcript's lines, one entry (or message) each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.view = SessionView(path=path, format=FORMAT_NAME, tree=True)
        self.editor = CodeWhaleEditor()
        self.tracker = PathTracker(late_results=False)
        self._workspace: str | None = None

    decode = staticmethod(LINE.decode)
    decode_lines = staticmethod(LINE.decode_lines)

    def ingest(
        self, record: Line, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        view = self.view
        if record.codewhale == DOCUMENT:
            if len(view):
                view.add(row, column, offset, size, Kind.OTHER)
                return
            view.add(row, column, offset, size, Kind.HEADER)
            workspace = record.workspace if isinstance(record.workspace, str) else None
            self._workspace = workspace
            view.header = HeaderFacts(
                row, record.id, record.schema_version, workspace, tuple(record.problems)
            )
            view.unread = record.unread
            view.tree = record.journal and record.unreadable is None and record.unread is None
            if view.tree:
                leaf = record.leaf_id if isinstance(record.leaf_id, str) else None
                view.policy = _Leaf(leaf)
                if leaf is not None and not record.problems:  # else no entry was read
                    view.references[0] = (Reference(LEAF_FIELD, leaf, role=RefRole.LEAF),)
            return
        message = message_of(record)
        kind = Kind.OTHER
        role = Role.NONE
        flags = 0
        if message is not None:
            kind = Kind.BRANCH_SUMMARY if record.kind == "branch_summary" else Kind.MESSAGE
            role = role_of(message)
            flags = Flag.CONTEXT
        if record.codewhale != ENTRY:
            if view.tree:  # the `messages` a journal with an empty walk falls back to
                kind, flags = Kind.METADATA, 0
            index = view.add(row, column, offset, size, kind, role, flags)
            if message is not None and not view.tree:  # no journal: the messages in order
                self._events(index, message)
            return
        entry_id = record.id if isinstance(record.id, str) and record.id else None
        parent = record.parent_id
        index = view.add(
            row,
            column,
            offset,
            size,
            kind,
            role,
            flags if entry_id is not None else flags | Flag.BAD_ID,
            key_of(entry_id) if entry_id is not None else NO_ID_KEY,
            key_of(parent) if isinstance(parent, str) else NULL_KEY,
        )
        view.remember_ids(index, entry_id, parent if isinstance(parent, str) else None)

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        """A line decoded the slow way: as its line when it is one, else a record of no kind."""
        try:
            record = msgspec.convert(value, Line)
        except msgspec.ValidationError:
            self.view.add(row, column, offset, len(data), Kind.OTHER)
            return
        self.ingest(record, data, row, column, offset, len(data))

    def replay(self, index: int, data: bytes) -> None:
        """Feed the tracker one record of the active path, as CodeWhale groups calls."""
        try:
            record = LINE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        message = message_of(record)
        if message is not None:
            self._events(index, message)

    def _events(self, index: int, message: Message) -> None:
        tracker = self.tracker
        blocks = _blocks(message)
        if message.role in CALLER_ROLES:
            calls = tuple(
                tool_call(block, self._workspace)
                for block in blocks
                if block.type == "tool_use" and isinstance(block.id, str)
            )
            tracker.assistant(index, calls, False, None)
            return
        results = [block for block in blocks if block.type == "tool_result"]
        for block in results:
            call_id = block.tool_use_id if isinstance(block.tool_use_id, str) else None
            bits = Bit.ERRORED if block.is_error is True else Bit.SUCCEEDED
            tracker.result(index, call_id, bits)
        if message.role == "user" and len(results) < len(blocks) and tracker.current is None:
            tracker.user(index, None)

    def finish(self, lines: LineReport) -> None:
        view = self.view
        if view.policy is None:
            view.tree = False
        view.read_ids = partial(_read_ids, RecordSource(self.path), view)
        view.type_name = _type_name
        view.result_text_exceeds = partial(_result_text_exceeds, RecordSource(self.path), view)
        view.finish()


def _result_text_exceeds(
    source: RecordSource, view: SessionView, index: int, limit: int, prefix: str
) -> bool:
    """Whether a message's tool result text is over `limit` bytes and not `prefix`-led
    (every result of the message, when it holds several)."""
    try:
        line = LINE.decode(source.read(view.offsets[index], view.sizes[index]))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    message = message_of(line)
    if message is None or not isinstance(message.content, list):
        return False
    texts = [
        block.get("content")
        for block in message.content
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    return bool(texts) and all(
        isinstance(text, str) and text_exceeds(text, limit, prefix) for text in texts
    )


def _type_name(index: int) -> str | None:
    """The document line stands for the journal (what its leaf pointer belongs to)."""
    return "journal" if index == 0 else None


_read_ids: Final = ids_reader("id", "parent_id")
