"""open-webui's own reading of its chats (0.12.4, pinned beside this file), run by the
venv `make open-webui` builds in `.cache/open-webui`, never by the project's own Python.

One process per test run answers requests on stdin, one JSON object a line, with one
JSON line each on stdout (open-webui's log goes to stderr):

- `{"op": "create", "path": P}`: a new database at P with open-webui's schema, made by
  its own alembic migrations (once per process; each database is a copy of that one);
- `{"op": "save", "path": P, "chats": {id: document}}`: each chat saved into P as the
  browser saves it (`Chats.update_chat_by_id`: the history merged into the stored one,
  `childrenIds` rebuilt, `current_message_id` set, every message upserted as a
  `chat_message` row), onto an empty chat row made first where P has none;
- `{"op": "load", "path": P, "chats": [ids] | null}`: what open-webui makes of each chat
  of P (all when null), read from a copy (its reads backfill `chat_message` rows, and P
  must stay as it is): the `currentId` stored and the one `Chats.get_chat_by_id`
  repairs it to in memory, where the messages come from (`chat_message` rows or the
  JSON history), the branch `load_messages_from_db` walks, the native compaction
  checkpoint (`_apply_latest_summary_checkpoint`) and the `payload`: the messages sent
  before any filter (`process_messages_with_output`, then `sanitize_tool_pairs`).

`load_messages_from_db` and the functions beside it live in `utils/middleware.py` and
`utils/context_compaction.py`, which import the whole server (vector stores, models):
they are taken out of the installed files with `ast` and run on open-webui's own
`Chats` and `utils.misc` (spec formats/open-webui.md §8).
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

WORK = Path(tempfile.mkdtemp(prefix="sessionfix-open-webui-"))
DATABASE = WORK / "webui.db"
os.environ.update(
    DATA_DIR=str(WORK),
    DATABASE_URL=f"sqlite:///{DATABASE}",
    WEBUI_SECRET_KEY="sessionfix-tests",
    OFFLINE_MODE="true",
    ENABLE_DB_MIGRATIONS="false",
    GLOBAL_LOG_LEVEL="WARNING",
)

import open_webui  # noqa: E402
from open_webui.internal.db import async_engine  # noqa: E402
from open_webui.models.chats import Chats  # noqa: E402
from open_webui.utils import misc  # noqa: E402

PACKAGE = Path(open_webui.__file__).parent
TAKEN = {
    "utils/middleware.py": (
        "MESSAGE_REPLAY_KEYS",
        "load_messages_from_db",
        "add_file_context",
        "process_messages_with_output",
        "sanitize_tool_pairs",
    ),
    "utils/context_compaction.py": ("_apply_latest_summary_checkpoint",),
}


def _taken() -> dict[str, Any]:
    """The functions open-webui builds a request's messages with, as installed."""
    namespace: dict[str, Any] = {
        "Optional": __import__("typing").Optional,
        "Chats": Chats,
        **{name: getattr(misc, name) for name in dir(misc) if not name.startswith("__")},
    }
    for file, names in TAKEN.items():
        tree = ast.parse((PACKAGE / file).read_text(encoding="utf-8"))
        found = [
            node
            for node in tree.body
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names)
            or (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
            )
        ]
        missing = set(names) - {
            getattr(node, "name", None) or node.targets[0].id  # type: ignore[attr-defined]
            for node in found
        }
        if missing:
            raise SystemExit(f"open-webui {file} has no {sorted(missing)}")
        exec(
            compile(ast.Module(body=found, type_ignores=[]), str(PACKAGE / file), "exec"), namespace
        )
    return namespace


TAKEN_FUNCTIONS = _taken()
_TEMPLATE: Path | None = None


