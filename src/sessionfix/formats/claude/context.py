"""What Claude Code's reader returns when it resumes a session (formats/claude-code.md §7),
as the Agent SDK's `getSessionMessages` does, and for a sub-agent's transcript as its
`getSubagentMessages` does.

A session: the chain from the leaf back to the root (a compaction boundary has no
parent, so the chain starts at the last one), with the parallel calls and results the
reader re-attaches. The leaf is a user or assistant record: `system` and `attachment`
records after the last turn are never on the chain. Of the chain it returns the `user`,
`assistant` and `system` records (every subtype), one per uuid (a replayed copy
replaces the first in its place), less those marked `isSidechain` or with a `teamName`,
those marked `isMeta` but for prompts relayed from elsewhere (an `origin` of a kind
`RELAYED` names), and an assistant record that closes a quiet turn with no words.
`progress` and `attachment` records are walked through and not returned.

A sub-agent's transcript: from its last user or assistant record back along the links
between user, assistant and attachment records of the file, its user and assistant
records, all of them.

The reader parses each line with `JSON.parse` after skipping the bytes up to the space:
a line with a byte-order mark, a glued or torn line, or NUL bytes after its record is
lost, and the chain breaks at it. Prompts queued while a turn ran (`queued_command`
attachments) it returns as user messages as `queued` says. Not modelled: voice-call
records, and rows a host replays in place of hidden tool calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from msgspec import UNSET, Raw, Struct, UnsetType

from sessionfix import jsonutil
from sessionfix.formats.claude.queued import RELAYED, Prompt, is_attachment, queued_prompts
from sessionfix.formats.common import ParsingDecoder
from sessionfix.model.loaded import Loaded, Sent
from sessionfix.model.view import Flag, Kind, Role, SessionView, key_of
from sessionfix.read.reader import LineFinding, LineIssue, LineReport, NulPlacement, RecordSource

_RETURNED_KINDS: Final = frozenset({Kind.MESSAGE, Kind.COMPACTION})
_TURN_ROLES: Final = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL_RESULT})
"""Records of type `user` or `assistant`."""
_NO_WORDS: Final = ("", "No response requested.")
"""The text of an assistant record closing a quiet turn that the reader leaves out."""
_NO_RAW: Final = Raw(b"")


class _Returned(Struct, gc=False):
    type: object = None
    isMeta: object = None
    isSidechain: object = None
    teamName: object = None
    isCompactSummary: object = None
    closesQuietTurn: object = None
    origin: Raw = _NO_RAW
    content: Raw | UnsetType = UNSET
    message: Raw = _NO_RAW


class _Role(Struct, gc=False):
    content: Raw = _NO_RAW


class _Blocks(Struct, gc=False):
    content: Any = None


class _Origin(Struct, gc=False):
    kind: Any = None


_DECODER: Final = ParsingDecoder(_Returned)
_CONTENT: Final = ParsingDecoder(_Role)
_BLOCKS: Final = ParsingDecoder(_Blocks)
_ORIGIN: Final = ParsingDecoder(_Origin)


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The records Claude Code's reader returns from the view's chain, in order."""
    unreadable = _unreadable(view, lines)
    chain: Sequence[int]
    returns: Callable[[_Returned], bool]
    prompts: dict[int, Prompt] = {}
    if view.main_file is not None:
        chain, returns = _side_chain(view, unreadable), _returned_of_side_conversation
    else:
        chain, leaf = _chain(view, unreadable)
        returns = _returned
        queued = queued_prompts(view, source, chain, leaf, unreadable)
        prompts = queued.returned
        if queued.trailing:
            chain = [*chain, *queued.trailing]
    kinds = view.kinds
    returned: set[int] = set()
    for index in chain:
        prompt = prompts.get(index)
        if prompt is not None:
            if prompt.key not in returned:
                returned.add(prompt.key)
                yield _prompt_loaded(index, prompt.prompt)
            continue
        if kinds[index] not in _RETURNED_KINDS or index in unreadable:
            continue
        key = view.id_keys[index]
        if key in returned:
            continue  # a replayed copy: the reader keeps one record per uuid
        returned.add(key)
        data = source.read(*view.span(index))
        try:
            record = _DECODER.decode(data)
        except (ValueError, RecursionError):
            continue
        if returns(record):
            yield _loaded(index, record, data, view.role(index) is Role.TOOL_RESULT)


