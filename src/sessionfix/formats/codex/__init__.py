"""Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`, archived and
legacy flat rollouts, and their `.jsonl.zst` forms (spec: formats/codex.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sessionfix.formats import Format, configured_folder
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.codex.decode import (
    CAPABILITIES,
    HEADER_TYPE,
    CodexAdapter,
    CodexContext,
)
from sessionfix.formats.codex.edit import CodexEditor
from sessionfix.formats.headerless import (
    HEADER_START,
    header_problems,
    rebuilt_header,
    writer_lock,
)
from sessionfix.read.compressed import SUFFIX
from sessionfix.registry import JsonlFiles

CODEX: Final = Format("codex")
FORMATS: Final = (CODEX,)
AGENTS: Final[dict[Format, str]] = {CODEX: "Codex"}
SUFFIXES: Final = (".jsonl", ".jsonl" + SUFFIX)
CONTAINERS: Final = (JsonlFiles(),)
_ENVELOPE: Final = frozenset({"timestamp", "type", "payload"})


if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessionfix.model.loaded import Loaded
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The messages Codex's loader sends the model on resume; its module loads only
    when asked, so a check does not pay for it."""
    from sessionfix.formats.codex.context import loaded_messages as load

    return load(view, source, lines)


def detect(first_record: dict[str, Any]) -> Format | None:
    """`session_meta` first, or `{timestamp, type, payload}` records (rules.md §1)."""
    if first_record.get("type") == HEADER_TYPE or first_record.keys() >= _ENVELOPE:
        return CODEX
    return None


def has_record_shape(value: dict[str, Any]) -> bool:
    return value.keys() >= _ENVELOPE


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> CodexAdapter:
    return CodexAdapter(path, context)


def capabilities(fmt: Format, tree: bool) -> frozenset[Capability]:
    return CAPABILITIES


def is_sibling(path: Path) -> bool:
    """Codex's prompt history (`$CODEX_HOME/history.jsonl`) beside `sessions/`."""
    return path.name == "history.jsonl" and (path.parent / "sessions").is_dir()


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """`~/.codex/sessions` and `~/.codex/archived_sessions`; `CODEX_HOME` replaces
    `~/.codex`."""
    codex_home = configured_folder(env, "CODEX_HOME", home, home / ".codex")
    return [codex_home / "sessions", codex_home / "archived_sessions"]


__all__ = [
    "AGENTS",
    "CAPABILITIES",
    "CODEX",
    "FORMATS",
    "HEADER_START",
    "SUFFIXES",
    "CodexAdapter",
    "CodexContext",
    "CodexEditor",
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
