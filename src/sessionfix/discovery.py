"""Finding session files under the paths given to `sessionfix scan` (cli-and-safety.md §1.1)."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# Sibling artefacts that agents and repair tools leave next to transcripts. Some end in
# `.jsonl` but are not sessions; none may ever be scanned or rewritten as one.
_SIBLING_NAMES = (
    "*.trajectory.jsonl",
    "*.checkpoint.*.jsonl",
    "*.corrupt-*.jsonl",
    "journal.jsonl",
    "*.jsonl.lock",
    "*.jsonl.reset.*",
    "*.jsonl.deleted.*",
    "*.bak-*",
    "*.repair-*.tmp",
    "*.jsonl.imported-*",
    "*.sessionfix-bak-*",
    "*.sessionfix-tmp*",
)
_SIBLING = re.compile("|".join(fnmatch.translate(pattern) for pattern in _SIBLING_NAMES))


def is_sibling_artefact(name: str) -> bool:
    return _SIBLING.match(name) is not None


@dataclass(slots=True)
class Discovery:
    files: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    """Sibling artefacts that look like sessions but are not."""
    missing: list[Path] = field(default_factory=list)


def discover(paths: Iterable[Path]) -> Discovery:
    """Session candidates (`*.jsonl`) under directories; explicit files are always taken.

    Directory symlinks are never followed, so a scan stays inside the tree it was given.
    """
    found = Discovery()
    seen: set[Path] = set()
    for root in paths:
        if root.is_dir():
            for path in _walk(root, found):
                if path not in seen:
                    seen.add(path)
                    found.files.append(path)
        elif root.exists() or root.is_symlink():
            if root not in seen:
                seen.add(root)
                found.files.append(root)
        else:
            found.missing.append(root)
    return found


def _walk(root: Path, found: Discovery) -> list[Path]:
    files: list[Path] = []
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            found.missing.append(directory)
            continue
        subdirectories = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirectories.append(Path(entry.path))
                    continue
                if is_sibling_artefact(entry.name):
                    found.skipped.append(Path(entry.path))
                    continue
                if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=True):
                    files.append(Path(entry.path))
            except OSError:
                continue
        stack.extend(reversed(subdirectories))
    files.sort()
    return files