def _returned(record: _Returned) -> bool:
    """Whether `getSessionMessages` returns a record of its chain."""
    if record.type not in ("user", "assistant", "system"):
        return False
    if _truthy(record.isSidechain, record.teamName) or _closes_quiet_turn(record):
        return False
    return not _truthy(record.isMeta) or _relayed(record.origin)


def _returned_of_side_conversation(record: _Returned) -> bool:
    """Whether `getSubagentMessages` returns a record of its chain."""
    return record.type in ("user", "assistant")


def _closes_quiet_turn(record: _Returned) -> bool:
    """An assistant record marked `closesQuietTurn` whose one text block says nothing."""
    if record.type != "assistant" or record.closesQuietTurn is not True or not record.message:
        return False
    try:
        content = _BLOCKS.decode(record.message).content
    except (ValueError, RecursionError):
        return False
    if not isinstance(content, list) or len(content) != 1 or not isinstance(content[0], dict):
        return False
    block = content[0]
    return block.get("type") == "text" and block.get("text") in _NO_WORDS


def _relayed(origin: Raw) -> bool:
    if not origin:
        return False
    try:
        return _ORIGIN.decode(origin).kind in RELAYED
    except (ValueError, RecursionError):
        return False


def _chain(view: SessionView, unreadable: set[int]) -> tuple[Sequence[int], int | None]:
    """The reader's chain and its leaf. Where the leaf is a record it cannot read, the
    reader finds its own (`_readers_leaf`)."""
    leaf = view.leaf
    if leaf is not None and leaf in unreadable:
        leaf = _readers_leaf(view, unreadable)
    tails = _self_parented_tails(view)
    if not unreadable and not tails:
        return view.active_path, leaf
    return _walk_back(view, leaf, unreadable, tails), leaf


def _readers_leaf(view: SessionView, unreadable: set[int]) -> int | None:
    """The leaf the reader finds among the records it reads: from the last record in
    file order that none of its records continues (side conversations aside), back to
    the nearest user or assistant record; each such record tried in turn."""
    kinds, flags, parents = view.kinds, view.flags, view.parents

    def counted(index: int) -> bool:
        return (
            kinds[index] in _RETURNED_KINDS
            and not flags[index] & Flag.SIDECHAIN
            and index not in unreadable
        )

    continued = {parents[index] for index in range(len(kinds)) if counted(index)}
    walked: set[int] = set()
    for terminal in range(len(kinds) - 1, -1, -1):
        if not counted(terminal) or terminal in continued:
            continue
        current = terminal
        while current >= 0 and current not in walked and current not in unreadable:
            if _is_turn(view, current):
                return current
            walked.add(current)
            current = parents[current]
    return None


def _walk_back(
    view: SessionView, leaf: int | None, unreadable: set[int], tails: set[int]
) -> list[int]:
    """The records from where the reader's walk back from `leaf` along the view's links
    stops, to `leaf`: at a record it cannot read (its child, whose parent it does not
    have, is a root), or at the tail of a preserved segment whose head was never written
    (the reader re-parents that tail, a child of the anchor, below itself); with what
    the format's loader re-attaches to them, of the records it reads."""
    path: list[int] = []
    seen: set[int] = set()
    current = -1 if leaf is None else leaf
    while current >= 0 and current not in seen and current not in unreadable:
        seen.add(current)
        path.append(current)
        if current in tails:
            break
        current = view.parents[current]
    path.reverse()
    return path if view.policy is None else view.policy.complete_path(view, path, unreadable)


def _side_chain(view: SessionView, unreadable: set[int]) -> list[int]:
    """`getSubagentMessages`' chain: from the last user or assistant record it reads,
    back along `parentUuid` while the parent is a user, assistant or attachment record
    of the file (a later copy of a uuid standing for it)."""
    kinds, roles = view.kinds, view.roles
    kept: dict[int, int] = {}
    for index in range(len(kinds)):
        if kinds[index] != Kind.MESSAGE or index in unreadable:
            continue
        if roles[index] in _TURN_ROLES or is_attachment(view, index):
            kept[view.id_keys[index]] = index
    leaf = max((i for i in kept.values() if roles[i] in _TURN_ROLES), default=None)
    chain: list[int] = []
    seen: set[int] = set()
    current = leaf
    while current is not None and view.id_keys[current] not in seen:
        seen.add(view.id_keys[current])
        chain.append(current)
        current = kept.get(view.parent_keys[current])
    chain.reverse()
    return chain


