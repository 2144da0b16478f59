"""Replacing a session file safely (cli-and-safety.md §8.2).

The new content goes to a temp file beside the target (never named `*.jsonl`), is
flushed to disk with the target's mode and, best effort, its owner; the file is checked
for changes made since it was read and for other processes holding it open for writing;
the original is kept as a hard-linked backup; then one `os.replace` swaps the new file in,
and the directory is synced so that the rename survives a crash. At every moment the path
holds either the original or the new bytes.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Final

import xxhash

from sessionfix.errors import SessionfixError, described
from sessionfix.writers import find_writer

TEMP_MARK = ".sessionfix-tmp-"
BACKUP_MARK = ".sessionfix-bak-"


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


@dataclass(frozen=True, slots=True)
class Snapshot:
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


def snapshot(
    path: Path, *, follow_symlinks: bool = False, allow_hard_links: bool = False
) -> Snapshot:
    """Check that `path` may be rewritten in place and record its state (steps 1-2).

    Symbolic links are refused unless followed (the rename would replace the link
    itself); so are files with other hard links (the other names would keep the old
    content) unless allowed, and anything that is not a regular file.
    """
    if path.is_symlink() and not follow_symlinks:
        raise WriteRefused(f"{path}: is a symbolic link (refusing to replace it)")
    resolved = Path(os.path.realpath(path))
    try:
        st = os.stat(resolved)
    except OSError as exc:
        raise WriteRefused(f"{path}: {described(exc)}") from None
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(f"{path}: not a regular file")
    if st.st_nlink > 1 and not allow_hard_links:
        others = st.st_nlink - 1 - _backup_links(resolved, st)
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


def _backup_links(target: Path, st: os.stat_result) -> int:
    """How many of the file's names are its own sessionfix backups or temp files (a run
    that died after step 9 leaves a backup that keeps the original, and splitting from
    it is the point; a restore that died leaves its temp file linked)."""
    prefixes = (target.name + BACKUP_MARK, f".{target.name}{TEMP_MARK}")
    count = 0
    with suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            if entry.name.startswith(prefixes):
                with suppress(OSError):
                    other = entry.stat(follow_symlinks=False)
                    if (other.st_ino, other.st_dev) == (st.st_ino, st.st_dev):
                        count += 1
    return count


def replace_file(
    original: Snapshot,
    chunks: Iterable[bytes],
    *,
    backup: bool = True,
    now: datetime | None = None,
    verify: Callable[[Path], None] | None = None,
    allow_writers: bool = False,
) -> Path | None:
    """Replace the file `original` was taken of with `chunks`; return the backup's path.

    `verify` is called with the temp file once it is complete and synced; if it raises,
    nothing is replaced. Another process holding the file open for writing refuses the
    swap unless `allow_writers`.

    Raises `FileChanged` (nothing written) when the file is not what the snapshot saw,
    `WriteFailed` when the new content cannot be written (a full disk). Any failure
    leaves the original in place and no temp file behind.
    """
    target = original.path
    try:
        temp = write_temp(target, chunks, original.mode, original.uid, original.gid)
    except OSError as exc:
        raise WriteFailed(
            f"{target}: cannot write the new file beside it ({described(exc)}); left untouched"
        ) from None
    try:
        if verify is not None:
            verify(temp)
    except BaseException:
        with suppress(OSError):
            temp.unlink()
        raise
    with signals_deferred():
        backup_path = _swap(original, temp, backup, now, allow_writers)
    # A signal that arrived during the swap is raised here, with nothing left to undo.
    sync_directory(target.parent)
    return backup_path


def _swap(
    original: Snapshot, temp: Path, backup: bool, now: datetime | None, allow_writers: bool
) -> Path | None:
    """Steps 8-10: backup link, last checks, rename; undone entirely if any fails."""
    target = original.path
    backup_path: Path | None = None
    try:
        if backup:
            try:
                backup_path = _link_backup(target, now or datetime.now(UTC))
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


_DEFERRED: Final = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back (where the platform can) until the block is
    done, so that an interrupt cannot land between a rename and the bookkeeping of it."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not on Windows
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def write_temp(target: Path, chunks: Iterable[bytes], mode: int, uid: int, gid: int) -> Path:
    """Steps 4-7: write `chunks` to a new temp file beside `target`, synced, with `mode`
    and (best effort) the owner. On failure the temp file is gone, unless its name was
    taken by a file this call did not create, which it leaves alone."""
    temp = temp_path(target)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
    except BaseException:
        with suppress(OSError):
            temp.unlink()
        raise
    chown_best_effort(temp, uid, gid)
    return temp


def file_digest(handle: BinaryIO, size: int | None = None) -> bytes:
    """xxh3-128 of an open file's first `size` bytes (all of it by default), read in
    pieces; a file shorter than `size` gets a digest no full read can have."""
    digest = xxhash.xxh3_128()
    handle.seek(0)
    left = size
    while left is None or left > 0:
        block = handle.read(_DIGEST_BLOCK if left is None else min(left, _DIGEST_BLOCK))
        if not block:
            return b"short" if left else digest.digest()
        digest.update(block)
        if left is not None:
            left -= len(block)
    return digest.digest()


_DIGEST_BLOCK: Final = 1 << 20


def temp_path(target: Path) -> Path:
    """Step 4: the temp file beside `target`, a dot file that never ends in `.jsonl`."""
    return target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}")


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


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def backup_name(target: Path, when: datetime) -> str:
    stamp = when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{target.name}{BACKUP_MARK}{stamp}"


def _link_backup(target: Path, when: datetime) -> Path:
    """Step 9: a hard link to the original inode, `-N` added when the name is taken."""
    base = backup_name(target, when)
    for attempt in range(1000):
        candidate = target.with_name(base if attempt == 0 else f"{base}-{attempt}")
        try:
            os.link(target, candidate)
        except FileExistsError:
            continue
        except OSError as exc:
            raise WriteFailed(
                f"{target}: cannot keep a backup ({described(exc)}); left untouched"
            ) from None
        return candidate
    raise WriteRefused(f"{target}: too many backups named {base}")


def chown_best_effort(path: Path, uid: int, gid: int) -> None:
    """Step 7: keep the owner where allowed, else at least the group; never fail on it."""
    for owner in ((uid, gid), (-1, gid)):
        try:
            os.chown(path, *owner)
        except OSError:
            continue
        return


def sync_directory(directory: Path) -> None:
    """Step 11: make the rename durable (not possible on every platform)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
