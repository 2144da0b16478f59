"""The packages that read sessions, by module name: adding a format (or a store of
sessions) is a package under `formats/` and a line here.

A package declares what it reads: a format package its `FORMATS`, and every package its
`CONTAINERS` (session files, a store of sessions); each is imported only when first
asked for.
"""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import ClassVar, Final

from msgspec import Struct

PACKAGES: Final = (
    "sessionfix.formats.pi",
    "sessionfix.formats.codex",
    "sessionfix.formats.codex_index",
    "sessionfix.formats.claude",
    "sessionfix.formats.openclaw_store",
    "sessionfix.formats.opencode",
    "sessionfix.formats.codewhale",
    "sessionfix.formats.openwebui",
    "sessionfix.formats.opaque",
)
"""In the order they are asked to recognise a first record or a store; the package of
files of no known format comes last."""


class JsonlFiles(Struct, frozen=True):
    """A container a package declares: one session per JSONL file, plain or
    zstd-compressed (`.zst`), whose records are its lines (the names end as the package's
    `SUFFIXES` say)."""


class SqliteStore(Struct, frozen=True):
    """A container a package declares: an SQLite database holding many sessions, which
    the package's `is_store` recognises and its `open_store` opens (see `stores`)."""

    names: frozenset[str]
    """What the agent names its database: a directory walk reads files of these names
    (shell patterns: `opencode-*.db`)."""

    def takes(self, name: str) -> bool:
        """Whether a file of this name is one of the agent's databases, by its name."""
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.names)


class JsonDocuments(Struct, frozen=True):
    """A container a package declares: one session per JSON document (CodeWhale), which
    is read and written whole; its package's `is_store` recognises one and `open_store`
    opens it as a store of that one session (see `stores`)."""

    names: frozenset[str]
    """What the agent names its documents (shell patterns ending in `SUFFIX`: `*.json`)."""
    folders: frozenset[str]
    """The names of the folders it keeps them in: a JSON file elsewhere is none of them."""

    SUFFIX: ClassVar[str] = ".json"
    """How every document's name ends: a file named otherwise is never asked about."""

    def takes(self, path: Path) -> bool:
        """Whether a file at `path` is one of the agent's documents, by its name and folder."""
        return path.parent.name in self.folders and any(
            fnmatch.fnmatchcase(path.name, pattern) for pattern in self.names
        )


ContainerDeclaration = JsonlFiles | SqliteStore | JsonDocuments
"""How a package's sessions are held: what it lists in `CONTAINERS`."""

StoreDeclaration = SqliteStore | JsonDocuments
"""The containers read as a store of sessions (`stores`), not as lines of a file."""


_IMPORTED: dict[str, ModuleType] = {}


def packages(declaring: str) -> Iterator[ModuleType]:
    """The registered packages that declare `declaring`, in order, each imported when
    first reached (a pi session is recognised without loading the other agents' code)."""
    for name in PACKAGES:
        module = _IMPORTED.get(name)
        if module is None:
            module = _IMPORTED.setdefault(name, importlib.import_module(name))
        if hasattr(module, declaring):
            yield module
