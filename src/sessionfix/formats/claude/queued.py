"""Prompts a user queued while Claude Code was answering (`queued_command` attachments),
which its reader returns as user messages.

Of the attachments on the chain, the reader turns into a user message each queued prompt
that a reply follows before the next prompt does (a reply: an assistant record, a tool
result, or a notice that a turn or a call was cut short); and after the chain it adds
the queued prompts that hang below the leaf through records that are no turn (sorted by
time), which it always turns. It leaves a prompt marked `isMeta` (but one relayed from a
channel or a peer), one another agent forwarded, and one whose `source_uuid` names a
record already among them. Not modelled: prompts a `queue-operation` record says were
absorbed mid-turn, which those records decide.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

from msgspec import Raw, Struct

from sessionfix.formats.common import ParsingDecoder
from sessionfix.model.view import MISSING_KEY, NULL_KEY, Flag, Kind, Role, SessionView, key_of
from sessionfix.read.reader import RecordSource

_NO_RAW: Final = Raw(b"")
_CUT_SHORT: Final = (
    "[Request interrupted by user]",
    "[Request interrupted: the session ended before this agent finished. Nobody asked it to stop.]",
    "[This turn ended before it finished.]",
    "[Agent call interrupted: the process running this conversation stopped before this "
    "agent finished, so it returned no result. Nobody asked it to stop.]",
    "[Request interrupted by user for tool use]",
    "[Tool call did not complete: the turn was ended to deliver the message that follows. "
    "Nothing refused it; re-run it if still needed.]",
    "[Tool call interrupted: the session ended before this call's result was recorded, so "
    "its outcome is unknown. Check whether it took effect before relying on it or running "
    "it again.]",
    "[Tool call result not in this copy: this session was copied from another session "
    "before that session recorded this call's result. The call may have finished there, "
    "may still be running there, or may never have run. Check whether it took effect "
    "before relying on it or running it again.]",
    "The user doesn't want to take this action right now. STOP what you are doing and "
    "wait for the user to tell you how to proceed.",
    "[Tool call skipped: the turn was stopped before this call ran, by the check whose "
    "denial is on another call in this batch. Nothing refused this call and it had no "
    "effects; re-run it if still needed.]",
    "[Tool call skipped: the turn ended to deliver the message that follows before this "
    "call ran. Nothing refused it; re-run it if still needed.]",
)
"""The texts that start a user record saying a turn or a call was cut short: the reader
counts that record as a reply."""
RELAYED: Final = frozenset(
    {"channel", "observer", "observer-activity", "slack-ping", "voice-call", "peer"}
)
"""`origin.kind` of the `isMeta` prompts the reader returns all the same."""


class _Origin(Struct, gc=False):
    kind: Any = None


class _Forwarded(Struct, gc=False):
    lineage: Any = None


class _Command(Struct, gc=False):
    type: Any = None
    prompt: Raw = _NO_RAW
    isMeta: Any = None
    origin: Any = None
    source_uuid: Any = None
    forwardedIntent: Any = None


class _Attachment(Struct, gc=False):
    attachment: Raw = _NO_RAW
    timestamp: Any = None


class _Turn(Struct, gc=False):
    isMeta: Any = None
    message: Any = None


_ATTACHMENT: Final = ParsingDecoder(_Attachment)
_COMMAND: Final = ParsingDecoder(_Command)
_TURN: Final = ParsingDecoder(_Turn)
_ERRORS: Final = (ValueError, RecursionError)


class Prompt(NamedTuple):
    """A queued prompt the reader returns as a user message."""

    key: int
    """`key_of` the uuid it is returned under (`source_uuid`, else its own)."""
    prompt: bytes
    """Its text or content blocks, as JSON."""


class QueuedPrompts(NamedTuple):
    trailing: list[int]
    """The queued prompts the reader adds after the chain, in its order."""
    returned: dict[int, Prompt]
    """Of those and the chain's attachments, the prompts it returns, by record."""


