"""The format-neutral view of a session that rules work on.

A format module (`sessionfix.formats.*`) streams a file into a `SessionView`: a
compact, column-oriented index holding, per record, only what rules need (kind,
role, ids, parent link, byte span, a few facts). Nothing here knows field names
of any format. After the pass, `finish()` derives the tree, the leaf, the active
path and the context window.
"""

from __future__ import annotations

import enum
import functools
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import chain, pairwise, repeat
from operator import add, ge
from pathlib import Path
from typing import Final, NamedTuple, Protocol, TypeVar, overload

from msgspec import Struct, field


class Kind(enum.IntEnum):
    """What a record is, independent of how a format spells it."""

    HEADER = 0
    MESSAGE = 1
    COMPACTION = 2
    """A boundary that replaces earlier history with a summary."""
    RESET = 3
    """A boundary without a summary."""
    BRANCH_SUMMARY = 4
    CUSTOM_MESSAGE = 5
    """Extension-injected message that reaches the model."""
    LABEL = 6
    SESSION_INFO = 7
    LEAF = 8
    """Control row that moves the active leaf."""
    SETTING = 9
    """Model or thinking-level change."""
    CUSTOM = 10
    """Extension data that never reaches the model."""
    OTHER = 11
    CONTROL = 12
    """Bookkeeping inside the tree that children link through to its own parent
    (Claude `progress`): never a leaf, never on the path."""
    METADATA = 13
    """A record outside the tree (Claude titles, modes, `last-prompt`)."""


class Role(enum.IntEnum):
    NONE = 0
    USER = 1
    ASSISTANT = 2
    TOOL_RESULT = 3
    BASH = 4
    CUSTOM = 5
    OTHER = 6


class Flag:
    """Bit flags per record (plain ints: IntFlag arithmetic is too slow for hot loops)."""

    CONTEXT: Final = 1
    """Reaches the model and ends a tool-call group."""
    CUT_POINT: Final = 2
    """A valid place for a compaction to start keeping history."""
    BAD_ID: Final = 4
    """Tree formats: no non-empty string id."""
    NO_PARENT_KEY: Final = 8
    """Tree formats: the parent link is missing altogether."""
    SUMMARY: Final = 16
    """A message carrying a compaction's summary (Claude `isCompactSummary`)."""
    STATE: Final = 32
    """Metadata whose latest copy is what readers use (a title, a mode, the last prompt)."""
    SIDECHAIN: Final = 64
    """A record of a side conversation (Claude sub-agent lines): it links only to its kind."""
    ROLLBACK: Final = 128
    """Drops the newest turns from the history a resume rebuilds (Codex
    `thread_rolled_back`): a boundary it reaches past is read again."""


class FileAction(enum.IntEnum):
    NONE = 0
    READ = 1
    """Returns a file's contents."""
    FULL_WRITE = 2
    """Replaces a file's whole contents."""


class Bit:
    """Facts about a tool result, as the format reads them (`PathTracker.result`)."""

    SUCCEEDED: Final = 1
    """The format's success test holds (pi: `isError === false`)."""
    ERRORED: Final = 2
    """Explicitly marked as an error."""


class ToolCall(Struct):
    id: str
    name: str
    action: FileAction = FileAction.NONE
    path: str | None = None
    """The path argument as written."""
    base: str | None = None
    """Directory a relative `path` is resolved against (pi: the header's cwd)."""


MISSING: Final = "\x00missing"
NO_ORDINAL: Final = -1
"""A record without a sequence number (`SessionView.ordinals`)."""
"""Stands for an absent field where `None` means an explicit null."""
NO_MODEL: Final = 0
"""The model key of a record that names no model (`SessionView.signed_thinking`)."""


class PreservedSegment(Struct, frozen=True):
    """Records a compaction keeps verbatim, relinked after its summary at load time
    (Claude `preservedSegment` / `preservedMessages`)."""

    head: object
    anchor: object
    tail: object
    listed_anchor: object = MISSING
    """The anchor the explicit list names; `MISSING` without a list."""
    listed: tuple[object, ...] | None = None
    """Every kept record's id, when the boundary lists them."""


class BoundaryFacts(Struct):
    first_kept: str | None
    """Id of the first kept entry; `MISSING` when absent."""
    first_kept_index: int | None = None
    """Positional formats: index of the first kept record."""
    tokens_before: object = None
    identity: bytes | None = None
    """Digest of the exact bytes of the summary payload (summary, details, fromHook,
    tokensBefore), for bucketing clones."""
    written_ms: int | float | None = None
    """When the boundary was written, in milliseconds since the epoch (pi: its entry
    `timestamp`); None when the format records no time or it does not parse."""
    logical_parent: object = MISSING
    """Where the conversation stood when the boundary cut it (Claude
    `logicalParentUuid`); `MISSING` when the format has none."""
    preserved: PreservedSegment | None = None
    carries_history: bool = False
    """The boundary holds the whole history it replaces (Codex `replacement_history`):
    the newest such boundary is what a resume starts from, older ones are dead weight."""
    images: tuple[tuple[int, int], ...] = ()
    """(digest, length) of each inline image the carried history holds."""
    held_by: int | None = None
    """The record holding the boundary's fields, where it is not the boundary's own
    (opencode: the compaction part of the request message)."""
    hollow_summary: str | None = None
    """What the boundary's summary is when it summarises nothing (`"empty"`, or which
    fallback text its agent writes in place of a summary); None for a summary with
    content, and for formats that do not hold the summary in the boundary."""


class SignatureFault(enum.Enum):
    """Why a signed thinking block's signature cannot be one its provider issued."""

    MISSING = "no signature"
    EMPTY = "an empty signature"
    MALFORMED = "a malformed signature"
    """Shorter than any the provider issues, or not padded base64 (its signatures always
    are): what a signature cut short looks like."""


class BadSignature(NamedTuple):
    """A thinking block, by its place in its record's content, whose signature the
    agent sends as it is and the provider refuses."""

    block: int
    fault: SignatureFault
    length: int
    """The signature's length in characters (0 when it has none)."""


class BrokenThinking(Struct):
    """An assistant record holding thinking blocks whose signatures the agent sends as
    they are and the provider refuses."""

    model: int
    """`key_of` the model that wrote it (as `SessionView.model_of` names it), or
    `NO_MODEL`."""
    blocks: int
    """How many content blocks the record holds, thinking and others."""
    bad: tuple[BadSignature, ...]


