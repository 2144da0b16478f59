"""An OpenClaw agent store as an SQLite database: how it is opened, whether its schema
is the one sessionfix knows, and how its rows and names are read; shared by the reading
(`store`) and the writing (`write`) of a store."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import apsw
import zstandard

from sessionfix.errors import InputError
from sessionfix.read.compressed import expansion_limit

SCHEMA_VERSION: Final = 23
"""The agent schema sessionfix reads and writes, OpenClaw 2026.9's (`PRAGMA user_version`
and `schema_meta.schema_version`). OpenClaw refuses a newer one, and migrates an older
one (`openclaw doctor --fix`) before it uses the store; a rewrite by the rules of one
schema could lose what another keeps."""
_SAFE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def schema_problem(db: apsw.Connection) -> str | None:
    """Why the store's schema is not the one sessionfix knows, or None when it is."""
    version = db.execute("PRAGMA user_version").fetchone()
    recorded = {
        row[0] for row in db.execute("SELECT schema_version FROM schema_meta WHERE role = 'agent'")
    }
    found = version[0] if version is not None else None
    if recorded != {found}:
        shown = ", ".join(sorted(map(repr, recorded))) or "none"
        return (
            f"schema versions disagree ({found} in its header, {shown} in schema_meta); "
            "`openclaw doctor` tells what is wrong"
        )
    if found == SCHEMA_VERSION:
        return None
    if isinstance(found, int) and found < SCHEMA_VERSION:
        return (
            f"schema version {found} is older than OpenClaw 2026.9's ({SCHEMA_VERSION}); "
            "`openclaw doctor --fix` migrates it, then sessionfix reads it"
        )
    return (
        f"schema version {found} is not one sessionfix knows (it reads {SCHEMA_VERSION}, "
        "OpenClaw 2026.9's); its rows could be read or written wrong"
    )


def file_name(session_id: str) -> str:
    """A file name for a session's transcript: its id when that is a plain name."""
    if _SAFE_NAME.fullmatch(session_id):
        return session_id
    return "session-" + hashlib.sha256(session_id.encode()).hexdigest()[:16]


_ROW_PIECE: Final = 1 << 20
"""Bytes of a compressed row decompressed at a time."""


def decompressed_row(
    decompressor: zstandard.ZstdDecompressor, packed: bytes, size: Any, where: str
) -> bytes:
    """A compressed row's event, decompressed no further than the size the row records
    (and one byte to tell a row that holds more): a small row that expands without
    bound is refused on one line, never held in memory. A size past what its bytes may
    expand to (as a compressed session file may) is refused before anything is read:
    OpenClaw's table admits 4 MiB, but a read-only connection does not check that."""
    if not isinstance(size, int) or size < 0:
        raise InputError(f"{where}: the compressed row does not record its size")
    if size > expansion_limit(len(packed)):
        raise InputError(
            f"{where}: the compressed row records {size:,} bytes, more than its "
            f"{len(packed):,} compressed bytes may expand to"
        )
    chunks: list[bytes] = []
    held = 0
    try:
        with decompressor.stream_reader(packed) as reader:
            while held <= size:
                chunk = reader.read(min(size + 1 - held, _ROW_PIECE))
                if not chunk:
                    break
                chunks.append(chunk)
                held += len(chunk)
    except zstandard.ZstdError as exc:
        raise InputError(f"{where}: the compressed row does not decompress ({exc})") from None
    if held > size:
        raise InputError(f"{where}: the compressed row expands past the {size} bytes it records")
    if held < size:
        raise InputError(
            f"{where}: the compressed row holds {held} bytes, not the {size} it records"
        )
    return b"".join(chunks)
