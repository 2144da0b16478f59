"""Writing a repair into `webui.db`: a chat changed since it was read is not written, one
that does not read back as the repair is not committed, and a write killed at any step
leaves the chat as it was or wholly repaired."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from sessionfix.cli import app
from sessionfix.formats.openwebui.store import WebuiStore
from sessionfix.formats.openwebui.write import ChatChanged, list_backups
from sessionfix.stores import transcript_of

from .conftest import ROOT
from .openwebui_chats import plain
from .test_openwebui_store import _database

CHAT: Final = "chat-1"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A chat whose `currentId` names no message (SF116, a safe fix)."""
    document = {"history": {"currentId": "gone", "messages": plain()}}
    return _database(tmp_path / "webui.db", (CHAT, json.dumps(document).encode()))


def stored(database: Path) -> list[Any]:
    with sqlite3.connect(database) as db:
        found = db.execute("SELECT * FROM chat ORDER BY id").fetchall()
    db.close()
    return found


def current_id(database: Path) -> Any:
    with sqlite3.connect(database) as db:
        (document,) = db.execute("SELECT chat FROM chat WHERE id = ?", (CHAT,)).fetchone()
    db.close()
    return json.loads(document)["history"]["currentId"]


def test_a_chat_changed_since_it_was_read_is_not_written(database: Path) -> None:
    with WebuiStore(database) as store:
        session = store.sessions()[0]
        with transcript_of(store, session) as transcript:
            document = {"history": {"currentId": "gone", "messages": {**plain(), "u3": {}}}}
            with sqlite3.connect(database) as db:
                db.execute("UPDATE chat SET chat = ? WHERE id = ?", (json.dumps(document), CHAT))
            db.close()
            before = stored(database)
            repaired = transcript.path.with_name("repaired.jsonl")
            lines = transcript.path.read_bytes().splitlines(keepends=True)
            lines[0] = lines[0].replace(b'"current_id":"gone"', b'"current_id":"a2"')
            repaired.write_bytes(b"".join(lines))
            with pytest.raises(ChatChanged, match="changed since it was read; nothing changed"):
                store.replace(transcript, repaired, lambda line: (line, line != 1), backup=True)
    assert stored(database) == before
    assert list_backups(database, CHAT) == []


def repair_in_child(database: Path, kill_at: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path]),
        "SESSIONFIX_KILL_AT": kill_at,
    }
    return subprocess.run(
        [sys.executable, "-m", "sessionfix", "repair", "--in-place", str(database)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("point", ["backed-up", "before-commit", "committed"])
def test_a_killed_write_leaves_the_chat_as_it_was_or_repaired(database: Path, point: str) -> None:
    killed = repair_in_child(database, point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr + killed.stdout
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    db.close()
    assert current_id(database) == ("a2" if point == "committed" else "gone")
    assert [backup.status for backup in list_backups(database, CHAT)] == ["ok"]


def test_a_write_that_does_not_read_back_as_the_repair_is_not_committed(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the commit the chat is read back: one that is not the repaired transcript
    (here a write that stores another current message) is rolled back, backup and all."""
    from sessionfix.formats.openwebui import write

    applied = write._apply

    def astray(db: Any, chat_id: str, changes: write.ChatChanges, where: str) -> None:
        applied(db, chat_id, changes._replace(current="u1"), where)

    monkeypatch.setattr(write, "_apply", astray)
    before = stored(database)
    result = CliRunner().invoke(app, ["repair", "--in-place", str(database)])
    assert result.exit_code == 2, result.output
    assert "the chat read back is not the repair; nothing changed" in result.output
    assert stored(database) == before
    assert list_backups(database, CHAT) == []
