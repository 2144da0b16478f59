"""pi and OpenClaw session JSONL (spec: formats/pi-openclaw.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sessionfix.formats import Format, configured_folder
from sessionfix.formats.pi.decode import (
    CAPABILITIES,
    ENTRY_TYPES,
    FORMATS,
    HEADER_START,
    OPENCLAW,
    PI,
    TREE_CAPABILITIES,
    VALID_VERSIONS,
    PiAdapter,
    PiContext,
    capabilities,
    detect,
    has_record_shape,
    is_sibling,
    make_adapter,
)
from sessionfix.formats.pi.edit import PiEditor
from sessionfix.formats.pi.header import header_problems, rebuilt_header, writer_lock
from sessionfix.registry import JsonlFiles

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessionfix.model.loaded import Loaded
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource


AGENTS: Final[dict[Format, str]] = {PI: "pi", OPENCLAW: "OpenClaw"}
SUFFIXES: Final = (".jsonl",)
CONTAINERS: Final = (JsonlFiles(),)


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The messages pi's loader sends the model on resume; its module loads only
    when asked, so a check does not pay for it."""
    from sessionfix.formats.pi.context import loaded_messages as load

    return load(view, source, lines)


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """pi's `~/.pi/agent/sessions` (`PI_CODING_AGENT_SESSION_DIR` replaces it,
    `PI_CODING_AGENT_DIR` replaces `~/.pi/agent`) and OpenClaw's `~/.openclaw/agents`,
    whose agents keep JSONL transcripts and SQLite stores (`OPENCLAW_STATE_DIR` replaces
    `~/.openclaw`)."""
    agent = configured_folder(env, "PI_CODING_AGENT_DIR", home, home / ".pi" / "agent")
    pi = configured_folder(env, "PI_CODING_AGENT_SESSION_DIR", home, agent / "sessions")
    state = configured_folder(env, "OPENCLAW_STATE_DIR", home, home / ".openclaw")
    return [pi, state / "agents"]


__all__ = [
    "AGENTS",
    "CAPABILITIES",
    "ENTRY_TYPES",
    "FORMATS",
    "HEADER_START",
    "OPENCLAW",
    "PI",
    "SUFFIXES",
    "TREE_CAPABILITIES",
    "VALID_VERSIONS",
    "PiAdapter",
    "PiContext",
    "PiEditor",
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
