"""opencode's message and part rows decoded: only the fields that decide what the model
is sent and what the rules look at (spec formats/opencode.md §3).

A row's `data` is decoded as it is stored (the database leaves the ids to its columns;
the legacy files repeat them, and they are ignored), as opencode reads it: its text
through `JSON.parse` (`parsed`), which takes what faster parsers refuse, such as a lone
surrogate escape. A field of an unexpected type is read as absent, a part's data that is
JSON but no object as a part of no type; a row that is no JSON, a message whose info is
no object, or a tool part without a state (absent or null), is one opencode itself
cannot read (`Unreadable`): it fails the whole session.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET, Struct, UnsetType

from sessionfix import jsonutil
from sessionfix.formats.opencode.database import StoredMessage

USER: Final = "user"
ASSISTANT: Final = "assistant"
TOOL: Final = "tool"
TEXT: Final = "text"
COMPACTION: Final = "compaction"
STEP_START: Final = "step-start"
REASONING: Final = "reasoning"
SUBTASK: Final = "subtask"
FILE: Final = "file"
PENDING: Final = "pending"
RUNNING: Final = "running"
COMPLETED: Final = "completed"
ERROR: Final = "error"
ABORTED: Final = "MessageAbortedError"
MESSAGE_PREFIX: Final = "msg_"


class _StateTime(Struct, gc=False):
    start: Any = None
    end: Any = None
    compacted: Any = None


class _Metadata(Struct, gc=False):
    interrupted: Any = None
    output: Any = None


class ToolState(Struct, gc=False):
    """A tool part's `state`: the call's input and, once it ended, its result."""

    status: Any = None
    input: Any = UNSET
    output: Any = None
    error: Any = None
    metadata: _Metadata | None = None
    time: _StateTime | None = None

    @property
    def compacted(self) -> bool:
        """Marked by opencode's prune (or sessionfix's stale-read fix): sent as a placeholder."""
        return self.time is not None and self.time.compacted is not None


class PartData(Struct, gc=False):
    """A part's fields of every type that are read (`type` says which apply)."""

    type: Any = None
    text: Any = None
    synthetic: Any = None
    ignored: Any = None
    mime: Any = None
    callID: Any = None
    tool: Any = None
    state: ToolState | UnsetType = UNSET
    tail_start_id: Any = UNSET


class _MessageTime(Struct, gc=False):
    created: Any = None
    completed: Any = None


class _Error(Struct, gc=False):
    name: Any = None


class _Path(Struct, gc=False):
    cwd: Any = None


class MessageData(Struct, gc=False):
    """A message info's fields that are read."""

    role: Any = None
    parentID: Any = None
    summary: Any = None
    finish: Any = None
    error: _Error | None = None
    time: _MessageTime | None = None
    path: _Path | None = None


_PART: Final = msgspec.json.Decoder(PartData)
_MESSAGE: Final = msgspec.json.Decoder(MessageData)


class Unreadable(Exception):
    """A row opencode cannot read (its loader fails the whole session with it)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class Part(NamedTuple):
    key: str
    """The part's id (`prt_…`): its record key."""
    data: PartData

    @property
    def state(self) -> ToolState | None:
        state = self.data.state
        return state if isinstance(state, ToolState) else None

    @property
    def tail_start(self) -> str | None:
        """A compaction part's `tail_start_id`: the first message the compaction kept."""
        tail = self.data.tail_start_id
        return tail if isinstance(tail, str) and tail else None


