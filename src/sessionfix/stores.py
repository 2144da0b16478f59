"""Session stores: databases that hold many sessions, each a sequence of JSONL lines.

A store's session is read by writing its lines, in order, to a private temporary
JSONL file (`Transcript`), which every rule and repair reads as it reads any session
file; findings are then located by the store's own row numbers. Writing a repair back
is the store's business (one transaction, the store's own recipe). Adding a kind of
store is a package under `formats/` that declares an `SqliteStore` among its
`CONTAINERS`, and a line in the registry (`sessionfix.registry`). A session kept as one
JSON document (`JsonDocuments`) is a store of that one session, read and written whole.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Protocol, cast, runtime_checkable

from msgspec import Struct, field

from sessionfix import registry
from sessionfix.errors import InputError, SessionfixError
from sessionfix.location import RecordNames
from sessionfix.registry import (
    ContainerDeclaration,
    JsonDocuments,
    SqliteStore,
    StoreDeclaration,
)
from sessionfix.scratch import private_folder


class StoreRefused(SessionfixError):
    """A rewrite refused for the whole store (its agent is running, it is being written):
    no other session of it is tried."""


class StoredSession(Struct, frozen=True):
    """One session of a store, as its listing names it."""

    id: str
    key: str | None = None
    """The store's name for the conversation the session belongs to."""
    cold: bool = False
    """Archived out of the live rows: readable, not rewritable in place."""


class Transcript(Struct):
    """A store session's lines written to `path`, one per row, and where each came from."""

    path: Path
    session: StoredSession
    rows: list[Any] = field(default_factory=list)
    """The store's key of the row of each line of `path`, in order: a number (OpenClaw:
    `seq`) or a text id (opencode: `prt_…`)."""
    tables: list[str] = field(default_factory=list)
    """The table of each line's row, where a store keeps a session in several (opencode:
    `message`, `part`); empty where it keeps one."""
    digest: str = ""
    """Of every row as stored, to tell later whether the session changed since."""
    multiline: bool = False
    """Some row holds a line break of its own (it became several lines of `path`)."""
    key_noun: str = "row"
    """How the store names a row by its number in text (OpenClaw: "seq")."""

    def row_of(self, line: int) -> Any:
        """The store row of 1-based line `line` of the transcript file."""
        return self.rows[line - 1] if 0 < line <= len(self.rows) else None

    def names(self, key_of: Callable[[int], int | str | None] | None = None) -> RecordNames:
        """How the store names the session's records in text: by the number of the row a
        line was read from (`key_of`: line → number, by default the rows read)."""
        return RecordNames(self.key_noun, "at", self.session.id, key_of or self.row_of, own="at")


class StoreBackup(Struct, frozen=True):
    """A backup a store rewrite kept, as `sessionfix restore --list` shows it."""

    path: Path
    session_id: str
    taken: str
    """ISO 8601, UTC."""
    rows: int | None
    """The session's rows it holds; None for a backup of a whole document."""
    status: str


def chosen_backup(
    backups: Sequence[StoreBackup], store: Path, session_id: str, name: str | None
) -> StoreBackup:
    """The backup a restore puts back, of those of the session (newest first): the one
    named, else the newest intact one; `InputError` when there is none, `SessionfixError`
    when the one chosen does not hold the rows it records."""
    if name is not None:
        backups = [backup for backup in backups if backup.path.name == name]
        if not backups:
            raise InputError(f"{store}: no backup {name!r} of session {session_id}")
    if not backups:
        raise InputError(f"{store}: no sessionfix backup of session {session_id}")
    intact = [backup for backup in backups if backup.status == "ok"]
    chosen = intact[0] if intact and name is None else backups[0]
    if chosen.status != "ok":
        raise SessionfixError(f"{chosen.path}: does not hold the rows it records; not restored")
    return chosen


Origins = Callable[[int], tuple[int, bool]]
"""For 1-based line k of a repaired transcript: the transcript line it comes from (0
for a line written before the first), and whether it is that line unchanged."""


