"""An opencode session decoded into the format-neutral model (`SessionView` and the
tracker's `Tracking`), for the rules.

Every row is a record, in opencode's load order: a message row, then its part rows
(spec formats/opencode.md §4.1). Records are positional (`tree=False`): opencode
orders by time, and a reply's `parentID` only names the prompt it answers (kept as the
record's parent key, for the rules that pair them). A record's key is its row id
(`msg_…`, `prt_…`), kept in `OpencodeSession.keys` and read back through the view's
`read_ids`.

- A message is `Kind.MESSAGE` with its role; it is `Flag.CONTEXT` when opencode sends
  something of it (`context.window`, `context.sends`); a summary carries `Flag.SUMMARY`.
- The compaction prompt that opencode's window stops at is `Kind.COMPACTION`, its
  `tail_start_id` the first record it keeps (`BoundaryFacts.first_kept[_index]`). A
  compaction prompt that is no boundary (no sound summary names it) stays a user
  message; its facts are in `view.boundaries` all the same, for the chain rules.
- Parts are `Kind.OTHER`, except tool parts opencode sends as a call (`context.sends_call`:
  one of its statuses): each is one call (`Role.ASSISTANT`, its message's turn) and,
  once it ended, its own result, fed to the tracker in that order.
  A completed `read` not yet marked compacted reads its `filePath`; a `write` fully
  writes it (relative paths against the message's `path.cwd`, else the session folder).
- A row opencode cannot read is `Kind.OTHER` without flags, noted in `view.notes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Final, NamedTuple

import xxhash

from sessionfix.formats.opencode.context import (
    SentMessage,
    model_messages,
    sends,
    sends_call,
    sent_size,
    window,
)
from sessionfix.formats.opencode.database import SessionRow, StoredMessage
from sessionfix.formats.opencode.decode import (
    ASSISTANT,
    COMPLETED,
    ERROR,
    USER,
    Message,
    Part,
    Unreadable,
    decode_message,
    parsed,
)
from sessionfix.jsonutil import canonical
from sessionfix.model.loaded import Loaded, LoadRefused
from sessionfix.model.tracking import PathTracker, Tracking
from sessionfix.model.view import (
    MISSING,
    NULL_KEY,
    Bit,
    BoundaryFacts,
    FileAction,
    Flag,
    Kind,
    Role,
    SessionView,
    ToolCall,
    key_of,
)

FORMAT_NAME: Final = "opencode"
READ_TOOL: Final = "read"
WRITE_TOOL: Final = "write"
_ROLES: Final = {USER: Role.USER, ASSISTANT: Role.ASSISTANT}
UNPRUNED_TOOLS: Final = frozenset({"skill"})
"""Tools whose results opencode's prune never clears (spec §4.4)."""
_IDENTITY_DROPPED: Final = frozenset({"id", "sessionID", "messageID", "time"})
"""Fields a copy of a user message does not repeat (spec §8.4)."""


class OpencodeSession(NamedTuple):
    """A session as the rules see it."""

    session: SessionRow
    view: SessionView
    tracking: Tracking
    keys: list[str]
    """Per view record, its row id: the record key diagnostics name."""
    sent: tuple[SentMessage, ...]
    """What opencode sends the model of it (`context.model_messages`)."""
    refused: str | None
    """Why opencode sends nothing of it (a row it cannot read), or None."""

    def loaded(self) -> Iterator[Loaded]:
        """What opencode sends, as `sessionfix.context` counts it: each chat message
        from the record of its row, its size that of the message as JSON;
        `LoadRefused` where opencode fails the session."""
        if self.refused is not None:
            raise LoadRefused(self.refused)
        index = {key: position for position, key in enumerate(self.keys)}
        for message in self.sent:
            yield Loaded(index[message.record], message.sent, sent_size(message))


def _identity(stored: StoredMessage) -> int:
    """What a user message says, whoever wrote it when: a digest of its info and its
    parts, less ids and times (spec §8.4), so that a copy under new ids matches."""
    digest = xxhash.xxh3_64()
    for data in (stored.row.data, *(part.data for part in stored.parts)):
        try:
            value = parsed(data)
        except ValueError:
            digest.update(data)
            continue
        if isinstance(value, dict):
            value = {key: field for key, field in value.items() if key not in _IDENTITY_DROPPED}
        try:
            digest.update(canonical(value))
        except ValueError:
            digest.update(data)
        digest.update(b"\0")
    return digest.intdigest()


