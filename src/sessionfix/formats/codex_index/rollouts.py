"""Codex's rollouts as its thread index would list them: where they are, and the row its
own indexing makes of each.

A rollout is `rollout-*.jsonl` (or `.jsonl.zst`, compressed after a week idle) under
`$CODEX_HOME/sessions` or, archived, `$CODEX_HOME/archived_sessions`. Codex indexes
one by its first `session_meta` line (the thread's id, a UUID, and where and how it
started), its first user message (the row's `first_user_message`, `preview` and
`title`), its last `turn_context` (model, approval policy) and its last token count;
the file's time of last change is the row's `updated_at`. The lines that tell none of
these are not decoded (a rollout of gigabytes is read, not parsed).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import orjson
from msgspec import Struct

from sessionfix.errors import InputError
from sessionfix.read.compressed import is_compressed, plain_name, text_chunks

SESSIONS: Final = "sessions"
ARCHIVED: Final = "archived_sessions"
PREFIX: Final = "rollout-"
SUFFIX: Final = ".jsonl"
ZSTD_SUFFIX: Final = ".jsonl.zst"
USER_MESSAGE_BEGIN: Final = "## My request for Codex:"
"""What older Codex put before the user's own words in a user message event."""
IMAGE_ONLY: Final = "[Image]"
"""The first prompt Codex records for a user message of images alone."""
SANDBOX_POLICY: Final = (
    '{"type":"managed","file_system":{"type":"restricted","entries":[{"path":{"type":'
    '"special","value":{"kind":"root"}},"access":"read"}]},"network":"restricted"}'
)
"""What Codex 0.169 records as the sandbox policy of a thread it indexes from its rollout."""
APPROVAL_MODE: Final = "on-request"
"""The approval mode of a thread whose rollout records none."""
_HEAD: Final = 256
"""Bytes of a line that tell its type and its payload's (Codex writes them first)."""
_FILE_STAMP: Final = re.compile(r"rollout-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-")


class Rollout(Struct, frozen=True):
    """One rollout file, and the thread row Codex's indexing makes of it (None when it
    makes none: no `session_meta` naming a thread by a UUID)."""

    path: str
    archived: bool
    """In the archive folder."""
    thread_id: str | None
    row: dict[str, Any] | None
    first_prompt: str | None = None


def is_rollout_name(name: str) -> bool:
    return name.startswith(PREFIX) and name.endswith((SUFFIX, ZSTD_SUFFIX))


def rollout_files(codex_home: Path) -> Iterator[tuple[Path, bool]]:
    """Every rollout under `codex_home`'s two folders (links to folders are not followed),
    with whether it is archived, in name order; of `NAME.jsonl` and `NAME.jsonl.zst` side
    by side only the plain one (Codex keeps one: the other is a leftover)."""
    for folder, archived in ((SESSIONS, False), (ARCHIVED, True)):
        root = codex_home / folder
        found: list[Path] = []
        stack = [root]
        while stack:
            directory = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif is_rollout_name(entry.name) and entry.is_file():
                        found.append(Path(entry.path))
                except OSError:
                    continue
        plain = {path for path in found if not is_compressed(path)}
        for path in sorted(found):
            if is_compressed(path) and path.with_name(plain_name(path.name)) in plain:
                continue
            yield path, archived


def in_archive(path: str) -> bool:
    """Whether a rollout's path lies in an archive folder."""
    return ARCHIVED in Path(path).parts


def existing(path: str) -> str | None:
    """The rollout a row's path names, as Codex finds it: the path itself, else its
    compressed form; None when neither is a file."""
    for candidate in (path, path + ".zst"):
        try:
            if os.path.isfile(candidate):
                return candidate
        except (OSError, ValueError):
            continue
    return None


