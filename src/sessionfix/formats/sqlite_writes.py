"""What every writer of a session into an SQLite database another program owns shares
(the OpenClaw store's, opencode's, Codex's thread index's): a session id in a backup's
file name, a backup made durable, a connection closed whatever its last checkpoint does,
a copy of the whole database for `-o`, and the points where a test kills the process to
prove that a write cut short leaves the database whole."""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final, Protocol

import apsw

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.interrupts import signals_deferred
from sessionfix.read.sqlite import connect_read_only, error_reason, read_only_uri
from sessionfix.stores import StoreBackup

KILL_VARIABLE: Final = "SESSIONFIX_KILL_AT"
_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def kill_point(name: str) -> None:
    """Tests stop the process here (`SESSIONFIX_KILL_AT=<name>`, SIGKILL: nothing is
    cleaned up) to prove that a write cut short at this point leaves the database as it
    was, or wholly written."""
    if os.environ.get(KILL_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def id_in_file_name(session_id: str) -> str:
    """A session id as a piece of a file name: the id when it is a plain name (letters,
    digits, `_`, `-`), else a digest of it."""
    if _PLAIN_NAME.fullmatch(session_id):
        return session_id
    return "session-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def new_backup_file(real: Path, stem: str, suffix: str) -> Path:
    """A new empty file beside the database at `real`, named `<stem><n><suffix>` for
    the first number `n` free (never an existing file, nor one whose journal is left)."""
    for number in itertools.count(1):
        path = real.with_name(f"{stem}{number}{suffix}")
        if os.path.lexists(f"{path}-journal"):
            continue
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")  # pragma: no cover


def sync_to_disk(path: Path) -> None:
    """Flush a file written beside a database, and its folder's entry for it, to the
    disk: a backup must outlast a crash that follows the write it makes undoable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened (not on every platform)
        return
    try:
        with suppress(OSError):
            os.fsync(folder)
    finally:
        os.close(folder)


def close_quietly(db: apsw.Connection) -> None:
    """Close; a checkpoint that fails on close (a full disk) leaves what was committed
    in the write-ahead log, where SQLite finds it."""
    with suppress(apsw.Error):
        db.close()


class CopyRefused(SessionfixError):
    """`-o` names a file that exists, and replacing it was not asked for."""


@contextmanager
def copy_database(source: Path, output: Path, *, replace: bool) -> Iterator[Path]:
    """A copy of the database at `source` (SQLite's online backup, through a read-only
    connection: `source` is not written) made beside `output` under a temporary name,
    given to the block to change, then named `output` (renamed over it when `replace`,
    else linked there, which fails rather than overwrite a file that appeared); a copy
    the block fails in is removed."""
    where = str(output)
    if not replace and os.path.lexists(output):
        raise CopyRefused(f"{where}: exists (--force to replace it)")
    temp = output.with_name(f".{output.name}.sessionfix-tmp-{os.getpid()}")
    try:
        reader = connect_read_only(source)
        try:
            copy = apsw.Connection(str(temp))
            try:
                with copy.backup("main", reader, "main") as backup:
                    backup.step(-1)
            finally:
                close_quietly(copy)
        finally:
            close_quietly(reader)
        sync_to_disk(temp)
        yield temp
        if replace:
            os.replace(temp, output)
        else:
            os.link(temp, output)
    except apsw.Error as exc:
        raise InputError(f"{where}: cannot copy {source} ({error_reason(exc)})") from None
    except FileExistsError:
        raise CopyRefused(f"{where}: exists (--force to replace it)") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot write the copy ({described(exc)})") from None
    finally:
        for leftover in (temp, Path(f"{temp}-wal"), Path(f"{temp}-shm")):
            with suppress(OSError):
                leftover.unlink()


class HeldWrite(Protocol):
    """A write into a database held exclusively: the backups it kept, and whether its
    commit may have been made."""

    kept: list[Path]

    def may_have_committed(self) -> bool: ...


class HeldRewrite:
    """A write on a database held exclusively: the backups it kept (removed if it ends
    before the commit may have been made, kept once it may have), its transaction."""

    def __init__(self, db: apsw.Connection, real: Path, where: str) -> None:
        self.db = db
        self.real = real
        self.where = where
        self.kept: list[Path] = []
        self.state: Callable[[], str] = lambda: ""
        self.before = ""
        self.committing = False

    def begin(self, state: Callable[[], str], before: str | None = None) -> None:
        """Begin the transaction; `state` digests what it changes, to tell after a
        failed commit whether it was made (`before`: its digest now, when the caller
        checks it in the transaction)."""
        if self.db.execute("PRAGMA foreign_keys").fetchone() != (1,):
            raise SessionfixError(f"{self.where}: foreign keys are not enforced; nothing changed")
        self.db.execute("BEGIN IMMEDIATE")
        self.state = state
        self.before = state() if before is None else before

    def commit(self) -> None:
        with signals_deferred():
            self.committing = True
            self.db.execute("COMMIT")

    def may_have_committed(self) -> bool:
        """After COMMIT began: whether the database may hold the write (the transaction
        ended, and the rows are not, or cannot be read to be, those before)."""
        if not self.committing or self.db.in_transaction:
            return False
        try:
            return self.state() != self.before
        except apsw.Error:
            return True


@contextmanager
def settled(db: apsw.Connection, write: HeldWrite, where: str, what: str) -> Iterator[None]:
    """Run a write on the held database `db` (`what`: the database, in messages). A
    failure before the commit may have been made rolls back and removes the backups;
    after it, they stay and the message names them."""
    try:
        yield
    except BaseException as exc:
        if write.may_have_committed():
            if isinstance(exc, apsw.Error):
                backups = (
                    f"; the rows it replaced are kept in {', '.join(map(str, write.kept))}"
                    if write.kept
                    else ""
                )
                raise SessionfixError(
                    f"{where}: the commit failed ({error_reason(exc)}), and the {what} may "
                    f"hold the write or not{backups}"
                ) from None
            raise
        if db.in_transaction:
            with suppress(apsw.Error):
                db.execute("ROLLBACK")
        for kept in write.kept:
            with suppress(OSError):
                kept.unlink()
        if isinstance(exc, apsw.Error):
            raise SessionfixError(
                f"{where}: cannot write the {what} ({error_reason(exc)}); nothing changed"
            ) from None
        raise


def checkpoint(db: apsw.Connection) -> None:
    """Move a write held exclusively into the database file: no reader can be waiting
    (the database is held), so the log empties."""
    with suppress(apsw.Error):
        db.execute("PRAGMA main.wal_checkpoint(TRUNCATE)").fetchall()


def backups_beside(path: Path, mark: str, suffix: str) -> Iterator[tuple[Path, str]]:
    """Each backup file beside the database at `path` (named `<name><mark>…<suffix>`): its
    path and what its name holds between `mark` and `suffix`."""
    real = Path(os.path.realpath(path))
    prefix = real.name + mark
    try:
        names = os.listdir(real.parent)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(suffix):
            yield real.with_name(name), name[len(prefix) : -len(suffix)]


def read_backup(
    path: Path, holds: Callable[[apsw.Connection, dict[str, str]], bool]
) -> tuple[dict[str, str], str]:
    """A backup file's `meta` table, and `ok` when `holds` finds in it the rows that meta
    records, else `damaged` (a backup that cannot be opened or read included)."""
    try:
        db = apsw.Connection(
            read_only_uri(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        )
    except apsw.Error:
        return {}, "damaged"
    meta: dict[str, str] = {}
    try:
        meta = {str(key): str(value) for key, value in db.execute("SELECT key, value FROM meta")}
        return meta, "ok" if holds(db, meta) else "damaged"
    except (apsw.Error, KeyError):
        return meta, "damaged"
    finally:
        close_quietly(db)


def newest_first(found: list[tuple[str, int, StoreBackup]]) -> list[StoreBackup]:
    """Backups by the time they were taken and their number, newest first."""
    found.sort(key=lambda entry: entry[:2], reverse=True)
    return [entry[2] for entry in found]
