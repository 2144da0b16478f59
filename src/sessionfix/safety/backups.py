"""The backups an in-place repair keeps, and putting one back.

A backup is a hard link to the replaced file, named
`<name>.sessionfix-bak-<UTC stamp>[-N]-<size>-<digest>-<result>` (cli-and-safety.md §8.2
step 9): its first `size` bytes have the xxh3-64 `digest`, and `result` is that of the
content that replaced it. The name is made with the link, so the record can be neither
missing nor half-written. A backup is restored by default only when it verifies and is
not dated ahead of the clock; a damaged one never. Restoring writes the backup's bytes
over the session by the same safe-replace recipe, so the version it replaces becomes a
backup in its turn: a restore can itself be undone.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import msgspec
import xxhash
from msgspec import Struct

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.formats import Format
from sessionfix.replacing import sync_directory, write_temp
from sessionfix.safety.locks import rewrite_access, sidecar_lock
from sessionfix.safety.writing import (
    BackupRecord,
    FileChanged,
    WriteFailed,
    file_digest,
    read_backup_name,
    refuse_link,
    remove_dead_temps,
    replace_file,
    snapshot,
)
from sessionfix.settings import DEFAULT_QUIESCENCE

FUTURE_SKEW: Final = timedelta(minutes=5)
"""How far ahead of the clock a backup's stamp may be and still be taken for the newest
(a clock stepped back since it was taken)."""
_BLOCK: Final = 1 << 20
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)


class NoBackup(SessionfixError):
    """There is no backup to restore (or not the one named)."""


class DamagedBackup(SessionfixError):
    """The backup does not hold the bytes its name records: it is not restored."""


class Status(enum.Enum):
    """Whether a backup holds what its name records."""

    VERIFIED = "verified"
    DAMAGED = "damaged"
    """Shorter than recorded, or other bytes: never restored."""
    UNVERIFIED = "unverified"
    """Named by an older sessionfix, with nothing recorded to check: restored only when
    named."""
    FUTURE = "future"
    """Verified, but dated ahead of the clock: restored only when named."""


class Backup(Struct, frozen=True):
    """One backup of a session, as found beside it."""

    path: Path
    taken: datetime
    """When the run that kept it replaced the file (UTC, to the second)."""
    serial: int
    """The `-N` that tells apart backups taken in the same second."""
    size: int
    """Its size now (a writer may have appended to it since)."""
    record: BackupRecord | None
    status: Status


class Restored(Struct, frozen=True):
    """What a restore did."""

    path: Path
    source: Backup
    kept: Path | None
    """The backup of the version the restore replaced (None: there was none, or
    it was not kept)."""
    changed: bool
    """False when the session already held the backup's bytes."""
    warning: str | None = None
    """What the user should know: the backup could not be checked, or newer ones that
    do not verify were passed over."""


class _Found(Struct, frozen=True):
    """A file named as a backup of the session, not yet checked."""

    path: Path
    taken: datetime
    serial: int
    record: BackupRecord | None


def list_backups(
    session: str | Path, *, follow_symlinks: bool = False, now: datetime | None = None
) -> list[Backup]:
    """The backups of `session` (of the file it links to, when links are followed),
    newest first, each checked against its record (which reads each one whole)."""
    now = now or datetime.now(UTC)
    found = _found(_backed_up(Path(session), follow_symlinks))
    return [b for candidate in found if (b := _checked(candidate, now)) is not None]


def _backed_up(session: Path, follow_symlinks: bool) -> Path:
    """The path an in-place repair of `session` kept its backups beside: the file a
    followed link names, where the rewrite went."""
    return Path(os.path.realpath(session)) if follow_symlinks else session


