"""Reading an open-webui chat's transcript (`transcript`) into the neutral model: a tree
of the messages open-webui walks (by `parentId`, rows first), whose leaf is the
`currentId` open-webui repairs in memory (`history.reading`).

A message only the document holds while the chat has rows is no entry of the tree:
open-webui does not read it (unless a row names it as parent, when it fills it in).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from sessionfix.formats.common import TranscriptLines
from sessionfix.formats.openwebui.edit import WebuiEditor
from sessionfix.formats.openwebui.history import (
    Message,
    Reading,
    children_of,
    kept_as_current,
    mended_children,
    parent_of,
    reading,
    rebuilt_children,
    sent,
)
from sessionfix.formats.openwebui.payload import Sent, payload
from sessionfix.formats.openwebui.transcript import (
    CHAT,
    ENVELOPE,
    ChatFacts,
    Envelope,
    is_envelope,
)
from sessionfix.model.tracking import PathTracker
from sessionfix.model.view import (
    MISSING,
    NO_ID_KEY,
    NULL_KEY,
    CopyDifference,
    CoveredCount,
    Flag,
    HeaderFacts,
    KeptLinks,
    Kind,
    Role,
    SessionView,
    ToolCall,
    key_of,
)
from sessionfix.read.reader import LineReport

FORMAT_NAME: Final = "openwebui"
ROLES: Final = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.OTHER}
CHILDREN: Final = "childrenIds"
CURRENT: Final = "currentId"
CURRENT_COLUMN: Final = "current_message_id"
COMPARED: Final = ("role", "parentId", "content", "output")
"""The fields of a message whose copies must agree: what open-webui sends and links by."""
ROWS: Final = "its chat_message row"
DOCUMENT: Final = "the chat's document (chat.chat)"
SUMMARY_HOLDER: Final = "the compression filter's chat_summary row"


class Chat(msgspec.Struct):
    """A chat's lines, decoded: its own facts and its messages by view index."""

    facts: ChatFacts
    document: dict[str, Message]
    rows: dict[str, Message]
    index: dict[str, int]
    """Message id → view index of its line."""


def chat_of(envelopes: list[tuple[int, Envelope]]) -> Chat:
    facts = ChatFacts()
    document: dict[str, Message] = {}
    rows: dict[str, Message] = {}
    index: dict[str, int] = {}
    for position, envelope in envelopes:
        if envelope.openwebui == CHAT:
            try:
                facts = msgspec.convert(envelope.data, ChatFacts)
            except msgspec.ValidationError:
                facts = ChatFacts()
            continue
        index.setdefault(envelope.id, position)
        if isinstance(envelope.data, dict):
            document[envelope.id] = envelope.data
        if isinstance(envelope.row, dict):
            rows[envelope.id] = envelope.row
    return Chat(facts, document, rows, index)


def chat_reading(chat: Chat) -> Reading:
    return reading(chat.document, chat.rows, chat.facts.current_id)


def chat_payload(read: Reading) -> list[Sent]:
    """The chat messages open-webui sends for the chat it reads, before any filter."""
    return payload(sent([read.messages[key] for key in read.branch]))


class _Leaf:
    """open-webui's leaf: the `currentId` it repairs in memory; the path is its parent
    walk, nothing added."""

    def __init__(self, leaf: int | None) -> None:
        self._leaf = leaf

    def relink(self, view: SessionView, parents: Any) -> None:
        return

    def leaf(self, view: SessionView) -> int | None:
        return self._leaf

    def complete_path(
        self, view: SessionView, path: list[int], unread: Collection[int] = ()
    ) -> list[int]:
        return path


