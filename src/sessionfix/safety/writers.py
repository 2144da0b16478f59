"""Other processes that hold a file open for writing, found through Linux's `/proc`.

An agent that keeps its session open and appends after an in-place rewrite writes to
the replaced inode, which is then only the backup. Where there is no `/proc` (macOS,
Windows) nothing is found; processes whose descriptors may not be read (another user's,
without privilege) are skipped.
"""

from __future__ import annotations

import os
from typing import Final

from msgspec import Struct

PROC: Final = "/proc"
_WRITE_MODES: Final = frozenset({os.O_WRONLY, os.O_RDWR})


class Writer(Struct, frozen=True):
    """A process with a descriptor open for writing on the file."""

    pid: int
    name: str
    """Its command name, control characters escaped (it is shown on one line)."""


def find_writer(name: str, device: int, inode: int) -> Writer | None:
    """The first other process holding the file (`device`, `inode`), whose current name
    is `name`, open for writing (write-only or read-write), or None."""
    me = str(os.getpid())
    ending = "/" + name
    try:
        processes = os.listdir(PROC)
    except OSError:
        return None
    for pid in processes:
        if not pid.isdigit() or pid == me:
            continue
        try:
            fds = os.open(f"{PROC}/{pid}/fd", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # gone, or not ours to inspect
            continue
        try:
            for fd in os.listdir(fds):
                # The link's text first: it costs no access to the file's filesystem
                # (a stat of every descriptor would touch sockets, devices, NFS...).
                try:
                    if not os.readlink(fd, dir_fd=fds).endswith(ending):
                        continue
                    st = os.stat(fd, dir_fd=fds)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (device, inode) and _writes(pid, fd):
                    return Writer(int(pid), _command(pid))
        except OSError:
            continue
        finally:
            os.close(fds)
    return None


def _writes(pid: str, fd: str) -> bool:
    """Whether the descriptor's open flags (octal, `flags:` in its fdinfo) allow writing."""
    try:
        with open(f"{PROC}/{pid}/fdinfo/{fd}", "rb") as handle:
            text = handle.read(4096)
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith(b"flags:"):
            try:
                return int(line[6:].strip(), 8) & os.O_ACCMODE in _WRITE_MODES
            except ValueError:
                return False
    return False


def _command(pid: str) -> str:
    """The process's command name, or the start of its command line."""
    for source in ("comm", "cmdline"):
        try:
            with open(f"{PROC}/{pid}/{source}", "rb") as handle:
                raw = handle.read(256)
        except OSError:
            continue
        # comm ends with a newline (and may hold others); cmdline's arguments end in NULs.
        raw = raw.removesuffix(b"\n") if source == "comm" else raw.split(b"\0", 1)[0]
        text = raw.decode("utf-8", "replace")
        if text:
            return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)
    return "?"