def _copy(source: Path, target: Path) -> None:
    """`source` (with what its WAL holds) into a new file `target`, by SQLite's backup."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def _template() -> Path:
    """An empty database at open-webui's head revision, made by its alembic migrations."""
    global _TEMPLATE
    if _TEMPLATE is None:
        from alembic import command
        from alembic.config import Config

        config = Config(str(PACKAGE / "alembic.ini"))
        config.set_main_option("script_location", str(PACKAGE / "migrations"))
        command.upgrade(config, "head")
        _TEMPLATE = WORK / "template.db"
        _copy(DATABASE, _TEMPLATE)
    return _TEMPLATE


async def _load(path: Path, chats: list[str] | None) -> dict[str, Any]:
    await async_engine.dispose()
    _copy(path, DATABASE)
    with sqlite3.connect(DATABASE) as connection:
        rows = connection.execute("SELECT id, chat, current_message_id FROM chat").fetchall()
        with_rows = {
            chat_id
            for (chat_id,) in connection.execute("SELECT DISTINCT chat_id FROM chat_message")
        }
    connection.close()
    stored = {chat_id: (document, column) for chat_id, document, column in rows}
    found: dict[str, Any] = {}
    for chat_id in chats if chats is not None else sorted(stored):
        found[chat_id] = await _chat(chat_id, stored.get(chat_id), chat_id in with_rows)
    await async_engine.dispose()
    return found


async def _chat(chat_id: str, stored: tuple[str, str | None] | None, rows: bool) -> dict[str, Any]:
    if stored is None:
        return {"error": "no such chat"}
    try:
        document = json.loads(stored[0]) if stored[0] else {}
    except ValueError:
        document = None
    history = document.get("history") if isinstance(document, dict) else None
    stored_current = history.get("currentId") if isinstance(history, dict) else None
    chat = await Chats.get_chat_by_id(chat_id)
    if chat is None:
        return {"error": "open-webui cannot read the chat", "stored_current_id": stored_current}
    current = (chat.chat.get("history") or {}).get("currentId")
    messages = await TAKEN_FUNCTIONS["load_messages_from_db"](chat_id, current) if current else None
    messages = messages or []
    checkpoint, summary = TAKEN_FUNCTIONS["_apply_latest_summary_checkpoint"](
        [dict(message) for message in messages]
    )
    payload = TAKEN_FUNCTIONS["sanitize_tool_pairs"](
        TAKEN_FUNCTIONS["process_messages_with_output"]([dict(message) for message in messages])
    )
    return {
        "stored_current_id": stored_current,
        "current_message_id": stored[1],
        "current_id": current,
        "source": "chat_message" if rows else "chat.history",
        "branch": [message.get("id") for message in messages],
        "checkpoint": [message.get("id") for message in checkpoint] if summary else None,
        "summary": summary,
        "payload": payload,
    }


async def _save(path: Path, chats: dict[str, dict[str, Any]]) -> dict[str, Any]:
    await async_engine.dispose()
    _copy(path, DATABASE)
    with sqlite3.connect(DATABASE) as connection:
        for chat_id in chats:
            connection.execute(
                "INSERT OR IGNORE INTO chat (id, user_id, title, created_at, updated_at, chat,"
                " meta, archived, pinned) VALUES (?, 'user-1', 'New Chat', 1780000000,"
                " 1780000000, '{}', '{}', 0, 0)",
                (chat_id,),
            )
    connection.close()
    saved = {}
    for chat_id, document in chats.items():
        saved[chat_id] = await Chats.update_chat_by_id(chat_id, document, touch=False) is not None
    await async_engine.dispose()
    _copy(DATABASE, path)
    return saved


def _answer(request: dict[str, Any]) -> Any:
    if request["op"] == "create":
        target = Path(request["path"])
        shutil.copyfile(_template(), target)
        return {"created": str(target)}
    if request["op"] == "save":
        return asyncio.run(_save(Path(request["path"]), request["chats"]))
    if request["op"] == "load":
        return asyncio.run(_load(Path(request["path"]), request.get("chats")))
    raise ValueError(f"unknown op {request['op']!r}")


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = {"ok": _answer(json.loads(line))}
        except Exception as exc:  # every failure is the test's to report
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