class Message(NamedTuple):
    key: str
    """The message's id (`msg_…`): its record key."""
    time_created: int | float
    """Its `time_created` column: what opencode orders messages by."""
    data: MessageData
    parts: tuple[Part, ...]

    @property
    def role(self) -> str | None:
        role = self.data.role
        return role if isinstance(role, str) else None

    @property
    def parent(self) -> str | None:
        """An assistant's `parentID`: the user message it answers."""
        parent = self.data.parentID
        return parent if isinstance(parent, str) else None

    @property
    def error_name(self) -> str | None:
        """The name of an assistant's `error`, `""` for an error without one, else None."""
        error = self.data.error
        if error is None:
            return None
        return error.name if isinstance(error.name, str) else ""

    @property
    def is_summary(self) -> bool:
        """A finished, faultless compaction summary: what ends opencode's window walk."""
        data = self.data
        return (
            self.role == ASSISTANT
            and bool(data.summary)
            and bool(data.finish)
            and data.error is None
        )

    @property
    def compaction(self) -> Part | None:
        """Its `compaction` part (a user message that asks for a summary)."""
        for part in self.parts:
            if part.data.type == COMPACTION:
                return part
        return None

    @property
    def cwd(self) -> str | None:
        """The folder an assistant's relative paths are relative to."""
        path = self.data.path
        return path.cwd if path is not None and isinstance(path.cwd, str) else None


def parsed(data: bytes) -> Any:
    """A row's `data` as opencode reads it: its text (bytes that are not UTF-8 replaced,
    as its SQLite driver reads text) through `JSON.parse`; ValueError where that throws."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        data = data.decode("utf-8", "replace").encode("utf-8")
    return jsonutil.loads(data)


def _loose(
    decoder: msgspec.json.Decoder[Any], data: bytes, key: str, what: str, *, spread: bool
) -> Any:
    """`data` decoded into `decoder`'s type, fields of other types read as absent;
    `spread`: JSON that is no object reads as an object of no fields, as opencode
    spreads a part's data into the part (`{...data, id, ...}`)."""
    try:
        return decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    try:
        value = parsed(data)
    except ValueError:
        raise Unreadable(key, f"its {what} is not JSON") from None
    if not isinstance(value, dict):
        if not spread:
            raise Unreadable(key, f"its {what} is not a JSON object")
        value = {}
    return msgspec.convert(_typed_fields(value, decoder.type), decoder.type)


def _typed_fields(value: dict[str, Any], shape: Any) -> dict[str, Any]:
    """`value` less the fields whose type `shape` does not take (read as absent); a
    field opencode reads members of (`_MEMBERS_READ`) that is no object and not null
    is one with none of them."""
    kept: dict[str, Any] = {}
    for name in shape.__struct_fields__:
        if name not in value:
            continue
        field = value[name]
        inner = _struct_of(shape, name)
        if inner is None:
            kept[name] = field
        elif isinstance(field, dict):
            kept[name] = _typed_fields(field, inner)
        elif field is not None and (shape, name) in _MEMBERS_READ:
            kept[name] = {}
    return kept


_MEMBERS_READ: Final = frozenset({(PartData, "state")})
"""Fields opencode reads a member of whatever they hold: a tool part's `state.status`
is undefined for a string, an array or a number (the part then sends nothing), and
throws only for a state that is absent or null (the session fails)."""


def _struct_of(shape: Any, name: str) -> Any:
    """The Struct type a field of `shape` holds, if any."""
    hints = {
        (PartData, "state"): ToolState,
        (ToolState, "metadata"): _Metadata,
        (ToolState, "time"): _StateTime,
        (MessageData, "error"): _Error,
        (MessageData, "time"): _MessageTime,
        (MessageData, "path"): _Path,
    }
    return hints.get((shape, name))


def decode_part(key: str, data: bytes) -> Part:
    part: PartData = _loose(_PART, data, key, "data", spread=True)
    if part.type == TOOL and not isinstance(part.state, ToolState):
        raise Unreadable(key, "a tool part without a state")
    return Part(key, part)


def decode_message(stored: StoredMessage) -> Message:
    row = stored.row
    info: MessageData = _loose(_MESSAGE, row.data, row.id, "data", spread=False)
    return Message(
        row.id,
        row.time_created,
        info,
        tuple(decode_part(part.id, part.data) for part in stored.parts),
    )


def decode_session(stored: Iterable[StoredMessage]) -> Iterator[Message]:
    """A session's messages, decoded in the order they are read."""
    for message in stored:
        yield decode_message(message)
