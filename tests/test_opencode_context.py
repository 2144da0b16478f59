"""What `formats.opencode.context` says opencode sends the model, held session by session
to what opencode 1.18.33 itself sends (`tests/opencode_loader.py`), on the described
sessions and on copies damaged as sessions are found in the field (spec
formats/opencode.md §6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionfix.formats.opencode.context import chat_message, model_messages
from sessionfix.formats.opencode.database import OpencodeDatabase
from sessionfix.formats.opencode.decode import decode_session
from sessionfix.formats.opencode.view import session_view
from sessionfix.model.loaded import LoadRefused

from .opencode_damages import DAMAGES, DESCRIPTIONS, SESSIONS
from .opencode_loader import load_with_opencode, require_opencode_at_collection
from .opencode_sessions import built_database, damaged

require_opencode_at_collection()


@pytest.fixture(scope="module")
def database() -> Path:
    return built_database(DESCRIPTIONS)


REFUSED = "refused"


def predicted(database: Path, session: str) -> list[tuple[dict[str, Any], int]] | str:
    """What `context` says opencode sends for the session, each chat message with the
    size the neutral model counts for it; or `REFUSED` where it says opencode sends
    nothing. Read both ways: decoded rows alone, and the session in the neutral model."""
    with OpencodeDatabase(database) as db:
        row = next(found for found in db.sessions() if found.id == session)
        neutral = session_view(database, row, db.messages(session))
        try:
            direct = [
                chat_message(sent) for sent in model_messages(decode_session(db.messages(session)))
            ]
        except LoadRefused:
            direct = None
    try:
        loaded = list(neutral.loaded())
    except LoadRefused:
        assert direct is None
        return REFUSED
    assert direct is not None
    assert [neutral.keys[message.record] for message in loaded] == [
        sent.record for sent in neutral.sent
    ]
    return list(zip(direct, [message.size for message in loaded], strict=True))


def test_context_is_what_opencode_sends(database: Path, tmp_path: Path) -> None:
    """Session by session, the described ones and each damaged copy, the messages
    `context` derives from the rows are the ones opencode sends (all loaded by one
    server), and the size counted for each is that of the message opencode sends."""
    cases = [(database, session) for session in SESSIONS]
    for name, (session, statements) in DAMAGES.items():
        cases.append((damaged(database, tmp_path / f"{name}.db", *statements), session))
    loads = load_with_opencode(cases)
    mismatches = []
    for case in cases:
        sent = loads[case]
        actual: list[tuple[dict[str, Any], int]] | str = [
            (message, len(orjson.dumps(message))) for message in sent.messages
        ]
        if sent.error is not None:
            actual = REFUSED if sent.error.startswith("HTTP 500: ") else sent.error
        expected = predicted(*case)
        if actual != expected:
            mismatches.append((case[0].name, case[1], expected, actual))
    assert not mismatches, "\n\n".join(
        f"{name} {session}:\n context: {expected}\n opencode: {actual}"
        for name, session, expected, actual in mismatches
    )
