"""CodeWhale (formerly DeepSeek-TUI) sessions (spec formats/codewhale.md): one JSON
document per session, `<sessions>/<id>.json`, holding an append-only journal of entries
(a tree with a leaf pointer) beside a compatibility `messages` array.

`document` reads a document as CodeWhale 0.9.10 does, `pairs` is its resume repair of
tool-call pairs, `context` what it sends the model. A document is a store of one
session (`store`): its lines (`transcript`) go into the neutral model (`adapter`), are
changed by `edit`, and go back as a new document, CodeWhale's way (`write`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sessionfix.formats import Format, configured_folder
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.codewhale.names import CHECKPOINTS, HOME, LEGACY_HOME, SESSIONS
from sessionfix.formats.headerless import (  # noqa: F401 (what the package declares)
    rebuilt_header,
    writer_lock,
)
from sessionfix.registry import JsonDocuments

if TYPE_CHECKING:
    from sessionfix.formats.codewhale.adapter import CodeWhaleAdapter
    from sessionfix.formats.codewhale.store import CodeWhaleDocument
    from sessionfix.model.loaded import Loaded
    from sessionfix.model.view import HeaderFacts, SessionView
    from sessionfix.read.reader import LineReport, RecordSource

CODEWHALE: Final = Format("codewhale")
FORMATS: Final = (CODEWHALE,)
AGENTS: Final[dict[Format, str]] = {CODEWHALE: "CodeWhale"}
SUFFIXES: Final[tuple[str, ...]] = ()
"""No JSONL session file: every session is a JSON document."""
CONTAINERS: Final = (JsonDocuments(frozenset({"*.json"}), frozenset({SESSIONS, CHECKPOINTS})),)
READ_IN_RANGES: Final = False
HEADER_START: Final = b'{"codewhale":"document"'
CAPABILITIES: Final = frozenset(
    {
        Capability.LINES,
        Capability.HEADER,
        Capability.ENTRIES,
        Capability.TREE,
        Capability.UNIQUE_IDS,
        Capability.BRANCHES,
        Capability.TOOL_CALLS,
        Capability.FILE_ACTIONS,
        Capability.RESULT_REPAIRS,
        Capability.UNREAD_SESSIONS,
        Capability.APPEND_ONLY,
        Capability.WHOLE_DOCUMENT,
        Capability.CRASHED_CALLS,
    }
)
NOT_SESSIONS: Final = frozenset({"session_boot_owners.json", "offline_queue.json", "latest.json"})
"""JSON files CodeWhale keeps among its sessions that hold none (spec §1)."""
_NAME_CHARACTERS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
)


_FIRST_KEYS: Final = (b'"schema_version"', b'"metadata"')
"""What a document opens with: serde writes `schema_version` first (older DeepSeek-TUI
documents open with `metadata`); another agent's JSON file in a `sessions` folder
(OpenClaw's `sessions.json`) does not."""


def detect(first_record: dict[str, Any]) -> Format | None:
    """A transcript of a document (`transcript`): sessionfix's own lines."""
    from sessionfix.formats.codewhale.transcript import is_line

    return CODEWHALE if is_line(first_record) else None


def has_record_shape(value: dict[str, Any]) -> bool:
    from sessionfix.formats.codewhale.transcript import is_line

    return is_line(value)


def header_problems(fmt: Format, header: HeaderFacts, name: str) -> list[str]:
    """What CodeWhale refuses of the document as a whole: it then loads nothing."""
    return [f"CodeWhale refuses to load the document: {problem}" for problem in header.problems]


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> CodeWhaleAdapter:
    from sessionfix.formats.codewhale.adapter import CodeWhaleAdapter

    return CodeWhaleAdapter(path)


def capabilities(fmt: Format, tree: bool) -> frozenset[Capability]:
    return (
        CAPABILITIES
        if tree
        else CAPABILITIES - {Capability.TREE, Capability.UNIQUE_IDS, Capability.BRANCHES}
    )


def is_sibling(path: Path) -> bool:
    """The JSON files CodeWhale keeps beside its sessions that are none."""
    return path.name in NOT_SESSIONS and path.parent.name in (SESSIONS, CHECKPOINTS)


def sessions_folders(env: Mapping[str, str], home: Path) -> list[Path]:
    """`$CODEWHALE_HOME/sessions`, by default `~/.codewhale/sessions`; and the legacy
    `~/.deepseek/sessions` (moved or merged into the new one on first use, which never
    happens when `CODEWHALE_HOME` is set)."""
    main = configured_folder(env, "CODEWHALE_HOME", home, home / HOME) / SESSIONS
    legacy = home / LEGACY_HOME / SESSIONS
    return [main] if legacy == main else [main, legacy]


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    return sessions_folders(env, home)


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    from sessionfix.formats.codewhale.context import loaded_messages as load

    return load(view, source, lines)


def is_store(path: Path, head: bytes) -> bool:
    """A document where CodeWhale keeps them (`CONTAINERS`), named as CodeWhale names
    session files, whose bytes begin as CodeWhale's documents do (after a byte-order mark;
    or cut short there), or are NUL bytes of a copy cut short, or nothing."""
    if path.name in NOT_SESSIONS or not set(path.stem) <= _NAME_CHARACTERS or not path.stem:
        return False
    from sessionfix.formats.codewhale.document import BOM

    body = head[len(BOM) :] if head.startswith(BOM) else head
    body = body.lstrip(b" \t\r\n")
    if not body or body.startswith(b"\x00"):
        return True
    if not body.startswith(b"{"):
        return False
    first = body[1:].lstrip(b" \t\r\n")
    return any(key.startswith(first) or first.startswith(key) for key in _FIRST_KEYS)


def open_store(path: Path) -> CodeWhaleDocument:
    from sessionfix.formats.codewhale.store import CodeWhaleDocument

    return CodeWhaleDocument(path)