def restore(
    session: str | Path,
    backup: str | Path | None = None,
    *,
    keep_current: bool = True,
    quiescence: float = DEFAULT_QUIESCENCE,
    force: bool = False,
    follow_symlinks: bool = False,
    break_stale_lock: bool = False,
    now: datetime | None = None,
) -> Restored:
    """Put back the newest verified backup of `session` (or the one named `backup`); with
    `follow_symlinks`, of the file a link names, beside which its repair kept them.

    The guards of an in-place repair apply (locks, quiescence, links, other processes
    holding the session open for writing), except that a session that still holds
    exactly what the last sessionfix run wrote is not held back by the quiescence
    window. A damaged backup is refused. The version replaced is kept as a backup unless
    `keep_current` is false; a session that no longer exists is created again.
    """
    refuse_link(Path(session), follow_symlinks=follow_symlinks)
    session = _backed_up(Path(session), follow_symlinks)
    now = now or datetime.now(UTC)
    found = _found(session)
    chosen, warning = _choose(session, found, backup, now)
    try:
        restored = _restore(
            session,
            chosen,
            lambda: _newest_verified(found, now),
            keep_current=keep_current,
            quiescence=quiescence,
            force=force,
            follow_symlinks=follow_symlinks,
            break_stale_lock=break_stale_lock,
        )
    except OSError as exc:
        raise WriteFailed(f"{session}: cannot restore ({described(exc)})") from None
    return msgspec.structs.replace(restored, warning=warning)


def _found(session: Path) -> list[_Found]:
    """The files named as backups of `session`, newest first by their names."""
    directory = Path(os.path.realpath(session.parent))
    found: list[_Found] = []
    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        raise InputError(f"{directory}: cannot list ({described(exc)})") from None
    for entry in entries:
        name = read_backup_name(session.name, entry.name)
        if name is None:
            continue
        with suppress(OSError):
            if entry.is_file(follow_symlinks=False):
                found.append(_Found(Path(entry.path), name.taken, name.serial, name.record))
    return sorted(found, key=lambda b: (b.taken, b.serial), reverse=True)


