"""Finding session files under the paths given to `sessionfix scan` (cli-and-safety.md §1.1)."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from msgspec import Struct, field

from sessionfix.formats import Format, detect, is_sibling_file, session_roots, session_suffixes
from sessionfix.read.compressed import is_compressed, plain_name
from sessionfix.read.reader import classify_line
from sessionfix.stores import is_store_path

_OWN_FILES = ("*.sessionfix-bak-*", "*.sessionfix-tmp*")
"""sessionfix's own backups and temporary files."""
_OWN = re.compile("|".join(fnmatch.translate(pattern) for pattern in _OWN_FILES))


class Discovery(Struct):
    files: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    """Sibling artefacts that look like sessions but are not."""
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    """Paths that could not be looked into, with the reason."""
    foreign: list[Path] = field(default_factory=list)
    """Files a walk left out because no format reads their first records (`sniff`)."""


def agent_folders(env: Mapping[str, str], home: Path) -> tuple[list[Path], list[Path]]:
    """The session folders of the agents installed for this user (those that exist;
    an agent may name a database of its own outside them), and every place looked in;
    the format packages say where their agents keep them."""
    looked = session_roots(env, home)
    return [root for root in looked if is_directory(root) or is_plain_file(root)], looked


def shown(path: Path, home: Path) -> str:
    """`path` as a person writes it: `~/...` under `home`."""
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return str(path)


SNIFF_RECORDS: Final = 5
"""How many of a file's first lines `is_foreign` reads."""
SNIFF_LINE_BYTES: Final = 1 << 20
"""A longer first line leaves the question open (the file is then read as a session)."""


def is_foreign(path: Path) -> bool:
    """Whether a JSONL file is plainly not a session of a known format: its first lines
    (up to `SNIFF_RECORDS`) are all whole JSON records and no format package recognises
    any of them (an agent's prompt history, a dataset, a log). Anything else (an empty
    or unreadable file, a torn or glued line, binary data, a very long line) is read
    as a session, so that a damaged session is never passed over."""
    if is_compressed(path):
        return False
    looked = 0
    try:
        with path.open("rb") as handle:
            while looked < SNIFF_RECORDS and (raw := handle.readline(SNIFF_LINE_BYTES)):
                if len(raw) == SNIFF_LINE_BYTES and not raw.endswith(b"\n"):
                    return False
                body = raw.rstrip(b"\r\n")
                if not body.strip():
                    continue
                outcome = classify_line(body)
                if outcome.damaged is not None or outcome.findings or not outcome.records:
                    return False
                if any(detect(record.value) is not Format.UNKNOWN for record in outcome.records):
                    return False
                looked += 1
    except OSError:
        return False
    return looked > 0


def is_directory(path: Path) -> bool:
    """`Path.is_dir`, except that a path it cannot look at (EACCES...) counts as a file,
    whose opening then reports why."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


def discover(paths: Iterable[Path], *, sniff: bool = False) -> Discovery:
    """Session candidates (files named as the format packages name sessions: `*.jsonl`,
    and `*.jsonl.zst` unless the plain file is beside it; and session stores by their
    names) under directories; explicit files are always taken. `sniff`: candidates a
    walk meets that `is_foreign` go to `foreign` instead.

    Directory symlinks are never followed, so a scan stays inside the tree it was given.
    """
    found = Discovery()
    seen: set[Path] = set()
    for root in paths:
        if is_directory(root):
            for path in _walk(root, found):
                if path not in seen:
                    seen.add(path)
                    if sniff and not is_store_path(path) and is_foreign(path):
                        found.foreign.append(path)
                    else:
                        found.files.append(path)
            continue
        try:
            os.lstat(root)
        except FileNotFoundError:
            found.unreadable.append((root, "no such file or directory"))
            continue
        except OSError as exc:
            found.unreadable.append((root, _reason(exc)))
            continue
        if root not in seen:
            seen.add(root)
            found.files.append(root)
    return found


def is_plain_file(path: Path) -> bool:
    """A regular file (a FIFO or a device is never opened here: reading it says why)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _walk(root: Path, found: Discovery) -> list[Path]:
    files: list[Path] = []
    suffixes = session_suffixes()
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            found.unreadable.append((directory, _reason(exc)))
            continue
        subdirectories = []
        for entry in entries:
            try:
                path = Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    subdirectories.append(path)
                    continue
                named = plain_name(entry.name)
                if _OWN.match(entry.name) or is_sibling_file(
                    path if named == entry.name else path.with_name(named)
                ):
                    found.skipped.append(path)
                    continue
                if (entry.name.endswith(suffixes) or is_store_path(path)) and entry.is_file(
                    follow_symlinks=True
                ):
                    files.append(path)
            except OSError:
                continue
        stack.extend(reversed(subdirectories))
    # Codex keeps one of `NAME.jsonl` and `NAME.jsonl.zst`; when both are there, the
    # plain one is the live session and the compressed one a leftover.
    plain = {path for path in files if not is_compressed(path)}
    files = [
        path
        for path in files
        if not is_compressed(path) or path.with_name(plain_name(path.name)) not in plain
    ]
    files.sort()
    return files
