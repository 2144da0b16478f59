"""Replacing a session file safely (cli-and-safety.md §8.2).

The new content goes to a temp file beside the target (never named `*.jsonl`), is
flushed to disk with the target's mode and, best effort, its owner; the file is checked
for changes made since it was read and for other processes holding it open for writing;
the original is kept as a hard-linked backup whose name records what it holds and what
replaced it; then one `os.replace` swaps the new file in, and the directory is synced so
that the rename survives a crash. At every moment the path holds either the original or
the new bytes.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Final, overload

import xxhash
from msgspec import Struct

from sessionfix.errors import SessionfixError, described
from sessionfix.interrupts import signals_deferred
from sessionfix.replacing import (
    BACKUP_MARK,
    TEMP_MARK,
    other_hard_links,
    sync_directory,
    write_temp,
)
from sessionfix.safety.writers import find_writer


class WriteRefused(SessionfixError):
    """The file may not be rewritten (a link, not a regular file, changed meanwhile...)."""


class WriteFailed(SessionfixError):
    """Writing the new content failed (a full disk, an I/O error): the original stays."""


class OpenForWriting(WriteRefused):
    """Another process holds the file open for writing: what it writes after a swap would
    reach only the backup."""


class FileChanged(WriteRefused):
    """The file changed after it was read: nothing was written."""

    def __init__(self, message: str, *, grew: bool) -> None:
        super().__init__(message)
        self.grew = grew
        """Same inode, larger: possibly only appended to. A caller that checks the bytes it
        read are still the file's first bytes may repair the grown file again."""


class Snapshot(Struct, frozen=True):
    """What a file was when it was read, to keep and to compare against before replacing."""

    path: Path
    mode: int
    uid: int
    gid: int
    inode: int
    size: int
    mtime_ns: int

    def matches(self, st: os.stat_result) -> bool:
        return (st.st_ino, st.st_size, st.st_mtime_ns) == (self.inode, self.size, self.mtime_ns)


def refuse_link(path: Path, *, follow_symlinks: bool) -> None:
    """Refuse to rewrite a symbolic link unless it is followed: the rename would replace
    the link itself."""
    if path.is_symlink() and not follow_symlinks:
        raise WriteRefused(f"{path}: is a symbolic link (refusing to replace it)")


def snapshot(
    path: Path, *, follow_symlinks: bool = False, allow_hard_links: bool = False
) -> Snapshot:
    """Check that `path` may be rewritten in place and record its state (steps 1-2).

    Symbolic links are refused unless followed (the rename would replace the link
    itself); so are files with other hard links (the other names would keep the old
    content) unless allowed, and anything that is not a regular file.
    """
    refuse_link(path, follow_symlinks=follow_symlinks)
    resolved = Path(os.path.realpath(path))
    try:
        st = os.stat(resolved)
    except OSError as exc:
        raise WriteRefused(f"{path}: {described(exc)}") from None
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(f"{path}: not a regular file")
    if not allow_hard_links:
        others = other_hard_links(resolved, st)
        if others > 0:
            raise WriteRefused(
                f"{path}: has {others} other hard link(s); a rewrite would split them"
            )
    return Snapshot(
        resolved,
        stat.S_IMODE(st.st_mode),
        st.st_uid,
        st.st_gid,
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
    )


def replace_file(
    original: Snapshot,
    chunks: Iterable[bytes],
    *,
    backup: bool = True,
    now: datetime | None = None,
    verify: Callable[[Path], None] | None = None,
    original_digest: str | None = None,
    allow_writers: bool = False,
) -> Path | None:
    """Replace the file `original` was taken of with `chunks`; return the backup's path.

    `verify` is called with the temp file once it is complete and synced; if it raises,
    nothing is replaced. The backup's name records `original_digest` (the `file_digest`
    of the original's bytes, computed here when not given) and that of the new content.
    Another process holding the file open for writing refuses the swap unless
    `allow_writers`.

    Raises `FileChanged` (nothing written) when the file is not what the snapshot saw,
    `WriteFailed` when the new content cannot be written (a full disk). Any failure
    leaves the original in place and no temp file behind.
    """
    target = original.path
    if backup and original_digest is None:
        original_digest = _snapshot_digest(original)
    written = xxhash.xxh3_64()

    def hashed() -> Iterator[bytes]:
        for chunk in chunks:
            written.update(chunk)
            yield chunk

    try:
        temp = write_temp(target, hashed(), original.mode, original.uid, original.gid)
        as_written = os.stat(temp)
    except OSError as exc:
        raise WriteFailed(
            f"{target}: cannot write the new file beside it ({described(exc)}); left untouched"
        ) from None
    try:
        if verify is not None:
            verify(temp)
        record = None
        if original_digest is not None:
            record = BackupRecord(
                original.size, original_digest, _digest_after(temp, as_written, written)
            )
    except BaseException:
        with suppress(OSError):
            temp.unlink()
        raise
    with signals_deferred():
        backup_path = _swap(original, temp, record if backup else None, now, allow_writers)
    # A signal that arrived during the swap is raised here, with nothing left to undo.
    sync_directory(target.parent)
    return backup_path


