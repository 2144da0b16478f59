"""A CodeWhale document on disk: whether CodeWhale has the session open (spec §6), and
writing a new document over it as CodeWhale writes one (§4: a temp file in its folder,
fsync, rename, folder fsync, mode 0600), after a backup beside it, which `restore`
puts back. As the SQLite stores keep their own backups, so does a document: named
`<id>.json.sessionfix-bak-<UTC stamp>-<n>-<digest>` (never `*.json`, which CodeWhale
would list as a session, count among the 50 it keeps and delete by its id).
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import time
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import xxhash

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.formats.codewhale.document import Document, parse
from sessionfix.formats.codewhale.names import CHECKPOINTS, RUNTIME_LOCK
from sessionfix.formats.sqlite_writes import kill_point, sync_to_disk
from sessionfix.interrupts import signals_deferred
from sessionfix.replacing import BACKUP_MARK, other_hard_links, sync_directory, write_temp
from sessionfix.stores import StoreBackup, StoreRefused, chosen_backup

_STAMP: Final = "%Y%m%dT%H%M%SZ"
_BACKUP: Final = re.compile(r"(\d{8}T\d{6}Z)-(\d{1,6})-([0-9a-f]{16})")


class SessionLive(StoreRefused):
    """The session may be open in a running CodeWhale, whose next autosave would revert
    a write: nothing was changed."""


class DocumentChanged(SessionfixError):
    """The document changed after it was read: nothing was written."""


def digest(data: bytes) -> str:
    return xxhash.xxh3_64_hexdigest(data)


def read(path: Path) -> bytes:
    """The bytes of the regular file at `path` (a FIFO is opened without waiting and
    refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({described(exc)})") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(f"{path}: not a regular file")
            return handle.read()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({described(exc)})") from None


def live_reason(document: Path, session_id: str) -> str | None:
    """Why the session may be open in a running CodeWhale: its Runtime owner lock is
    held (0.9.12+; tried without waiting, released at once, never made), or a checkpoint
    younger than the document shows a turn in flight. A checkpoint's session is the
    one its name gives in the sessions folder above it."""
    sessions = document.parent
    if sessions.name == CHECKPOINTS:
        sessions = sessions.parent
    lock = sessions / session_id / Path(*RUNTIME_LOCK)
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return "a running CodeWhale holds the session's Runtime lock"
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    checkpoint = document.parent / CHECKPOINTS / document.name
    with suppress(OSError):
        if os.stat(checkpoint).st_mtime_ns > os.stat(document).st_mtime_ns:
            return "its checkpoint is younger than the document (a turn is in flight)"
    return None


def unquiet_reason(path: Path, quiescence: float) -> str | None:
    """Why the document may be mid-write: it changed within the quiescence window
    (CodeWhale 0.9.10 takes no lock on it)."""
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        return None
    if age >= quiescence:
        return None
    return (
        f"modified {max(age, 0):.0f}s ago, within the quiescence window of {quiescence:g}s "
        "(CodeWhale may be writing it; --quiescence 0 skips this check)"
    )


def _backup_name(target: Path, data: bytes, when: datetime, serial: int) -> str:
    return f"{target.name}{BACKUP_MARK}{when.strftime(_STAMP)}-{serial}-{digest(data)}"


def _keep_backup(target: Path, data: bytes) -> Path:
    """A hard link to the document as it is, named with its digest, made durable."""
    when = datetime.now(UTC)
    for serial in range(1000):
        backup = target.with_name(_backup_name(target, data, when, serial))
        try:
            os.link(target, backup)
        except FileExistsError:
            continue
        except OSError as exc:
            raise SessionfixError(
                f"{target}: cannot keep a backup ({described(exc)}); left untouched"
            ) from None
        sync_to_disk(backup)
        return backup
    raise SessionfixError(f"{target}: too many backups this second; left untouched")


def write_document(
    path: Path, data: bytes, *, expected: str, backup: bool, check: bool = True
) -> Path | None:
    """Replace the document at `path`, which must still hold bytes of digest `expected`,
    by `data` (with `check`, only when it is a document CodeWhale loads), keeping its
    owner, and a checkpoint's age (its modification time, which CodeWhale reads as
    such); returns the backup kept of the old one. A document with other hard links is
    refused: the rename would leave them the old bytes."""
    target = Path(os.path.realpath(path))
    if check:
        written = parse(data)
        if not isinstance(written, Document) or written.problems:
            raise SessionfixError(f"{path}: the repaired document would not load; left as it is")
    try:
        st = os.stat(target)
    except OSError as exc:
        raise DocumentChanged(f"{path}: {described(exc)}; left untouched") from None
    others = other_hard_links(target, st)
    if others > 0:
        raise SessionfixError(
            f"{path}: has {others} other hard link(s); a rewrite would split them; left untouched"
        )
    try:
        temp = write_temp(target, (data,), 0o600, st.st_uid, st.st_gid)
        if target.parent.name == CHECKPOINTS:
            os.utime(temp, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as exc:
        raise SessionfixError(
            f"{path}: cannot write the new document beside it ({described(exc)}); left untouched"
        ) from None
    try:
        kill_point("codewhale-written")
        with signals_deferred():
            current = read(target)
            if digest(current) != expected:
                raise DocumentChanged(f"{path}: changed since it was read; left untouched")
            kept = _keep_backup(target, current) if backup else None
            kill_point("codewhale-backed-up")
            os.replace(temp, target)
    except BaseException:
        with suppress(OSError):
            temp.unlink()
        raise
    sync_directory(target.parent)
    kill_point("codewhale-replaced")
    return kept


def list_backups(path: Path, session_id: str) -> list[StoreBackup]:
    """The backups beside the document, newest first, each `ok` when it holds the bytes
    its name records, else `damaged`."""
    target = Path(os.path.realpath(path))
    prefix = target.name + BACKUP_MARK
    try:
        names = [name for name in os.listdir(target.parent) if name.startswith(prefix)]
    except OSError:
        return []
    found: list[tuple[str, int, StoreBackup]] = []
    for name in names:
        match = _BACKUP.fullmatch(name, len(prefix))
        if match is None:
            continue
        backup = target.with_name(name)
        try:
            status = "ok" if digest(read(backup)) == match[3] else "damaged"
        except InputError:
            status = "damaged"
        taken = datetime.strptime(match[1], _STAMP).replace(tzinfo=UTC).isoformat()
        found.append(
            (match[1], int(match[2]), StoreBackup(backup, session_id, taken, None, status))
        )
    found.sort(key=lambda entry: entry[:2], reverse=True)
    return [entry[2] for entry in found]


def restore_document(
    path: Path, session_id: str, backup: str | None, *, keep_current: bool
) -> Path:
    """Put back the newest intact backup (or the one named), written as a repair is;
    with `keep_current`, the document it replaces is kept as a backup first."""
    chosen = chosen_backup(list_backups(path, session_id), path, session_id, backup)
    reason = live_reason(path, session_id)
    if reason is not None:
        raise SessionLive(f"{path}: {reason}; not restored")
    current = read(path)
    write_document(
        path, read(chosen.path), expected=digest(current), backup=keep_current, check=False
    )
    return chosen.path
