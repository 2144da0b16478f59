"""Finding session files under the paths given to `sessionfix scan` (cli-and-safety.md §1.1)."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sessionfix.formats import is_sibling_file
from sessionfix.read.compressed import SUFFIX, is_compressed, plain_name
from sessionfix.stores import is_store_name

_OWN_FILES = ("*.sessionfix-bak-*", "*.sessionfix-tmp*")
"""sessionfix's own backups and temporary files."""
_OWN = re.compile("|".join(fnmatch.translate(pattern) for pattern in _OWN_FILES))
_SESSION_NAMES = (".jsonl", ".jsonl" + SUFFIX)


@dataclass(slots=True)
class Discovery:
    files: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    """Sibling artefacts that look like sessions but are not."""
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    """Paths that could not be looked into, with the reason."""


def is_directory(path: Path) -> bool:
    """`Path.is_dir`, except that a path it cannot look at (EACCES...) counts as a file,
    whose opening then reports why."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


def discover(paths: Iterable[Path]) -> Discovery:
    """Session candidates (`*.jsonl`, `*.jsonl.zst` unless the plain file is beside it,
    and session stores by their names) under directories; explicit files are always
    taken.

    Directory symlinks are never followed, so a scan stays inside the tree it was given.
    """
    found = Discovery()
    seen: set[Path] = set()
    for root in paths:
        if is_directory(root):
            for path in _walk(root, found):
                if path not in seen:
                    seen.add(path)
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


def _walk(root: Path, found: Discovery) -> list[Path]:
    files: list[Path] = []
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
                if entry.is_dir(follow_symlinks=False):
                    subdirectories.append(Path(entry.path))
                    continue
                if _OWN.match(entry.name) or is_sibling_file(
                    Path(entry.path).with_name(plain_name(entry.name))
                ):
                    found.skipped.append(Path(entry.path))
                    continue
                if (
                    entry.name.endswith(_SESSION_NAMES) or is_store_name(entry.name)
                ) and entry.is_file(follow_symlinks=True):
                    files.append(Path(entry.path))
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
