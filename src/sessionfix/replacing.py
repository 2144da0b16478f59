"""The steps every safe rewrite of a file shares, whoever makes it (a session file's
writer in `safety`, a format's writer of a whole document): a synced temp file beside
the target under a name no agent reads, the owner kept, the folder synced after the
rename, and the count of the target's other hard links, which a rename would split off.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import BinaryIO, Final

from sessionfix.errors import described

TEMP_MARK: Final = ".sessionfix-tmp-"
BACKUP_MARK: Final = ".sessionfix-bak-"


def temp_path(target: Path) -> Path:
    """The temp file beside `target`: a dot file that never ends as a session file does."""
    return target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}")


def write_temp(target: Path, chunks: Iterable[bytes], mode: int, uid: int, gid: int) -> Path:
    """Write `chunks` to a new temp file beside `target`, synced, with `mode` and (best
    effort) the owner. On failure the temp file is gone, unless its name was taken by a
    file this call did not create, which it leaves alone."""
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


def chown_best_effort(path: Path, uid: int, gid: int) -> None:
    """Keep the owner where allowed, else at least the group; never fail on it."""
    for owner in ((uid, gid), (-1, gid)):
        try:
            os.chown(path, *owner)
        except OSError:
            continue
        return


def sync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (not possible on every platform)."""
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


def other_hard_links(target: Path, st: os.stat_result) -> int:
    """How many names the file at `target` (resolved; `st` its stat) has besides its own
    and its sessionfix backups and temp files (a run that died after linking a backup
    leaves one that keeps the original, and splitting from it is the point; a restore
    that died leaves its temp file linked)."""
    if st.st_nlink <= 1:
        return 0
    prefixes = (target.name + BACKUP_MARK, f".{target.name}{TEMP_MARK}")
    own = 0
    with suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            if entry.name.startswith(prefixes):
                with suppress(OSError):
                    other = entry.stat(follow_symlinks=False)
                    if (other.st_ino, other.st_dev) == (st.st_ino, st.st_dev):
                        own += 1
    return st.st_nlink - 1 - own


def open_for_writing(path: Path, flags: int = 0, mode: int = 0o666) -> BinaryIO:
    """Open `path` for writing (with extra `flags`, e.g. to create it) without waiting for
    a reader that a FIFO may never get: that raises OSError with ENXIO, which
    `cannot_write` words as such."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | flags, mode)
    handle = open(fd, "wb")  # noqa: SIM115  (returned; its only owner, never closed twice)
    try:
        os.set_blocking(fd, True)
    except BaseException:
        handle.close()
        raise
    return handle


def cannot_write(error: OSError) -> str:
    """Why a file could not be opened for writing, in a few words."""
    return "no process reads it" if error.errno == errno.ENXIO else described(error)