def _snapshot_digest(original: Snapshot) -> str:
    """`file_digest` of the file as the snapshot saw it (`FileChanged` when it is not)."""
    found = None
    try:
        with open(original.path, "rb") as handle:
            if original.matches(os.fstat(handle.fileno())):
                found = file_digest(handle, original.size)
    except OSError as exc:
        _check_unchanged(original)
        raise WriteFailed(
            f"{original.path}: cannot read it ({described(exc)}); left untouched"
        ) from None
    if found is None:
        _check_unchanged(original)
        raise FileChanged(f"{original.path}: changed while being read; left untouched", grew=False)
    return found


def _digest_after(temp: Path, as_written: os.stat_result, written: xxhash.xxh3_64) -> str:
    """The digest of the temp file: the one taken while writing it, unless `verify`
    replaced it since (a second repair pass), then read again."""
    current = os.stat(temp)
    if (current.st_ino, current.st_size, current.st_mtime_ns) == (
        as_written.st_ino,
        as_written.st_size,
        as_written.st_mtime_ns,
    ):
        return written.hexdigest()
    with open(temp, "rb") as handle:
        return file_digest(handle)


def _swap(
    original: Snapshot,
    temp: Path,
    record: BackupRecord | None,
    now: datetime | None,
    allow_writers: bool,
) -> Path | None:
    """Steps 8-10: backup link, last checks, rename; undone entirely if any fails."""
    target = original.path
    backup_path: Path | None = None
    try:
        if record is not None:
            try:
                backup_path = _link_backup(target, now or datetime.now(UTC), record)
            except WriteFailed:
                _check_unchanged(original)  # a file gone meanwhile is a change
                raise
        # Checked as late as possible: a write after this point reaches the old inode.
        if not allow_writers:
            refuse_writers(target)
        _check_unchanged(original)
        try:
            os.replace(temp, target)
        except OSError as exc:
            raise WriteFailed(
                f"{target}: cannot replace it ({described(exc)}); left untouched"
            ) from None
    except BaseException:
        with suppress(OSError):
            temp.unlink()
        if backup_path is not None:
            with suppress(OSError):
                backup_path.unlink()
        raise
    return backup_path


def refuse_writers(path: Path, shown: Path | None = None) -> None:
    """Raise `OpenForWriting` when another process holds the file at `path` (resolved)
    open for writing."""
    try:
        st = os.stat(path)
    except OSError:
        return  # gone: the check of changes says so
    writer = find_writer(path.name, st.st_dev, st.st_ino)
    if writer is not None:
        raise OpenForWriting(
            f"{shown or path}: open for writing by pid {writer.pid} ({writer.name}); an agent "
            "may still append to it (--force to rewrite anyway)"
        )


@overload
def file_digest(handle: BinaryIO) -> str: ...


@overload
def file_digest(handle: BinaryIO, size: int) -> str | None: ...


def file_digest(handle: BinaryIO, size: int | None = None) -> str | None:
    """xxh3-64 (hex) of an open file's first `size` bytes (all of it by default), read in
    pieces; None when the file is shorter than `size`."""
    digest = xxhash.xxh3_64()
    handle.seek(0)
    left = size
    # One buffer read into again and again: a fresh block per read would be mapped and
    # faulted in anew each time (large blocks bypass the heap, see cli.run).
    buffer = bytearray(_DIGEST_BLOCK)
    with memoryview(buffer) as whole:
        while left is None or left > 0:
            room = whole if left is None or left >= _DIGEST_BLOCK else whole[:left]
            count = handle.readinto(room)  # type: ignore[attr-defined]
            if not count:
                return None if left else digest.hexdigest()
            digest.update(room[:count])
            if left is not None:
                left -= count
    return digest.hexdigest()


_DIGEST_BLOCK: Final = 1 << 20


def _check_unchanged(original: Snapshot) -> None:
    """Step 8: the file must still be the one that was read."""
    try:
        st = os.stat(original.path)
    except OSError as exc:
        raise FileChanged(
            f"{original.path}: gone while being repaired ({exc.strerror})", grew=False
        ) from None
    if original.matches(st):
        return
    grew = st.st_ino == original.inode and st.st_size > original.size
    what = "grew" if grew else "changed"
    raise FileChanged(f"{original.path}: {what} while being repaired; left untouched", grew=grew)


def remove_dead_temps(target: Path) -> list[Path]:
    """Delete the temp files of `target` left by sessionfix runs that died (a crash, a
    SIGKILL): they hold nothing that is not in the session or its backup. Call it only
    under the sidecar lock."""
    prefix = f".{target.name}{TEMP_MARK}"
    removed: list[Path] = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        pid_text = name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        # Under the sidecar lock no run of this process is writing one: its own pid's
        # leftover is from a dead process whose pid was reused.
        if pid != os.getpid() and process_alive(pid):
            continue
        leftover = target.with_name(name)
        with suppress(OSError):
            leftover.unlink()
            removed.append(leftover)
    return removed


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file (False when either cannot be looked at)."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class BackupRecord(Struct, frozen=True):
    """What a backup's name records: its first `size` bytes have the `file_digest`
    `digest` (a writer may append to the replaced file later), and `result` is the
    `file_digest` of the content that replaced it."""

    size: int
    digest: str
    result: str