class MediaKind(enum.Enum):
    IMAGE = "image"
    DOCUMENT = "document"
    """A PDF (or another file the provider reads as a document)."""


class InlineMedia(Struct, frozen=True):
    """An image or document a record holds inline, as base64 text."""

    kind: MediaKind
    media_type: str | None
    """What the record says it is (`image/png`), if it says."""
    encoded: int
    """Bytes of its base64 text: what the provider's size limits count."""
    decoded: int
    """Bytes of the file it encodes."""
    width: int | None = None
    height: int | None = None
    """Its pixel dimensions, from its header (None: not an image, or a header that does
    not say)."""
    digest: int = 0
    """xxh3-64 of its base64 text (`sessionfix.media.digest`): how a fix finds it again."""
    copies: int = 0
    """Further copies of the same text the record holds where the model never sees them
    (Claude's `toolUseResult`): counted once, replaced with the block."""


class MediaLimits(Struct, frozen=True):
    """What the provider an agent sends its requests to refuses of inline media. None:
    no such limit."""

    by: str
    """Who refuses them ("Anthropic's API")."""
    encoded: int | None = None
    """Bytes of base64 text one image may have."""
    pixels: int | None = None
    """Pixels an image may have on either side."""
    many: int | None = None
    """More images than this in one request make `many_pixels` the limit."""
    many_pixels: int | None = None
    request: int | None = None
    """Bytes one request may have (the base64 text of its media counted)."""


class BlankText(Struct, frozen=True):
    """Text blocks of a record that are empty or whitespace only, which the agent sends
    as they are."""

    at: tuple[int, ...]
    """Their places in the record's content."""
    kept: int
    """Blocks of the content besides them: with none, the record holds nothing else."""
    empty: tuple[bool, ...] = ()
    """For each of them, whether it holds nothing at all (not even whitespace)."""


class RefKind(enum.Enum):
    BACKWARD = "backward"
    FORWARD = "forward"
    COMPACTION = "compaction"
    """A compaction's own bookkeeping (its logical parent, its kept records): checked by
    the compaction rules, remapped like any reference."""
    ANY_SESSION = "any-session"
    """May name a record of another session's file (Claude `summary.leafUuid`): remapped
    when its target goes, never reported when it names nothing here."""


class RefRole(enum.Enum):
    """How a field naming another record is remapped when that record is dropped (§8)."""

    PARENT = "parent"
    """The structural link: moves to the nearest surviving ancestor."""
    FIRST_KEPT = "first-kept"
    """A forward cut point: moves to the survivor, else on toward the boundary."""
    FIRST_KEPT_POSITION = "first-kept-position"
    """A positional cut point (pi v1): recomputed as an output position."""
    LABEL = "label"
    """Moves to the survivor or an ancestor; with neither, the label row goes."""
    FROM = "from"
    """Moves to the survivor or an ancestor, else to `"root"`."""
    LEAF = "leaf"
    """Names the entry a leaf row makes the leaf; moves to the survivor or an ancestor,
    else to null."""
    APPEND_PARENT = "append-parent"
    """Names where a leaf row's next entry is appended; remapped as LEAF."""
    LOGICAL_PARENT = "logical-parent"
    """Where a compaction cut the conversation: the survivor or an ancestor, else null."""
    SEGMENT_HEAD = "segment-head"
    """The first record a compaction keeps: the survivor, else the next kept record."""
    SEGMENT_TAIL = "segment-tail"
    """The last record a compaction keeps: the survivor or an ancestor, else null."""
    SEGMENT_MEMBER = "segment-member"
    """A list of the records a compaction keeps: dropped ones leave it."""


class Reference(Struct, frozen=True):
    """A record naming another record by id in a non-structural field."""

    field: str
    target: str
    kind: RefKind = RefKind.BACKWARD
    role: RefRole | None = None
    """What the reference means to the session (the view asks by role, never by field)."""


class IndexDrift(enum.Enum):
    """How an agent's index of sessions, which its lists of sessions are read from,
    disagrees with the session files it indexes."""

    UNLISTED = "unlisted"
    """A session file the index holds no entry for."""
    MISSING_FILE = "missing-file"
    """An entry naming a file that is gone."""
    ARCHIVED_FLAG = "archived-flag"
    """The entry says archived, or not, against the folder its file is in."""
    UNTITLED = "untitled"
    """The entry holds no first prompt, though its file has one."""
    SHARED_ID = "shared-id"
    """Several session files hold the session's id."""


class IndexedSession(Struct, frozen=True):
    """One session as its agent's index of sessions lists it, beside its files."""

    drift: tuple[IndexDrift, ...]
    files: tuple[str, ...]
    """The session's files, as the index names files."""
    named: str | None
    """The file the entry names; None without an entry."""
    archived: bool | None
    """Whether the entry says the session is archived; None without an entry."""
    in_archive: bool | None
    """Whether the session's file (the one named, else the only one) is in the
    archive folder; None when there is none."""
    first_prompt: str | None = None
    """The first prompt of that file, as the index would show it."""
    rebuildable: bool = False
    """What is wrong with the entry (a drift but several files with one id) can be
    mended, or the missing entry made, from that file alone."""


class KeptLinks(Struct, frozen=True):
    """Links a format stores beside its parent links, which its agent recomputes from
    them when it reads the session (open-webui: each message's child list, the chat's
    current message), and what they are named."""

    children_field: str
    """What a record's list of its children is called."""
    leaf_field: str
    """What the stored pointer to the leaf the session continues from is called."""
    leaf_record: int
    """The record that holds the leaf pointer."""
    stored_leaf: object
    """The leaf pointer as stored (`MISSING` when there is none)."""
    children: dict[int, tuple[tuple[str, ...], tuple[str, ...]]]
    """Records whose stored child list is not what their children's parent links say:
    (the list stored, the list the parent links give)."""
    leaf_copy_field: str = ""
    """What a second stored copy of the leaf pointer is called (empty: none is kept)."""
    leaf_copy: object = MISSING
    """That copy as stored (`MISSING`: none kept, or not set)."""
    leaf_settled: bool = False
    """The leaf the agent reads from is one it keeps as stored whatever the child lists
    say; else it picks one by them, and mending a list may move it."""


