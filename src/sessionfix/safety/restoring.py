"""`restore`, wherever the session lives: a session file, whose backups lie beside it
(`backups`), or a session of a store, whose backups the store keeps; either the
backups listed, or one of them put back.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from msgspec import Struct, field

from sessionfix import stores
from sessionfix.errors import UsageError
from sessionfix.safety import backups
from sessionfix.settings import DEFAULT_QUIESCENCE


class RestoreRequest(Struct, frozen=True):
    """What `restore` is asked: the session (a file, or a store and one of its sessions),
    and whether to list its backups or which one to put back, under which guards."""

    session: Path
    store_session: str | None = None
    """In a store: the session (needed when the store holds several)."""
    backup: str | None = None
    """The backup to put back, by its file name; None: the newest that verifies."""
    list_only: bool = False
    keep_current: bool = True
    quiescence: float = DEFAULT_QUIESCENCE
    force: bool = False
    follow_symlinks: bool = False
    break_stale_lock: bool = False


class BackupListing(Struct, frozen=True):
    """The backups of a session, newest first, each verified against its record."""

    session: Path
    files: list[backups.Backup] = field(default_factory=list)
    """Of a session file: the backups beside it."""
    stored: list[stores.StoreBackup] | None = None
    """Of a store: the backups it keeps of the session (of every session when none is
    named); None for a session file."""
    store_session: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.stored if self.stored is not None else self.files)


class RestoreDone(Struct, frozen=True):
    """What a restore did."""

    session: Path
    source: str
    """The file name of the backup put back."""
    changed: bool = True
    """False when the session already held the backup's bytes."""
    kept: str | None = None
    """The file name of the backup of the version replaced (None: none kept)."""
    warning: str | None = None
    store_session: str | None = None
    """In a store: the session restored."""


def run_restore(request: RestoreRequest) -> BackupListing | RestoreDone:
    """List the backups of `request.session` or put one back, a file's or a store's."""
    if stores.declared_store(request.session) is not None:
        return _restore_stored(request)
    if request.store_session is not None:
        raise UsageError(f"{request.session}: --session names a session of a store; this is a file")
    if request.list_only:
        if request.backup is not None:
            raise UsageError("--list and --backup cannot be combined")
        found = backups.list_backups(request.session, follow_symlinks=request.follow_symlinks)
        return BackupListing(request.session, files=found)
    restored = backups.restore(
        request.session,
        request.backup,
        keep_current=request.keep_current,
        quiescence=request.quiescence,
        force=request.force,
        follow_symlinks=request.follow_symlinks,
        break_stale_lock=request.break_stale_lock,
    )
    return RestoreDone(
        request.session,
        restored.source.path.name,
        changed=restored.changed,
        kept=restored.kept.name if restored.kept is not None else None,
        warning=restored.warning,
    )


def _restore_stored(request: RestoreRequest) -> BackupListing | RestoreDone:
    """One session of a store: its rows put back from a backup of them, or its backups
    listed."""
    path = request.session
    session_id = request.store_session
    with contextlib.closing(stores.open_store(path)) as store:
        if session_id is None and not request.list_only:
            sessions = store.sessions()
            if len(sessions) != 1:
                raise UsageError(f"{path}: holds {len(sessions)} sessions; name one with --session")
            session_id = sessions[0].id
        if request.list_only:
            if request.backup is not None:
                raise UsageError("--list and --backup cannot be combined")
            return BackupListing(path, stored=store.backups(session_id), store_session=session_id)
        assert session_id is not None, "a restore names its session"
        restored = store.restore(session_id, request.backup, keep_current=request.keep_current)
    return RestoreDone(path, restored.name, store_session=session_id)
