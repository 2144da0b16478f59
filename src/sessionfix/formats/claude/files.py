"""Where Claude Code keeps transcripts, the JSONL beside them that is not one, and the
main transcript a sub-agent's belongs to."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from msgspec import Struct

from sessionfix import jsonutil
from sessionfix.formats.common import ParsingDecoder
from sessionfix.read.reader import BOM

HOME_FOLDER = ".claude"
TRANSCRIPTS_FOLDER = "projects"


WORKFLOW_JOURNAL = "journal.jsonl"
"""A workflow agent's run log (`subagents/workflows/wf_<runId>/journal.jsonl`)."""


def is_sibling(path: Path) -> bool:
    """Under `~/.claude` only `projects/` holds transcripts (`<slug>/<sessionId>.jsonl`
    and sub-agents' `<sessionId>/subagents/agent-*.jsonl`); `history.jsonl` and the
    other JSONL files there are the agent's own state, not sessions. Nor is a
    workflow's journal, wherever it lies."""
    if path.name == WORKFLOW_JOURNAL:
        return True
    if not path.name.endswith(".jsonl"):
        return False
    if f"{os.sep}{HOME_FOLDER}{os.sep}" not in os.path.abspath(path):
        return False  # the common case, told without splitting the path
    parts = path.absolute().parts[:-1]
    if HOME_FOLDER not in parts:
        return False
    below = parts[len(parts) - parts[::-1].index(HOME_FOLDER) :]
    return not below or below[0] != TRANSCRIPTS_FOLDER


SUBAGENTS_FOLDER = "subagents"
_SESSION_ID: Final = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def session_id_of(name: str) -> str | None:
    """The session id a main transcript's file name gives (`<sessionId>.jsonl`)."""
    stem = name.removesuffix(".jsonl")
    return stem if stem != name and _SESSION_ID.fullmatch(stem) else None


def main_transcript_of(path: Path) -> Path | None:
    """Where the main transcript of the session lies whose sub-agent transcript `path`
    is (`<slug>/<sessionId>/subagents/[…/]agent-*.jsonl` → `<slug>/<sessionId>.jsonl`);
    None for a file that is no sub-agent's. The folders are those the file lies in,
    however `path` names it (relative to where sessionfix runs, say)."""
    if not (path.name.startswith("agent-") and path.name.endswith(".jsonl")):
        return None
    folders = Path(os.path.abspath(path)).parts[:-1]
    for at in range(len(folders) - 1, 0, -1):
        if folders[at] == SUBAGENTS_FOLDER:
            session = folders[at - 1]
            if _SESSION_ID.fullmatch(session) is None:
                return None
            return Path(*folders[: at - 1], f"{session}.jsonl")
    return None


class _Identity(Struct, gc=False):
    uuid: Any = None


_IDENTITY: Final = ParsingDecoder(_Identity)


class MainTranscript:
    """The main transcript of a sub-agent's session, searched for record ids on demand
    (the sub-agent's first records name their parents there)."""

    def __init__(self, path: Path, block: int = 1 << 20) -> None:
        self.path = path
        self.block = block
        """Bytes read at a time."""

    def holding(self, ids: set[str]) -> set[str]:
        """Those of `ids` that are the `uuid` of a record of the main transcript (none
        when it cannot be read). Its lines are read from the end: a sub-agent starts
        below the records its session wrote last."""
        if not ids:
            return set()
        quoted = sorted((jsonutil.stringify_bytes(uuid) for uuid in ids), key=len, reverse=True)
        named = re.compile(b"|".join(map(re.escape, quoted)))
        found: set[str] = set()
        try:
            for line in _lines_backwards(self.path, self.block):
                if named.search(line) is None:
                    continue
                try:
                    uuid = _IDENTITY.decode(line.strip().removeprefix(BOM)).uuid
                except (ValueError, RecursionError):
                    continue
                if uuid in ids:
                    found.add(uuid)
                    if found == ids:
                        break
        except OSError:
            return set()
        return found


def _lines_backwards(path: Path, block: int) -> Iterator[bytes]:
    """The file's lines, last first, read `block` bytes at a time."""
    with open(path, "rb") as stream:
        end = stream.seek(0, os.SEEK_END)
        carried = b""
        while end > 0:
            start = max(0, end - block)
            stream.seek(start)
            lines = (stream.read(end - start) + carried).split(b"\n")
            carried = lines.pop(0) if start > 0 else b""
            yield from reversed(lines)
            end = start