def _is_turn(view: SessionView, index: int) -> bool:
    return view.kinds[index] == Kind.MESSAGE and view.roles[index] in _TURN_ROLES


def _lost(finding: LineFinding) -> bool:
    """Whether `JSON.parse` rejects the line once the reader skipped the bytes up to the
    space that start it (a run of NUL bytes before the record among them)."""
    issue = finding.issue
    if issue in (
        LineIssue.GLUED,
        LineIssue.TORN,
        LineIssue.UNDEFINED,
        LineIssue.BOM,
        LineIssue.SPREAD,
    ):
        return True
    if issue is LineIssue.NUL:
        return finding.nul in (NulPlacement.TRAILING, NulPlacement.AROUND)
    return issue is LineIssue.UNPARSABLE and finding.json_kind is None


def _unreadable(view: SessionView, lines: LineReport) -> set[int]:
    """Records the reader does not find: those on a line it rejects (`_lost`), unless
    the same uuid is written again on a line it reads."""
    rows = {finding.row for finding in lines.findings if _lost(finding)}
    if not rows:
        return set()
    lost = {index for index, row in enumerate(view.rows) if row in rows}
    keys = {view.id_keys[index] for index in lost}
    written_again = {
        key for index, key in enumerate(view.id_keys) if key in keys and index not in lost
    }
    return {index for index in lost if view.id_keys[index] not in written_again}


def _self_parented_tails(view: SessionView) -> set[int]:
    tails: set[int] = set()
    for facts in view.boundaries.values():
        segment = facts.preserved
        if segment is None or segment.listed or not isinstance(segment.anchor, str):
            continue
        if not isinstance(segment.tail, str) or not isinstance(segment.head, str):
            continue
        if view.resolve(segment.head) is not None:
            continue
        tail = view.resolve(segment.tail)
        if tail is not None and view.parent_keys[tail] == key_of(segment.anchor):
            tails.add(tail)
    return tails


def _truthy(*values: object) -> bool:
    """JavaScript's truth of each field the reader tests (`!m.isMeta` …)."""
    return any(value not in (None, False, 0, "") for value in values)


def _loaded(index: int, record: _Returned, data: bytes, answers: bool) -> Loaded:
    if record.type == "system":
        raw = bytes(record.content) if record.content is not UNSET else data
        return Loaded(index, Sent.SYSTEM, len(raw))
    raw = bytes(record.message) or data
    sent = Sent.ASSISTANT if record.type == "assistant" else Sent.USER
    if record.isCompactSummary is True:
        sent = Sent.SUMMARY
    elif answers:
        sent = Sent.TOOL_RESULT
    if b'"image"' not in raw:
        return Loaded(index, sent, len(raw))
    try:
        images, image_bytes = _images(_CONTENT.decode(raw).content)
    except (ValueError, RecursionError):
        images = image_bytes = 0
    return Loaded(index, sent, len(raw), images, image_bytes)


_PROMPT_ENVELOPE: Final = len(b'{"role":"user","content":}')
"""The bytes of the user message the reader wraps a queued prompt in, but the prompt's."""


def _prompt_loaded(index: int, prompt: bytes) -> Loaded:
    """A queued prompt, returned as the user message the reader makes of it."""
    size = _PROMPT_ENVELOPE + len(prompt)
    if b'"image"' not in prompt:
        return Loaded(index, Sent.USER, size)
    try:
        images, image_bytes = _images(Raw(prompt))
    except (UnicodeDecodeError, RecursionError, ValueError):
        images = image_bytes = 0
    return Loaded(index, Sent.USER, size, images, image_bytes)


def _images(content: Raw) -> tuple[int, int]:
    """Inline base64 images in the content, inside tool results too."""
    if not content:
        return 0, 0
    found: list[str] = []
    _collect(jsonutil.loads(bytes(content)), found)
    return len(found), sum(map(len, found))


def _collect(content: Any, found: list[str]) -> None:
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "image":
            image = block.get("source")
            if isinstance(image, dict) and isinstance(image.get("data"), str):
                found.append(image["data"])
        elif block.get("type") == "tool_result":
            _collect(block.get("content"), found)
