"""What `restore` prints: a session's backups (`--list`, as text or JSON) and the line
that says what a restore did."""

from __future__ import annotations

from pathlib import Path

import orjson

from sessionfix.escapes import escape, escape_surrogates
from sessionfix.safety.restoring import BackupListing, RestoreDone
from sessionfix.units import human_bytes


def _text(path: Path) -> str:
    """A path as valid text (bytes of its name that are not UTF-8 escaped)."""
    return escape_surrogates(str(path))


def backup_listing(listing: BackupListing, *, as_json: bool) -> bytes:
    """The backups, one a line (tab-separated) or as a JSON array."""
    if listing.stored is not None:
        if as_json:
            stored = [
                {
                    "path": _text(b.path),
                    "session_id": b.session_id,
                    "taken": b.taken,
                    "rows": b.rows,
                    "status": b.status,
                }
                for b in listing.stored
            ]
            return orjson.dumps(stored, option=orjson.OPT_INDENT_2) + b"\n"
        lines = (
            "\t".join((escape(_text(b.path)), b.taken, _held(b.rows), b.status))
            for b in listing.stored
        )
        return b"".join(line.encode() + b"\n" for line in lines)
    if as_json:
        files = [
            {
                "path": _text(b.path),
                "taken": b.taken.isoformat(),
                "size": b.size,
                "status": b.status.value,
            }
            for b in listing.files
        ]
        return orjson.dumps(files, option=orjson.OPT_INDENT_2) + b"\n"
    lines = (
        "\t".join(
            (
                escape(_text(b.path)),
                f"{b.taken:%Y-%m-%d %H:%M:%S} UTC",
                human_bytes(b.size),
                b.status.value,
            )
        )
        for b in listing.files
    )
    return b"".join(line.encode() + b"\n" for line in lines)


def _held(rows: int | None) -> str:
    if rows is None:
        return "whole document"
    return "1 row" if rows == 1 else f"{rows} rows"


def listing_note(listing: BackupListing) -> str | None:
    """The line that says there is nothing to list (None when there is)."""
    if not listing.empty:
        return None
    if listing.stored is None:
        return f"{listing.session}: no sessionfix backup beside it."
    of = f" of session {listing.store_session}" if listing.store_session is not None else ""
    return f"{listing.session}: no sessionfix backup{of} beside it."


def restore_warning(done: RestoreDone) -> str | None:
    return f"{done.session}: {done.warning}" if done.warning is not None else None


def restore_note(done: RestoreDone) -> str:
    """What the restore did, in one line."""
    if done.store_session is not None:
        return f"Restored session {done.store_session} of {done.session} from {done.source}."
    if not done.changed:
        return f"{done.session} already holds {done.source}; nothing to do."
    note = f"Restored {done.session} from {done.source}"
    if done.kept is not None:
        note += f"; the replaced version is kept as {done.kept}"
    return note + "."
