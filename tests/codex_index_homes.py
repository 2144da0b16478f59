"""Codex homes for tests of its thread index: rollouts written as Codex writes them, and
an index (`state_5.sqlite`) made from the schema Codex 0.169.0 creates
(`codex_index/state_5.sql`), with rows as Codex fills them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import apsw

SCHEMA: Final = Path(__file__).parent / "codex_index" / "state_5.sql"
SANDBOX: Final = (
    '{"type":"managed","file_system":{"type":"restricted","entries":[{"path":{"type":'
    '"special","value":{"kind":"root"}},"access":"read"}]},"network":"restricted"}'
)
CREATED: Final = 1780635500
"""2026-06-05T04:58:20Z, when every test thread starts."""


def make_index(path: Path) -> Path:
    """An empty thread index at `path`, in WAL mode as Codex keeps it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = apsw.Connection(str(path))
    try:
        db.execute("PRAGMA journal_mode = WAL").fetchall()
        db.execute(SCHEMA.read_text())
    finally:
        db.close()
    return path


def rollout_text(thread_id: str, prompt: str | None, *, provider: str = "openai") -> bytes:
    """A rollout as Codex writes one: its `session_meta`, a turn's context, the user's
    message (as an event and as a response item) and a token count."""
    stamp = "2026-06-05T04:58:20.593Z"
    records: list[dict[str, Any]] = [
        {
            "timestamp": stamp,
            "type": "session_meta",
            "payload": {
                "id": thread_id,
                "timestamp": stamp,
                "cwd": "/work/project",
                "originator": "codex_cli_rs",
                "cli_version": "0.169.0",
                "source": "cli",
                "model_provider": provider,
            },
        },
        {
            "timestamp": stamp,
            "type": "turn_context",
            "payload": {"cwd": "/work/project", "approval_policy": "never", "model": "gpt-5.5"},
        },
    ]
    if prompt is not None:
        records += [
            {
                "timestamp": stamp,
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": prompt}],
                },
            },
            {
                "timestamp": stamp,
                "type": "event_msg",
                "payload": {"type": "user_message", "message": prompt, "images": []},
            },
        ]
    records.append(
        {
            "timestamp": stamp,
            "type": "event_msg",
            "payload": {"type": "token_count", "info": {"total_token_usage": {"total_tokens": 42}}},
        }
    )
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


def put_rollout(
    codex_home: Path,
    thread_id: str,
    prompt: str | None,
    *,
    archived: bool = False,
    day: str = "2026/06/05",
    provider: str = "openai",
) -> Path:
    """A rollout of the thread in the home's active or archive folder."""
    name = f"rollout-2026-06-05T04-58-20-{thread_id}.jsonl"
    path = (
        codex_home / "archived_sessions" / name
        if archived
        else codex_home / "sessions" / day / name
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(rollout_text(thread_id, prompt, provider=provider))
    return path


def add_row(
    index: Path,
    thread_id: str,
    rollout: Path,
    prompt: str | None,
    *,
    archived: bool = False,
    **columns: Any,
) -> None:
    """The row Codex keeps for a thread whose rollout is `rollout` (`columns` override)."""
    row: dict[str, Any] = {
        "id": thread_id,
        "rollout_path": str(rollout),
        "created_at": CREATED,
        "updated_at": CREATED + 60,
        "source": "cli",
        "model_provider": "openai",
        "cwd": "/work/project",
        "title": prompt or "",
        "sandbox_policy": SANDBOX,
        "approval_mode": "never",
        "tokens_used": 42,
        "archived": int(archived),
        "archived_at": CREATED + 60 if archived else None,
        "cli_version": "0.169.0",
        "first_user_message": prompt or "",
        "preview": prompt or "",
        "model": "gpt-5.5",
        "originator": "codex_cli_rs",
        "history_mode": "legacy",
    }
    row.update(columns)
    db = apsw.Connection(str(index))
    try:
        names = ", ".join(row)
        db.execute(
            f"INSERT INTO threads ({names}) VALUES ({', '.join('?' for _ in row)})",
            tuple(row.values()),
        )
    finally:
        db.close()


def thread_rows(index: Path) -> dict[str, dict[str, Any]]:
    """Every row of the index, every column, by thread id."""
    db = apsw.Connection(str(index))
    try:
        names = [str(column[1]) for column in db.execute("PRAGMA table_info(threads)")]
        rows = db.execute(f"SELECT {', '.join(names)} FROM threads ORDER BY id")
        return {row[0]: dict(zip(names, row, strict=True)) for row in rows}
    finally:
        db.close()
