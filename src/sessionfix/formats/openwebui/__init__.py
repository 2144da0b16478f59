"""open-webui chats (spec formats/open-webui.md): the chats of its SQLite database
(`webui.db`), read-only.

`database` reads a chat's document, its `chat_message` rows and the compression
filter's `chat_summary` row; `history` says what open-webui reads of them for the model
(rows first, the `currentId` it repairs in memory, the branch it walks). The database
is a store of sessions (`store`): a chat is read as the lines of a transcript
(`transcript`), which `adapter` puts into the neutral model as a tree of messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sessionfix.formats import Format
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.headerless import (  # noqa: F401 (what the package declares)
    HEADER_START,
    header_problems,
    rebuilt_header,
    writer_lock,
)
from sessionfix.registry import SqliteStore

if TYPE_CHECKING:
    from sessionfix.formats.openwebui.adapter import WebuiAdapter
    from sessionfix.formats.openwebui.store import WebuiStore
    from sessionfix.model.loaded import Loaded
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource

OPENWEBUI: Final = Format("openwebui")
FORMATS: Final = (OPENWEBUI,)
AGENTS: Final[dict[Format, str]] = {OPENWEBUI: "open-webui"}
SUFFIXES: Final[tuple[str, ...]] = ()
"""No session file: every chat is in the database."""
CONTAINERS: Final = (SqliteStore(frozenset({"webui.db"})),)
"""open-webui's database, as it names it in its data folder (spec §1)."""
READ_IN_RANGES: Final = False
"""What a message is depends on the whole chat (rows first, the repaired currentId)."""
CAPABILITIES: Final = frozenset(
    {
        Capability.LINES,
        Capability.ENTRIES,
        Capability.TREE,
        Capability.UNIQUE_IDS,
        Capability.KEPT_LINKS,
        Capability.STORED_TWICE,
        Capability.COVERED_COUNTS,
        Capability.UNREAD_SESSIONS,
        Capability.TOOL_CALLS,
        Capability.PAIRS_CHECKED_ON_SEND,
    }
)
_SQLITE_MAGIC: Final = b"SQLite format 3\x00"
DATA_VARIABLE: Final = "DATA_DIR"
DATABASE_VARIABLE: Final = "DATABASE_URL"
SQLITE_URL: Final = "sqlite:///"


def data_folder(env: Mapping[str, str]) -> Path | None:
    """The folder `DATA_DIR` names (a pip install's default lies inside its own
    site-packages, the Docker image's is `/app/backend/data`: neither is looked for)."""
    named = env.get(DATA_VARIABLE, "").strip()
    return Path(named) if named else None


def database_path(env: Mapping[str, str]) -> Path | None:
    """The SQLite database `DATABASE_URL` names (`sqlite:///<path>`), else `webui.db` of
    `DATA_DIR`; None for another database (sessionfix reads SQLite only)."""
    url = env.get(DATABASE_VARIABLE, "").strip()
    if url:
        return Path(url[len(SQLITE_URL) :]) if url.startswith(SQLITE_URL) else None
    folder = data_folder(env)
    return folder / "webui.db" if folder is not None else None


def detect(first_record: dict[str, Any]) -> Format | None:
    """A transcript of a chat (`transcript`): sessionfix's own lines."""
    from sessionfix.formats.openwebui.transcript import is_envelope

    return OPENWEBUI if is_envelope(first_record) else None


def has_record_shape(value: dict[str, Any]) -> bool:
    from sessionfix.formats.openwebui.transcript import is_envelope

    return is_envelope(value)


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> WebuiAdapter:
    from sessionfix.formats.openwebui.adapter import WebuiAdapter

    return WebuiAdapter(path)


def capabilities(fmt: Format, tree: bool) -> frozenset[Capability]:
    return CAPABILITIES


def is_sibling(path: Path) -> bool:
    return False


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """The database open-webui's environment names, where it names one."""
    found = database_path(env)
    return [found] if found is not None else []


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    from sessionfix.formats.openwebui.loaded import loaded_messages as load

    return load(view, source, lines)


def is_store(path: Path, head: bytes) -> bool:
    """An SQLite database with open-webui's chat tables; or, when it cannot be looked
    into, one named as open-webui names it, so that opening it says why."""
    if not head.startswith(_SQLITE_MAGIC):
        return False
    from sessionfix.formats.openwebui.database import is_openwebui_database

    found = is_openwebui_database(path)
    return found if found is not None else CONTAINERS[0].takes(path.name)


def open_store(path: Path) -> WebuiStore:
    from sessionfix.formats.openwebui.store import WebuiStore

    return WebuiStore(path)
