"""Where OpenClaw keeps its transcripts, and what their names say."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from msgspec import Struct


def _uuid(versions: str) -> str:
    """A UUID of one of `versions` (a character class), as OpenClaw's patterns take it."""
    return (
        rf"[0-9a-f]{{8}}-[0-9a-f]{{4}}-[{versions}][0-9a-f]{{3}}-[89ab][0-9a-f]{{3}}-[0-9a-f]{{12}}"
    )


_GENERATED_ID: Final = re.compile(_uuid("1-8"), re.IGNORECASE)
"""A session id OpenClaw generated (a UUID), which the names below may carry."""
_FORKED: Final = re.compile(r"(\d{4}-\d{2}-\d{2}T[\w-]+(?:Z|[+-]\d{2}(?:-\d{2})?)?)_(.+)", re.ASCII)
"""`<timestamp>_<sessionId>`: a transcript a fork wrote (pi's naming)."""
_TOPIC: Final = "-topic-"
"""`<sessionId>-topic-<threadId>`: a Telegram topic's transcript."""
_CHECKPOINT: Final = re.compile(rf"(.+)\.checkpoint\.{_uuid('1-5')}\.jsonl", re.IGNORECASE)
"""`<transcript stem>.checkpoint.<uuid>.jsonl`: the copy of a transcript OpenClaw took
before a compaction (older versions; `session-compaction-checkpoints.ts`)."""


def is_openclaw_location(path: Path) -> bool:
    """OpenClaw keeps transcripts under `…/agents/<agentId>/sessions/`: where the file
    really lies, links followed, however it is named."""
    parts = Path(os.path.realpath(path)).parts
    return len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"


class NamedSession(Struct, frozen=True):
    """The session a file in an OpenClaw sessions folder is named after."""

    session_id: str
    """The id its header must hold: OpenClaw's SQLite import takes it from a transcript's
    name (`extractGeneratedTranscriptSessionId`, else the whole stem) and refuses a
    header that differs; a checkpoint copies its transcript, header and all."""
    checkpoint: bool = False
    """The file is a checkpoint: a copy of the transcript it names, which the import
    neither takes as a session of its own nor checks."""


def openclaw_session_of(name: str) -> NamedSession:
    """The session the file `name` (in an OpenClaw sessions folder) is named after."""
    copied = _CHECKPOINT.fullmatch(name)
    stem = copied[1] if copied else name.removesuffix(".jsonl")
    return NamedSession(_session_id_of_stem(stem), checkpoint=copied is not None)


def _session_id_of_stem(stem: str) -> str:
    topic = stem.find(_TOPIC)
    if topic > 0:
        named = stem[:topic]
    elif (forked := _FORKED.fullmatch(stem)) is not None:
        named = forked[2]
    else:
        return stem
    return named if _GENERATED_ID.fullmatch(named) else stem


def is_checkpoint_name(name: str) -> bool:
    """A checkpoint's name: the copy of a transcript, which no one resumes, so a folder
    scan passes it over (its findings are its transcript's of that moment)."""
    return _CHECKPOINT.fullmatch(name) is not None


def pi_session_id_of(name: str) -> str:
    """The session id pi's name for a transcript carries: `<timestamp>_<sessionId>`."""
    stem = name.removesuffix(".jsonl")
    return stem.split("_", 1)[1] if "_" in stem else stem
