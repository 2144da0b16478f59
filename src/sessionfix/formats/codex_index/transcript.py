"""Codex's thread index as lines of text, one thread each, for the rules to read.

A line is one thread: its `threads` row as stored (the columns a list filters and shows
by, `database.CARRIED`; null where the index has no row), whether the file the row
names is there, and each rollout holding the thread's id with the row Codex's indexing
makes of it (`rollouts`):

    {"codex_index":"thread","id":…,"row":{…}|null,"named_file":"present"|"missing"|null,
     "rollouts":[{"path":…,"archived":false,"row":{…},"first_prompt":…}]}

What the row and the rollouts disagree on (`indexed`), and the row a repair makes
(`mended`), follow from the line alone: a repaired line is read back as any line is.
Threads come in the order they were made, then by id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec
import orjson

from sessionfix import jsonutil
from sessionfix.formats.codex_index.rollouts import Rollout
from sessionfix.model.view import IndexDrift, IndexedSession

TAG: Final = "codex_index"
"""The field that tells this format's lines apart."""
THREAD: Final = "thread"
PRESENT: Final = "present"
MISSING: Final = "missing"
PROMPT_COLUMNS: Final = ("preview", "first_user_message")
"""Where a row holds its thread's first prompt, which lists show and filter by (older
Codex builds have only the latter)."""
COMPRESSED: Final = ".zst"
"""A rollout Codex compressed keeps the name its row gives it, with this added."""


class RolloutLine(msgspec.Struct, gc=False):
    path: str
    archived: bool = False
    row: dict[str, Any] | None = None
    first_prompt: str | None = None


class ThreadLine(msgspec.Struct, gc=False):
    codex_index: str
    id: str
    row: dict[str, Any] | None = None
    named_file: str | None = None
    rollouts: list[RolloutLine] = msgspec.field(default_factory=list)


LINE: Final = msgspec.json.Decoder(ThreadLine)


def is_thread_line(value: dict[str, Any]) -> bool:
    return value.get(TAG) == THREAD and isinstance(value.get("id"), str)


def thread_line(
    thread_id: str, row: dict[str, Any] | None, named_present: bool | None, rollouts: list[Rollout]
) -> bytes:
    named = None if named_present is None else PRESENT if named_present else MISSING
    return (
        orjson.dumps(
            {
                TAG: THREAD,
                "id": thread_id,
                "row": row,
                "named_file": named,
                "rollouts": [
                    {
                        "path": rollout.path,
                        "archived": rollout.archived,
                        "row": rollout.row,
                        "first_prompt": rollout.first_prompt,
                    }
                    for rollout in rollouts
                ],
            }
        )
        + b"\n"
    )


def sort_key(
    row: dict[str, Any] | None, rollouts: Iterable[Rollout], thread_id: str
) -> tuple[Any, ...]:
    """Threads in the order they were made (the row's time, else the rollout's), then by id."""
    created = row.get("created_at") if row is not None else None
    if not isinstance(created, int):
        created = next(
            (r.row["created_at"] for r in rollouts if r.row is not None),
            0,
        )
    return (created, thread_id)


def main_rollout(line: ThreadLine) -> RolloutLine | None:
    """The rollout the thread's row stands for: the one it names; else, where it names
    a file that is gone or there is no row, the thread's only rollout."""
    row = line.row
    if row is not None:
        named = row.get("rollout_path")
        for rollout in line.rollouts:
            if isinstance(named, str) and rollout.path in (named, named + COMPRESSED):
                return rollout
        if line.named_file != MISSING:
            return None
    return line.rollouts[0] if len(line.rollouts) == 1 else None


def _empty(value: object) -> bool:
    return value is None or value == ""


def _archived(value: object) -> bool:
    return value not in (None, 0, False, "0")


def indexed(line: ThreadLine) -> IndexedSession:
    """How the thread's row disagrees with its rollouts."""
    drift: list[IndexDrift] = []
    row = line.row
    main = main_rollout(line)
    files = tuple(rollout.path for rollout in line.rollouts)
    if row is None:
        if line.rollouts:
            drift.append(IndexDrift.UNLISTED)
    else:
        if line.named_file == MISSING:
            drift.append(IndexDrift.MISSING_FILE)
        if main is not None and _archived(row.get("archived")) != main.archived:
            drift.append(IndexDrift.ARCHIVED_FLAG)
        if (
            main is not None
            and main.first_prompt
            and any(_empty(row[name]) for name in PROMPT_COLUMNS if name in row)
        ):
            drift.append(IndexDrift.UNTITLED)
    if len(line.rollouts) > 1:
        drift.append(IndexDrift.SHARED_ID)
    return IndexedSession(
        drift=tuple(drift),
        files=files,
        named=None if row is None else str(row.get("rollout_path")),
        archived=None if row is None else _archived(row.get("archived")),
        in_archive=None if main is None else main.archived,
        first_prompt=None if main is None else main.first_prompt,
        rebuildable=main is not None
        and main.row is not None
        and any(found is not IndexDrift.SHARED_ID for found in drift),
    )


def mended(record: Any) -> Any:
    """`record` (a line as `jsonutil.loads_preserving` reads it) with its row made, or
    mended, from the rollout it stands for: a missing row is that rollout's row; a row
    that exists takes the rollout's path where the file it names is gone, its archived
    flag (and time) where it says otherwise than the rollout's folder, and its first
    prompt where the row holds none. Nothing else of a row changes."""
    line = LINE.decode(jsonutil.stringify_preserved(record))
    main = main_rollout(line)
    if main is None or main.row is None:
        return record
    index = line.rollouts.index(main)
    source = record["rollouts"][index]["row"]
    found = indexed(line).drift
    if line.row is None:
        record["row"] = dict(source)
        record["named_file"] = PRESENT
        return record
    row = record["row"]
    changed: list[str] = []
    if IndexDrift.MISSING_FILE in found:
        changed.append("rollout_path")
        record["named_file"] = PRESENT
    if IndexDrift.ARCHIVED_FLAG in found:
        changed += ["archived", "archived_at"]
    if IndexDrift.UNTITLED in found:
        changed += [
            name
            for name in (*PROMPT_COLUMNS, "title")
            if name in line.row and _empty(line.row[name])
        ]
    for name in changed:
        if name in line.row:
            row[name] = source.get(name)
    return record