class SessionStore(Protocol):
    """What a store package's `open_store` returns."""

    path: Path
    kind: str
    """What the store is, for messages ("OpenClaw session store")."""
    session_format: str
    """The format of its sessions' lines (a `Format` value)."""

    def sessions(self) -> list[StoredSession]: ...

    def transcript(self, session: StoredSession, folder: Path) -> Transcript:
        """Write `session`'s lines to a new file in `folder`."""
        ...

    def loader(self, transcript: Transcript) -> Callable[..., Iterator[Any]]:
        """What the store's agent sends the model from the session `transcript` holds
        (and from a repaired copy of it), reading the rows as its own loader does: a
        `sessionfix.model.loaded.Loader`."""
        ...

    def replace(
        self,
        transcript: Transcript,
        repaired: Path,
        origins: Origins,
        *,
        backup: bool,
    ) -> Path | None:
        """Replace the session's rows by the lines of `repaired`, in one transaction,
        copying the rows `origins` says are unchanged. Returns the backup kept, if any."""
        ...

    copies_as_store: bool
    """`-o` writes a copy of the whole store with the session repaired (its sessions'
    lines are no file its agent reads); else the session's lines, a session file."""

    def write_copy(
        self,
        output: Path,
        transcript: Transcript,
        repaired: Path | None,
        origins: Origins | None,
        *,
        replace: bool,
    ) -> None:
        """A copy of the store at `output` (a new file, or replacing one when
        `replace`) whose session is the lines of `repaired` (None: as it is)."""
        ...

    def rewrite_notes(self, transcript: Transcript) -> list[str]:
        """What a rewrite of the session leaves as it was that the store keeps of it
        elsewhere (opencode: its event log), for the run's summary."""
        ...

    def key_after_rewrite(self, line: int) -> int | str | None:
        """The key `replace` gives the row it writes for 1-based line `line` of a repair."""
        ...

    def check_integrity(self, backups: Sequence[Path]) -> None:
        """Check the whole store after rewrites (`backups`: what they kept, for the
        message should it fail)."""
        ...

    def backups(self, session_id: str | None) -> list[StoreBackup]:
        """The backups beside the store, of one session or (None) of all, newest first."""
        ...

    def restore(self, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
        """Put back a backup (the newest, or the one named); returns the one restored."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> SessionStore: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class WaitsForQuiet(Protocol):
    """A store its agent writes without a lock sessionfix can see (a CodeWhale document):
    a rewrite waits until it has not changed for the quiescence window."""

    def refuse_unquiet(self, quiescence: float) -> None:
        """Raise `StoreRefused` when the store changed within `quiescence` seconds."""
        ...


class StorePackage(Protocol):
    CONTAINERS: tuple[ContainerDeclaration, ...]
    """Among them, the `SqliteStore` or `JsonDocuments` it reads."""

    def is_store(self, path: Path, head: bytes) -> bool:
        """Whether `path`, whose first bytes are `head`, is a store of this package."""
        ...

    def open_store(self, path: Path) -> SessionStore: ...


def _packages() -> Iterator[tuple[StorePackage, StoreDeclaration]]:
    """The registered packages that declare a store, with its declaration, in the order
    they are asked to recognise a path."""
    for module in registry.packages("CONTAINERS"):
        package = cast(StorePackage, module)
        for declared in package.CONTAINERS:
            if isinstance(declared, SqliteStore | JsonDocuments):
                yield package, declared


SQLITE_MAGIC: Final = b"SQLite format 3\x00"
HEAD_BYTES: Final = 100
"""Bytes read to recognise a store (an SQLite header is 100 bytes)."""


def declared_store(path: Path) -> tuple[StorePackage, StoreDeclaration] | None:
    """The package whose store `path` is, and the store it declares, if `path` is one
    (only a regular file can be: a FIFO or a device is never opened here): a database a
    package recognises, or a JSON document where a package keeps its documents (which
    its package recognises however damaged: a document is read whole or not at all)."""
    head = _head(path)
    if head is None:
        return None
    if not head.startswith(SQLITE_MAGIC):  # every database store is a database
        found = None
        if path.name.endswith(JsonDocuments.SUFFIX):
            documents = (
                (p, s) for p, s in _packages() if isinstance(s, JsonDocuments) and s.takes(path)
            )
            found = next(((p, s) for p, s in documents if p.is_store(path, head)), None)
        if found is not None or head:
            return found
        # SQLite reads an empty file as an empty database
        return next(
            ((p, s) for p, s in _packages() if isinstance(s, SqliteStore) and s.takes(path.name)),
            None,
        )
    return next(
        ((p, s) for p, s in _packages() if isinstance(s, SqliteStore) and p.is_store(path, head)),
        None,
    )


def open_store(path: Path) -> SessionStore:
    """Open the store at `path`; `InputError` if it is not one sessionfix reads."""
    found = declared_store(path)
    if found is None:
        raise InputError(f"{path}: not a session store sessionfix reads")
    return found[0].open_store(path)


def is_store_path(path: Path) -> bool:
    """Whether a directory walk takes the file at `path` for a store: a database by its
    name; a document by its name and folder, and its first bytes (other agents keep JSON
    files in folders of the same names)."""
    for package, store in _packages():
        if isinstance(store, SqliteStore):
            if store.takes(path.name):
                return True
        elif store.takes(path) and _head_is_store(package, path):
            return True
    return False


def _head_is_store(package: StorePackage, path: Path) -> bool:
    head = _head(path)
    return head is not None and package.is_store(path, head)


def _head(path: Path) -> bytes | None:
    """The first bytes of the regular file at `path` (None for anything else: a FIFO or
    a device is opened without waiting and never read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def select_sessions(
    store: SessionStore, only: Sequence[str] | None, *, strict: bool = True
) -> list[StoredSession]:
    """The sessions of `store` a run reads: all, or those named; a name the store does
    not hold is an error when `strict` (a store named on its own), else left to the run
    to report if no store holds it."""
    sessions = store.sessions()
    if not only:
        return sessions
    by_id = {session.id: session for session in sessions}
    missing = [name for name in only if name not in by_id]
    if missing and strict:
        raise InputError(f"{store.path}: no session {missing[0]!r} in this {store.kind}")
    return [by_id[name] for name in only if name in by_id]


def unmatched_sessions(only: Sequence[str], found: Iterable[str]) -> list[str]:
    """The sessions named with `--session` that no store of the run holds, one line each."""
    seen = set(found)
    return [f"no session {name!r} in any session store read" for name in only if name not in seen]


@contextmanager
def transcript_of(store: SessionStore, session: StoredSession) -> Iterator[Transcript]:
    """A store session's transcript in a private temporary folder, removed afterwards."""
    with private_folder(f"{store.path}: cannot read session {session.id}") as folder:
        transcript = store.transcript(session, folder)
        try:
            yield transcript
        except SessionfixError as exc:
            shown = f"{store.path} (session {session.id})"
            exc.args = tuple(
                arg.replace(str(transcript.path), shown) if isinstance(arg, str) else arg
                for arg in exc.args
            )
            raise
