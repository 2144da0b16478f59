"""The backups an in-place repair keeps, and putting one back.

A backup is a hard link to the replaced file named `<name>.sessionfix-bak-<UTC stamp>`,
with `-N` added when the name was taken (cli-and-safety.md §8.2 step 9). Restoring one
writes its bytes over the session by the same safe-replace recipe, so the version it
replaces becomes a backup in its turn: a restore can itself be undone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.formats import is_openclaw_location
from sessionfix.locks import rewrite_access, sidecar_lock
from sessionfix.settings import DEFAULT_QUIESCENCE
from sessionfix.writing import (
    BACKUP_MARK,
    WriteFailed,
    file_digest,
    remove_dead_temps,
    replace_file,
    snapshot,
    sync_directory,
    write_temp,
)

_STAMP: Final = re.compile(r"(\d{8}T\d{6}Z)(?:-(\d+))?")
_BLOCK: Final = 1 << 20


class NoBackup(SessionfixError):
    """There is no backup to restore (or not the one named)."""


@dataclass(frozen=True, slots=True)
class Backup:
    """One backup of a session, as found beside it."""

    path: Path
    taken: datetime
    """When the repair that kept it ran (UTC, to the second)."""
    serial: int
    """The `-N` that tells apart backups taken in the same second."""
    size: int


@dataclass(frozen=True, slots=True)
class Restored:
    """What a restore did."""

    path: Path
    source: Backup
    kept: Path | None
    """The backup of the version the restore replaced (None: there was none, or
    it was not kept)."""
    changed: bool
    """False when the session already held the backup's bytes."""


def list_backups(session: str | Path) -> list[Backup]:
    """The backups of `session`, newest first."""
    session = Path(session)
    directory = Path(os.path.realpath(session.parent))
    prefix = session.name + BACKUP_MARK
    found: list[Backup] = []
    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        raise InputError(f"{directory}: cannot list ({described(exc)})") from None
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        match = _STAMP.fullmatch(entry.name[len(prefix) :])
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        try:
            taken = datetime.strptime(match[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            size = entry.stat().st_size
        except (ValueError, OSError):  # not a real stamp, or gone meanwhile
            continue
        found.append(Backup(Path(entry.path), taken, int(match[2] or 0), size))
    return sorted(found, key=lambda b: (b.taken, b.serial), reverse=True)


def restore(
    session: str | Path,
    backup: str | Path | None = None,
    *,
    keep_current: bool = True,
    quiescence: float = DEFAULT_QUIESCENCE,
    force: bool = False,
    follow_symlinks: bool = False,
    break_stale_lock: bool = False,
) -> Restored:
    """Put back the newest backup of `session` (or the one named `backup`).

    The guards of an in-place repair apply (locks, quiescence, links, other processes
    holding the session open for writing). The version
    replaced is kept as a backup unless `keep_current` is false; a session that no
    longer exists is created again from the backup.
    """
    session = Path(session)
    try:
        return _restore(
            session,
            _choose(session, backup),
            keep_current=keep_current,
            quiescence=quiescence,
            force=force,
            follow_symlinks=follow_symlinks,
            break_stale_lock=break_stale_lock,
        )
    except OSError as exc:
        raise WriteFailed(f"{session}: cannot restore ({described(exc)})") from None


def _restore(
    session: Path,
    chosen: Backup,
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
    with rewrite_access(
        original.path,
        shown=session,
        quiescence=quiescence,
        openclaw=is_openclaw_location(original.path),
        break_stale_lock=break_stale_lock,
        allow_writers=force,
    ):
        original = snapshot(session, allow_hard_links=force, follow_symlinks=follow_symlinks)
        wanted = _digest(chosen.path)
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


def _choose(session: Path, backup: str | Path | None) -> Backup:
    backups = list_backups(session)
    if backup is None:
        if not backups:
            raise NoBackup(f"{session}: no sessionfix backup beside it")
        return backups[0]
    wanted = Path(backup).name
    for candidate in backups:
        if candidate.path.name == wanted:
            return candidate
    raise NoBackup(f"{session}: no backup named {wanted} beside it")


def _recreate(session: Path, source: Backup) -> Restored:
    """The session is gone: write the backup's bytes to its path, never over a file."""
    target = Path(os.path.realpath(session.parent)) / session.name
    remove_dead_temps(target)
    st = os.stat(source.path)
    temp = write_temp(target, _blocks(source.path), st.st_mode & 0o7777, st.st_uid, st.st_gid)
    try:
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


def _digest(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            return file_digest(handle)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({described(exc)})") from None
