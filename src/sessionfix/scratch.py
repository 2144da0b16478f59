"""Private temporary folders: where sessionfix writes a copy it reads and then discards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sessionfix.errors import InputError, described


@contextmanager
def private_folder(purpose: str) -> Iterator[Path]:
    """A new folder in the system's temporary folder that only this user may enter,
    removed with all it holds when the block ends. `purpose` begins the one line said
    when it cannot be made: `PATH: cannot decompress it` (then `into FOLDER (why)`)."""
    import shutil
    import tempfile

    try:
        folder = Path(tempfile.mkdtemp(prefix="sessionfix-"))  # mode 0700, whatever the umask
    except OSError as exc:
        raise InputError(f"{purpose} into {tempfile.gettempdir()} ({described(exc)})") from None
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