def _lines(path: Path) -> Iterator[bytes]:
    pending = b""
    for chunk in text_chunks(path):
        pending += chunk
        *whole, pending = pending.split(b"\n")
        yield from whole
    if pending:
        yield pending


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _payload(record: dict[str, Any]) -> dict[str, Any]:
    payload = record.get("payload")
    return payload if isinstance(payload, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _as_column(value: object) -> str:
    """A value as Codex records it in a text column: a string as it is, anything else
    as compact JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def _stripped(message: str) -> str:
    at = message.find(USER_MESSAGE_BEGIN)
    return (message[at + len(USER_MESSAGE_BEGIN) :] if at >= 0 else message).strip()


def first_prompt(payload: dict[str, Any]) -> str | None:
    """The first prompt a user message event tells, as Codex records it (its words less
    the old request prefix; `[Image]` for images alone), or None when it tells none:
    a `user_message` event, or (Codex 0.169) an `item_completed` of a `UserMessage`."""
    kind = payload.get("type")
    if kind == "user_message":
        words = _text(payload.get("message")) or ""
        images = payload.get("images") or payload.get("local_images")
    elif kind == "item_completed":
        item = payload.get("item")
        if not isinstance(item, dict) or item.get("type") != "UserMessage":
            return None
        content = item.get("content")
        parts = content if isinstance(content, list) else []
        words = "\n".join(
            text
            for part in parts
            if isinstance(part, dict) and (text := _text(part.get("text"))) is not None
        )
        images = [
            part
            for part in parts
            if isinstance(part, dict) and "image" in str(part.get("type")).lower()
        ]
    else:
        return None
    stripped = _stripped(words)
    if stripped:
        return stripped
    return IMAGE_ONLY if images else None


def _seconds(stamp: object) -> tuple[int, int] | None:
    """An RFC 3339 time as (seconds, milliseconds) since the epoch."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    millis = int(moment.timestamp() * 1000)
    return millis // 1000, millis


def _file_stamp(name: str) -> tuple[int, int] | None:
    match = _FILE_STAMP.match(name)
    if match is None:
        return None
    try:
        moment = datetime.strptime(match.group(1) + "+0000", "%Y-%m-%dT%H-%M-%S%z")
    except ValueError:
        return None
    seconds = int(moment.timestamp())
    return seconds, seconds * 1000


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def read_rollout(path: Path, archived: bool, default_provider: str) -> Rollout:
    """The row Codex's indexing makes of the rollout at `path` (`archived`: in the
    archive folder); `InputError` where it cannot be read."""
    meta: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    tokens: object = None
    prompt: str | None = None
    try:
        stat = os.stat(path)
        for line in _lines(path):
            head = line[:_HEAD]
            if meta is None and b'"session_meta"' in head:
                record = _parsed(line)
                if record is not None and record.get("type") == "session_meta":
                    meta = record
            elif b'"turn_context"' in head:
                record = _parsed(line)
                if record is not None and record.get("type") == "turn_context":
                    context = _payload(record)
            elif b'"event_msg"' in head and (
                b'"token_count"' in head
                or (prompt is None and (b'"user_message"' in head or b'"item_completed"' in head))
            ):
                record = _parsed(line)
                if record is None or record.get("type") != "event_msg":
                    continue
                payload = _payload(record)
                if payload.get("type") == "token_count":
                    info = payload.get("info")
                    usage = info.get("total_token_usage") if isinstance(info, dict) else None
                    if isinstance(usage, dict):
                        tokens = usage.get("total_tokens")
                elif prompt is None:
                    prompt = first_prompt(payload)
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    shown = str(path)
    if meta is None:
        return Rollout(shown, archived, None, None)
    payload = _payload(meta)
    thread_id = _text(payload.get("id"))
    if thread_id is None or not _is_uuid(thread_id):
        return Rollout(shown, archived, None, None)
    created = _seconds(payload.get("timestamp")) or _file_stamp(path.name)
    if created is None:
        return Rollout(shown, archived, thread_id, None, prompt)
    row = _row(payload, context or {}, tokens, prompt, default_provider)
    updated = stat.st_mtime_ns // 1_000_000
    row.update(
        id=thread_id,
        rollout_path=shown,
        created_at=created[0],
        created_at_ms=created[1],
        updated_at=updated // 1000,
        updated_at_ms=updated,
        archived=int(archived),
        archived_at=updated // 1000 if archived else None,
    )
    return Rollout(shown, archived, thread_id, dict(sorted(row.items())), prompt)


def _row(
    meta: dict[str, Any],
    context: dict[str, Any],
    tokens: object,
    prompt: str | None,
    default_provider: str,
) -> dict[str, Any]:
    """The columns of a thread's row that its `session_meta`, its last `turn_context`,
    its last token count and its first prompt give (as Codex's indexing fills them)."""
    git = meta.get("git")
    git = git if isinstance(git, dict) else {}
    cwd = _text(meta.get("cwd")) or _text(context.get("cwd")) or ""
    source = meta.get("source")
    effort = context.get("effort")
    return {
        "source": "vscode" if source is None else _as_column(source),
        "model_provider": _text(meta.get("model_provider")) or default_provider,
        "cwd": cwd,
        "title": prompt or "",
        "sandbox_policy": SANDBOX_POLICY,
        "approval_mode": _text(context.get("approval_policy")) or APPROVAL_MODE,
        "tokens_used": tokens if isinstance(tokens, int) and tokens > 0 else 0,
        "git_sha": _text(git.get("commit_hash")),
        "git_branch": _text(git.get("branch")),
        "git_origin_url": _text(git.get("repository_url")),
        "cli_version": _text(meta.get("cli_version")) or "",
        "first_user_message": prompt or "",
        "preview": prompt or "",
        "agent_nickname": _text(meta.get("agent_nickname")),
        "agent_role": _text(meta.get("agent_role")),
        "agent_path": _text(meta.get("agent_path")),
        "memory_mode": _text(meta.get("memory_mode")) or "enabled",
        "model": _text(context.get("model")),
        "reasoning_effort": None if effort is None else _as_column(effort),
        "thread_source": _text(meta.get("thread_source")),
        "history_mode": _text(meta.get("history_mode")) or "legacy",
        "originator": _text(meta.get("originator")),
    }
