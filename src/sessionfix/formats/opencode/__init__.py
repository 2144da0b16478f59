"""opencode sessions (spec formats/opencode.md): message and part rows of its SQLite
database (`opencode.db`, opencode 1.2 and later), and the legacy JSON `storage/` tree
of opencode 1.1 and earlier, read-only.

`database` and `legacy` read rows in opencode's load order, `decode` reads the fields
of each row that matter, `context` says what opencode sends the model from them. The
database is a store of sessions (`store`): a session's rows are read as the lines of a
transcript (`transcript`), which `adapter` puts into the neutral model and `edit`
changes; `write` puts changed rows back, in one transaction, after a backup.
"""

from __future__ import annotations

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
from sessionfix.formats.opencode.names import LEGACY_FOLDER
from sessionfix.registry import SqliteStore

if TYPE_CHECKING:
    from sessionfix.formats.opencode.adapter import OpencodeAdapter
    from sessionfix.formats.opencode.store import OpencodeStore
    from sessionfix.model.loaded import Loaded
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource

OPENCODE: Final = Format("opencode")
FORMATS: Final = (OPENCODE,)
AGENTS: Final[dict[Format, str]] = {OPENCODE: "opencode"}
SUFFIXES: Final[tuple[str, ...]] = ()
"""No session file: every session is in a database."""
CONTAINERS: Final = (SqliteStore(frozenset({"opencode.db", "opencode-*.db"})),)
"""The default database and the release channels' own (spec §1)."""
READ_IN_RANGES: Final = False
"""What a record is depends on the whole session (its compaction window)."""
CAPABILITIES: Final = frozenset(
    {
        Capability.LINES,
        Capability.ENTRIES,
        Capability.TOOL_CALLS,
        Capability.FILE_ACTIONS,
        Capability.BOUNDARIES,
        Capability.SUMMARY_REQUESTS,
        Capability.TIME_ORDER,
        Capability.RETRY_COPIES,
        Capability.UNREAD_SESSIONS,
        Capability.EVENT_LOG,
        Capability.MESSAGE_PARTS,
        Capability.PRUNE_MARKS,
        Capability.RESULTS_IN_CALLS,
        Capability.SHORTENED_RESULTS,
    }
)
_SQLITE_MAGIC: Final = b"SQLite format 3\x00"

DATABASE_PREFIX: Final = "opencode"
DATABASE_SUFFIX: Final = ".db"
"""opencode names its databases `opencode.db`, or `opencode-<channel>.db` for builds of
another release channel (spec §1): every `opencode*.db` of its data folder is one."""

DATABASE_VARIABLE: Final = "OPENCODE_DB"
IN_MEMORY: Final = ":memory:"


def data_folder(env: Mapping[str, str], home: Path) -> Path:
    """opencode's data folder: `$XDG_DATA_HOME/opencode`, by default
    `~/.local/share/opencode` (macOS too)."""
    return configured_folder(env, "XDG_DATA_HOME", home, home / ".local" / "share") / "opencode"


def databases(env: Mapping[str, str], home: Path) -> list[Path]:
    """Every opencode database of a user: each `opencode*.db` of the data folder (the
    default one and the release channels' own, spec §1), and the one `OPENCODE_DB`
    names (a bare name is in the data folder; `:memory:` keeps none)."""
    folder = data_folder(env, home)
    found = sorted(
        path
        for path in (folder.glob(f"{DATABASE_PREFIX}*{DATABASE_SUFFIX}") if folder.is_dir() else ())
        if path.is_file()
    )
    named = env.get(DATABASE_VARIABLE, "").strip()
    if named and named != IN_MEMORY:
        override = Path(named) if Path(named).is_absolute() else folder / named
        if override.is_file() and override not in found:
            found.append(override)
    return found


def legacy_storage(env: Mapping[str, str], home: Path) -> Path | None:
    """The JSON `storage/` tree opencode 1.1 and earlier kept sessions in, if there is one."""
    storage = data_folder(env, home) / LEGACY_FOLDER
    return storage if (storage / "session").is_dir() else None


def detect(first_record: dict[str, Any]) -> Format | None:
    """A transcript of a session's rows (`transcript`): sessionfix's own lines."""
    from sessionfix.formats.opencode.transcript import is_envelope

    return OPENCODE if is_envelope(first_record) else None


def has_record_shape(value: dict[str, Any]) -> bool:
    from sessionfix.formats.opencode.transcript import is_envelope

    return is_envelope(value)


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> OpencodeAdapter:
    from sessionfix.formats.opencode.adapter import OpencodeAdapter

    return OpencodeAdapter(path)


def capabilities(fmt: Format, tree: bool) -> frozenset[Capability]:
    return CAPABILITIES


def is_sibling(path: Path) -> bool:
    return False


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """opencode's data folder, where its databases are, and the database `OPENCODE_DB`
    names when it lies elsewhere."""
    folder = data_folder(env, home)
    named = env.get(DATABASE_VARIABLE, "").strip()
    if named and named != IN_MEMORY and Path(named).is_absolute():
        override = Path(named)
        if folder not in override.parents:
            return [folder, override]
    return [folder]


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    from sessionfix.formats.opencode.loaded import loaded_messages as load

    return load(view, source, lines)


def is_store(path: Path, head: bytes) -> bool:
    """An SQLite database with opencode's session tables; or, when it cannot be looked
    into, one named as opencode names its databases, so that opening it says why."""
    if not head.startswith(_SQLITE_MAGIC):
        return False
    from sessionfix.formats.opencode.database import is_opencode_database

    found = is_opencode_database(path)
    return found if found is not None else CONTAINERS[0].takes(path.name)


def open_store(path: Path) -> OpencodeStore:
    from sessionfix.formats.opencode.store import OpencodeStore

    return OpencodeStore(path)
