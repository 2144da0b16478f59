"""opencode sessions (spec formats/opencode.md): message and part rows of its SQLite
database (`opencode.db`, opencode 1.2 and later), and the legacy JSON `storage/` tree
of opencode 1.1 and earlier, both read-only.

`database` and `legacy` read rows in opencode's load order, `decode` reads the fields
of each row that matter, `context` says what opencode sends the model from them.
"""

from __future__ import annotations

from typing import Final

DATABASE_PREFIX: Final = "opencode"
DATABASE_SUFFIX: Final = ".db"
"""opencode names its databases `opencode.db`, or `opencode-<channel>.db` for builds of
another release channel (spec §1): every `opencode*.db` of its data folder is one."""
LEGACY_FOLDER: Final = "storage"
