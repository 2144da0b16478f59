"""The format-neutral view of a session that rules work on.

A format module (`sessionfix.formats.*`) streams a file into a `SessionView`: a
compact, column-oriented index holding, per record, only what rules need (kind,
role, ids, parent link, byte span, a few facts). Nothing here knows field names
of any format. After the pass, `finish()` derives the tree, the leaf, the active
path and the context window.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final


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


class Role(enum.IntEnum):
    NONE = 0
    USER = 1
    ASSISTANT = 2
    TOOL_RESULT = 3
    BASH = 4
    CUSTOM = 5
    OTHER = 6


class Flag(enum.IntFlag):
    NONE = 0
    CONTEXT = 1
    """Reaches the model and ends a tool-call group."""
    CUT_POINT = 2
    """A valid place for a compaction to start keeping history."""
    BAD_ID = 4
    """Tree formats: no non-empty string id."""
    NO_PARENT_KEY = 8
    """Tree formats: the parent link is missing altogether."""


class FileAction(enum.Enum):
    NONE = "none"
    READ = "read"
    """Returns a file's contents."""
    FULL_WRITE = "full_write"
    """Replaces a file's whole contents."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    action: FileAction = FileAction.NONE
    path: str | None = None
    """The path argument as written."""
    normalized_path: str | None = None


@dataclass(frozen=True, slots=True)
class CallFacts:
    """An assistant message: its tool calls and how the turn ended."""

    calls: tuple[ToolCall, ...]
    incomplete: bool
    """The turn errored or was aborted, so its calls may be incomplete."""
    stop_reason: str | None
    leaked_partial_json: tuple[int, ...] = ()
    """Indexes of content blocks carrying leaked streaming state."""


@dataclass(frozen=True, slots=True)
class ResultFacts:
    call_id: str | None
    tool_name: str | None
    succeeded: bool
    """The format's success test holds (pi: `isError === false`)."""
    errored: bool
    """The result is explicitly marked as an error."""
    text_only: bool
    """Only text content (no images or other blocks)."""


@dataclass(frozen=True, slots=True)
class UserFacts:
    identity: bytes
    """Digest of the canonical message object, for finding replayed copies."""


MISSING: Final = "\x00missing"
"""Stands for an absent field where `None` means an explicit null."""


@dataclass(frozen=True, slots=True)
class BoundaryFacts:
    first_kept: str | None
    """Id of the first kept entry; `MISSING` when absent."""
    first_kept_index: int | None = None
    """Positional formats: index of the first kept record."""
    tokens_before: object = None
    identity: bytes | None = None
    """Digest of the summary payload (summary, details, fromHook), for clone detection."""


class RefKind(enum.Enum):
    BACKWARD = "backward"
    FORWARD = "forward"


@dataclass(frozen=True, slots=True)
class Reference:
    """A record naming another record by id in a non-structural field."""

    field: str
    target: str
    kind: RefKind = RefKind.BACKWARD


@dataclass(slots=True)
class HeaderFacts:
    row: int
    id: object
    version: object
    cwd: str | None


ROOT: Final = -1
DANGLING: Final = -2