def _checked(found: _Found, now: datetime) -> Backup | None:
    """`found` with its status (None when it is gone, or no longer a regular file)."""
    try:
        # Never through a link, never waiting on a FIFO put in its place meanwhile.
        fd = os.open(found.path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            size = st.st_size
            record = found.record
            if record is None:
                status = Status.UNVERIFIED
            elif file_digest(handle, record.size) != record.digest:
                status = Status.DAMAGED
            elif found.taken > now + FUTURE_SKEW:
                status = Status.FUTURE
            else:
                status = Status.VERIFIED
    except OSError:
        return None
    return Backup(found.path, found.taken, found.serial, size, found.record, status)


def _choose(
    session: Path, found: list[_Found], backup: str | Path | None, now: datetime
) -> tuple[Backup, str | None]:
    """The backup to restore, and a warning to give with it."""
    if backup is None:
        passed = 0
        for candidate in found:
            checked = _checked(candidate, now)
            if checked is None:
                continue
            if checked.status is Status.VERIFIED:
                warning = None
                if passed:
                    warning = (
                        f"passed over {passed} newer backup(s) that do not verify or are dated "
                        "ahead of the clock (restore --list shows them)"
                    )
                return checked, warning
            passed += 1
        if not passed:
            raise NoBackup(f"{session}: no sessionfix backup beside it")
        raise NoBackup(
            f"{session}: no verified sessionfix backup beside it ({passed} that do not "
            "verify: restore --list shows them; --backup NAME restores an unverified one)"
        )
    wanted = Path(backup).name
    for candidate in found:
        if candidate.path.name == wanted and (checked := _checked(candidate, now)) is not None:
            if checked.status is Status.DAMAGED:
                raise DamagedBackup(f"{session}: {_damage(checked)}; not restored")
            if checked.status is Status.UNVERIFIED:
                return checked, (
                    f"{wanted} records nothing to check its bytes against (an older "
                    "sessionfix named it); restored as it is"
                )
            return checked, None
    raise NoBackup(f"{session}: no backup named {wanted} beside it")


def _damage(backup: Backup) -> str:
    """What is wrong with a damaged backup, in a few words."""
    assert backup.record is not None
    name, recorded = backup.path.name, backup.record.size
    if backup.size < recorded:
        return (
            f"{name} is damaged (it holds {backup.size} of the {recorded} bytes its name records)"
        )
    return f"{name} is damaged (its bytes are not those its name records)"


def _newest_verified(found: list[_Found], now: datetime) -> Backup | None:
    """The backup the last sessionfix run kept: its record says what that run wrote."""
    for candidate in found:
        checked = _checked(candidate, now)
        if checked is not None and checked.status is Status.VERIFIED:
            return checked
    return None


def _restore(
    session: Path,
    chosen: Backup,
    last_run: Callable[[], Backup | None],
    *,
    keep_current: bool,
    quiescence: float,
    force: bool,
    follow_symlinks: bool,
    break_stale_lock: bool,
) -> Restored:
    if not os.path.lexists(session):
        with sidecar_lock(Path(os.path.realpath(session.parent)) / session.name):
            return _recreate(session, chosen)
    original = snapshot(session, allow_hard_links=force, follow_symlinks=follow_symlinks)
    if os.path.samefile(original.path, chosen.path):
        return Restored(session, chosen, None, changed=False)
    path = original.path
    own = OwnWrite(path, last_run)
    with rewrite_access(
        path,
        shown=session,
        quiescence=quiescence,
        fmt=Format.AUTO,
        break_stale_lock=break_stale_lock,
        allow_writers=force,
        written_by_us=own,
    ):
        original = snapshot(session, allow_hard_links=force, follow_symlinks=follow_symlinks)
        if own.seen is not None and not original.matches(own.seen):
            raise FileChanged(
                f"{session}: changed while being restored; left untouched", grew=False
            )
        wanted = _verified_digest(session, chosen)
        if original.size == chosen.size and _digest(original.path) == wanted:
            return Restored(session, chosen, None, changed=False)

        def verify(temp: Path) -> None:
            if _digest(temp) != wanted:
                raise WriteFailed(f"{session}: the restored copy differs from {chosen.path}")

        kept = replace_file(
            original,
            _blocks(chosen.path),
            backup=keep_current,
            verify=verify,
            allow_writers=force,
        )
    return Restored(session, chosen, kept, changed=True)


class OwnWrite:
    """Whether a session holds exactly the bytes the last sessionfix run wrote to it, as
    its newest verified backup records them: then its recent change is no sign of an
    agent writing. The state the file was seen in is kept (`seen`), so that the caller
    can require the file it goes on to read to be that one."""

    def __init__(self, session: Path, last_run: Callable[[], Backup | None]) -> None:
        self.path = session
        self._last_run = last_run
        self.seen: os.stat_result | None = None

    @classmethod
    def of(cls, session: Path, now: datetime | None = None) -> OwnWrite:
        """The check for `session` (resolved), by the backups beside it."""
        found = _found(session)
        return cls(session, lambda: _newest_verified(found, now or datetime.now(UTC)))

    def __call__(self) -> bool:
        newest = self._last_run()
        if newest is None or newest.record is None:
            return False
        try:
            with open(self.path, "rb") as handle:
                before = os.fstat(handle.fileno())
                held = file_digest(handle)
                after = os.fstat(handle.fileno())
        except OSError:
            return False
        if held != newest.record.result or _state(after) != _state(before):
            return False
        self.seen = before
        return True


def _state(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns


def _verified_digest(session: Path, backup: Backup) -> str:
    """The digest of the whole backup, checking again (under the locks, in the same
    read) that it holds what its name records."""
    whole = xxhash.xxh3_64()
    recorded = xxhash.xxh3_64()
    left = 0 if backup.record is None else backup.record.size
    for block in _blocks(backup.path):
        whole.update(block)
        if left:
            recorded.update(block[:left])
            left -= min(left, len(block))
    if backup.record is not None and (left or recorded.hexdigest() != backup.record.digest):
        raise DamagedBackup(
            f"{session}: {backup.path.name} changed since it was checked; not restored"
        )
    return whole.hexdigest()


def _recreate(session: Path, source: Backup) -> Restored:
    """The session is gone: write the backup's bytes to its path, never over a file."""
    target = Path(os.path.realpath(session.parent)) / session.name
    remove_dead_temps(target)
    wanted = _verified_digest(session, source)
    st = os.stat(source.path)
    temp = write_temp(target, _blocks(source.path), st.st_mode & 0o7777, st.st_uid, st.st_gid)
    try:
        if _digest(temp) != wanted:
            raise WriteFailed(f"{session}: the restored copy differs from {source.path}")
        os.link(temp, target)  # fails rather than replace a file that appeared meanwhile
        sync_directory(target.parent)
    except FileExistsError:
        raise SessionfixError(f"{session}: appeared while being restored; left untouched") from None
    finally:
        with suppress(OSError):
            temp.unlink()
    return Restored(session, source, None, changed=True)


def _blocks(path: Path) -> Iterator[bytes]:
    try:
        with open(path, "rb") as handle:
            while block := handle.read(_BLOCK):
                yield block
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({described(exc)})") from None


def _digest(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return file_digest(handle)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({described(exc)})") from None