def _call(part: Part, base: str | None) -> ToolCall:
    """A tool part as the call it records, with the file it reads or rewrites."""
    data = part.data
    state = part.state
    assert state is not None
    tool = data.tool if isinstance(data.tool, str) else ""
    call_id = data.callID if isinstance(data.callID, str) else ""
    arguments = state.input if isinstance(state.input, dict) else {}
    path = arguments.get("filePath")
    action = FileAction.NONE
    if isinstance(path, str) and path:
        if tool == READ_TOOL and not state.compacted:
            action = FileAction.READ
        elif tool == WRITE_TOOL:
            action = FileAction.FULL_WRITE
    if action is FileAction.NONE:
        return ToolCall(call_id, tool)
    return ToolCall(call_id, tool, action, path, base)


def _pruned(part: Part) -> bool:
    state = part.state
    return state is not None and state.compacted


def _result_bits(part: Part) -> int | None:
    """A tool part's result as the tracker takes it; None while the call has none."""
    state = part.state
    status = state.status if state is not None else None
    if status == COMPLETED:
        return Bit.SUCCEEDED
    if status == ERROR:
        return Bit.ERRORED
    return None


class _Builder:
    """Puts a session's records into a view: appended (`session_view`), or, for records
    a reader already added in order (`slots`), their kinds, roles and links set."""

    def __init__(
        self,
        view: SessionView,
        directory: str,
        tracker: PathTracker,
        slots: Iterator[int] | None = None,
        keys: list[str] | None = None,
    ) -> None:
        self.directory = directory
        self.view = view
        self.tracker = tracker
        self.slots = slots
        self.keys: list[str] = [] if keys is None else keys
        self.offset = 0
        self.parents: dict[int, str] = {}
        """Each reply's `parentID`: the message it answers."""
        self.made: list[tuple[int | float, int]] = []
        """Each message's `time_created` and record, in load order."""

    def add(
        self,
        key: str,
        data: bytes,
        kind: Kind,
        role: Role = Role.NONE,
        flags: int = 0,
        parent: str | None = None,
    ) -> int:
        if self.slots is not None:
            index = next(self.slots)
            view = self.view
            view.kinds[index] = kind
            view.roles[index] = role
            view.flags[index] = flags
            view.id_keys[index] = key_of(key)
            view.parent_keys[index] = NULL_KEY if parent is None else key_of(parent)
            return index
        index = self.view.add(
            len(self.keys),
            1,
            self.offset,
            len(data),
            kind,
            role,
            flags,
            key_of(key),
            NULL_KEY if parent is None else key_of(parent),
        )
        self.keys.append(key)
        self.offset += len(data)
        return index

    def unreadable(self, stored: StoredMessage, reason: Unreadable) -> None:
        self.view.notes.append(f"opencode cannot read row {reason.key}: {reason.reason}")
        self.add(stored.row.id, stored.row.data, Kind.OTHER)
        for part in stored.parts:
            self.add(part.id, part.data, Kind.OTHER)

    def message(self, stored: StoredMessage, message: Message, sent: bool, boundary: bool) -> None:
        role = _ROLES.get(message.role or "", Role.OTHER)
        flags = Flag.CONTEXT if sent else 0
        if message.role == ASSISTANT and message.data.summary:
            flags |= Flag.SUMMARY
        kind = Kind.COMPACTION if boundary else Kind.MESSAGE
        index = self.add(message.key, stored.row.data, kind, role, flags, message.parent)
        self.made.append((message.time_created, index))
        self.view.part_counts[index] = len(message.parts)
        self.view.sort_times[index] = message.time_created
        if message.parent is not None:
            self.parents[index] = message.parent
        tracker = self.tracker
        if flags & Flag.SUMMARY:
            self.view.summary_requests[index] = message.parent or MISSING
            error = message.error_name
            if error is not None:
                self.view.failed_summaries[index] = f"failed with {error or 'an error'}"
            elif not message.data.finish:
                self.view.failed_summaries[index] = "never finished"
        compaction = message.compaction
        facts = None
        if compaction is not None:
            facts = self.view.boundaries[index] = BoundaryFacts(
                compaction.tail_start or MISSING, written_ms=message.time_created
            )
        if boundary:
            tracker.boundary(index)
        elif message.role == USER:
            tracker.user(index, _identity(stored))
        elif message.role == ASSISTANT:
            finish = message.data.finish
            tracker.assistant(
                index, (), False, finish if isinstance(finish, str) else None, message.key
            )
        elif sent:
            tracker.context(index)
        base = message.cwd or self.directory or None
        for part, row in zip(message.parts, stored.parts, strict=True):
            if message.role != ASSISTANT or not sends_call(part):
                part_index = self.add(part.key, row.data, Kind.OTHER)
                if facts is not None and compaction is not None and part.key == compaction.key:
                    facts.held_by = part_index
                continue
            part_index = self.add(
                part.key, row.data, Kind.MESSAGE, Role.ASSISTANT, Flag.CONTEXT if sent else 0
            )
            call = _call(part, base)
            tracker.assistant(part_index, (call,), False, None, message.key)
            bits = _result_bits(part)
            if bits == Bit.SUCCEEDED and not _pruned(part) and call.name not in UNPRUNED_TOOLS:
                self.view.unpruned_results.append(part_index)
            if bits is not None:
                tracker.result(part_index, call.id, bits)

    def finish(self) -> None:
        view = self.view
        for index, facts in view.boundaries.items():
            if view.kinds[index] == Kind.COMPACTION and isinstance(facts.first_kept, str):
                facts.first_kept_index = view.resolve(facts.first_kept)
        view.made_after = partial(_made_after, tuple(self.made), len(view))