class CopyDifference(Struct, frozen=True):
    """A record the format stores twice, whose copies disagree."""

    fields: tuple[str, ...]
    """The fields that differ, as the format names them (none where one copy lacks the
    record)."""
    read: str
    """Which copy the agent reads ("the chat_message row")."""
    other: str
    """Where the other copy is kept ("the chat's document")."""


class CoveredCount(Struct, frozen=True):
    """A summary stored beside the session that covers the first `count` messages the
    agent sends, by number, naming none of them (open-webui's compression filter)."""

    holder: str
    """What holds it, in words ("the compression filter's chat_summary row")."""
    record: int
    """The record that carries it."""
    count: int
    sent: int
    """How many messages the agent sends for the session's active path."""
    stored_at: int | float | None
    """When the summary was stored, in seconds since the epoch (None: not known)."""
    newer: tuple[int, ...]
    """Of the messages it covers, the records stamped after it was stored."""
    splits_tool_group: bool
    """The count ends between a tool call and its results."""


class HeaderFacts(Struct):
    row: int
    id: object
    version: object
    cwd: str | None
    problems: tuple[str, ...] = ()
    """What the agent refuses of the session as a whole, where its format reads the
    header line as the whole document's (CodeWhale): one sentence each."""


class MainFile(Protocol):
    """The main file of a session kept in several files, as seen from a file that holds
    one side conversation of it (a Claude sub-agent's transcript)."""

    path: Path

    def holding(self, ids: set[str]) -> set[str]:
        """Those of `ids` that name a record of the main file."""
        ...


class ListingFacts(Struct, frozen=True):
    """How the agent's list of sessions to resume shows a session, where it builds that
    list from the first and last bytes of each session file (and, in older releases,
    from an index file of the folder's sessions)."""

    window: int
    """Bytes the list reads at each end of a session file."""
    unnamed: bool = False
    """The session holds a prompt, but nothing the list reads names it (a title, the
    first prompt, the last prompt, a summary): the list leaves it out."""
    buried_title: int | None = None
    """The record holding the session's newest title, when the list reads it at neither
    end and so shows another title or none."""
    shown_title: str | None = None
    """The title the list shows instead of the newest one (None: no title)."""
    index: Path | None = None
    """The folder's index of sessions, when one lies beside the session."""
    index_unreadable: str | None = None
    """Why the index cannot be read, for the one session of the folder that reports it."""
    unindexed: bool = False
    """The index leaves out this session, which the list shows."""
    stray_entries: tuple[str, ...] = ()
    """The sessions the index names whose files are gone, for the one session of the
    folder that reports them."""


class SessionListing(Protocol):
    """How the session's agent lists it among the sessions it offers to resume."""

    def facts(self, view: SessionView) -> ListingFacts:
        """What the list shows of the session the view holds (read when a rule asks)."""
        ...


class ChainPolicy(Protocol):
    """What a format decides about its tree beyond parent links: which record is the
    leaf, and what its loader adds to the walk from the leaf (Claude re-attaches the
    parallel tool calls and results a single-parent walk leaves behind)."""

    def relink(self, view: SessionView, parents: array[int]) -> None:
        """Change `parents` where the loader links records otherwise than their parent
        fields say (Claude: the records a compaction keeps hang below its summary)."""
        ...

    def leaf(self, view: SessionView) -> int | None: ...

    def complete_path(
        self, view: SessionView, path: list[int], unread: Collection[int] = ()
    ) -> list[int]:
        """`path` with what the loader re-attaches to it, of the records it reads (not
        `unread`)."""
        ...


V = TypeVar("V")


def _shift_into(target: dict[int, V], source: dict[int, V], base: int) -> None:
    target.update({index + base: value for index, value in source.items()})


ROOT: Final = -1
DANGLING: Final = -2

NULL_KEY: Final = hash(None)
"""Parent key of an entry whose `parentId` is null (a root)."""
NO_ID_KEY: Final = hash(("no usable id",))
"""Id key of a record without a usable id. Sentinel keys hash tuples, not strings, so
that no id a file spells can have the same key (string hashes are salted per run)."""
MISSING_KEY: Final = hash(("no parentId field",))
"""Parent key of an entry without a `parentId` field."""


def key_of(entry_id: str) -> int:
    """The 64-bit key an id is indexed by.

    Keys are `hash(str)`: consistent across one run's processes (workers are forked),
    never stored. Anything decided on keys that would not also hold for the strings
    (a duplicate, a link) is confirmed on the strings before it is reported.
    """
    return hash(entry_id)


def all_distinct(buckets: Iterable[array[float]]) -> bool:
    """No key repeats within any bucket of `bucketed_keys` and none is `NO_ID_KEY`
    (keys of different buckets differ by construction)."""
    for bucket in buckets:
        distinct = set(bucket)
        if len(distinct) != len(bucket) or _NO_ID_DOUBLE in distinct:
            return False
    return True


_TOP_BYTE: Final = slice(7 if sys.byteorder == "little" else 0, None, 8)
"""Where the most significant byte of each key lies in an array's bytes."""
_CLEAR_BIT_62: Final = bytes(value & 0xBF for value in range(256))


def as_doubles(keys: array[int]) -> array[float]:
    """The keys' bit patterns read as doubles, with bit 62 cleared so that none is NaN
    or infinite: equal keys stay equal, and doubles sort several times faster than
    64-bit ints. (Keys that differ only in bit 62, or give 0.0 and -0.0, become equal:
    a false repeat only sends a file down the exact path.)"""
    raw = bytearray(keys.tobytes())
    raw[_TOP_BYTE] = raw[_TOP_BYTE].translate(_CLEAR_BIT_62)
    return array("d", raw)


def _bucket_floors() -> list[float]:
    """The least double of each bucket: buckets group the doubles of `as_doubles` by
    the sign and the next five bits below bit 62, each an interval of doubles."""
    floors = []
    for top in range(0, 256, 2):
        if top & 0x40:
            continue
        # Negative doubles grow in magnitude with their pattern: the least has all low bits set.
        pattern = ((top + 2) << 56) - 1 if top & 0x80 else top << 56
        floors.append(array("d", array("Q", [pattern]).tobytes())[0])
    return sorted(floors)


