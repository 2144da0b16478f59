"""File paths as tools name them inside sessions: normalisation and protect globs.

Normalisation (rules.md §5.3) may only ever cause a missed match, never a false
one: no case folding, no `~` expansion, no symlink resolution.
"""

from __future__ import annotations

import re
from functools import lru_cache

_DRIVE = re.compile(r"^[A-Za-z]:/")


def is_absolute(path: str) -> bool:
    return path.startswith("/") or bool(_DRIVE.match(path))


def _tidy(path: str) -> bool:
    """Nothing for `normalize` to change: no backslash, no empty, `.` or `..` segment,
    no final `/` (a few tidy paths such as `a/.hidden` fail this quick test; they take the
    full route and come out the same)."""
    return (
        "\\" not in path
        and "//" not in path
        and "/." not in path
        and not path.endswith("/")
        and not path.startswith(".")
    )


def normalize(path: str, base: str | None) -> str:
    """Join a tool's path argument to its base directory and collapse it."""
    joined = path if not base or path.startswith("/") else base.rstrip("/") + "/" + path
    if _tidy(joined) and not _DRIVE.match(path):
        return joined
    path = path.replace("\\", "/")
    if base and not is_absolute(path):
        path = base.replace("\\", "/").rstrip("/") + "/" + path
    absolute = path.startswith("/")
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments and segments[-1] != ".." and not _DRIVE.match(segments[-1] + "/"):
                segments.pop()
            elif not absolute and not (segments and _DRIVE.match(segments[0] + "/")):
                segments.append(segment)
            continue
        segments.append(segment)
    joined = "/".join(segments)
    return "/" + joined if absolute else joined


@lru_cache(maxsize=256)
def _compile_glob(pattern: str) -> re.Pattern[str]:
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            parts.append(".*")
            index += 2
        elif pattern[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            parts.append("[^/]")
            index += 1
        else:
            parts.append(re.escape(pattern[index]))
            index += 1
    return re.compile("^" + "".join(parts) + "$")


def matches_glob(path: str, pattern: str) -> bool:
    """Opencode-DCP `protectedFilePatterns` semantics: anchored, case-sensitive."""
    return _compile_glob(pattern).match(path) is not None