def queued_prompts(
    view: SessionView,
    source: RecordSource,
    chain: Sequence[int],
    leaf: int | None,
    unreadable: set[int],
) -> QueuedPrompts:
    """What the reader makes of the queued prompts on `chain` (from `leaf`) and below it."""
    attachments = [index for index in chain if is_attachment(view, index)]
    queued = {
        index: command
        for index in [*attachments, *_trailing(view, source, chain, leaf, unreadable)]
        if (command := _queued(source.read(*view.span(index)))) is not None
    }
    trailing = [index for index in queued if index not in attachments]
    commands = {
        index: command
        for index, command in queued.items()
        if _turned(command) and not view.flags[index] & Flag.SIDECHAIN
    }
    if not commands:
        return QueuedPrompts(trailing, {})
    replied = _replied(view, source, [*chain, *trailing], commands)
    present = {view.id_keys[index] for index in [*chain, *trailing]}
    returned: dict[int, Prompt] = {}
    for index, command in commands.items():
        if index not in replied and index not in trailing:
            continue
        own = view.id_keys[index]
        named = command.source_uuid
        key = key_of(named) if isinstance(named, str) and named else own
        if key != own and key in present:
            continue
        returned[index] = Prompt(key, bytes(command.prompt))
    return QueuedPrompts(trailing, returned)


def _queued(data: bytes) -> _Command | None:
    """The queued prompt an attachment record holds, if it holds one."""
    try:
        attachment = _ATTACHMENT.decode(data).attachment
        if _first_byte(attachment) != b"{":
            return None
        command = _COMMAND.decode(attachment)
    except _ERRORS:
        return None
    return command if command.type == "queued_command" else None


def _turned(command: _Command) -> bool:
    """Whether the reader makes a user message of the prompt where it makes one: a text
    or blocks, not `isMeta` (but relayed), not forwarded by another agent."""
    if _first_byte(command.prompt) not in (b'"', b"["):
        return False
    relayed = isinstance(command.origin, dict) and command.origin.get("kind") in RELAYED
    if _truthy(command.isMeta) and not relayed:
        return False
    return not _forwarded(command.forwardedIntent)


def _first_byte(raw: Raw) -> bytes:
    return bytes(memoryview(raw)[:1])


def _truthy(value: object) -> bool:
    """JavaScript's truth of a JSON value."""
    return value not in (None, False, 0, "")


def _forwarded(intent: object) -> bool:
    """An intent another agent forwarded: a non-empty `lineage`, a string `source` if any."""
    if not isinstance(intent, dict):
        return False
    lineage, origin = intent.get("lineage"), intent.get("source", "")
    return isinstance(lineage, str) and bool(lineage) and isinstance(origin, str)


def _replied(
    view: SessionView, source: RecordSource, records: Sequence[int], commands: dict[int, Any]
) -> set[int]:
    """The queued prompts among `records` that a reply follows before a prompt does."""
    replied: set[int] = set()
    first = min(records.index(index) for index in commands)
    state: str | None = None
    for index in reversed(records[first:]):
        if index in commands and state == "reply":
            replied.add(index)
        state = _turn_state(view, source, index) or state
    return replied


def is_prompt(source: RecordSource, view: SessionView, index: int) -> bool:
    """Whether a user record is a person's prompt, which starts a turn: not `isMeta`,
    not a compaction's summary, not a notice that a turn or a call was cut short."""
    return _turn_state(view, source, index) == "prompt"


def _turn_state(view: SessionView, source: RecordSource, index: int) -> str | None:
    """ "reply", "prompt" or None (neither) for one record."""
    if view.kinds[index] != Kind.MESSAGE:
        return None
    role = view.roles[index]
    if role == Role.ASSISTANT:
        return "reply"
    if role == Role.TOOL_RESULT and view.parent_keys[index] not in (NULL_KEY, MISSING_KEY):
        return "reply"
    if role not in (Role.USER, Role.TOOL_RESULT):
        return None
    try:
        turn = _TURN.decode(source.read(*view.span(index)))
    except _ERRORS:
        return None
    content = turn.message.get("content") if isinstance(turn.message, dict) else None
    if _cut_short(content):
        return "reply"
    if _truthy(turn.isMeta) or view.flags[index] & Flag.SUMMARY:
        return None
    return "prompt"


