"""pi's session header: what makes one invalid, and the one sessionfix writes in place of
a lost header (formats/pi-openclaw.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sessionfix import jsonutil
from sessionfix.formats import Format, WriterLock
from sessionfix.formats.pi.decode import OPENCLAW, VALID_VERSIONS
from sessionfix.formats.pi.location import (
    is_openclaw_location,
    openclaw_session_of,
    pi_session_id_of,
)
from sessionfix.model.view import HeaderFacts, SessionView


def header_problems(fmt: Format, header: HeaderFacts, name: str) -> list[str]:
    """No string `id`, a `version` OpenClaw's strict reader rejects, and, in OpenClaw, an
    id other than the one the file's name gives (its SQLite import refuses it)."""
    problems: list[str] = []
    has_id = isinstance(header.id, str) and bool(header.id)
    if not has_id:
        problems.append("session header has no non-empty string `id`")
    version = header.version
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version not in VALID_VERSIONS
    ):
        problems.append(
            f"session header `version` is {jsonutil.stringify(version)}, not 1, 2 or 3; "
            "OpenClaw's strict reader rejects the file"
        )
    if fmt is OPENCLAW and has_id:
        named = openclaw_session_of(name)
        # A checkpoint copies its transcript; the import neither takes nor checks it.
        if not named.checkpoint and named.session_id != header.id:
            problems.append(
                f"OpenClaw header id {header.id!r} differs from the session id its file name "
                f"gives, {named.session_id!r}; the SQLite import refuses such transcripts"
            )
    return problems


def rebuilt_header(
    fmt: Format, view: SessionView, first: object, name: str, cwd: str
) -> dict[str, Any]:
    """pi's header: version 3 for a tree, the id the file's name gives (OpenClaw's or
    pi's naming), the first record's timestamp, and `cwd`."""
    header: dict[str, Any] = {"type": "session"}
    if view.tree:
        header["version"] = 3
    header["id"] = (
        openclaw_session_of(name).session_id if fmt is OPENCLAW else pi_session_id_of(name)
    )
    timestamp = first.get("timestamp") if isinstance(first, dict) else None
    if isinstance(timestamp, str):
        header["timestamp"] = timestamp
    header["cwd"] = cwd
    return header


def writer_lock(fmt: Format, session: Path) -> WriterLock:
    """OpenClaw's write lock, `<realpath(dir)>/<name>.lock` (formats/pi-openclaw.md §12):
    taken on every OpenClaw session, and on any session beside which one exists."""
    directory = Path(os.path.realpath(session.parent))
    always = fmt is OPENCLAW or is_openclaw_location(session)
    return WriterLock(directory / f"{session.name}.lock", always=always)
