"""Claude Code transcripts: `~/.claude/projects/<slug>/<sessionId>.jsonl` and sub-agent
files (spec: formats/claude-code.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sessionfix.formats import Format, configured_folder
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.claude.decode import (
    CAPABILITIES,
    CONVERSATION_TYPES,
    METADATA_TYPES,
    ClaudeAdapter,
    ClaudeContext,
)
from sessionfix.formats.claude.edit import ClaudeEditor
from sessionfix.formats.claude.files import HOME_FOLDER, TRANSCRIPTS_FOLDER, is_sibling
from sessionfix.formats.headerless import (
    HEADER_START,
    header_problems,
    rebuilt_header,
    writer_lock,
)
from sessionfix.registry import JsonlFiles

CLAUDE: Final = Format("claude")
FORMATS: Final = (CLAUDE,)
AGENTS: Final[dict[Format, str]] = {CLAUDE: "Claude Code"}
SUFFIXES: Final = (".jsonl",)
CONTAINERS: Final = (JsonlFiles(),)


if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessionfix.model.loaded import Loaded
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The messages Claude Code's loader sends the model on resume; its module loads only
    when asked, so a check does not pay for it."""
    from sessionfix.formats.claude.context import loaded_messages as load

    return load(view, source, lines)


def detect(first_record: dict[str, Any]) -> Format | None:
    """Records with `uuid` / `parentUuid` / `sessionId`, or one of Claude's metadata
    types (rules.md §1)."""
    if (
        "uuid" in first_record
        or "parentUuid" in first_record
        or "sessionId" in first_record
        or first_record.get("type") in METADATA_TYPES
    ):
        return CLAUDE
    return None


def has_record_shape(value: dict[str, Any]) -> bool:
    """A `type` and a `uuid`, or a metadata type (what a damaged line may be salvaged as)."""
    record_type = value.get("type")
    return isinstance(record_type, str) and ("uuid" in value or record_type in METADATA_TYPES)


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """`~/.claude/projects`; `CLAUDE_CONFIG_DIR` replaces `~/.claude`."""
    config = configured_folder(env, "CLAUDE_CONFIG_DIR", home, home / HOME_FOLDER)
    return [config / TRANSCRIPTS_FOLDER]


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> ClaudeAdapter:
    return ClaudeAdapter(path, named_as)


def capabilities(fmt: Format, tree: bool) -> frozenset[Capability]:
    return CAPABILITIES


__all__ = [
    "AGENTS",
    "CAPABILITIES",
    "CLAUDE",
    "CONVERSATION_TYPES",
    "FORMATS",
    "HEADER_START",
    "METADATA_TYPES",
    "SUFFIXES",
    "ClaudeAdapter",
    "ClaudeContext",
    "ClaudeEditor",
    "capabilities",
    "detect",
    "has_record_shape",
    "header_problems",
    "is_sibling",
    "loaded_messages",
    "make_adapter",
    "rebuilt_header",
    "session_roots",
    "writer_lock",
]