_BUCKET_FLOORS: Final = _bucket_floors()
KEY_BUCKETS: Final = len(_BUCKET_FLOORS)
_NO_ID_DOUBLE: Final = as_doubles(array("q", [NO_ID_KEY]))[0]
_PARTITION_SLICE: Final = 1 << 14
"""Keys sorted at a time: a sorted slice's floats stay in cache, and memory holds
8 bytes per key (the buckets) plus one slice, never a float object per key."""


def bucketed_keys(keys: array[int], start: int = 0) -> list[array[float]]:
    """`keys[start:]` as doubles (`as_doubles`), in `KEY_BUCKETS` buckets by their top
    bits: equal keys always share a bucket, so that buckets can be checked apart."""
    buckets = [array("d") for _ in range(KEY_BUCKETS)]
    for first in range(start, len(keys), _PARTITION_SLICE):
        part = sorted(as_doubles(keys[first : first + _PARTITION_SLICE]))
        bounds = [bisect_left(part, floor) for floor in _BUCKET_FLOORS]
        bounds.append(len(part))
        for bucket, (low, high) in zip(buckets, pairwise(bounds), strict=True):
            if low < high:
                bucket.extend(part[low:high])
    return buckets


class Shifted(Sequence[int]):
    """`index + shift` for every index from `start` on, and `below` before it.

    The parent links (`index - 1`) and path positions (`index - first entry`) of a
    linear session, without an array as long as the file.
    """

    __slots__ = ("_below", "_count", "_shift", "_start")

    def __init__(self, count: int, start: int, shift: int, below: int) -> None:
        self._count = count
        self._start = min(start, count)
        self._shift = shift
        self._below = below

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("index out of range")
        return index + self._shift if index >= self._start else self._below

    def __iter__(self) -> Iterator[int]:
        start, shift = self._start, self._shift
        return chain(repeat(self._below, start), range(start + shift, self._count + shift))

    def take(self, indices: Sequence[int]) -> list[int]:
        """The values at several indices, column-wise."""
        if not indices:
            return []
        if min(indices) >= self._start and max(indices) < self._count:
            return list(map(add, indices, repeat(self._shift)))
        return list(map(self.__getitem__, indices))

    def index(self, value: object, start: int = 0, stop: int | None = None) -> int:
        begin, end, _ = slice(start, stop).indices(self._count)
        if value == self._below and begin < min(end, self._start):
            return begin
        if isinstance(value, int):
            at = value - self._shift
            if max(begin, self._start) <= at < end:
                return at
        raise ValueError(f"{value!r} is not in the sequence")