@dataclass(slots=True)
class SessionView:
    """Compact per-record index of one session file plus its derived tree."""

    path: Path
    format: str
    tree: bool = True
    """Records link by id; False for positional formats (pi v1)."""
    header: HeaderFacts | None = None
    rows: array[int] = field(default_factory=lambda: array("I"))
    offsets: array[int] = field(default_factory=lambda: array("q"))
    sizes: array[int] = field(default_factory=lambda: array("I"))
    kinds: bytearray = field(default_factory=bytearray)
    roles: bytearray = field(default_factory=bytearray)
    flags: bytearray = field(default_factory=bytearray)
    ids: list[str | None] = field(default_factory=list)
    parent_ids: list[str | None] = field(default_factory=list)
    columns: dict[int, int] = field(default_factory=dict)
    details: dict[int, object] = field(default_factory=dict)
    references: dict[int, tuple[Reference, ...]] = field(default_factory=dict)
    # Derived by finish():
    id_index: dict[str, int] = field(default_factory=dict)
    duplicate_ids: list[tuple[int, int]] = field(default_factory=list)
    """(first occurrence, later occurrence) for every repeated id."""
    parents: array[int] = field(default_factory=lambda: array("q"))
    leaf: int | None = None
    active_path: array[int] = field(default_factory=lambda: array("q"))
    path_positions: array[int] = field(default_factory=lambda: array("q"))
    cycle_on_path: bool = False
    window_start: int = 0
    """Path position where the model's context window starts."""
    boundary_position: int | None = None
    """Path position of the last compaction/reset on the path."""

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
        entry_id: str | None = None,
        parent_id: str | None = MISSING,
        detail: object = None,
        references: tuple[Reference, ...] = (),
    ) -> int:
        index = len(self.kinds)
        self.rows.append(row)
        if column != 1:
            self.columns[index] = column
        self.offsets.append(offset)
        self.sizes.append(size)
        self.kinds.append(kind)
        self.roles.append(role)
        self.flags.append(flags)
        self.ids.append(entry_id)
        self.parent_ids.append(parent_id)
        if detail is not None:
            self.details[index] = detail
        if references:
            self.references[index] = references
        return index

    # ---- accessors -------------------------------------------------------------

    def kind(self, index: int) -> Kind:
        return Kind(self.kinds[index])

    def role(self, index: int) -> Role:
        return Role(self.roles[index])

    def has_flag(self, index: int, flag: Flag) -> bool:
        return bool(self.flags[index] & flag)

    def column(self, index: int) -> int:
        return self.columns.get(index, 1)

    def span(self, index: int) -> tuple[int, int]:
        return self.offsets[index], self.sizes[index]

    def is_entry(self, index: int) -> bool:
        """Every record but the session header counts as an entry (pi's `fileEntries`)."""
        return index > 0 or self.header is None

    def calls(self, index: int) -> CallFacts | None:
        detail = self.details.get(index)
        return detail if isinstance(detail, CallFacts) else None

    def result(self, index: int) -> ResultFacts | None:
        detail = self.details.get(index)
        return detail if isinstance(detail, ResultFacts) else None

    def boundary(self, index: int) -> BoundaryFacts | None:
        detail = self.details.get(index)
        return detail if isinstance(detail, BoundaryFacts) else None

    def user(self, index: int) -> UserFacts | None:
        detail = self.details.get(index)
        return detail if isinstance(detail, UserFacts) else None

    def on_path(self, index: int) -> bool:
        return self.path_positions[index] >= 0

    def in_context(self, index: int) -> bool:
        """On the active path and inside the context window the model receives."""
        position = self.path_positions[index]
        return position >= self.window_start

    def entries(self) -> Iterator[int]:
        start = 1 if self.header is not None else 0
        return iter(range(start, len(self.kinds)))

    def ancestors(self, index: int) -> Iterator[int]:
        """Parents of `index`, nearest first, stopping at a root, a break or a cycle."""
        seen = {index}
        current = self.parents[index]
        while current >= 0 and current not in seen:
            yield current
            seen.add(current)
            current = self.parents[current]

    def resolve(self, entry_id: str) -> int | None:
        return self.id_index.get(entry_id)

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
        return self.id_index.get(facts.first_kept)

    # ---- derivation ------------------------------------------------------------

    def finish(self) -> None:
        """Derive ids, parent links, leaf, active path and context window."""
        count = len(self.kinds)
        self.parents = array("q", bytes(8 * count))
        if self.tree:
            self._index_ids()
            self._link_parents()
        else:
            self._link_positional()
        self.leaf = self._find_leaf()
        self._walk_active_path()
        self._find_window()

    def _index_ids(self) -> None:
        """Map ids to records; like pi's Map, a later line wins over an earlier one."""
        index_of = self.id_index
        first_of: dict[str, int] = {}
        for index, entry_id in enumerate(self.ids):
            if entry_id is None or not self.is_entry(index):
                continue
            previous = index_of.get(entry_id)
            if previous is not None:
                first = first_of.setdefault(entry_id, previous)
                self.duplicate_ids.append((first, index))
            index_of[entry_id] = index

    def _link_parents(self) -> None:
        index_of = self.id_index
        kinds = self.kinds
        parents = self.parents
        for index, parent_id in enumerate(self.parent_ids):
            if parent_id is None or parent_id == MISSING or not self.is_entry(index):
                parents[index] = ROOT
                continue
            target = index_of.get(parent_id)
            if target is None:
                parents[index] = DANGLING
                continue
            # A child of an OpenClaw leaf row hangs below that row's target.
            hops = 0
            while target is not None and kinds[target] == Kind.LEAF and hops < 64:
                target = self._leaf_target(target)
                hops += 1
            parents[index] = ROOT if target is None else target

    def _leaf_target(self, index: int) -> int | None:
        for reference in self.references.get(index, ()):
            if reference.field == "targetId":
                return self.id_index.get(reference.target)
        return None

    def _link_positional(self) -> None:
        parents = self.parents
        previous = ROOT
        for index in range(len(self.kinds)):
            if not self.is_entry(index):
                parents[index] = ROOT
                continue
            parents[index] = previous
            previous = index

    def _find_leaf(self) -> int | None:
        last = None
        for index in range(len(self.kinds) - 1, -1, -1):
            if self.is_entry(index):
                last = index
                break
        if last is None or not self.tree or self.kinds[last] != Kind.LEAF:
            return last
        if not any(r.field == "targetId" for r in self.references.get(last, ())):
            return None
        target = self._leaf_target(last)
        if target is not None:
            return target
        # Unknown leaf target: pi falls back to the last entry.
        for index in range(last - 1, -1, -1):
            if self.is_entry(index) and self.kinds[index] != Kind.LEAF:
                return index
        return None

    def _walk_active_path(self) -> None:
        count = len(self.kinds)
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
        self.active_path = array("q", reversed_path)
        for position, index in enumerate(reversed_path):
            positions[index] = position
        self.path_positions = positions

    def _find_window(self) -> None:
        path = self.active_path
        for position in range(len(path) - 1, -1, -1):
            index = path[position]
            if self.kinds[index] in (Kind.COMPACTION, Kind.RESET):
                self.boundary_position = position
                target = self.first_kept_target(index)
                target_position = -1 if target is None else self.path_positions[target]
                if 0 <= target_position < position:
                    self.window_start = target_position
                else:
                    self.window_start = position
                return
        self.window_start = 0

    def path_entries(self) -> Sequence[int]:
        return self.active_path
