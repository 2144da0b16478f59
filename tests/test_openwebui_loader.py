"""What sessionfix reads of open-webui chats, held to what open-webui 0.12.4 itself reads
(`tests/openwebui_loader.py`: its own migrations, `Chats`, `load_messages_from_db` and
the functions that build the request), chat by chat (`tests/openwebui_cases.py`).

Observed with open-webui 0.12.4 (spec formats/open-webui.md §3): rows win over the
document; a `currentId` naming nothing is repaired to the newest leaf, an inner one
moved down to its last descendant; a `parentId` naming nothing cuts the history there;
a cycle rotates it; a message missing from the rows is filled in from the document.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from sessionfix.context import contexts
from sessionfix.formats.openwebui.adapter import chat_of, chat_payload, chat_reading
from sessionfix.formats.openwebui.database import KNOWN_HEAD, KNOWN_REVISIONS
from sessionfix.formats.openwebui.history import Reading
from sessionfix.formats.openwebui.store import WebuiStore
from sessionfix.formats.openwebui.transcript import ENVELOPE

from .openwebui_cases import CASES, build
from .openwebui_loader import (
    PYTHON,
    created_database,
    load_with_openwebui,
    require_openwebui_at_collection,
)

require_openwebui_at_collection()


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(created_database(tmp_path_factory.mktemp("open-webui") / "webui.db"))


@pytest.fixture(scope="module")
def loads(database: Path) -> dict[str, dict[str, Any]]:
    return load_with_openwebui([(database, None)])[database]


def readings(database: Path, folder: Path) -> dict[str, Reading]:
    """sessionfix's reading of each chat, from the transcript the store writes."""
    found = {}
    with WebuiStore(database) as store:
        for session in store.sessions():
            transcript = store.transcript(session, folder)
            with open(transcript.path, "rb") as lines:
                envelopes = [ENVELOPE.decode(line) for line in lines]
            found[session.id] = chat_reading(chat_of(list(enumerate(envelopes))))
    return found


def test_reading_is_open_webuis(database: Path, loads: dict[str, Any], tmp_path: Path) -> None:
    """Chat by chat, the current message, the source and the branch sessionfix reads are
    open-webui's, and the chat messages it says are sent are the ones open-webui sends
    (tool calls and results of an assistant's output included)."""
    ours = readings(database, tmp_path)
    assert sorted(ours) == sorted(CASES) == sorted(loads)
    mismatches = []
    for chat, theirs in loads.items():
        read = ours[chat]
        mine: dict[str, Any] = {
            "current_id": read.current,
            "source": "chat_message" if read.from_rows else "chat.history",
            "branch": read.branch,
        }
        mine["payload"] = msgspec.json.decode(
            msgspec.json.encode([message for _, message in chat_payload(read)])
        )
        expected = {key: theirs[key] for key in mine}
        if mine != expected:
            mismatches.append(f"{chat}:\n sessionfix: {mine}\n open-webui: {expected}")
    assert not mismatches, "\n\n".join(mismatches)


def test_context_counts_what_open_webui_sends(database: Path, loads: dict[str, Any]) -> None:
    """`sessionfix context` on the database: per chat, as many messages as open-webui
    sends, and their bytes as JSON."""
    measured = {found.filename.rsplit(":", 1)[-1]: found for found, _ in contexts([database])}
    assert sorted(measured) == sorted(loads)
    for chat, theirs in loads.items():
        payload = theirs["payload"]
        assert measured[chat].messages == len(payload), chat
        assert measured[chat].message_bytes == sum(len(orjson.dumps(m)) for m in payload), chat


def test_cut_history_and_rotation_as_observed(loads: dict[str, Any]) -> None:
    """The field cases the rules are about load as the spec observed them."""
    assert loads["dangling-parent"]["branch"] == ["u2", "a2"]
    assert loads["cycle"]["branch"] == ["a2", "u1", "a1", "u2"]
    assert loads["current-dangling"]["stored_current_id"] == "gone"
    assert loads["current-dangling"]["current_id"] == "a2"
    assert loads["rows-differ"]["payload"][-1]["content"] == "ok (edited)"


def test_the_revisions_known_are_open_webuis(database: Path) -> None:
    """sessionfix knows every alembic revision open-webui 0.12.4 has, and its head is the
    one a new 0.12.4 database is at (a database at any other is refused as newer)."""
    versions = PYTHON.parent.parent.glob("lib/python*/site-packages/open_webui/migrations/versions")
    installed = {path.name.split("_", 1)[0] for folder in versions for path in folder.glob("*.py")}
    assert installed == KNOWN_REVISIONS
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(KNOWN_HEAD,)]
    db.close()