class WebuiAdapter(TranscriptLines[Envelope]):
    """Indexes a transcript's lines; `finish` makes the tree of them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.view = SessionView(path=path, format=FORMAT_NAME, tree=True)
        self.editor = WebuiEditor()
        self.tracker = PathTracker()
        self._envelopes: list[tuple[int, Envelope]] = []

    decode = staticmethod(ENVELOPE.decode)
    decode_lines = staticmethod(ENVELOPE.decode_lines)

    def ingest(
        self, record: Envelope, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        index = self.view.add(row, column, offset, size, Kind.OTHER)
        self._envelopes.append((index, record))

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        index = self.view.add(row, column, offset, len(data), Kind.OTHER)
        if is_envelope(value):
            try:
                self._envelopes.append((index, msgspec.convert(value, Envelope)))
            except msgspec.ValidationError:
                return

    def replay(self, index: int, data: bytes) -> None:
        """A message of the path, in path order: its calls and the results its output
        holds, as open-webui reads the message (its row's copy where it has one)."""
        try:
            envelope = ENVELOPE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        message = envelope.row if isinstance(envelope.row, dict) else envelope.data
        if envelope.openwebui == CHAT or not isinstance(message, dict):
            return
        role = message.get("role")
        if role == "user":
            self.tracker.user(index, None)
            return
        if role != "assistant":
            self.tracker.context(index)
            return
        output = message.get("output")
        items = (
            [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []
        )
        calls = tuple(
            ToolCall(item["call_id"], str(item.get("name", "")))
            for item in items
            if item.get("type") == "function_call" and isinstance(item.get("call_id"), str)
        )
        self.tracker.assistant(index, calls, False, None)
        for item in items:
            if item.get("type") == "function_call_output":
                call = item.get("call_id")
                self.tracker.result(index, call if isinstance(call, str) else None, 0)

    def finish(self, lines: LineReport) -> None:
        view = self.view
        chat = chat_of(self._envelopes)
        read = chat_reading(chat)
        ids: dict[int, tuple[str | None, object]] = {}
        for index, envelope in self._envelopes:
            if envelope.openwebui == CHAT:
                if index == 0:
                    view.header = HeaderFacts(
                        row=view.rows[0], id=envelope.id, version=None, cwd=None
                    )
                    view.kinds[0] = Kind.HEADER
                continue
            message = read.messages.get(envelope.id)
            if message is None or chat.index.get(envelope.id) != index:
                view.kinds[index] = Kind.METADATA
                continue
            parent = parent_of(message)
            view.kinds[index] = Kind.MESSAGE
            role = message.get("role")
            view.roles[index] = ROLES.get(role, Role.NONE) if isinstance(role, str) else Role.NONE
            view.flags[index] = Flag.CONTEXT
            view.id_keys[index] = key_of(envelope.id)
            if isinstance(parent, str) and parent:
                view.parent_keys[index] = key_of(parent)
                ids[index] = (envelope.id, parent)
            else:
                view.parent_keys[index] = NULL_KEY
                ids[index] = (envelope.id, None)
        view.read_ids = lambda index: ids.get(index, (None, MISSING))
        leaf = chat.index.get(read.current) if read.current is not None else None
        if leaf is not None and view.id_keys[leaf] == NO_ID_KEY:
            leaf = None
        view.policy = _Leaf(leaf)
        view.adopters_only = True
        if chat.facts.unread is not None:
            view.unread = chat.facts.unread
        self._envelopes = []
        view.finish()
        if view.header is not None:
            _stored_facts(view, chat, read)


def _stored_facts(view: SessionView, chat: Chat, read: Reading) -> None:
    """What the chat stores beside its parent links and twice (spec §6): child lists
    and the current message, the document's and the rows' copies of each message, the
    compression filter's count; and the messages sent without a role."""
    parents = rebuilt_children(chat.document)
    listers: dict[str, list[str]] = {}
    for key, message in chat.document.items():
        for child in children_of(message):
            if isinstance(child, str):
                listers.setdefault(child, []).append(key)
    out_of_step: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    looped = _in_cycles(chat.document)
    for key, message in chat.document.items():
        if key in looped:
            continue
        stored = children_of(message)
        unparented = [
            child
            for child in stored
            if isinstance(child, str) and _parent_dangles(chat.document.get(child), chat.document)
        ]
        mended = mended_children(stored, parents.get(key, []) + unparented)
        if stored != mended and key in chat.index:
            out_of_step[chat.index[key]] = (tuple(map(str, stored)), tuple(mended))
    for index in view.dangling():
        entry = view.entry_id(index)
        named = listers.get(entry, []) if entry is not None else []
        if len(named) == 1 and named[0] in read.messages:
            view.adopters[index] = named[0]
    view.kept_links = KeptLinks(
        CHILDREN,
        CURRENT,
        0,
        MISSING if chat.facts.current_id is None else chat.facts.current_id,
        out_of_step,
        CURRENT_COLUMN,
        MISSING if chat.facts.current_message_id is None else chat.facts.current_message_id,
        read.current is not None and kept_as_current(chat.document, read.current),
    )
    if chat.rows:
        for key, index in chat.index.items():
            document, row = chat.document.get(key), chat.rows.get(key)
            if document is None or row is None:
                fields: tuple[str, ...] = ()
            else:
                fields = tuple(
                    name for name in COMPARED if _differs(document.get(name), row.get(name))
                )
            if fields or document is None or row is None:
                view.copy_differences[index] = CopyDifference(fields, ROWS, DOCUMENT)
    for key in read.branch:
        role = read.messages[key].get("role")
        if not (isinstance(role, str) and role) and key in chat.index:
            view.roleless.append(chat.index[key])
    count = chat.facts.summary_count
    if isinstance(count, int) and not isinstance(count, bool):
        view.covered_count = _covered(chat, read, count)


def _in_cycles(document: Mapping[str, Message]) -> set[str]:
    """The messages whose parent links loop, and their parents: which children such a
    message has depends on where the loop is broken, so its list is left as it is."""
    looped: set[str] = set()
    done: set[str] = set()
    for start in document:
        walk: list[str] = []
        key: object = start
        while isinstance(key, str) and key in document and key not in done and key not in walk:
            walk.append(key)
            key = parent_of(document[key])
        if isinstance(key, str) and key in walk:
            looped.update(walk[walk.index(key) :])
        done.update(walk)
    return looped


def _parent_dangles(message: object, document: Mapping[str, Message]) -> bool:
    """A message whose `parentId` names no message: the child list that still names it
    is what tells where it belongs (its adopter), not a list to mend."""
    parent = parent_of(message) if isinstance(message, dict) else None
    return isinstance(parent, str) and bool(parent) and parent not in document


def _differs(document: object, row: object) -> bool:
    """Whether two copies of a field disagree (a missing field and an empty one agree)."""
    return (document or None) != (row or None)


def _covered(chat: Chat, read: Reading, count: int) -> CoveredCount:
    roles = [(key, str(message.get("role"))) for key, message in chat_payload(read)]
    stored_at = _seconds(chat.facts.summary_updated)
    newer: list[int] = []
    for key, _ in roles[:count]:
        stamp = read.messages.get(key, {}).get("timestamp")
        index = chat.index.get(key)
        if (
            stored_at is not None
            and index is not None
            and isinstance(stamp, (int, float))
            and stamp > stored_at
            and index not in newer
        ):
            newer.append(index)
    splits = 0 < count < len(roles) and roles[count][1] == "tool"
    return CoveredCount(SUMMARY_HOLDER, 0, count, len(roles), stored_at, tuple(newer), splits)


def _seconds(value: object) -> float | None:
    """A `chat_summary.updated_at` (SQLAlchemy's `YYYY-MM-DD HH:MM:SS[.ffffff]`, UTC) in
    seconds since the epoch."""
    if not isinstance(value, str):
        return None
    try:
        found = datetime.fromisoformat(value)
    except ValueError:
        return None
    if found.tzinfo is None:
        found = found.replace(tzinfo=UTC)
    return found.timestamp()