def _cut_short(content: object) -> bool:
    if isinstance(content, str):
        return content.startswith(_CUT_SHORT)
    if not isinstance(content, list) or not content:
        return False
    return all(_block_cut_short(block) for block in content)


def _block_cut_short(block: object) -> bool:
    if not isinstance(block, dict):
        return False
    if block.get("type") == "text":
        text = block.get("text")
    elif block.get("type") == "tool_result" and block.get("is_error") is True:
        text = block.get("content")
    else:
        return False
    return isinstance(text, str) and text.startswith(_CUT_SHORT)


def _trailing(
    view: SessionView,
    source: RecordSource,
    chain: Sequence[int],
    leaf: int | None,
    unreadable: set[int],
) -> list[int]:
    """The queued prompts that hang below the leaf through records that are no turn and
    lie off the chain, walked depth first with each record's children by time; none that
    leads to a turn off the chain."""
    if leaf is None:
        return []
    on_chain = set(chain)
    children = _children_of_non_turns(view, unreadable)
    if not children:
        return []
    toward_turns = set(_toward_turns_off_chain(view, on_chain))
    found: list[int] = []
    visited = set(on_chain)
    stack = [leaf]
    while stack:
        index = stack.pop()
        if index != leaf:
            if index in visited:
                continue
            visited.add(index)
            if is_attachment(view, index) and index not in toward_turns:
                found.append(index)
        below = sorted(children.get(index, ()), key=lambda i: _timestamp(view, source, i))
        stack.extend(child for child in reversed(below) if child not in visited)
    return found


def _children_of_non_turns(view: SessionView, unreadable: set[int]) -> dict[int, list[int]]:
    """Records that are no turn (system, attachment, progress), by parent."""
    kinds, roles = view.kinds, view.roles
    raw = view.index_of()
    children: dict[int, list[int]] = {}
    for index in range(len(kinds)):
        kind = kinds[index]
        if index in unreadable or kind not in (Kind.MESSAGE, Kind.COMPACTION, Kind.CONTROL):
            continue
        if kind == Kind.MESSAGE and roles[index] != Role.OTHER:
            continue
        for parent in {raw.get(view.parent_keys[index], -1), view.parents[index]}:
            if parent >= 0:
                children.setdefault(parent, []).append(index)
    return children


def _toward_turns_off_chain(view: SessionView, on_chain: set[int]) -> Iterator[int]:
    """The records above a user or assistant record off the chain, up to the chain."""
    kinds, roles, flags = view.kinds, view.roles, view.flags
    seen: set[int] = set()
    for index in range(len(kinds)):
        if kinds[index] != Kind.MESSAGE or roles[index] not in _TURN_ROLES:
            continue
        if index in on_chain or flags[index] & Flag.SIDECHAIN:
            continue
        for ancestor in view.ancestors(index):
            if ancestor in on_chain or ancestor in seen:
                break
            seen.add(ancestor)
            yield ancestor


_TURN_ROLES: Final = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL_RESULT})


def _timestamp(view: SessionView, source: RecordSource, index: int) -> str:
    try:
        stamp = _ATTACHMENT.decode(source.read(*view.span(index))).timestamp
    except _ERRORS:
        return ""
    return stamp if isinstance(stamp, str) else ""


def is_attachment(view: SessionView, index: int) -> bool:
    """Whether the record is an `attachment` (one kind of record that is no turn)."""
    return (
        view.kinds[index] == Kind.MESSAGE
        and view.roles[index] == Role.OTHER
        and view.type_name is not None
        and view.type_name(index) == "attachment"
    )
