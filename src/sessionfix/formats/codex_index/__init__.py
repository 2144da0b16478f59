"""Codex's thread index: `state_5.sqlite`, whose `threads` rows
Codex's lists of sessions are read from (the resume picker, the app's sidebar,
`thread/list`), checked against the rollouts they index, and mended from them.

The index is a store of one session, the index itself (`store`): its transcript holds a
line per thread, the thread's row beside its rollouts (`transcript`); `adapter` puts
into the neutral model how they disagree, `edit` makes or mends a row, `write` puts the
rows back in one transaction, after a backup. Rollouts are only read.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sessionfix.formats import Format, configured_folder
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.headerless import (  # noqa: F401 (what the package declares)
    HEADER_START,
    header_problems,
    rebuilt_header,
    writer_lock,
)
from sessionfix.registry import SqliteStore

if TYPE_CHECKING:
    from sessionfix.formats.codex_index.adapter import IndexAdapter
    from sessionfix.formats.codex_index.store import CodexIndexStore
    from sessionfix.model.loaded import Loaded
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource

CODEX_INDEX: Final = Format("codex-index")
FORMATS: Final = (CODEX_INDEX,)
AGENTS: Final[dict[Format, str]] = {CODEX_INDEX: "Codex"}
SUFFIXES: Final[tuple[str, ...]] = ()
"""No session file: the index is a database."""
DATABASE: Final = "state_5.sqlite"
CONTAINERS: Final = (SqliteStore(frozenset({DATABASE})),)
READ_IN_RANGES: Final = False
CAPABILITIES: Final = frozenset({Capability.LINES, Capability.SESSION_INDEX})
_SQLITE_MAGIC: Final = b"SQLite format 3\x00"
SQLITE_FOLDER: Final = "sqlite"
"""Where newer Codex builds keep their databases inside the Codex home."""


def detect(first_record: dict[str, Any]) -> Format | None:
    """A transcript of the index (`transcript`): sessionfix's own lines."""
    from sessionfix.formats.codex_index.transcript import is_thread_line

    return CODEX_INDEX if is_thread_line(first_record) else None


def has_record_shape(value: dict[str, Any]) -> bool:
    from sessionfix.formats.codex_index.transcript import is_thread_line

    return is_thread_line(value)


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> IndexAdapter:
    from sessionfix.formats.codex_index.adapter import IndexAdapter

    return IndexAdapter(path)


def capabilities(fmt: Format, tree: bool) -> frozenset[Capability]:
    return CAPABILITIES


def is_sibling(path: Path) -> bool:
    return False


def _sqlite_home(codex_home: Path) -> Path | None:
    """The `sqlite_home` a Codex home's `config.toml` names, if any."""
    try:
        with open(codex_home / "config.toml", "rb") as handle:
            named = tomllib.load(handle).get("sqlite_home")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return Path(named) if isinstance(named, str) and named.strip() else None


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """The thread index Codex keeps for this user: in the Codex home (`CODEX_HOME`, by
    default `~/.codex`) or its `sqlite/` folder, or in the folder `sqlite_home` in its
    `config.toml` or `CODEX_SQLITE_HOME` names."""
    codex_home = configured_folder(env, "CODEX_HOME", home, home / ".codex")
    folders = [codex_home, codex_home / SQLITE_FOLDER]
    for named in (
        _sqlite_home(codex_home),
        configured_folder(env, "CODEX_SQLITE_HOME", home, codex_home),
    ):
        if named is not None and named not in folders:
            folders.append(named)
    return [folder / DATABASE for folder in folders]


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """Codex sends the model nothing of its thread index."""
    return iter(())


def is_store(path: Path, head: bytes) -> bool:
    """An SQLite database with Codex's `threads` table; or, when it cannot be looked
    into, one named as Codex names its index, so that opening it says why."""
    if not head.startswith(_SQLITE_MAGIC):
        return False
    from sessionfix.formats.codex_index.database import is_thread_index

    found = is_thread_index(path)
    return found if found is not None else CONTAINERS[0].takes(path.name)


def open_store(path: Path) -> CodexIndexStore:
    from sessionfix.formats.codex_index.store import CodexIndexStore

    return CodexIndexStore(path)
