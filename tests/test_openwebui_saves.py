"""Chats open-webui 0.12.4 wrote itself (its own save of a browser's chat,
`Chats.update_chat_by_id`): sessionfix finds nothing in them, and what its safe fixes
store is what open-webui's own next save of the damaged chat stores."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from sessionfix.cli import app

from .openwebui_chats import message, plain
from .openwebui_loader import created_database, require_openwebui_at_collection, saved_by_openwebui

require_openwebui_at_collection()

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "200"}


def run(*args: object) -> Any:
    return CliRunner().invoke(app, [str(arg) for arg in args], env=ENV)


def regenerated() -> dict[str, Any]:
    found = plain()
    found["b2"] = message("b2", "assistant", "u2", at=5, content="ok again")
    found["u2"]["childrenIds"].append("b2")
    return found


def with_tools() -> dict[str, Any]:
    found = plain()
    found["a2"]["output"] = [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "ls",
            "arguments": "{}",
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "a"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
    ]
    return found


def summarised() -> dict[str, Any]:
    found = plain()
    found["u2"]["contextSummary"] = "they said hi"
    return found


def children_lost() -> dict[str, Any]:
    """As a browser of #29299 saved it: a reply's childrenIds never filled in."""
    found = plain()
    found["a1"]["childrenIds"] = []
    return found


CLEAN: Final = {
    "plain": (plain, "a2"),
    "regenerated": (regenerated, "b2"),
    "with-tools": (with_tools, "a2"),
    "summarised": (summarised, "a2"),
    "children-lost": (children_lost, "a2"),
}


def document(chat: str) -> dict[str, Any]:
    build, current = CLEAN[chat]
    return {"title": chat, "history": {"currentId": current, "messages": build()}}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("open-webui-saves")
    database = created_database(folder / "webui.db")
    return saved_by_openwebui(database, {chat: document(chat) for chat in CLEAN})


def stored_history(database: Path, chat: str) -> dict[str, Any]:
    with sqlite3.connect(database) as db:
        (found,) = db.execute("SELECT chat FROM chat WHERE id = ?", (chat,)).fetchone()
    db.close()
    history: dict[str, Any] = json.loads(found)["history"]
    return history


def test_chats_open_webui_saved_have_no_finding(saved: Path) -> None:
    """Its save rebuilds the child lists (a browser's lost ones too), keeps the current
    message and writes every message's row: nothing is stale, nothing disagrees."""
    result = run("check", "--output-format", "json", saved)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_safe_fixes_store_what_open_webuis_next_save_stores(saved: Path, tmp_path: Path) -> None:
    """A chat whose child list and current message went stale (as written by the clients
    of #29299 and #20474), repaired by sessionfix, holds the child lists and current
    message open-webui's own next save of it would store."""
    damaged = tmp_path / "damaged.db"
    shutil.copyfile(saved, damaged)
    history = stored_history(saved, "plain")
    history["messages"]["a1"]["childrenIds"] = []
    history["currentId"] = "u2"
    with sqlite3.connect(damaged) as db:
        db.execute(
            "UPDATE chat SET chat = ?, current_message_id = 'u2' WHERE id = 'plain'",
            (json.dumps({"title": "plain", "history": history}),),
        )
    db.close()
    (tmp_path / "repaired").mkdir()
    repaired = tmp_path / "repaired" / "webui.db"
    shutil.copyfile(damaged, repaired)
    result = run("repair", "--in-place", "--session", "plain", repaired)
    assert result.exit_code == 0, result.output
    resaved = saved_by_openwebui(damaged, {"plain": {"history": stored_history(damaged, "plain")}})
    ours, theirs = stored_history(repaired, "plain"), stored_history(resaved, "plain")
    assert {key: found["childrenIds"] for key, found in ours["messages"].items()} == {
        key: found["childrenIds"] for key, found in theirs["messages"].items()
    }
    assert ours["messages"]["a1"]["childrenIds"] == ["u2"]
    assert ours["currentId"] == "a2"
