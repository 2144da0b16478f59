"""Session formats: detection, and the adapters that stream records into a `SessionView`.

Each format module knows its own field names and semantics and nothing else does:
rules see only the format-neutral view.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from sessionfix.reader import LineReport
from sessionfix.tracking import PathTracker
from sessionfix.view import SessionView, ToolCall

Transform = Callable[[Any], Any]
"""Changes a parsed record (key order kept) and returns it."""


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


class RecordEditor(Protocol):
    """Format-specific record changes, so rules never name a format's fields."""

    parent_link: str
    """How the format spells the parent link (for messages)."""

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        """The fields of `record` that name another record, with how each is remapped."""
        ...

    def set_field(self, name: str, value: object) -> Transform: ...

    def get_field(self, record: Any, name: str) -> object:
        """The value of a field `references` named."""
        ...

    def set_parent(self, parent_id: str | None) -> Transform: ...

    def unlinked(self, role: RefRole) -> object:
        """What a reference of `role` becomes when its target goes with no survivor
        or surviving ancestor."""
        ...

    def set_first_kept(self, entry_id: str | None, index: int | None) -> Transform: ...

    def replace_result_text(self, text: str) -> Transform: ...

    def drop_leaked_partial_json(self, blocks: tuple[int, ...]) -> Transform: ...

    def holds_other_content(self, record: Any, call_id: str) -> bool:
        """Whether a tool result record holds more than its answer to `call_id`."""
        ...

    def drop_result_blocks(self, call_ids: frozenset[str]) -> Transform: ...

    def identity(self, record: Any) -> str | None:
        """The id other records name this one by."""
        ...

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        """A deterministic id for a record inserted after `anchor_id` (rules.md §9.3)."""
        ...

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]: ...


class Format(enum.Enum):
    AUTO = "auto"
    PI = "pi"
    OPENCLAW = "openclaw"
    CLAUDE = "claude"
    CODEX = "codex"
    UNKNOWN = "unknown"

    @property
    def is_pi_family(self) -> bool:
        return self in (Format.PI, Format.OPENCLAW)


class FormatAdapter(Protocol):
    """Streams one file's records into its view.

    `decode` receives a raw line (terminator included) and raises a ValueError when
    it cannot decode it; the line then goes through the reader's slow path and
    comes back, record by record, through `add_object`. Decoded lines go to `ingest`.
    """

    @property
    def view(self) -> SessionView: ...

    @property
    def editor(self) -> RecordEditor: ...

    @property
    def context(self) -> object:
        """What a reader of a later byte range of the same file needs to know."""

    tracker: PathTracker
    """Receives the conversation events of the records this adapter decodes."""

    def replay(self, index: int, data: bytes) -> None:
        """Feed the tracker one record again, in path order, without touching the view."""

    @property
    def decode(self) -> Callable[[bytes], Any]: ...

    def ingest(
        self, record: Any, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None: ...

    @property
    def decode_lines(self) -> Callable[[memoryview], list[Any]]:
        """Decode newline-separated records (raises ValueError like `decode`)."""

    def ingest_batch(
        self,
        records: list[Any],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
    ) -> None:
        """Index records decoded from consecutive clean lines; `line(k)` returns the
        bytes of the k-th (read only when a record needs more than its decode)."""

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None: ...

    def finish(self, lines: LineReport) -> None: ...


_CLAUDE_METADATA_TYPES = frozenset(
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
    }
)
_PI_ENTRY_TYPES = frozenset(
    {
        "message",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "model_change",
        "thinking_level_change",
        "leaf",
        "reset",
    }
)


def detect(first_record: dict[str, Any]) -> Format:
    """Decide the format from the first record that parses (rules.md §1)."""
    record_type = first_record.get("type")
    if record_type == "session":
        return Format.PI
    if record_type == "session_meta" or {"timestamp", "type", "payload"} <= first_record.keys():
        return Format.CODEX
    if (
        "uuid" in first_record
        or "parentUuid" in first_record
        or "sessionId" in first_record
        or record_type in _CLAUDE_METADATA_TYPES
    ):
        return Format.CLAUDE
    if record_type in _PI_ENTRY_TYPES and (
        "parentId" in first_record or "message" in first_record or "id" in first_record
    ):
        return Format.PI
    return Format.UNKNOWN


def is_sibling_file(path: Path) -> bool:
    """A JSONL file an agent keeps beside its sessions that is not a session."""
    from sessionfix.formats.claude.files import is_sibling as is_claude_sibling

    return is_claude_sibling(path)


def is_openclaw_location(path: Path) -> bool:
    """OpenClaw keeps transcripts under `…/agents/<agentId>/sessions/`."""
    parts = path.resolve().parts if not path.is_absolute() else path.parts
    return len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"


def make_adapter(fmt: Format, path: Path, context: object = None) -> FormatAdapter:
    """A reader for `fmt`; `context` comes from the start of the file when reading a later part."""
    if fmt.is_pi_family:
        from sessionfix.formats.pi import PiAdapter, PiContext

        return PiAdapter(
            path,
            forced_openclaw=fmt is Format.OPENCLAW,
            context=context if isinstance(context, PiContext) else None,
        )
    if fmt is Format.CLAUDE:
        from sessionfix.formats.claude import ClaudeAdapter

        return ClaudeAdapter(path)
    from sessionfix.formats.opaque import OpaqueAdapter

    return OpaqueAdapter(path, fmt)


def has_record_shape(fmt: Format, value: Any) -> bool:
    """Whether an object recovered from damaged bytes looks like a record of `fmt`."""
    if not isinstance(value, dict):
        return False
    record_type = value.get("type")
    if fmt.is_pi_family:
        return isinstance(record_type, str)
    if fmt is Format.CLAUDE:
        return isinstance(record_type, str) and (
            "uuid" in value or record_type in _CLAUDE_METADATA_TYPES
        )
    if fmt is Format.CODEX:
        return {"timestamp", "type", "payload"} <= value.keys()
    return False