class SessionView(Struct):
    """Compact per-record index of one session file plus its derived tree.

    Columns (arrays, bytearrays, lists of shared strings) rather than per-record
    objects keep a gigabyte session small, and let byte ranges decoded in parallel
    pickle and concatenate cheaply. Conversation facts (tool calls, results, user
    messages) are not stored here: they stream into `sessionfix.model.tracking`.
    """

    path: Path
    format: str
    tree: bool = True
    """Records link by id; False for positional formats (pi v1)."""
    header: HeaderFacts | None = None
    headerless: str = "readers treat the file as empty"
    """What the agent does with the file when its header is missing."""
    # One entry per record:
    rows: array[int] = field(default_factory=lambda: array("I"))
    offsets: array[int] = field(default_factory=lambda: array("q"))
    sizes: array[int] = field(default_factory=lambda: array("I"))
    kinds: bytearray = field(default_factory=bytearray)
    roles: bytearray = field(default_factory=bytearray)
    flags: bytearray = field(default_factory=bytearray)
    id_keys: array[int] = field(default_factory=lambda: array("q"))
    """`key_of(id)` per record (`NO_ID_KEY` when it has none); the strings stay in the file."""
    parent_keys: array[int] = field(default_factory=lambda: array("q"))
    """`key_of(parentId)` per record, or `NULL_KEY` / `MISSING_KEY`."""
    # Sparse facts, keyed by record index:
    columns: dict[int, int] = field(default_factory=dict)
    leaked: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Assistants: content blocks carrying leaked streaming state."""
    boundaries: dict[int, BoundaryFacts] = field(default_factory=dict)
    references: dict[int, tuple[Reference, ...]] = field(default_factory=dict)
    turns: dict[int, int] = field(default_factory=dict)
    """Assistant records of formats whose API message spans several records: the key
    of that message (records sharing it form one turn)."""
    leaf_hints: dict[int, str] = field(default_factory=dict)
    """Records naming the leaf the agent resumes from (the last one that resolves wins)."""
    foreign_sessions: dict[int, str] = field(default_factory=dict)
    """Records stamped with another session's id than the file's own."""
    invalid_calls: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Records holding tool calls whose names the provider refuses."""
    signed_thinking: dict[int, array[int]] = field(default_factory=dict)
    """Assistant records holding thinking whose signature the agent sends, in file order,
    by the `key_of` the model that wrote them (as `model_of` names it; `NO_MODEL` when
    the record names none)."""
    broken_thinking: dict[int, BrokenThinking] = field(default_factory=dict)
    """Of those, the records whose signatures the provider refuses."""
    model_of: Callable[[int], str | None] | None = None
    """The model an assistant record was written by, or a model change sets (the name its
    format gives it); None for other records (set by formats whose records name one)."""
    foreign_thinking_as_text: bool = False
    """The agent sends the thinking of a model other than the one it continues with as
    plain text, without its signature (pi, OpenClaw); else as it is."""
    unsigns_kept_before_boundary: bool = False
    """The agent strips the signatures of the records a compaction keeps from before it
    (OpenClaw): only thinking after the last boundary is sent signed."""
    adopters: dict[int, str] = field(default_factory=dict)
    """Records that name, besides their parent, the record they answer (Claude tool
    results: `sourceToolAssistantUUID`), where the two differ: the parent to re-link
    them to when their own parent link breaks."""
    adopters_only: bool = False
    """A broken parent link may be re-linked only to the record `adopters` names, never
    to a record found by position, and a loop of parent links is not broken: the agent
    keeps branches side by side, so another parent would graft the record onto another
    branch (open-webui)."""
    media: dict[int, tuple[InlineMedia, ...]] = field(default_factory=dict)
    """Records holding images or documents inline: each such block."""
    blank_texts: dict[int, BlankText] = field(default_factory=dict)
    """Records holding text blocks that are empty or whitespace only."""
    media_limits: MediaLimits | None = None
    """What the agent's requests refuse of inline media (None: the format tells none)."""
    ordinals: array[int] | None = None
    """Per record, the sequence number its format stamps on it (Codex `ordinal`),
    `NO_ORDINAL` where a record has none; None while no record of the file has one."""
    notes: list[str] = field(default_factory=list)
    """Format observations made while reading (e.g. why a pi file is OpenClaw's)."""
    unread: str | None = None
    """Why the session's agent no longer reads it where it is kept (a format or a place
    it left behind), when it does not; nothing of it is then read as records."""
    event_log_bytes: int | None = None
    """Bytes of the log of every write the agent keeps of the session besides what it
    loads (opencode's `event` rows), for formats that keep one."""
    indexed_sessions: dict[int, IndexedSession] = field(default_factory=dict)
    """For an agent's index of sessions: per record, the session it lists (or should)
    and how the entry disagrees with the session's files."""
    summary_requests: dict[int, object] = field(default_factory=dict)
    """Summaries that name the compaction request they answer (opencode `parentID`):
    the id named, `MISSING` when none is."""
    part_counts: dict[int, int] = field(default_factory=dict)
    """Formats whose messages are made of records of their own, which follow the message
    (opencode parts): each message record's count of them."""
    sort_times: dict[int, int | float] = field(default_factory=dict)
    """Formats whose agent orders messages by a time it stamps on them (opencode
    `time_created`): each message's, in milliseconds (with a fraction where a record
    was stamped so)."""
    failed_summaries: dict[int, str] = field(default_factory=dict)
    """Summaries that name their compaction request but did not complete it: why, in
    words ("failed with ContextOverflowError", "never finished")."""
    unpruned_results: list[int] = field(default_factory=list)
    """For formats whose agent prunes results by a mark, which its pruning stops at
    (opencode): the results it may still prune (complete, not marked), in order."""
    kept_links: KeptLinks | None = None
    """For formats that store links their agent recomputes on read (open-webui)."""
    copy_differences: dict[int, CopyDifference] = field(default_factory=dict)
    """For formats that store a record twice (open-webui's document and its rows): the
    records whose copies disagree."""
    roleless: list[int] = field(default_factory=list)
    """Messages the agent sends without the role every provider requires."""
    covered_count: CoveredCount | None = None
    """A summary stored beside the session that covers messages by their number."""
    made_after: Callable[[str], int | None] | None = None
    """For formats whose ids tell when their record was made: the first record made
    after the one `id` names (`len(view)` when none); None when the id tells no time."""
    # Derived by finish():
    id_index: dict[int, int] = field(default_factory=dict)
    """id key → record, for the keys looked up so far (all of them once `index_of` ran)."""
    read_ids: Callable[[int], tuple[str | None, object]] | None = None
    """Reads a record's id and parentId from the file (set by the reader)."""
    result_text_exceeds: Callable[[int, int, str], bool] | None = None
    """`(index, limit, prefix)`: whether a tool result's content is text only, not
    starting with `prefix`, and over `limit` UTF-8 bytes (set by the reader: a scan does
    not decode result contents, so this reads the file)."""
    type_name: Callable[[int], str | None] | None = None
    """The record's kind as its format names it, for messages (set by formats whose
    own names say more than the neutral kind)."""
    copied_bytes: Callable[[int], bytes | None] | None = None
    """The exact bytes a copy of a record must repeat (a message, a compaction's summary
    payload), or None when it has none (set by the reader)."""
    signed: Callable[[int], bool] | None = None
    """Whether a record is part of a message that carries reasoning the provider signs
    (thinking), which a safe fix never edits (set by the reader: read from the file)."""
    prompted: Callable[[int], bool] | None = None
    """Whether a user message is a person's prompt, which starts a turn, and not a note
    the agent writes in the user's name (Claude Code's `isMeta` text, a notice that a
    turn was interrupted); None: every user message is (set by the reader)."""
    _id_cache: dict[int, tuple[str | None, object]] = field(default_factory=dict)
    duplicate_ids: list[tuple[int, int]] = field(default_factory=list)
    """(first occurrence, later occurrence) for every repeated id."""
    parents: Sequence[int] = field(default_factory=lambda: array("q"))
    """Per record, the index of its parent, or `ROOT` / `DANGLING`."""
    leaf: int | None = None
    active_path: Sequence[int] = field(default_factory=lambda: array("q"))
    path_positions: Sequence[int] = field(default_factory=lambda: array("q"))
    linear: bool = False
    """The active path is every entry, in file order: the file is one unbranched chain."""
    cycle_on_path: bool = False
    window_start: int = 0
    """Path position where the model's context window starts."""
    boundary_position: int | None = None
    """Path position of the last compaction/reset on the path."""
    _full_index: bool = False
    largest_size: int | None = None
    """The largest record's size in bytes (set by `finish`, or while reading in parallel)."""
    key_buckets: list[array[float]] | None = None
    """The entry id keys sorted into buckets by their top bits (`partition_keys`)."""
    keys_distinct: bool | None = None
    """Whether the entry id keys are all distinct, when a parallel reader decided it."""
    _packed_keys: bytes | None = None
    policy: ChainPolicy | None = None
    """The format's leaf and path rules; None for pi's (the last entry is the leaf)."""
    may_start_mid_session: bool = False
    """The file may be a slice of a longer session (Claude checkpoints): its first tree
    record naming a parent that is not in it is expected."""
    main_file: MainFile | None = None
    """Set when the file holds a side conversation of a session whose main file is this
    (a Claude sub-agent's transcript): its chain begins at records of that file, and its
    agent never resumes it as a session of its own."""
    listing: SessionListing | None = None
    """Set when the session's agent offers it for resuming in a list it builds from the
    session's file and the files beside it (a Claude Code main transcript)."""

    def __len__(self) -> int:
        return len(self.kinds)

    def add(
        self,
        row: int,
        column: int,
        offset: int,
        size: int,
        kind: Kind,
        role: Role = Role.NONE,
        flags: int = 0,
        id_key: int = NO_ID_KEY,
        parent_key: int = MISSING_KEY,
    ) -> int:
        """Append one record (the pi reader appends to the columns directly)."""
        index = len(self.kinds)
        self.rows.append(row)
        if column != 1:
            self.columns[index] = column
        self.offsets.append(offset)
        self.sizes.append(size)
        self.kinds.append(kind)
        self.roles.append(role)
        self.flags.append(flags)
        self.id_keys.append(id_key)
        self.parent_keys.append(parent_key)
        return index

    def extend(self, other: SessionView, row_offset: int, byte_shift: int = 0) -> None:
        """Append the records of a view decoded from a later part of the same file (or
        from bytes that lie `byte_shift` further on in this one)."""
        base = len(self.kinds)
        self.rows.extend(array("I", map(add, other.rows, repeat(row_offset))))
        if byte_shift:
            self.offsets.extend(array("q", map(add, other.offsets, repeat(byte_shift))))
        else:
            self.offsets.extend(other.offsets)
        self.sizes.extend(other.sizes)
        self.kinds.extend(other.kinds)
        self.roles.extend(other.roles)
        self.flags.extend(other.flags)
        self.id_keys.extend(other.id_keys)
        self.parent_keys.extend(other.parent_keys)
        if other.largest_size is None or (base and self.largest_size is None):
            self.largest_size = None
        else:
            self.largest_size = max(self.largest_size or 0, other.largest_size)
        if other.key_buckets is not None:
            if base == 0:
                self.key_buckets = [array("d") for _ in other.key_buckets]
            if self.key_buckets is not None:
                for mine, theirs in zip(self.key_buckets, other.key_buckets, strict=True):
                    mine.extend(theirs)
        else:
            self.key_buckets = None
        _shift_into(self.columns, other.columns, base)
        _shift_into(self.leaked, other.leaked, base)
        _shift_into(self.boundaries, other.boundaries, base)
        _shift_into(self.references, other.references, base)
        _shift_into(self.turns, other.turns, base)
        _shift_into(self.leaf_hints, other.leaf_hints, base)
        _shift_into(self.foreign_sessions, other.foreign_sessions, base)
        _shift_into(self.invalid_calls, other.invalid_calls, base)
        _shift_into(self.broken_thinking, other.broken_thinking, base)
        for model, records in other.signed_thinking.items():
            held = self.signed_thinking.setdefault(model, array("q"))
            held.extend(array("q", map(add, records, repeat(base))))
        _shift_into(self.adopters, other.adopters, base)
        _shift_into(self.media, other.media, base)
        _shift_into(self.blank_texts, other.blank_texts, base)
        if other.ordinals is not None or self.ordinals is not None:
            numbered = self.ordinals
            if numbered is None:
                numbered = array("q", [NO_ORDINAL]) * base
            numbered.extend(
                other.ordinals
                if other.ordinals is not None
                else array("q", [NO_ORDINAL]) * len(other.kinds)
            )
            self.ordinals = numbered
        _shift_into(self._id_cache, other._id_cache, base)
        for note in other.notes:
            if note not in self.notes:
                self.notes.append(note)
        if self.header is None and other.header is not None and base == 0:
            self.header = other.header

    # ---- accessors -------------------------------------------------------------

    def kind(self, index: int) -> Kind:
        return Kind(self.kinds[index])

    def role(self, index: int) -> Role:
        return Role(self.roles[index])

    def has_flag(self, index: int, flag: int) -> bool:
        return bool(self.flags[index] & flag)

    def positions_of(self, indices: Sequence[int]) -> list[int]:
        """Path positions of several records (-1 for those off the path)."""
        positions = self.path_positions
        if isinstance(positions, Shifted):
            return positions.take(indices)
        return list(map(positions.__getitem__, indices))

    def column(self, index: int) -> int:
        return self.columns.get(index, 1)

    def span(self, index: int) -> tuple[int, int]:
        return self.offsets[index], self.sizes[index]

    def is_entry(self, index: int) -> bool:
        """Every record but the session header counts as an entry (pi's `fileEntries`)."""
        return index > 0 or self.header is None

    @property
    def first_entry(self) -> int:
        return 1 if self.header is not None else 0

    def boundary(self, index: int) -> BoundaryFacts | None:
        return self.boundaries.get(index)

    def on_path(self, index: int) -> bool:
        return self.path_positions[index] >= 0

    def in_context(self, index: int) -> bool:
        """On the active path and inside the context window the model receives."""
        position = self.path_positions[index]
        return position >= self.window_start

    def entries(self) -> Iterator[int]:
        return iter(range(self.first_entry, len(self.kinds)))

    def records_of_kind(self, kind: Kind, start: int = 0) -> Iterator[int]:
        """Indexes of the records of one kind (a byte search, not a loop over records)."""
        needle = bytes([kind])
        position = self.kinds.find(needle, start)
        while position >= 0:
            yield position
            position = self.kinds.find(needle, position + 1)

    def history_carriers(self) -> list[int]:
        """The compactions that carry a replacement history, in file order (a resume
        reads the last one's; with no rollback in the file, never an older one's)."""
        return [
            index
            for index in self.records_of_kind(Kind.COMPACTION)
            if (facts := self.boundaries.get(index)) is not None and facts.carries_history
        ]

    def records_flagged(self, mask: int) -> Iterator[int]:
        """Indexes of the records carrying any of the `mask` flag bits."""
        marked = self.flags.translate(_flag_table(mask))
        position = marked.find(1)
        while position >= 0:
            yield position
            position = marked.find(1, position + 1)

    def dangling(self) -> Iterator[int]:
        """Entries whose parent link names no record."""
        parents = self.parents
        try:
            position = parents.index(DANGLING)
        except ValueError:
            return
        while True:
            yield position
            try:
                position = parents.index(DANGLING, position + 1)
            except ValueError:
                return

    def has_forward_links(self) -> bool:
        """Some parent link points at a later record: the only way to form a cycle."""
        return any(map(ge, self.parents, range(len(self.parents))))

    def in_path_order(self, indexes: Iterable[int]) -> list[int]:
        """The given records that lie on the active path, in path order."""
        positions = self.path_positions
        on_path = [i for i in indexes if positions[i] >= 0]
        return on_path if self.linear else sorted(on_path, key=positions.__getitem__)

    def path_between(self, first: int, second: int) -> Sequence[int]:
        """Path entries strictly between two path entries."""
        positions = self.path_positions
        return self.active_path[positions[first] + 1 : positions[second]]

    def starts_turn(self, index: int) -> bool:
        """Whether the record is a person's prompt, where a user turn starts."""
        if self.kinds[index] != Kind.MESSAGE or self.roles[index] != Role.USER:
            return False
        return self.prompted is None or self.prompted(index)

    def last_turns_start(self, turns: int) -> int:
        """Path position where the last `turns` user turns of the active path begin
        (the path's length for none, 0 when it holds no more)."""
        path = self.active_path
        if turns <= 0:
            return len(path)
        seen = 0
        for position in range(len(path) - 1, -1, -1):
            index = path[position]
            if self.starts_turn(index):
                seen += 1
                if seen == turns:
                    return position
        return 0

    def ancestors(self, index: int) -> Iterator[int]:
        """Parents of `index`, nearest first, stopping at a root, a break or a cycle."""
        seen = {index}
        current = self.parents[index]
        while current >= 0 and current not in seen:
            yield current
            seen.add(current)
            current = self.parents[current]

    def entry_id(self, index: int) -> str | None:
        """The record's id as written (read back from the file on first use)."""
        if self.id_keys[index] == NO_ID_KEY:
            return None
        return self._ids_of(index)[0]

    def parent_id(self, index: int) -> object:
        """The record's `parentId` as written (`MISSING` when absent)."""
        return self._ids_of(index)[1]

    def remember_ids(self, index: int, entry_id: object, parent_id: object) -> None:
        """Keep a record's id and parentId read along with other fields (saves a read)."""
        if self.tree and index not in self._id_cache:
            valid = entry_id if type(entry_id) is str and entry_id else None
            self._id_cache[index] = (valid, parent_id)

    def _ids_of(self, index: int) -> tuple[str | None, object]:
        found = self._id_cache.get(index)
        if found is None:
            if self.read_ids is None or (self.id_keys[index] == NO_ID_KEY and not self.tree):
                found = (None, MISSING)
            else:
                found = self.read_ids(index)
            self._id_cache[index] = found
        return found

    def resolve(self, entry_id: str) -> int | None:
        """The record holding `entry_id` (a later duplicate wins, as in pi's Map)."""
        key = key_of(entry_id)
        found = self.id_index.get(key)
        if found is None and not self._full_index:
            found = self._scan_for(key)
        if found is not None and self.entry_id(found) != entry_id:
            return None
        return found

    def _scan_for(self, key: int) -> int | None:
        """Find a key not indexed yet. In a verified chain every key is unique, so an
        array search is exact; elsewhere the full index decides."""
        if not self.linear:
            return self.index_of().get(key)
        found = self._search_chain(key, len(self.id_keys))
        if found is not None:
            self.id_index[key] = found
        return found

    def has_id(self, entry_id: str) -> bool:
        return self.resolve(entry_id) is not None

    def index_of(self) -> dict[int, int]:
        """Every id key → record, built on first use (a later duplicate wins)."""
        if not self._full_index:
            self._full_index = True
            start = self.first_entry
            keys = self.id_keys
            index = dict(zip(keys[start:], range(start, len(keys)), strict=True))
            index.pop(NO_ID_KEY, None)
            self.id_index = index
        return self.id_index

    def first_kept_target(self, index: int) -> int | None:
        """The record a boundary keeps history from, or None when nothing is named."""
        facts = self.boundary(index)
        if facts is None:
            return None
        if not self.tree:
            target = facts.first_kept_index
            return target if target is not None and 0 <= target < len(self) else None
        if facts.first_kept is None or facts.first_kept == MISSING:
            return None
        return self.resolve(facts.first_kept)

    # ---- derivation ------------------------------------------------------------

    def finish(self) -> None:
        """Derive ids, parent links, leaf, active path and context window."""
        if self.tree:
            if self.policy is None and self._link_chain():
                self._index_referenced()
            else:
                self._link_parents()
        else:
            self._link_positional()
        self.key_buckets = None
        if self.largest_size is None:
            self.largest_size = max(self.sizes, default=0)
        self.leaf = self._find_leaf()
        self._walk_active_path()
        self._find_window()

    def _link_chain(self) -> bool:
        """The common case, checked with array operations only: ids are unique and every
        entry's parent is the entry written just before it (one unbranched chain)."""
        start = self.first_entry
        keys = self.id_keys
        count = len(keys)
        if count <= start or Kind.LEAF in self.kinds:
            return False
        if self.parent_keys[start] != NULL_KEY:
            return False
        # Memoryviews compare the columns in place: slices would copy 16 bytes per entry.
        with memoryview(self.parent_keys) as parents, memoryview(keys) as ids:
            if parents[start + 1 :] != ids[start : count - 1]:
                return False
        if not self._entry_keys_unique():
            return False
        self.parents = Shifted(count, start + 1, -1, ROOT)
        self.linear = True
        return True

    def partition_keys(self) -> None:
        """Sort the entry id keys into buckets (see `bucketed_keys`).

        Whether all ids of a file are distinct is then decided bucket by bucket, after
        byte ranges read in parallel have each partitioned their own keys.
        """
        self.key_buckets = bucketed_keys(self.id_keys, self.first_entry)

    def _entry_keys_unique(self) -> bool:
        """Every entry has an id and no two share one."""
        if self.keys_distinct is not None:
            return self.keys_distinct
        buckets = self.key_buckets
        self.key_buckets = None
        if buckets is None:
            buckets = bucketed_keys(self.id_keys, self.first_entry)
        return all_distinct(buckets)

    def _index_referenced(self) -> None:
        """For a chain, index the ids other records name, each searched for near the
        record naming it (they mostly point a little way back); `index_of` does the rest."""
        near: dict[int, int] = {}
        for index, facts in self.boundaries.items():
            if isinstance(facts.first_kept, str):
                near.setdefault(key_of(facts.first_kept), index)
        for index, references in self.references.items():
            for reference in references:
                near.setdefault(key_of(reference.target), index)
        for key, referrer in near.items():
            found = self._search_chain(key, referrer)
            if found is not None:
                self.id_index[key] = found

    def _search_chain(self, key: int, near: int) -> int | None:
        """The record with this id key in a chain, where keys are unique: a byte search
        of the packed key column, backwards from `near`, then forwards."""
        packed = self._packed_keys
        if packed is None:
            packed = self._packed_keys = self.id_keys.tobytes()
        width = self.id_keys.itemsize
        needle = array("q", [key]).tobytes()
        lowest = self.first_entry * width
        limit = min(len(packed), (near + 1) * width)
        at = packed.rfind(needle, lowest, limit)
        while at >= 0 and at % width:
            at = packed.rfind(needle, lowest, at + width - 1)
        if at < 0:
            at = packed.find(needle, limit)
            while at >= 0 and at % width:
                at = packed.find(needle, at + 1)
        return None if at < 0 else at // width

    def _link_parents(self) -> None:
        """Resolve every parent by its key; a later duplicate id wins, as in pi."""
        index = dict(self.index_of())
        start = self.first_entry
        self._find_duplicates(index)
        index[NULL_KEY] = ROOT
        index[MISSING_KEY] = ROOT
        parents = array("q", map(index.get, self.parent_keys, repeat(DANGLING)))
        for position in range(start):
            parents[position] = ROOT
        self.parents = parents
        if Kind.LEAF in self.kinds:
            self._link_through_leaf_rows(parents)
        if Kind.CONTROL in self.kinds:
            self._link_through_control_rows(parents)
        if self.policy is not None:
            self.policy.relink(self, parents)

    def _find_duplicates(self, index: dict[int, int]) -> None:
        start = self.first_entry
        keys = self.id_keys
        named = len(keys) - start - keys[start:].count(NO_ID_KEY)
        if len(index) == named:
            return
        first_of: dict[int, int] = {}
        for position in range(start, len(keys)):
            key = keys[position]
            if key == NO_ID_KEY:
                continue
            first = first_of.setdefault(key, position)
            if first != position and self.entry_id(first) == self.entry_id(position):
                self.duplicate_ids.append((first, position))

    def _link_through_leaf_rows(self, parents: array[int]) -> None:
        """A child of an OpenClaw leaf row hangs below that row's target."""
        kinds = self.kinds
        for index, parent in enumerate(parents):
            hops = 0
            while parent >= 0 and kinds[parent] == Kind.LEAF and hops < 64:
                target = self._leaf_target(parent)
                parent = ROOT if target is None else target
                hops += 1
            parents[index] = parent

    def _link_through_control_rows(self, parents: array[int]) -> None:
        """A child of a control row hangs below that row's nearest ancestor that is not
        one (a cycle of control rows links to nothing)."""
        kinds = self.kinds
        control = Kind.CONTROL
        for index, parent in enumerate(parents):
            if parent < 0 or kinds[parent] != control:
                continue
            seen = {index}
            while parent >= 0 and kinds[parent] == control and parent not in seen:
                seen.add(parent)
                parent = parents[parent]
            parents[index] = ROOT if parent in seen else parent

    def _leaf_target(self, index: int) -> int | None:
        for reference in self.references.get(index, ()):
            if reference.role is RefRole.LEAF:
                return self.resolve(reference.target)
        return None

    def _link_positional(self) -> None:
        start = self.first_entry
        count = len(self.kinds)
        parents = array("q", [ROOT]) * start
        if count > start:
            parents.append(ROOT)
            parents.extend(range(start, count - 1))
        self.parents = parents

    def _find_leaf(self) -> int | None:
        """The last entry, as pi's index has it: header records (a repeated one too) are
        never the leaf; an OpenClaw `leaf` row names it. A format's policy may decide."""
        if self.policy is not None:
            return self.policy.leaf(self)
        kinds = self.kinds
        last = len(kinds) - 1
        while last >= self.first_entry and kinds[last] == Kind.HEADER:
            last -= 1
        if last < self.first_entry:
            return None
        if not self.tree or kinds[last] != Kind.LEAF:
            return last
        if not any(r.role is RefRole.LEAF for r in self.references.get(last, ())):
            return None
        target = self._leaf_target(last)
        if target is not None:
            return target
        # Unknown leaf target: pi falls back to the last entry.
        for index in range(last - 1, self.first_entry - 1, -1):
            if kinds[index] not in (Kind.LEAF, Kind.HEADER):
                return index
        return None

    def _walk_active_path(self) -> None:
        count = len(self.kinds)
        start = self.first_entry
        if self.policy is None and (self.linear or self._is_linear()):
            self.linear = True
            self.active_path = range(start, count)
            self.path_positions = Shifted(count, start, -start, -1)
            return
        positions = array("q", [-1]) * count
        reversed_path: list[int] = []
        current = self.leaf if self.leaf is not None else ROOT
        while current >= 0:
            if positions[current] != -1:
                self.cycle_on_path = True
                break
            positions[current] = 0
            reversed_path.append(current)
            current = self.parents[current]
        reversed_path.reverse()
        if self.policy is not None:
            reversed_path = self.policy.complete_path(self, reversed_path)
        self.active_path = array("q", reversed_path)
        for position, index in enumerate(reversed_path):
            positions[index] = position
        self.path_positions = positions

    def _is_linear(self) -> bool:
        """The leaf is the last entry and every entry's parent is the one before it."""
        count = len(self.kinds)
        start = self.first_entry
        if count <= start or self.leaf != count - 1:
            return count <= start and self.leaf is None
        parents = self.parents
        if parents[start] >= 0:
            return False
        expected = array("q", range(start, count - 1))
        return parents[start + 1 :] == expected

    def _find_window(self) -> None:
        path = self.active_path
        for position in self._boundary_positions_backwards():
            index = path[position]
            self.boundary_position = position
            target = self.first_kept_target(index)
            target_position = -1 if target is None else self.path_positions[target]
            if 0 <= target_position < position:
                self.window_start = target_position
            else:
                self.window_start = position
            return
        self.window_start = 0

    def _boundary_positions_backwards(self) -> Iterator[int]:
        if self.linear:
            start = self.first_entry
            last = max(
                self.kinds.rfind(bytes([Kind.COMPACTION]), start),
                self.kinds.rfind(bytes([Kind.RESET]), start),
            )
            if last >= 0:
                yield last - start
            return
        kinds = self.kinds
        path = self.active_path
        for position in range(len(path) - 1, -1, -1):
            if kinds[path[position]] in (Kind.COMPACTION, Kind.RESET):
                yield position
                return


@functools.lru_cache(maxsize=32)
def _flag_table(mask: int) -> bytes:
    """Byte translation marking flag values that carry any bit of `mask` with 1."""
    return bytes(1 if value & mask else 0 for value in range(256))
