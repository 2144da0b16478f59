"""opencode sessions (spec formats/opencode.md): message and part rows of its SQLite
database (`opencode.db`, opencode 1.2 and later), and the legacy JSON `storage/` tree
of opencode 1.1 and earlier, both read-only.

`database` and `legacy` read rows in opencode's load order, `decode` reads the fields
of each row that matter, `context` says what opencode sends the model from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from sessionfix.formats import configured_folder

DATABASE_PREFIX: Final = "opencode"
DATABASE_SUFFIX: Final = ".db"
"""opencode names its databases `opencode.db`, or `opencode-<channel>.db` for builds of
another release channel (spec §1): every `opencode*.db` of its data folder is one."""
LEGACY_FOLDER: Final = "storage"

DATABASE_VARIABLE: Final = "OPENCODE_DB"
IN_MEMORY: Final = ":memory:"


def data_folder(env: Mapping[str, str], home: Path) -> Path:
    """opencode's data folder: `$XDG_DATA_HOME/opencode`, by default
    `~/.local/share/opencode` (macOS too)."""
    return configured_folder(env, "XDG_DATA_HOME", home, home / ".local" / "share") / "opencode"


def databases(env: Mapping[str, str], home: Path) -> list[Path]:
    """Every opencode database of a user: each `opencode*.db` of the data folder (the
    default one and the release channels' own, spec §1), and the one `OPENCODE_DB`
    names (a bare name is in the data folder; `:memory:` keeps none)."""
    folder = data_folder(env, home)
    found = sorted(
        path
        for path in (folder.glob(f"{DATABASE_PREFIX}*{DATABASE_SUFFIX}") if folder.is_dir() else ())
        if path.is_file()
    )
    named = env.get(DATABASE_VARIABLE, "").strip()
    if named and named != IN_MEMORY:
        override = Path(named) if Path(named).is_absolute() else folder / named
        if override.is_file() and override not in found:
            found.append(override)
    return found


def legacy_storage(env: Mapping[str, str], home: Path) -> Path | None:
    """The JSON `storage/` tree opencode 1.1 and earlier kept sessions in, if there is one."""
    storage = data_folder(env, home) / LEGACY_FOLDER
    return storage if (storage / "session").is_dir() else None
