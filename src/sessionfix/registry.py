"""The packages that read sessions, by module name: adding a format (or a store of
sessions) is a package under `formats/` and a line here.

A package declares what it reads: a format package its `FORMATS`, a store package its
`STORE_NAMES`; each is imported only when first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Final

PACKAGES: Final = (
    "sessionfix.formats.pi",
    "sessionfix.formats.codex",
    "sessionfix.formats.claude",
    "sessionfix.formats.openclaw_store",
    "sessionfix.formats.opaque",
)
"""In the order they are asked to recognise a first record or a store; the package of
files of no known format comes last."""

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