def _made_after(made: Sequence[tuple[int | float, int]], end: int, record_id: str) -> int | None:
    """The first message made after the one `record_id` names, by the time its id
    encodes (`msg_` and 12 hex digits: milliseconds shifted left 12 bits, plus a
    counter, spec §3); `end` when none is; None when the id tells no time."""
    prefix, _, rest = record_id.partition("_")
    if prefix not in ("msg", "prt", "ses") or len(rest) < 12:
        return None
    try:
        made_ms = int(rest[:12], 16) >> 12
    except ValueError:
        return None
    return next((index for created, index in made if created > made_ms), end)


def build(builder: _Builder, rows: Sequence[StoredMessage]) -> tuple[Message | Unreadable, ...]:
    """Put the records of `rows` (a session's messages in load order) into the builder's
    view; returns each message decoded, or why opencode cannot read it."""
    decoded: list[Message | Unreadable] = []
    for row in rows:
        try:
            decoded.append(decode_message(row))
        except Unreadable as unreadable:
            decoded.append(unreadable)
    kept = window([message for message in decoded if isinstance(message, Message)])
    sending = {message.key for message in kept.messages if sends(message)}
    boundary = kept.boundary.key if kept.boundary is not None else None
    for row, message in zip(rows, decoded, strict=True):
        if isinstance(message, Unreadable):
            builder.unreadable(row, message)
        else:
            builder.message(row, message, message.key in sending, message.key == boundary)
    builder.finish()
    return tuple(decoded)


def sent_messages(
    decoded: Iterable[Message | Unreadable],
) -> tuple[tuple[SentMessage, ...], str | None]:
    """What opencode sends of the messages, or nothing and why it fails the session."""
    try:
        return tuple(model_messages(_readable_or_raise(decoded))), None
    except LoadRefused as refusal:
        return (), str(refusal)


def session_view(
    path: Path, session: SessionRow, stored: Iterable[StoredMessage]
) -> OpencodeSession:
    """The session of `stored` (its rows in load order) in the neutral model."""
    rows = list(stored)
    view = SessionView(path=path, format=FORMAT_NAME, tree=False)
    builder = _Builder(view, session.directory, PathTracker())
    keys, parents = builder.keys, builder.parents
    view.read_ids = lambda index: (keys[index], parents.get(index, MISSING))
    decoded = build(builder, rows)
    view.finish()
    sent, refused = sent_messages(decoded)
    return OpencodeSession(session, view, builder.tracker.finish(), keys, sent, refused)


def _readable_or_raise(decoded: Iterable[Message | Unreadable]) -> Iterator[Message]:
    """The messages, raising the first row opencode cannot read where it comes."""
    for message in decoded:
        if isinstance(message, Unreadable):
            raise message
        yield message