class BackupName(Struct, frozen=True):
    """A backup's name, read: `<session>.sessionfix-bak-<UTC stamp>[-N][-<size>-<digest>-
    <result>]` (the record is absent from the names of sessionfix 0.1 and earlier)."""

    taken: datetime
    serial: int
    """The `-N` that tells apart backups taken in the same second."""
    record: BackupRecord | None


_BACKUP_SUFFIX: Final = re.compile(
    r"(\d{8}T\d{6}Z)(?:-(\d{1,9}))?(?:-(\d{1,20})-([0-9a-f]{16})-([0-9a-f]{16}))?"
)
_STAMP_FORMAT: Final = "%Y%m%dT%H%M%SZ"


def backup_name(
    target: Path, when: datetime, record: BackupRecord | None = None, serial: int = 0
) -> str:
    """The name of a backup of `target` taken at `when` (step 9), recording `record`."""
    name = f"{target.name}{BACKUP_MARK}{when.astimezone(UTC).strftime(_STAMP_FORMAT)}"
    if serial:
        name += f"-{serial}"
    if record is not None:
        name += f"-{record.size}-{record.digest}-{record.result}"
    return name


def read_backup_name(session_name: str, name: str) -> BackupName | None:
    """What the name of a backup of the session `session_name` says, or None when it is
    not one."""
    prefix = session_name + BACKUP_MARK
    if not name.startswith(prefix):
        return None
    match = _BACKUP_SUFFIX.fullmatch(name, len(prefix))
    if match is None:
        return None
    try:
        taken = datetime.strptime(match[1], _STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    record = None if match[3] is None else BackupRecord(int(match[3]), match[4], match[5])
    return BackupName(taken, int(match[2] or 0), record)


def _link_backup(target: Path, when: datetime, record: BackupRecord) -> Path:
    """Step 9: a hard link to the original inode, named with what it holds (so that the
    record can never be missing or half-written), `-N` added after the stamp when a
    backup already has it: the serial orders backups taken in the same second."""
    first = _next_serial(target, when)
    for serial in range(first, first + 1000):
        candidate = target.with_name(backup_name(target, when, record, serial))
        try:
            os.link(target, candidate)
        except FileExistsError:
            continue
        except OSError as exc:
            raise WriteFailed(
                f"{target}: cannot keep a backup ({described(exc)}); left untouched"
            ) from None
        return candidate
    raise WriteRefused(f"{target}: too many backups named {backup_name(target, when, record)}")


def _next_serial(target: Path, when: datetime) -> int:
    """The first serial after those of `target`'s backups stamped `when`."""
    stamped = backup_name(target, when)
    serials = [-1]
    with suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            if entry.name.startswith(stamped):
                name = read_backup_name(target.name, entry.name)
                if name is not None:
                    serials.append(name.serial)
    return max(serials) + 1


def record_result(target: Path, backup: Path, result: str) -> Path:
    """Name `target`'s backup anew so that it records `result` as the digest of what
    replaced it (the repair ended with other bytes than its first swap wrote); return
    its path, the old one if that fails. Linked before unlinked: never without a name."""
    name = read_backup_name(target.name, backup.name)
    if name is None or name.record is None or name.record.result == result:
        return backup
    record = BackupRecord(name.record.size, name.record.digest, result)
    renamed = backup.with_name(backup_name(target, name.taken, record, name.serial))
    try:
        os.link(backup, renamed)
    except OSError:
        return backup
    with suppress(OSError):
        backup.unlink()
    return renamed


def set_aside(path: Path, when: datetime | None = None) -> Path | None:
    """Move `path` aside to a backup name beside it (`<name>.sessionfix-bak-<stamp>[-N]`)
    and return that name; None when it is already gone (another session's repair moved
    it). Linked before unlinked: its bytes never go without a name."""
    taken = when or datetime.now(UTC)
    for serial in range(1000):
        backup = path.with_name(backup_name(path, taken, serial=serial))
        try:
            os.link(path, backup)
        except FileExistsError:
            continue
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise WriteFailed(f"{path}: cannot move it aside ({described(exc)})") from None
        try:
            path.unlink()
        except FileNotFoundError:
            # Another run moved it aside meanwhile: its backup keeps these bytes.
            with suppress(OSError):
                backup.unlink()
            return None
        except OSError as exc:
            with suppress(OSError):
                backup.unlink()
            raise WriteFailed(f"{path}: cannot move it aside ({described(exc)})") from None
        sync_directory(path.parent)
        return backup
    raise WriteRefused(f"{path}: too many backups named {backup_name(path, taken)}")
